// The context a model is loaded with when nobody chose one (engine/fit/context_choice.h):
// the longest the model was made for that fits, judged by the planner's bytes. Real
// SmolLM2 (trained for 8,192 tokens) on the CPU, and a Llama-3-8B shape (8,192) and a
// 128K-trained shape on GPUs of several sizes (header-only synthetic files).
#include <string>

#include "engine/fit/context_choice.h"
#include "engine/models/synthetic.h"
#include "test_data.h"

using namespace ember;

namespace {

constexpr uint64_t GiB = uint64_t{1} << 30, MiB = uint64_t{1} << 20;

fit::FitModel model_of(const SyntheticShape& shape, const std::string& scheme) {
    const SyntheticHeader h = synthetic_header(shape, scheme);
    // Only the header exists (a multi-GB file's tensor table): parsed as a prefix of its size.
    const GgufPrefix p = GgufFile::parse_prefix(h.bytes.data(), h.bytes.size(), h.file_size, shape.name);
    REQUIRE(p.file);
    return fit::fit_model(*p.file);
}

fit::FitPlan plan_at(const fit::FitModel& m, const fit::ContextOptions& o, const fit::Budget& b, int64_t ctx) {
    return fit::plan(m, fit::FitOptions{ctx, o.n_seqs, o.n_batch, o.kv_type}, b);
}

}  // namespace

TEST_CASE("SmolLM2 on a roomy CPU gets all 8,192 tokens it was trained for") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    const fit::FitModel m = fit::fit_model(GgufFile::open(path));
    fit::ContextOptions o;
    o.n_seqs = 4;
    const fit::ContextChoice c = fit::choose_context(m, fit::Budget{0, 16 * GiB, false}, o);
    CHECK(c.trained == 8192);
    CHECK(c.n_ctx == 8192);
    CHECK(c.fits_up_to == 8192);
    CHECK(c.plan.placement == fit::Placement::Cpu);
    CHECK(c.reason == "8,192 tokens: all the model was made for");
}

TEST_CASE("on a small RAM budget the context halves until it fits half the free RAM") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    const fit::FitModel m = fit::fit_model(GgufFile::open(path));
    fit::ContextOptions o;
    o.n_seqs = 4;
    // The plan's bytes at 8,192 and 4,096 tokens; a RAM budget between them (doubled: the
    // choice may take half of it) must give 4,096.
    const uint64_t at8k = plan_at(m, o, {0, 64 * GiB, false}, 8192).cpu.total();
    const uint64_t at4k = plan_at(m, o, {0, 64 * GiB, false}, 4096).cpu.total();
    REQUIRE(at4k < at8k);
    const fit::Budget b{0, 2 * ((at4k + at8k) / 2), false};
    const fit::ContextChoice c = fit::choose_context(m, b, o);
    CHECK(c.n_ctx == 4096);
    CHECK(fit::fits(c.plan));
    CHECK(c.reason.find("4,096 tokens of the model's 8,192 tokens") == 0);
    // Below even the floor: the floor, and a reason that says it does not fit.
    const fit::ContextChoice none = fit::choose_context(m, fit::Budget{0, 64 * MiB, false}, o);
    CHECK(none.n_ctx == 4096);
    CHECK(none.fits_up_to == 0);
    CHECK(none.reason.find("does not fit") != std::string::npos);
}

TEST_CASE("a longer context never costs GPU layers") {
    SyntheticShape shape = synthetic_shape("llama-3-8b");
    shape.n_ctx = 131072;  // a 128K-trained model
    const fit::FitModel m = model_of(shape, "Q4_K_M");
    fit::ContextOptions o;
    for (uint64_t vram_gib : {8, 12, 24, 80}) {
        INFO(vram_gib, " GiB");
        const fit::Budget b{vram_gib * GiB, 64 * GiB, false};
        const fit::ContextChoice c = fit::choose_context(m, b, o);
        const fit::FitPlan floor = plan_at(m, o, b, 4096);
        CHECK(c.plan.placement == floor.placement);
        CHECK(c.plan.gpu_layers >= floor.gpu_layers);
        CHECK(c.n_ctx >= 4096);
        CHECK(c.n_ctx <= 131072);
        // The next doubling would have cost layers or not fit (the choice is the longest).
        if (c.n_ctx < 131072) {
            fit::Budget eff = b;
            eff.vram = static_cast<uint64_t>(static_cast<double>(b.vram) * (1.0 - o.margin));
            eff.ram = b.ram / 2;
            const fit::FitPlan twice = plan_at(m, o, eff, c.n_ctx * 2);
            CHECK((!fit::fits(twice) || twice.placement != c.plan.placement || twice.gpu_layers < c.plan.gpu_layers));
        }
    }
    // 80 GiB holds 8B Q4_K_M with its whole 128K context (16 GiB of KV at F16).
    CHECK(fit::choose_context(m, fit::Budget{80 * GiB, 64 * GiB, false}, o).n_ctx == 131072);
    // 8 GiB holds the weights (~4.6 GiB) with a short context only.
    const fit::ContextChoice small = fit::choose_context(m, fit::Budget{8 * GiB, 64 * GiB, false}, o);
    CHECK(small.plan.placement == fit::Placement::Gpu);
    CHECK(small.n_ctx < 131072);
    CHECK(small.reason.find("the GPU's free memory") != std::string::npos);
}

TEST_CASE("max_ctx caps a model trained for more") {
    SyntheticShape shape = synthetic_shape("llama-3.2-1b");
    shape.n_ctx = 1 << 20;
    const fit::FitModel m = model_of(shape, "Q4_0");
    fit::ContextOptions o;
    o.max_ctx = 32768;
    const fit::ContextChoice c = fit::choose_context(m, fit::Budget{80 * GiB, 64 * GiB, false}, o);
    CHECK(c.n_ctx == 32768);
    CHECK(c.reason == "32,768 tokens of the model's 1,048,576 tokens: Ember's upper limit");
}
