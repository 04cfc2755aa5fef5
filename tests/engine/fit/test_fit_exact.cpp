// Exactness of the fit planner: the bytes it plans for a model equal, within 2 %, what the
// engine then allocates, as Model::memory_use() reports them per kind (weights mapped from
// the file, KV cache, per-pass scratch). Real models (stories260K F32, SmolLM2-135M Q4_1,
// Gemma-3-270M Q4_K_M) and synthetic shapes, at several contexts, on the CPU backend; a
// split between two CPU backends checks the partial-offload placement (which tensors and KV
// layers go to which side). The CUDA side's own buffers and context are estimates that need
// a GPU to check (engine/fit/planner.h says which).
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/fit/planner.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
#include "engine/runtime/model.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

constexpr int32_t kBatch = 32;  // the pass size planned and run (small: the tests stay fast)

// One prefill of min(kBatch, n_ctx) tokens: the pass that sizes the scratch. Returns the
// last token's logits.
std::vector<float> prefill(Transformer& tr, KvCache& kv, int64_t n_ctx) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(kBatch, n_ctx));
    const int32_t seq = kv.new_sequence();
    std::vector<int32_t> toks, pos, seq_of(static_cast<size_t>(n), 0);
    for (int32_t i = 0; i < n; ++i) {
        toks.push_back(1 + i % 7);
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
    const int32_t state_slot = kv.state_slot(seq);  // qwen35's linear-attention layers
    if (kv.has_recurrent()) b.state_slot = std::span<const int32_t>(&state_slot, 1);
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
    check_close("state", planned.state, r.bytes[static_cast<int>(MemoryKind::State)]);
    check_close("scratch", planned.scratch, r.bytes[static_cast<int>(MemoryKind::Activations)]);
}

// Loads `path` on the CPU at n_ctx, runs the largest pass, compares memory_use() with the plan.
void check_model(const std::string& path, int64_t n_ctx, DType kv_type = DType::F16) {
    EMBER_REQUIRE_FILE(path);
    LoadOptions lo;
    lo.path = path;
    lo.device = BackendPreference::Cpu;
    lo.n_threads = 2;
    lo.n_ctx = n_ctx;
    lo.n_batch = kBatch;
    lo.kv_type = kv_type;
    auto model = Model::load(lo);
    prefill(model->transformer(), model->kv(), n_ctx);
    const std::vector<DeviceMemory> used = model->memory_use();
    REQUIRE(used.size() == 1);

    fit::FitOptions fo{n_ctx, 1, kBatch, kv_type};
    const fit::FitPlan p = fit::plan_layers(fit::fit_model(model->file()), fo, fit::Budget{0, 0, false}, -1);
    REQUIRE(p.placement == fit::Placement::Cpu);
    INFO(path, " at ", n_ctx, " tokens");
    check_close("weights", p.cpu.weights, used[0].weights);
    check_close("mapped weights", p.cpu.mapped_weights, used[0].mapped_weights);
    check_close("kv cache", p.cpu.kv_cache, used[0].kv_cache);
    check_close("state", p.cpu.state, used[0].state);
    check_close("scratch", p.cpu.scratch, used[0].scratch);
    check_close("total", p.cpu.total(), used[0].held());
    test::info("%s ctx %lld: planned %llu B, allocated %llu B", path.c_str(), static_cast<long long>(n_ctx),
               static_cast<unsigned long long>(p.cpu.total()), static_cast<unsigned long long>(used[0].held()));
}

}  // namespace

TEST_CASE("planned bytes match the engine's on the real models") {
    for (int64_t ctx : {512, 2048, 8192}) {
        check_model(test::testdata(test::kStories), ctx);
        check_model(test::test_model(test::kSmolLM2), ctx);
        check_model(test::test_model(test::kGemma3), ctx);
    }
    check_model(test::test_model(test::kSmolLM2), 2048, DType::Q8_0);
}

TEST_CASE("a draft model is counted: the plan of both equals both loads, and the budget must hold both") {
    // The planner needs shapes only: SmolLM2 with stories260K as its draft (ember run refuses
    // that pair for their vocabularies, engine/scheduler/draft_model.h; the bytes are the same).
    const std::string target_path = test::test_model(test::kSmolLM2), draft_path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(target_path);
    EMBER_REQUIRE_FILE(draft_path);
    constexpr int64_t kCtx = 1024;
    const fit::FitOptions fo{kCtx, 2, kBatch, DType::F16};
    const GgufFile tf = GgufFile::open(target_path), df = GgufFile::open(draft_path);
    const fit::FitModel tm = fit::fit_model(tf), dm = fit::fit_model(df);
    const fit::DraftFitPlan p = fit::plan_with_draft(tm, dm, fo, fit::Budget{0, uint64_t{1} << 40, false});
    REQUIRE(fit::fits(p));
    CHECK(p.draft.placement == fit::Placement::Cpu);
    CHECK(p.draft.n_ctx == kCtx);
    uint64_t held = 0;
    for (const std::string& path : {target_path, draft_path}) {
        LoadOptions lo;
        lo.path = path;
        lo.device = BackendPreference::Cpu;
        lo.n_threads = 2;
        lo.n_ctx = kCtx;
        lo.n_seqs = 2;
        lo.n_batch = kBatch;
        auto model = Model::load(lo);
        prefill(model->transformer(), model->kv(), kCtx);
        held += model->memory_use().at(0).held();
    }
    check_close("model + draft", p.cpu_total(), held);
    // RAM for both exactly: fits; a byte less: the draft does not.
    CHECK(fit::fits(fit::plan_with_draft(tm, dm, fo, fit::Budget{0, p.cpu_total(), false})));
    CHECK_FALSE(fit::fits(fit::plan_with_draft(tm, dm, fo, fit::Budget{0, p.cpu_total() - 1, false})));
}

TEST_CASE("planned bytes match the engine's on synthetic shapes") {
    test::TempDir dir;
    const std::pair<const char*, const char*> models[] = {{"tiny", "Q4_K_M"},
                                                          {"tiny-qwen2", "Q8_0"},
                                                          {"tiny-gemma3", "F16"},
                                                          {"tiny", "Q6_K"},
                                                          {"tiny", "Q4_0"},
                                                          {"tiny-qwen3moe", "Q4_K_M"},
                                                          {"tiny-qwen3moe", "Q4_0"},
                                                          {"tiny-gemma4", "F16"},
                                                          {"tiny-gemma4", "Q4_K_M"},
                                                          {"tiny-gemma4moe", "Q4_K_M"},
                                                          {"tiny-qwen35", "Q4_K_M"},
                                                          {"tiny-qwen35moe", "Q8_0"},
                                                          {"tiny-qwen3next", "Q4_K_M"}};
    for (auto [shape, scheme] : models) {
        const std::string path = dir.path() + "/" + shape + "-" + scheme + ".gguf";
        write_synthetic_model(path, synthetic_shape(shape), scheme);
        for (int64_t ctx : {512, 2048, 8192}) check_model(path, ctx);
        check_model(path, 2048, DType::Q8_0);
    }
}

// The 3-D expert tensors of Qwen3-30B-A3B's layout, from the header alone: each is n_expert
// matrices of whole rows, its bytes exactly rows x row bytes, and the tensor table adds up to
// the file (data section = the tensors, each aligned) and to the model's 30.5 B parameters.
TEST_CASE("expert tensors are counted byte-exactly (qwen3-30b-a3b header)") {
    const SyntheticShape sh = synthetic_shape("qwen3-30b-a3b");
    const SyntheticHeader h = synthetic_header(sh, "Q4_K_M");
    GgufPrefix pre = GgufFile::parse_prefix(h.bytes.data(), h.bytes.size(), h.file_size, "qwen3-30b-a3b.gguf");
    REQUIRE(pre.file);
    const fit::FitModel m = fit::fit_model(*pre.file);
    CHECK(m.config.n_expert == 128);
    CHECK(m.config.n_expert_used == 8);
    CHECK(m.config.n_ff_exp == 768);
    CHECK(m.config.n_ff_shexp == 0);
    uint64_t data_end = 0, expert_bytes = 0;
    int n_experts_tensors = 0;
    for (const GgufTensor& t : pre.file->tensors()) data_end = std::max(data_end, t.offset + t.n_bytes);
    for (const fit::FitTensor& t : m.tensors) {
        const uint64_t row = row_bytes(*dtype_info(static_cast<uint32_t>(t.type)), static_cast<uint64_t>(t.cols));
        CHECK(t.bytes == row * static_cast<uint64_t>(t.rows));
        if (t.name.find("_exps.") == std::string::npos) continue;
        ++n_experts_tensors;
        expert_bytes += t.bytes;
        CHECK(t.matrices == 128);
        CHECK(t.rows == 128 * (t.name.find("down") != std::string::npos ? 2048 : 768));
    }
    CHECK(n_experts_tensors == 3 * 48);
    CHECK(pre.file->data_offset() + data_end == h.file_size);
    // Every expert matrix whole: 144 B per 256 weights in Q4_K (gate, up, most downs), 210 B in
    // Q6_K (the downs of llama.cpp's use_more_bits layers).
    uint64_t want = 0;
    for (const fit::FitTensor& t : m.tensors)
        if (t.name.find("_exps.") != std::string::npos) {
            CHECK((t.type == DType::Q4_K || (t.type == DType::Q6_K && t.name.find("down") != std::string::npos)));
            want += static_cast<uint64_t>(t.matrices) * static_cast<uint64_t>(t.rows / t.matrices) *
                    (static_cast<uint64_t>(t.cols) / 256) * (t.type == DType::Q6_K ? 210 : 144);
        }
    CHECK(expert_bytes == want);
    CHECK(m.n_params > 30'400'000'000ull);
    CHECK(m.n_params < 30'600'000'000ull);
    test::info("qwen3-30b-a3b Q4_K_M: %llu parameters, %llu bytes of experts, file %llu bytes",
               static_cast<unsigned long long>(m.n_params), static_cast<unsigned long long>(expert_bytes),
               static_cast<unsigned long long>(h.file_size));
}

// Qwen3-Next-80B-A3B's layout (qwen3next) from the header alone: 79.7 B parameters (the model
// card's 80 B), and the recurrent state planned per sequence, the same at every context: 36
// linear-attention layers of 3 x 8192 convolution floats and 32 heads x 128 x 128 delta-rule
// floats, 4 bytes each: 36 x 2,195,456 = 79,036,416 bytes (no padding: multiples of 64 B).
TEST_CASE("qwen3-next-80b-a3b header: its parameters and its recurrent state per sequence") {
    const SyntheticHeader h = synthetic_header(synthetic_shape("qwen3-next-80b-a3b"), "Q4_K_M");
    GgufPrefix pre = GgufFile::parse_prefix(h.bytes.data(), h.bytes.size(), h.file_size, "qwen3-next-80b-a3b.gguf");
    REQUIRE(pre.file);
    const fit::FitModel m = fit::fit_model(*pre.file);
    CHECK(m.config.arch == "qwen3next");
    CHECK(m.config.n_ff_shexp == 512);
    CHECK(m.n_params > 79'500'000'000ull);
    CHECK(m.n_params < 79'900'000'000ull);
    for (int64_t ctx : {4096, 32768}) {
        for (int32_t seqs : {1, 4}) {
            const fit::FitOptions fo{ctx, seqs, kBatch, DType::F16};
            const fit::FitPlan p = fit::plan_layers(m, fo, fit::Budget{}, -1, fit::cpu_profile());
            CHECK(p.cpu.state == 79'036'416ull * static_cast<uint64_t>(seqs));
            test::info("qwen3-next-80b-a3b, %lld tokens x %d sequences: KV cache %llu bytes, state %llu bytes",
                       static_cast<long long>(ctx), seqs, static_cast<unsigned long long>(p.cpu.kv_cache),
                       static_cast<unsigned long long>(p.cpu.state));
        }
    }
}

// The Qwen3.5 layouts the benchmarks use (issue #40), from their headers: the published
// parameter counts (llama.cpp reports 4.21 B for the 4B file) and what one sequence's
// recurrent state takes: per linear-attention layer 3 x 8192 conv inputs and 32 value heads'
// 128 x 128 matrices, F32 = 2,195,456 B; 24 such layers in the 4B, 30 in the 35B-A3B.
TEST_CASE("Qwen3.5-4B and 35B-A3B layouts: parameters, KV layers, state per sequence") {
    struct Want {
        const char* shape;
        uint64_t params_lo, params_hi;
        int32_t kv_layers, recurrent_layers;
    };
    for (const Want& w : {Want{"qwen3.5-4b", 4'200'000'000ull, 4'220'000'000ull, 8, 24},
                          Want{"qwen3.5-35b-a3b", 34'500'000'000ull, 36'000'000'000ull, 10, 30}}) {
        const SyntheticHeader h = synthetic_header(synthetic_shape(w.shape), "Q4_K_M");
        GgufPrefix pre = GgufFile::parse_prefix(h.bytes.data(), h.bytes.size(), h.file_size, w.shape);
        REQUIRE(pre.file);
        const fit::FitModel m = fit::fit_model(*pre.file);
        test::info("%s Q4_K_M: %llu parameters, file %llu bytes", w.shape, static_cast<unsigned long long>(m.n_params),
                   static_cast<unsigned long long>(h.file_size));
        CHECK(m.n_params > w.params_lo);
        CHECK(m.n_params < w.params_hi);
        const KvCacheConfig kv = Transformer::kv_config(m.config, 4096, 1, DType::F16);
        CHECK(kv.n_layers == w.kv_layers);
        CHECK(kv.n_recurrent_layers == w.recurrent_layers);
        CHECK(kv.recurrent.bytes_per_slot() == 2'195'456u);
        CHECK(kv.state_bytes() == uint64_t(w.recurrent_layers) * 2'195'456u);
    }
}

// Transformer's split: layers [0, n) and the embedding on the first backend, the rest and
// the output head (a mapped copy of the tied embedding) on the second, KV layers likewise.
// tiny-gemma4: the per-layer embedding projection with the embedding, KV layers only where
// a layer keeps K/V of its own.
static void check_split(const std::string& path, std::initializer_list<int32_t> splits) {
    EMBER_REQUIRE_FILE(path);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    const fit::FitModel fm = fit::fit_model(*file);
    for (int32_t n : splits) {
        INFO("first ", n, " layers on the first backend");
        auto first = make_cpu_backend(2), rest = make_cpu_backend(2);
        {
            Transformer tr(file, *first, *rest, n);
            KvCache kv(tr.kv_backends(), tr.kv_config(2048, 1));
            prefill(tr, kv, 2048);
            fit::FitOptions fo{2048, 1, kBatch, DType::F16};
            const fit::FitPlan p = fit::plan_layers(fm, fo, fit::Budget{1, 0, false}, n, fit::cpu_profile());
            REQUIRE(p.placement == fit::Placement::Split);
            check_device(p.gpu, first->memory());
            check_device(p.cpu, rest->memory());
        }
    }
}

TEST_CASE("planned split matches the two backends' allocations") {
    check_split(test::test_model(test::kSmolLM2), {0, 1, 17, 29});
    test::TempDir dir;
    const std::string gemma4 = dir.file("tiny-gemma4.gguf");
    write_synthetic_model(gemma4, synthetic_shape("tiny-gemma4"), "F16");
    check_split(gemma4, {0, 2, 4});
}

// A mixture of experts with every layer on the first backend but the experts (and routers)
// of the layers past the first e on the second (fit::Placement::ExpertsInRam): each backend
// allocates what the plan counts, and the logits are bitwise those of one backend (the same
// CPU kernels run the experts on either side).
TEST_CASE("planned experts in RAM match the two backends' allocations, and change no logit") {
    // qwen3moe, and gemma4's experts beside a dense FFN (their router scale, per-expert scales
    // and branch norms on the experts' backend, the attention output crossing over).
    for (const char* shape : {"tiny-qwen3moe", "tiny-gemma4moe"}) {
        SUBCASE(shape) {
            test::TempDir dir;
            const std::string path = dir.file(std::string(shape) + ".gguf");
            write_synthetic_model(path, synthetic_shape(shape), "Q8_0");
            auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
            const fit::FitModel fm = fit::fit_model(*file);
            const int32_t L = fm.config.n_layers;
            auto one = make_cpu_backend(2);
            Transformer whole(file, *one);
            KvCache whole_kv(whole.kv_backends(), whole.kv_config(2048, 1));
            const std::vector<float> expected = prefill(whole, whole_kv, 2048);
            for (int32_t e : {0, L - 1}) {
                INFO("experts of the first ", e, " of ", L, " layers on the first backend");
                auto first = make_cpu_backend(2), rest = make_cpu_backend(2);
                Transformer tr(file, *first, *rest, L, e);
                KvCache kv(tr.kv_backends(), tr.kv_config(2048, 1));
                CHECK(prefill(tr, kv, 2048) == expected);
                fit::FitOptions fo{2048, 1, kBatch, DType::F16};
                const fit::FitPlan p = fit::plan_layers(fm, fo, fit::Budget{1, 0, false}, -1, fit::cpu_profile(), e);
                REQUIRE(p.placement == fit::Placement::ExpertsInRam);
                CHECK(p.gpu_expert_layers == e);
                check_device(p.gpu, first->memory());
                check_device(p.cpu, rest->memory());
            }
        }
    }
}

namespace {

fit::FitModel header_model(const std::string& shape, const std::string& scheme) {
    const SyntheticHeader h = synthetic_header(synthetic_shape(shape), scheme);
    const GgufPrefix p = GgufFile::parse_prefix(h.bytes.data(), h.bytes.size(), h.file_size, shape);
    REQUIRE(p.file);
    return fit::fit_model(*p.file);
}

uint64_t tensor_bytes(const fit::FitModel& m, const std::string& name) {
    for (const fit::FitTensor& t : m.tensors)
        if (t.name == name) return t.bytes;
    FAIL("no tensor " << name);
    return 0;
}

}  // namespace

// The real models' shapes (synthetic headers: the planner reads only the tensor table).
// KV cache, by hand: K and V (F16, 2 B) for 8,192 tokens, per layer with K/V of its own.
//  - E4B: 24 of 42 layers keep K/V (18 share): 20 sliding of 2 x 256, 4 global of 2 x 512:
//    2 x 8192 x (20 x 512 + 4 x 1024) x 2 B = 469,762,048 B (all 42 layers: 822 MiB).
//  - 31B: 60 layers, 50 sliding of 16 x 256 and 10 global of 4 x 512:
//    2 x 8192 x (50 x 4096 + 10 x 2048) x 2 B = 7,381,975,040 B.
// The per-layer token table (E4B: 262,144 x 10,752) stays in the file map on the host: no
// device holds it. A split never parts a layer from the layer whose K/V it shares.
TEST_CASE("gemma4 E4B and 31B: the planner's KV cache, per-layer table and splits") {
    const fit::FitOptions fo{8192, 1, 512, DType::F16};
    const fit::Budget roomy{uint64_t{200} << 30, uint64_t{256} << 30, false};
    const fit::FitModel e4b = header_model("gemma4-e4b", "Q4_K_M");
    const fit::FitPlan pe = fit::plan_layers(e4b, fo, roomy, -1);
    REQUIRE(pe.placement == fit::Placement::Gpu);
    CHECK(pe.gpu.kv_cache == 469762048);
    uint64_t all = 0;
    for (const fit::FitTensor& t : e4b.tensors) all += t.bytes;
    const uint64_t table = tensor_bytes(e4b, "per_layer_token_embd.weight");
    MESSAGE("gemma4-e4b Q4_K_M: tensors ", all, " B, per-layer table ", table, " B, on the GPU ", pe.gpu.weights,
            " B of weights, ", pe.gpu.total(), " B in all");
    CHECK(pe.gpu.weights < all - table + (uint64_t{1} << 20));  // + padding and the V norms' ones
    CHECK(pe.gpu.weights > all - table);

    const fit::FitModel b31 = header_model("gemma4-31b", "Q4_K_M");
    const fit::FitPlan p31 = fit::plan_layers(b31, fo, roomy, -1);
    CHECK(p31.gpu.kv_cache == 7381975040ull);
    MESSAGE("gemma4-31b Q4_K_M: ", p31.gpu.total(), " B on the GPU at 8192 tokens");

    for (uint64_t gib : {2, 3, 4, 5}) {
        const fit::FitPlan p = fit::plan(e4b, fo, fit::Budget{gib << 30, uint64_t{64} << 30, false});
        INFO("E4B at ", gib, " GiB: ", p.reason);
        if (p.placement == fit::Placement::Split) CHECK(Transformer::split_supported(e4b.config, p.gpu_layers));
    }
}

// --gpu-layers auto asks the planner only where there is a GPU; on the CPU it loads as usual.
// (Which split it picks on a GPU is plan(): its bytes are the ones checked above; the CUDA
// terms are estimates that need a GPU machine to check.)
TEST_CASE("gpu layers auto loads on the CPU") {
    LoadOptions lo;
    lo.path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(lo.path);
    lo.device = BackendPreference::Cpu;
    lo.n_threads = 2;
    lo.n_gpu_layers = kAutoGpuLayers;
    auto model = Model::load(lo);
    CHECK(model->device() == "cpu");
    CHECK(model->memory_use().size() == 1);
    lo.n_gpu_layers = -3;
    CHECK_THROWS_AS(Model::load(lo), Error);
}
