// Where a mixture-of-experts model goes (engine/fit/planner.h, Placement::ExpertsInRam):
//  - the plans for the real sizes on 8, 12, 24 and 80 GiB cards (headers only, the sizes of
//    the real Q4_K_M files), each with its one-line reason (printed: docs/BENCHMARKS.md
//    lists them);
//  - gpt-oss-20b's plans on the same cards, and the automatic quantization choice on a
//    Qwen3-30B-A3B repository.
// That a load allocates what such a plan counts, per backend, and that the experts on the
// other backend change no logit: test_fit_exact ("planned experts in RAM ...").
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/fit/fit_model.h"
#include "engine/fit/planner.h"
#include "engine/fit/quant_choice.h"
#include "engine/models/synthetic.h"
#include "test_data.h"
#include "test_util.h"

using namespace ember;

namespace {

constexpr uint64_t GiB = uint64_t{1} << 30;

fit::FitModel header_model(const std::string& shape, const std::string& scheme) {
    const SyntheticHeader h = synthetic_header(synthetic_shape(shape), scheme);
    GgufPrefix p = GgufFile::parse_prefix(h.bytes.data(), h.bytes.size(), h.file_size, shape + ".gguf");
    REQUIRE(p.file);
    fit::FitModel m = fit::fit_model(*p.file);
    m.file_bytes = h.file_size;
    return m;
}

}  // namespace

// Qwen3-30B-A3B in Q4_K_M (18.6 GB, 17.3 GB of it experts) at an 8192-token context and 64
// GiB of RAM: an 80 or 24 GiB card holds it all; on 12 and 8 GiB the attention of all 48
// layers stays on the GPU with as many layers' experts as fit, the rest in RAM (what
// llama.cpp users tune by hand with --n-cpu-moe).
TEST_CASE("a mixture of experts keeps its attention on the GPU and its experts in RAM") {
    const fit::FitModel m = header_model("qwen3-30b-a3b", "Q4_K_M");
    REQUIRE(fit::has_experts(m));
    fit::FitOptions o;
    o.n_ctx = 8192;
    struct Row {
        uint64_t vram_gib;
        fit::Placement placement;
    };
    const Row rows[] = {{80, fit::Placement::Gpu},
                        {24, fit::Placement::Gpu},
                        {12, fit::Placement::ExpertsInRam},
                        {8, fit::Placement::ExpertsInRam}};
    int32_t last_expert_layers = m.config.n_layers;
    for (const Row& r : rows) {
        const fit::FitPlan p = fit::plan(m, o, fit::Budget{r.vram_gib * GiB, 64 * GiB, false});
        test::info("qwen3-30b-a3b Q4_K_M, %llu GiB: %s: %s", static_cast<unsigned long long>(r.vram_gib),
                   fit::placement_name(p.placement), p.reason.c_str());
        INFO(r.vram_gib, " GiB: ", p.reason);
        CHECK(p.placement == r.placement);
        CHECK(fits(p));
        CHECK(p.gpu_layers == m.config.n_layers);
        // Fewer experts on a smaller card, and the ones in RAM are counted there.
        CHECK(p.gpu_expert_layers <= last_expert_layers);
        last_expert_layers = p.gpu_expert_layers;
        CHECK(p.cpu.expert_layers == m.config.n_layers - p.gpu_expert_layers);
        CHECK(p.gpu.expert_layers == p.gpu_expert_layers);
        if (r.placement == fit::Placement::ExpertsInRam) {
            CHECK(p.reason.find("in RAM") != std::string::npos);
            CHECK(p.cpu.kv_cache == 0);  // every layer's attention, and its KV cache, on the GPU
            CHECK(p.cpu.expert_weights > 0);
            // One more layer's experts on the GPU would not fit.
            const fit::FitPlan more =
                fit::plan_layers(m, o, p.budget, -1, fit::cuda_profile(), p.gpu_expert_layers + 1);
            CHECK_FALSE(fits(more));
        }
    }
    // A dense model never gets this placement.
    const fit::FitModel dense = header_model("llama-3-8b", "Q4_K_M");
    CHECK_FALSE(fit::has_experts(dense));
    CHECK(fit::plan(dense, o, fit::Budget{4 * GiB, 64 * GiB, false}).placement == fit::Placement::Split);
}

// gpt-oss-20b as shipped (MXFP4 experts, Q8_0 elsewhere: 12.1 GB) and Gemma 4 26B-A4B in
// Q4_K_M, the same cards: whole on 24 and 80 GiB, experts partly in RAM on 12 and 8.
TEST_CASE("gpt-oss-20b and Gemma 4 26B-A4B on 8, 12, 24 and 80 GiB") {
    for (auto [shape, scheme] : {std::pair{"gpt-oss-20b", "MXFP4_MOE"}, std::pair{"gemma4-26b-a4b", "Q4_K_M"}}) {
        const fit::FitModel m = header_model(shape, scheme);
        fit::FitOptions o;
        o.n_ctx = 8192;
        for (const uint64_t vram : {80, 24, 12, 8}) {
            const fit::FitPlan p = fit::plan(m, o, fit::Budget{vram * GiB, 64 * GiB, false});
            test::info("%s %s, %llu GiB: %s: %s", shape, scheme, static_cast<unsigned long long>(vram),
                       fit::placement_name(p.placement), p.reason.c_str());
            INFO(shape, " at ", vram, " GiB: ", p.reason);
            CHECK(fits(p));
            CHECK(p.gpu_layers == m.config.n_layers);  // never a layer split: the experts go first
            CHECK(p.placement == (vram >= 24 ? fit::Placement::Gpu : fit::Placement::ExpertsInRam));
        }
    }
}

// The automatic quantization choice on a Qwen3-30B-A3B repository (headers of each file): the
// best file that fits the GPU whole (Q8_0 on 80 GiB, Q4_K_M on 24); on 12 and 8 GiB none of
// Q4_K_M or better does, and the smallest of them (Q4_K_M) goes with some experts in RAM:
// those are read at RAM speed, like a model on the CPU, so fewer bytes beat more bits. Never
// a layer split, never Q4_0's lower quality.
TEST_CASE("the quantization choice keeps quality and puts experts in RAM") {
    std::vector<fit::Candidate> candidates;
    for (const char* scheme : {"Q8_0", "Q6_K", "Q4_K_M", "Q4_0"}) {
        fit::FitModel m = header_model("qwen3-30b-a3b", scheme);
        const uint64_t size = m.file_bytes;
        candidates.push_back({std::string("qwen3-30b-a3b-") + scheme + ".gguf", size, std::move(m), ""});
    }
    fit::ChoiceOptions o;
    o.fit.n_ctx = 8192;
    struct Row {
        uint64_t vram_gib;
        const char* quant;
        fit::Placement placement;
    };
    for (const Row& r :
         {Row{80, "Q8_0", fit::Placement::Gpu}, Row{24, "Q4_K_M", fit::Placement::Gpu},
          Row{12, "Q4_K_M", fit::Placement::ExpertsInRam}, Row{8, "Q4_K_M", fit::Placement::ExpertsInRam}}) {
        const fit::QuantChoice c = fit::choose_quant(candidates, fit::Budget{r.vram_gib * GiB, 64 * GiB, false}, o);
        test::info("qwen3-30b-a3b repository, %llu GiB: %s", static_cast<unsigned long long>(r.vram_gib),
                   c.reason.c_str());
        INFO(r.vram_gib, " GiB: ", c.reason);
        REQUIRE(c.chosen);
        CHECK(c.ranked[*c.chosen].quant == r.quant);
        CHECK(c.plan->placement == r.placement);
    }
}
