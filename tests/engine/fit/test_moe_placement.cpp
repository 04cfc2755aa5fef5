// Where a mixture-of-experts model goes (engine/fit/planner.h, Placement::ExpertsInRam) and
// that the load does what the plan says:
//  - the plans for the real sizes on 8, 12, 24 and 80 GiB cards (headers only, the sizes of
//    the real Q4_K_M files), each with its one-line reason (printed: docs/BENCHMARKS.md
//    lists them);
//  - a load with the experts of some layers on a second backend allocates, per backend,
//    what the plan counts (two CPU backends stand in for the GPU and the CPU: the byte
//    accounting is the same code; a GPU adds only the CUDA estimates, checked on a GPU by
//    ember-gpu-check --only fit);
//  - the experts running on the other backend change no logit: the CPU kernels are the same
//    on both sides, so the logits are bitwise those of the single-backend load.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/fit/fit_model.h"
#include "engine/fit/planner.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
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

// One pass of n tokens of one new sequence; the logits of its last token.
std::vector<float> last_logits(Transformer& tr, KvCache& kv, int32_t n) {
    const int32_t seq = kv.new_sequence();
    std::vector<int32_t> toks, pos, seq_of(static_cast<size_t>(n), 0);
    for (int32_t i = 0; i < n; ++i) {
        toks.push_back(3 + (i * 37) % 200);
        pos.push_back(i);
    }
    const auto slots = kv.append(seq, n);
    const auto table = kv.block_table(seq);
    const int32_t out = n - 1;
    BatchInfo b;
    b.tokens = toks;
    b.positions = pos;
    b.seq_of = seq_of;
    b.kv_slot = slots;
    b.block_table = table;
    b.n_seqs = 1;
    b.max_blocks = static_cast<int32_t>(table.size());
    b.output_rows = std::span<const int32_t>(&out, 1);
    std::vector<float> logits;
    tr.forward(b, kv, logits);
    kv.free_sequence(seq);
    return logits;
}

void check_close(const char* what, uint64_t planned, uint64_t allocated) {
    INFO(what, ": planned ", planned, " allocated ", allocated);
    const double diff = planned > allocated ? double(planned - allocated) : double(allocated - planned);
    CHECK(diff <= 0.02 * double(allocated));
}

void check_device(const fit::DeviceBytes& planned, const MemoryReport& r) {
    check_close("weights", planned.weights, r.bytes[static_cast<int>(MemoryKind::Weights)]);
    check_close("mapped weights", planned.mapped_weights, r.mapped_weight_bytes);
    check_close("kv cache", planned.kv_cache, r.bytes[static_cast<int>(MemoryKind::KvCache)]);
    check_close("scratch", planned.scratch, r.bytes[static_cast<int>(MemoryKind::Activations)]);
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

TEST_CASE("experts in RAM: each backend allocates what the plan counts, and the logits do not change") {
    // qwen3moe, and gemma4's experts beside a dense FFN (their router scale, per-expert
    // scales and branch norms on the experts' backend, the attention output crossing over).
    for (const char* shape : {"tiny-qwen3moe", "tiny-gemma4moe"}) {
        SUBCASE(shape) {
            test::TempDir dir;
            const std::string path = dir.file(std::string(shape) + ".gguf");
            write_synthetic_model(path, synthetic_shape(shape), "Q8_0");
            auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
            const fit::FitModel fm = fit::fit_model(*file);
            const int32_t L = fm.config.n_layers, n_ctx = 256, n = 24;

            auto one = make_cpu_backend(2);
            Transformer whole(file, *one);
            KvCache whole_kv(whole.kv_backends(), whole.kv_config(n_ctx, 1));
            const std::vector<float> expected = last_logits(whole, whole_kv, n);

            for (int32_t e : {0, L - 1}) {
                INFO("experts of the first ", e, " of ", L, " layers on the first backend");
                auto first = make_cpu_backend(2), rest = make_cpu_backend(2);
                Transformer tr(file, *first, *rest, L, e);
                KvCache kv(tr.kv_backends(), tr.kv_config(n_ctx, 1));
                const std::vector<float> got = last_logits(tr, kv, n);
                CHECK(got == expected);
                fit::FitOptions fo{n_ctx, 1, n, DType::F16};
                const fit::FitPlan p = fit::plan_layers(fm, fo, fit::Budget{1, 0, false}, -1, fit::cpu_profile(), e);
                REQUIRE(p.placement == fit::Placement::ExpertsInRam);
                CHECK(p.gpu_expert_layers == e);
                check_device(p.gpu, first->memory());
                check_device(p.cpu, rest->memory());
            }
        }
    }
}
