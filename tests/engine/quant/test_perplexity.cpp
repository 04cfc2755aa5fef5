// The quality tool on stories260K: chunking and scoring as llama-perplexity does (checked
// against a token-by-token evaluation), the saved base file round trip (a model against its
// own base run has KL ~ 0 and full top-1 agreement), and clear errors for short texts and bad
// base files.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/quant/logits_file.h"
#include "engine/quant/perplexity.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

const char* kText = "/usr/share/common-licenses/GPL-3";

std::unique_ptr<Model> load(const std::string& path, int64_t n_ctx) {
    EMBER_REQUIRE_FILE(path);
    LoadOptions lo;
    lo.path = path, lo.device = BackendPreference::Cpu, lo.n_threads = 1, lo.n_ctx = n_ctx;
    return Model::load(lo);
}

std::string text() {
    EMBER_REQUIRE_FILE(kText);
    return test::read_file(kText);
}

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("perplexity scores the second half of each chunk, BOS first, like llama-perplexity") {
    auto model = load(test::testdata(test::kStories), 64);
    const Tokenizer& tok = model->tokenizer();
    REQUIRE(tok.add_bos());
    const std::vector<int32_t> ids = tok.encode(text(), true, false);
    PerplexityOptions po;
    po.n_ctx = 64;
    const PerplexityResult all = perplexity(*model, text(), po);
    CHECK(all.n_chunks == int32_t(ids.size() / 64));
    CHECK(all.n_scored == int64_t(all.n_chunks) * (64 - 1 - 32));

    // Chunk 1 (the second: its first token is replaced by BOS), token by token.
    po.n_chunks = 2;
    const PerplexityResult two = perplexity(*model, text(), po);
    po.n_chunks = 1;
    const PerplexityResult one = perplexity(*model, text(), po);
    std::vector<int32_t> chunk(ids.begin() + 64, ids.begin() + 128);
    chunk[0] = tok.bos();
    Sequence seq(*model);
    double nll = 0;
    for (int i = 32; i < 63; ++i) {  // the logits at position i predict token i + 1
        const auto fed = i == 32 ? std::span(chunk).first(33) : std::span(chunk).subspan(size_t(i), 1);
        nll += token_nll(seq.prefill(fed), chunk[size_t(i) + 1]);
    }
    // ln PPL(2 chunks) = (ln PPL(1) + ln PPL(chunk 1 alone)) / 2; float32 logits: 1e-4.
    const double chunk1 = nll / 31;
    CHECK(std::log(two.ppl) == doctest::Approx((std::log(one.ppl) + chunk1) / 2).epsilon(1e-4));
}

TEST_CASE("a model against its own saved base run: KL ~ 0, top-1 always agrees") {
    test::TempDir dir;
    auto model = load(test::testdata(test::kStories), 128);
    PerplexityOptions po;
    po.n_ctx = 128, po.n_chunks = 4, po.save_logits = dir.file("base.kld");
    const PerplexityResult a = perplexity(*model, text(), po);
    REQUIRE(std::filesystem::exists(po.save_logits));
    CHECK_FALSE(std::filesystem::exists(po.save_logits + ".tmp"));
    // Header + tokens + 4 chunks of 63 records of (512 + 4) uint16.
    CHECK(std::filesystem::file_size(po.save_logits) == 20 + 4 * 128 * 4 + 4 * 63 * 516 * 2);
    PerplexityOptions kl;
    kl.kl_divergence = po.save_logits;
    const PerplexityResult b = perplexity(*model, "", kl);
    REQUIRE(b.kl);
    CHECK(b.ppl == a.ppl);
    CHECK(b.n_chunks == 4);
    // The records keep log-probabilities in steps of 16/65535 nats: KL from rounding alone is
    // of order step^2, far below 1e-4.
    CHECK(b.kl->kld.mean < 1e-4);
    CHECK(b.kl->same_top.mean == 1.0);
    CHECK(std::fabs(b.kl->ln_ppl_ratio.mean) < 0.01);  // base nll capped 16 nats below the best
    // Every scored token's KL, in text order: their mean is the report's, and the first
    // chunk's values are what a run over that chunk alone gives.
    REQUIRE(b.kl->kld_tokens.size() == static_cast<size_t>(b.n_scored));
    double sum = 0;
    for (const float v : b.kl->kld_tokens) sum += v;
    CHECK(sum / double(b.n_scored) == doctest::Approx(b.kl->kld.mean).epsilon(1e-5));
    kl.n_chunks = 1;
    const PerplexityResult first = perplexity(*model, "", kl);
    REQUIRE(first.kl);
    REQUIRE(first.kl->kld_tokens.size() == 63);
    CHECK(std::equal(first.kl->kld_tokens.begin(), first.kl->kld_tokens.end(), b.kl->kld_tokens.begin()));
    CHECK_FALSE(std::is_sorted(b.kl->kld_tokens.begin(), b.kl->kld_tokens.end()));
}

TEST_CASE("short texts and bad base files are clear errors") {
    test::TempDir dir;
    auto model = load(test::testdata(test::kStories), 512);
    PerplexityOptions po;
    po.n_ctx = 512;
    std::string err = error_of([&] { perplexity(*model, text().substr(0, 1500), po); });
    CHECK(contains(err, "at least 1024 tokens"));
    CHECK(contains(err, "--ctx"));

    po.n_ctx = 64, po.n_chunks = 2, po.save_logits = dir.file("base.kld");
    perplexity(*model, text(), po);
    const std::string bytes = test::read_file(po.save_logits);
    test::write_file(dir.file("cut.kld"), bytes.substr(0, bytes.size() - 100));
    PerplexityOptions kl;
    kl.kl_divergence = dir.file("cut.kld");
    err = error_of([&] { perplexity(*model, "", kl); });
    CHECK(contains(err, "truncated"));
    test::write_file(dir.file("junk.kld"), "hello, world, this is no logits file");
    kl.kl_divergence = dir.file("junk.kld");
    CHECK(contains(error_of([&] { perplexity(*model, "", kl); }), "not a saved logits file"));

    auto smol = load(test::test_model(test::kSmolLM2), 64);
    kl.kl_divergence = po.save_logits;
    CHECK(contains(error_of([&] { perplexity(*smol, "", kl); }), "vocabulary of 512"));
}
