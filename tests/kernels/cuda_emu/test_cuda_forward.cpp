// Whole forward passes through the CUDA backend (emulated, or a real GPU in test_cuda_gpu):
// stories260K must generate the CPU backend's greedy tokens (and the stored reference), a
// synthetic Gemma 3-shaped model (head_dim 256, sliding window, soft-caps, QK norms; prompt
// long enough for the GEMM path and the tensor-core prefill attention) the CPU backend's greedy tokens; CUDA graphs on
// and off give bit-identical logits, and decode passes are replayed from graphs; a synthetic qwen3moe (experts) the CPU
// backend's greedy tokens; tiny-gemma4 (the file the llama.cpp peer test checks: head dims 64 and 128, per-layer
// embeddings, KV sharing, soft-capped logits) and tiny-gemma4moe (experts beside the dense FFN) the CPU backend's
// logits; a synthetic gpt-oss (MXFP4 experts, sinks, YaRN) the CPU backend's greedy tokens.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/quant/quantizer.h"
#include "engine/models/transformer.h"
#include "kernels/backend.h"
#include "test_data.h"
#include "tests/kernels/cuda_emu/cuda_test_backend.h"

using namespace ember;

namespace {

struct Run {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;  // before each greedy token
};

int32_t argmax(const std::vector<float>& v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Prefill `prompt` in one pass, then `n_gen` greedy tokens (the last one not fed back).
Run greedy(const std::shared_ptr<const GgufFile>& file, Backend& backend, const std::vector<int32_t>& prompt,
           int n_gen) {
    Transformer tr(file, backend);
    KvCache kv(backend, tr.kv_config(static_cast<int64_t>(prompt.size()) + n_gen + 16, 1));
    const int32_t seq = kv.new_sequence();
    Run out;
    std::vector<float> logits;
    auto step = [&](const std::vector<int32_t>& toks) {
        const int32_t start = kv.length(seq);
        const std::vector<int32_t> slots = kv.append(seq, static_cast<int32_t>(toks.size()));
        std::vector<int32_t> positions, seq_of(toks.size(), 0);
        for (size_t i = 0; i < toks.size(); ++i) positions.push_back(start + static_cast<int32_t>(i));
        const std::vector<int32_t>& table = kv.block_table(seq);
        const std::vector<int32_t> output_rows = {static_cast<int32_t>(toks.size() - 1)};
        BatchInfo b;
        b.tokens = toks;
        b.positions = positions;
        b.seq_of = seq_of;
        b.kv_slot = slots;
        b.block_table = table;
        b.n_seqs = 1;
        b.max_blocks = static_cast<int32_t>(table.size());
        b.output_rows = output_rows;
        const int32_t state_slot = kv.state_slot(seq);  // linear-attention layers' state (qwen35)
        if (kv.has_recurrent()) b.state_slot = std::span(&state_slot, 1);
        tr.forward(b, kv, logits);
    };
    step(prompt);
    for (int i = 0; i < n_gen; ++i) {
        out.logits.push_back(logits);
        out.tokens.push_back(argmax(logits));
        if (i + 1 < n_gen) step({out.tokens.back()});
    }
    return out;
}

// ||got - ref|| / ||ref|| over one logits row.
double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
    double e = 0, r = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
        const double d = double(got[j]) - ref[j];
        e += d * d;
        r += double(ref[j]) * ref[j];
    }
    return std::sqrt(e / r);
}

// Every step's GPU logits within `bound` (relative L2) of the CPU's.
void check_logits_close(const Run& gpu, const Run& cpu, double bound = 0.05) {
    REQUIRE(gpu.logits.size() == cpu.logits.size());
    for (size_t i = 0; i < gpu.logits.size(); ++i) {
        const double rel = rel_l2(gpu.logits[i], cpu.logits[i]);
        MESSAGE("step " << i << " logits rel_l2 " << rel);
        CHECK(rel < bound);
    }
}

size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

}  // namespace

TEST_CASE("stories260K: the CUDA backend generates the CPU backend's greedy tokens") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    std::ifstream in(test::testdata("models/stories260K.greedy256.ids.txt"));
    REQUIRE(in);
    std::string header;
    std::getline(in, header);
    std::vector<int32_t> expected;
    for (int32_t id; in >> id;) expected.push_back(id);
    REQUIRE(expected.size() == 256);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    const int n_gen = 256;
    auto cpu = make_cpu_backend(2);
    const Run rc = greedy(file, *cpu, {1}, n_gen);
    auto gpu = test::make_test_cuda_backend();
    const Run rg = greedy(file, *gpu, {1}, n_gen);
    CHECK(rc.tokens == expected);
    CHECK(rg.tokens == rc.tokens);
    size_t first_diff = 0;
    while (first_diff < rg.tokens.size() && rg.tokens[first_diff] == rc.tokens[first_diff]) ++first_diff;
    INFO("first differing token: " << first_diff);
    CHECK(first_diff == rg.tokens.size());
    const GraphStats gs = gpu->graph_stats();
    MESSAGE("stories260K on " << std::string(test::cuda_test_flavour()) << ": graphs replayed " << gs.replayed
                              << ", captured " << gs.captured << ", eager " << gs.eager << ", failed " << gs.failures);
    CHECK(gs.failures == 0);
    CHECK(gs.replayed >= static_cast<uint64_t>(n_gen) - 8);  // decode passes replay their graph
}

TEST_CASE("synthetic Gemma 3 shape: the CUDA backend generates the CPU backend's greedy tokens") {
    // head_dim 256 as gemma-3-270m, GQA 4:1, sliding window 16, a 40-token prompt (the
    // quantized GEMM path: more than 32 tokens).
    SyntheticShape shape{"emu-gemma3", 256, 2, 4, 1, 512, 1024, 1024, true, "gemma3", 256, 16};
    const std::string path = (std::filesystem::temp_directory_path() / "ember-test-cuda-gemma3-q4km.gguf").string();
    write_synthetic_model(path, shape, "Q4_K_M", 7);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 11) % 1000 + 3));
    const int n_gen = 12;
    auto cpu = make_cpu_backend(2);
    const Run rc = greedy(file, *cpu, prompt, n_gen);
    auto gpu = test::make_test_cuda_backend();
    const int64_t tc_before = test::kernel_launches("attention_tc_kernel");
    const Run on = greedy(file, *gpu, prompt, n_gen);
    // The prompt's attention on tensor cores (one launch per layer; decode keeps attention_kernel).
    if (tc_before >= 0) CHECK(test::kernel_launches("attention_tc_kernel") - tc_before == shape.n_layers);
    CHECK(on.tokens == rc.tokens);
    // The logits themselves: the GPU's 8-bit activations (per 32, vs the CPU's per-32/16
    // blocks) and FP16 GEMM inputs move them a little, never the argmax here.
    check_logits_close(on, rc);
    // Graphs off: the very same launches, eagerly: bit-identical logits.
    REQUIRE(gpu->set_graphs(false));
    const Run off = greedy(file, *gpu, prompt, n_gen);
    gpu->set_graphs(true);
    size_t bad = 0;
    for (size_t i = 0; i < on.logits.size(); ++i) bad += bits_differ(on.logits[i], off.logits[i]);
    CHECK(bad == 0);
    CHECK(off.tokens == on.tokens);
    std::filesystem::remove(path);
}

namespace {

// A quantized file (mixture of experts: every expert chosen by several tokens): a 72-token
// prompt (with experts, 72 x k slots: moe_matmul's grouped-by-expert path), then 12 decode
// steps replayed from CUDA graphs (a few slots: the per-slot path), on the CPU and the CUDA
// backend: the same greedy tokens. As for Gemma 3 above, the GPU's activation blocks (and
// FP16 GEMM) differ from the CPU's, and may also move a token's router logits across a
// near-tie, which changes one of its experts: logits within 5 % (relative L2) per step.
void check_experts_greedy(const std::string& path) {
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    std::vector<int32_t> prompt;
    for (int i = 0; i < 72; ++i) prompt.push_back(static_cast<int32_t>((i * 53 + 7) % 1000 + 3));
    const int n_gen = 12;
    auto cpu = make_cpu_backend(2);
    const Run rc = greedy(file, *cpu, prompt, n_gen);
    auto gpu = test::make_test_cuda_backend();
    const Run rg = greedy(file, *gpu, prompt, n_gen);
    CHECK(rg.tokens == rc.tokens);
    check_logits_close(rg, rc);
    CHECK(gpu->graph_stats().failures == 0);
}

}  // namespace

TEST_CASE("synthetic qwen3moe: the CUDA backend generates the CPU backend's greedy tokens") {
    // tiny-qwen3moe in Q4_K_M: 16 experts of 96, 4 used, an F32 router.
    const std::string path = (std::filesystem::temp_directory_path() / "ember-test-cuda-qwen3moe-q4km.gguf").string();
    SyntheticShape shape = synthetic_shape("tiny-qwen3moe");
    shape.output_norm = 0.1f;  // moderate logits: the argmax is decided by the whole pass
    write_synthetic_model(path, shape, "Q4_K_M", 11);
    check_experts_greedy(path);
    std::filesystem::remove(path);
}

TEST_CASE("synthetic gpt-oss: the CUDA backend generates the CPU backend's greedy tokens") {
    // tiny-gpt-oss as real files are (MXFP4_MOE: MXFP4 experts, Q8_0 attention, router F32):
    // q/k/v/o biases, sinks, YaRN, 8-token windows on even layers, 8 experts with biases, 2
    // per token by the softmax over the top-2 logits, the clamped SwiGLU; the prompt crosses
    // the windows.
    // Quantized by Ember's quantizer from the F32 file with test_arch_peer's gpt-oss gains
    // (sinks, YaRN and windows matter there): random Q8_0 blocks would make the logits hot.
    const std::string dir = std::filesystem::temp_directory_path().string();
    const std::string f32 = dir + "/ember-test-cuda-gpt-oss-f32.gguf", path = dir + "/ember-test-cuda-gpt-oss.gguf";
    SyntheticShape shape = synthetic_shape("tiny-gpt-oss");
    shape.qk_gain = 1.0f, shape.attn_gain = 2.0f, shape.output_norm = 1.6f;
    write_synthetic_model(f32, shape, "F32", 13);
    QuantizeOptions qo;
    qo.input = f32, qo.output = path, qo.type = "MXFP4_MOE", qo.n_threads = 2;
    quantize_model(qo);
    std::filesystem::remove(f32);
    check_experts_greedy(path);
    std::filesystem::remove(path);
}

// test_arch_peer's F32 file of `name` on both backends, n_prompt prompt tokens and 6 greedy
// steps: the same tokens, logits within 1e-4 relative L2 (FP32 on both sides).
static void check_f32_logits(const char* name, int n_prompt = 40, void (*variant)(SyntheticShape&) = nullptr) {
    SyntheticShape shape = synthetic_shape(name);
    if (variant) variant(shape);
    shape.output_norm = 0.1f, shape.qk_gain = 4.0f, shape.attn_gain = 8.0f;  // test_arch_peer's file
    if (shape.arch == "gpt-oss") shape.qk_gain = 1.0f, shape.attn_gain = 2.0f, shape.output_norm = 1.6f;  // its own
    const std::string path =
        (std::filesystem::temp_directory_path() / ("ember-test-cuda-" + std::string(name) + "-f32.gguf")).string();
    write_synthetic_model(path, shape, "F32", 3);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    std::vector<int32_t> prompt;
    for (int i = 0; i < n_prompt; ++i) prompt.push_back(static_cast<int32_t>((i * 53 + 5) % 1000 + 3));
    const int n_gen = 6;
    auto cpu = make_cpu_backend(2);
    const Run rc = greedy(file, *cpu, prompt, n_gen);
    auto gpu = test::make_test_cuda_backend();
    const Run rg = greedy(file, *gpu, prompt, n_gen);
    CHECK(rg.tokens == rc.tokens);
    check_logits_close(rg, rc, 1e-4);
    std::filesystem::remove(path);
}

// F32 weights: both backends compute in FP32 (no activation quantization, no FP16 GEMM for
// float weights), so only the order of summation differs: relative errors of a few 1e-7 per
// op, grown through 9 layers and attention (about 1e-7 here). 1e-4 relative L2 is far above that, and far
// below what a wrong op gives (a missing per-layer input or soft-cap moves logits by >1e-2).
TEST_CASE("synthetic Gemma 4 shape: the CUDA backend gives the CPU backend's logits") {
    check_f32_logits("tiny-gemma4");
}

// tiny-gpt-oss in F32 (test_arch_peer's file, its own gains): sinks, YaRN, windows, biases,
// the clamped SwiGLU and its float experts (the MXFP4 file is checked above), as above.
TEST_CASE("synthetic gpt-oss shape in F32: the CUDA backend gives the CPU backend's logits") {
    check_f32_logits("tiny-gpt-oss");
}

// tiny-qwen3 in F32: per-head Q/K RMS norms before RoPE, as above.
TEST_CASE("synthetic Qwen3 shape: the CUDA backend gives the CPU backend's logits") { check_f32_logits("tiny-qwen3"); }

// tiny-gemma4moe in F32 (test_arch_peer's file): the experts beside each layer's dense FFN,
// the router on the scaled norm of the attention output, fused gate+up experts, per-expert
// output scales. As above, FP32 on both sides: only the order of summation differs, unless a
// token's router logits sit at a near-tie (then one expert of four changes and the logits
// move by ~1e-2; the file's routing gain keeps the logits' gaps far wider than 1e-6). A
// 72-token prompt: its experts take the grouped-by-expert path.
TEST_CASE("synthetic Gemma 4 MoE shape: the CUDA backend gives the CPU backend's logits") {
    check_f32_logits("tiny-gemma4moe", 72);
}

// tiny-qwen35, tiny-qwen35moe and tiny-qwen3next in F32 (test_arch_peer's files): the
// linear-attention layers' convolution and delta rule (linear_attn.cu; qwen3next's value heads
// grouped by key head, its alpha and beta split from ssm_ba) carrying their states from the
// 40-token prefill through the decode steps, the gated attention layers, the shared expert.
// FP32 on both sides, as above.
TEST_CASE("synthetic Qwen3.5 and Qwen3-Next shapes: the CUDA backend gives the CPU backend's logits") {
    check_f32_logits("tiny-qwen35");
    check_f32_logits("tiny-qwen35moe");
    check_f32_logits("tiny-qwen3next");
    // Its first conversions' fused ssm_in, regrouped by copies into column views.
    check_f32_logits("tiny-qwen3next", 40, [](SyntheticShape& s) { s.qwen35.fused_qkvz = true; });
}

// Qwen3 and Gemma 4 quantized as the real files are (Q4_K_M; Gemma 4's per-layer embedding
// table too): the dense shapes and Gemma 4's MoE one, the same greedy tokens on both backends, logits as
// check_experts_greedy bounds them (the GPU's activation blocks and FP16 GEMM).
TEST_CASE("synthetic Qwen3 and Gemma 4 shapes in Q4_K_M: the CUDA backend generates the CPU's greedy tokens") {
    for (const char* name : {"tiny-qwen3", "tiny-gemma4", "tiny-gemma4moe"}) {
        SUBCASE(name) {
            const std::string path =
                (std::filesystem::temp_directory_path() / ("ember-test-cuda-" + std::string(name) + "-q4km.gguf"))
                    .string();
            SyntheticShape shape = synthetic_shape(name);
            shape.output_norm = 0.1f;  // moderate logits: the argmax is decided by the whole pass
            write_synthetic_model(path, shape, "Q4_K_M", 17);
            check_experts_greedy(path);
            std::filesystem::remove(path);
        }
    }
}
