// Files from Ember's quantizer load in llama.cpp (the peer), and the two engines agree on
// them: llama-perplexity (built by scripts/llama-cpp-tools.sh, cached) runs the file Ember
// wrote and saves its log-probabilities as a --kl-divergence-base file; Ember then scores
// the same file against it. Same weights, so what remains is arithmetic (how each engine
// rounds activations for its quantized dot products): small KL, greedy (top-1) tokens agreeing at
// most positions. The peer is real, not a mock; a missing peer fails the test.
#include <doctest/doctest.h>

#include <regex>
#include <string>

#include "engine/quant/perplexity.h"
#include "engine/quant/quantizer.h"
#include "engine/runtime/model.h"
#include "llama_peer.h"
#include "test_data.h"

using namespace ember;

TEST_CASE("llama.cpp loads Ember's Q4_K_M SmolLM2 and agrees with Ember's logits on it") {
    const std::string src = test::test_model(test::kSmolLM2), text = "/usr/share/common-licenses/GPL-3";
    EMBER_REQUIRE_FILE(src);
    EMBER_REQUIRE_FILE(text);
    const std::string bin = test::llama_tools_dir();
    test::TempDir dir;
    QuantizeOptions q;
    // From the Q4_1 file (the only SmolLM2 we have): quality is not the point here, the
    // format is, and Q4_K_M has every block type a mix uses (Q4_K, Q6_K, Q5_0, Q8_0).
    q.input = src, q.output = dir.file("smol-q4km.gguf"), q.type = "Q4_K_M", q.allow_requantize = true;
    const QuantizeResult qr = quantize_model(q);
    int k_quants = 0;
    for (const auto& t : qr.tensors) k_quants += t.to == DType::Q4_K || t.to == DType::Q6_K;
    REQUIRE(k_quants > 0);

    const std::string base = dir.file("llama.kld");
    const auto r = test::run_process({bin + "/llama-perplexity", "-m", q.output, "-f", text, "-c", "128", "--chunks",
                                      "3", "-t", "2", "--kl-divergence-base", base},
                                     1800 * 1000);
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.ok());
    const std::string log = r.out + r.err;
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex(R"(Final estimate: PPL = ([0-9.]+))")));
    const double llama_ppl = std::stod(m[1]);

    LoadOptions lo;
    lo.path = q.output, lo.device = BackendPreference::Cpu, lo.n_threads = 2, lo.n_ctx = 128;
    auto model = Model::load(lo);
    PerplexityOptions po;
    po.kl_divergence = base;
    const PerplexityResult e = perplexity(*model, "", po);
    REQUIRE(e.kl);
    MESSAGE("llama.cpp PPL ", llama_ppl, ", Ember PPL ", e.ppl, ", KL ", e.kl->kld.mean, ", top-1 agreement ",
            e.kl->same_top.mean);
    CHECK(e.n_chunks == 3);
    // Ember scores llama.cpp's own tokens (from the base file), so what remains is arithmetic:
    // the engines round the activations to 8 bits differently before their quantized dot
    // products (llama.cpp: Q8_0/Q8_K blocks) and sum in other orders. On this 4-bit file that
    // moved the distributions by a mean KL of ~0.012 and PPL by ~2 % (measured, see
    // docs/BENCHMARKS.md); a wrong block layout or
    // scale gives KL of order 1 (a Q4_0 file is 0.36 from its source) and top-1 near chance.
    CHECK(e.ppl == doctest::Approx(llama_ppl).epsilon(0.05));
    CHECK(e.kl->kld.mean < 0.05);
    CHECK(e.kl->same_top.mean > 0.85);
}
