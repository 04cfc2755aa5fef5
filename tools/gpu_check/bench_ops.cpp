// ember-gpu-check (c), per op: the time of single ops at the shapes a decode and a prefill of
// Llama-3-8B run (matrix-vector products per weight type at 1, 8 and 16 tokens, a GEMM pass,
// attention decode of 1 and 16 sequences and a 2048-token causal prefill, one small launch), as
// GB/s or TFLOP/s against the bytes and FLOPs each must move or do. What the whole-model
// decode and prefill rows of bench.cpp cannot say: which op holds the step back.
// Weights rotate over copies totalling >= 256 MiB so that repeated calls are not served
// from the 60 MB L2; every input is random (never zeros).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using namespace ember::opdata;

namespace {

constexpr size_t kRotateBytes = size_t{256} << 20;

// Seconds per call: `fn(i)` 3 times to warm up, then `reps` calls queued back to back and
// one synchronize (launches overlap the running kernels, as in an eager decode).
double seconds_per_call(Backend& gpu, int reps, const std::function<void(int)>& fn) {
    for (int i = 0; i < 3; ++i) fn(i);
    gpu.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn(i);
    gpu.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

std::string us_note(double s, const char* what) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.1f us/call; %s", s * 1e6, what);
    return buf;
}

// W rows x cols of `type` (copies to rotate) against n tokens: GB/s of weight bytes, or
// TFLOP/s for the GEMM path.
void bench_matmul(Backend& gpu, DType type, int64_t rows, int64_t cols, const std::vector<int64_t>& ns) {
    const std::vector<uint8_t> w = random_weights(type, rows, cols);
    const size_t copies = std::max<size_t>(1, (kRotateBytes + w.size() - 1) / w.size());
    std::vector<Tensor> ws;
    for (size_t i = 0; i < copies; ++i) ws.push_back(gpu.load_weight(w.data(), type, cols, rows, "w"));
    for (int64_t n : ns) {
        Tensor x = put(gpu, random_floats(static_cast<size_t>(n * cols)), cols, n);
        Tensor y = gpu.alloc(MemoryKind::Activations, DType::F32, rows, n, "y");
        const double s = seconds_per_call(gpu, 200, [&](int i) { gpu.matmul(ws[i % ws.size()], x, y, nullptr); });
        char what[96];
        std::snprintf(what, sizeof what, "matmul %s %lldx%lld n=%lld", std::string(dtype_name(type)).c_str(),
                      static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(n));
        if (n <= 32) bench_row(what, double(w.size()) / s / 1e9, "GB/s", us_note(s, "weight bytes once"));
        else bench_row(what, 2.0 * n * rows * cols / s / 1e12, "TFLOP/s", us_note(s, "dequant + FP16 GEMM"));
        gpu.free(x);
        gpu.free(y);
    }
    for (Tensor& t : ws) gpu.free(t);
}

// Qwen3-30B-A3B's experts (128 of them, 8 per token) over a T-token prefill: the grouped
// moe_matmul (one call, T*k slots sorted by expert on the device) against the per-slot path
// a prefill would otherwise take (the same slots as calls of 8 tokens = 64 slots each, so
// each slot re-reads its expert). Rates against what the call must do at least: the chosen
// experts' weights once (GB/s; every expert is chosen at T = 512) and 2 * slots * rows * cols
// FLOPs (TFLOP/s; tensor cores at these sizes). Weights rotate over copies as above.
// x_per_slot: x holds a row per slot (the down projection of the GLU output), else per token.
void bench_moe_matmul(Backend& gpu, DType type, int64_t rows, int64_t cols, int64_t T, bool x_per_slot) {
    const int64_t n_expert = 128, k = 8, slots = T * k;
    const std::vector<uint8_t> w = random_weights(type, n_expert * rows, cols);
    const size_t copies = std::max<size_t>(1, (kRotateBytes + w.size() - 1) / w.size());
    std::vector<Tensor> ws;
    for (size_t i = 0; i < copies; ++i) ws.push_back(gpu.load_expert_weight(w.data(), type, cols, rows, n_expert, "w"));
    std::mt19937 rng(35);
    std::vector<int32_t> ids, perm(static_cast<size_t>(n_expert));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t t = 0; t < T; ++t) {  // k distinct experts per token, as routing gives
        std::shuffle(perm.begin(), perm.end(), rng);
        ids.insert(ids.end(), perm.begin(), perm.begin() + k);
    }
    std::vector<int32_t> used(ids);
    std::sort(used.begin(), used.end());
    const double experts_used = double(std::unique(used.begin(), used.end()) - used.begin());
    const int64_t x_rows = x_per_slot ? slots : T;
    Tensor x = put(gpu, random_floats(static_cast<size_t>(x_rows * cols)), cols, x_rows);
    Tensor y = gpu.alloc(MemoryKind::Activations, DType::F32, rows, slots, "y");
    Tensor id = gpu.alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
    gpu.upload(id, ids.data(), ids.size() * sizeof(int32_t));
    const int64_t piece = 8;  // tokens per per-slot call: 64 slots, the grouping threshold
    const double grouped =
        seconds_per_call(gpu, 20, [&](int i) { gpu.moe_matmul(ws[i % ws.size()], n_expert, x, id, y, nullptr); });
    const double per_slot = seconds_per_call(gpu, 5, [&](int i) {
        for (int64_t t0 = 0; t0 < T; t0 += piece) {
            const int64_t m = std::min(piece, T - t0);
            const Tensor xs = x_per_slot ? x.slice_rows(t0 * k, m * k) : x.slice_rows(t0, m), is = id.slice_rows(t0, m);
            Tensor ys = y.slice_rows(t0 * k, m * k);
            gpu.moe_matmul(ws[i % ws.size()], n_expert, xs, is, ys, nullptr);
        }
    });
    const double bytes = double(w.size()) * experts_used / double(n_expert), flops = 2.0 * slots * rows * cols;
    char what[128], note[160];
    std::snprintf(what, sizeof what, "moe_matmul %s 128x%lldx%lld T=%lld k=8 grouped",
                  std::string(dtype_name(type)).c_str(), static_cast<long long>(rows), static_cast<long long>(cols),
                  static_cast<long long>(T));
    std::snprintf(note, sizeof note, "%.1f us/call, %.2f TFLOP/s; %.0f MB weights once; per-slot path %.1f us (x%.1f)",
                  grouped * 1e6, flops / grouped / 1e12, bytes / 1e6, per_slot * 1e6, per_slot / grouped);
    bench_row(what, bytes / grouped / 1e9, "GB/s", note);
    for (Tensor* t : {&x, &y, &id}) gpu.free(*t);
    for (Tensor& t : ws) gpu.free(t);
}

// Llama-3-8B attention (32 heads, 8 KV heads, head_dim 128, F16 cache, 16-token blocks).
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16;
constexpr int64_t kQDim = int64_t{kHeads} * kHeadDim, kKvDim = int64_t{kKvHeads} * kHeadDim;

// Random K/V of batch `b` stored in `layer` (b set on the backend).
void store_random_kv(Backend& gpu, KvLayer& layer, const Batch& b) {
    const int64_t n = static_cast<int64_t>(b.tokens.size());
    Tensor k = put(gpu, random_floats(static_cast<size_t>(n * kKvDim)), kKvDim, n);
    Tensor v = put(gpu, random_floats(static_cast<size_t>(n * kKvDim)), kKvDim, n);
    gpu.store_kv(layer, k, v);
    gpu.synchronize();
    gpu.free(k);
    gpu.free(v);
}

// The cache of `seqs` sequences of `len` tokens, written by store_kv from random K/V; `fill`
// is the batch that wrote them (a prefill of all of them).
struct FilledCache {
    KvLayer layer;
    PagedSeqs paged;
    Batch fill;
};
FilledCache fill_cache(Backend& gpu, int seqs, int len) {
    const int own = len / kBlock + 1, blocks = seqs * own;
    std::vector<int> first, n_own;
    for (int s = 0; s < seqs; ++s) {
        first.push_back(s * own);
        n_own.push_back(own);
    }
    FilledCache c{alloc_kv_layer(gpu, DType::F16, kKvHeads, kHeadDim, kBlock, blocks),
                  PagedSeqs(blocks, own, kBlock, first, n_own),
                  {}};
    std::vector<std::pair<int, int>> parts;
    for (int s = 0; s < seqs; ++s) parts.emplace_back(s, len);
    c.fill = c.paged.batch(parts);
    gpu.set_batch(c.fill.info());
    store_random_kv(gpu, c.layer, c.fill);
    return c;
}

// Attention over the batch set on the backend: seconds per call.
double time_attention(Backend& gpu, const KvLayer& layer, int64_t n_tokens, int reps) {
    Tensor q = put(gpu, random_floats(static_cast<size_t>(n_tokens * kQDim)), kQDim, n_tokens);
    Tensor o = gpu.alloc(MemoryKind::Activations, DType::F32, kQDim, n_tokens, "o");
    const AttentionParams ap = attention_params(kHeads, kKvHeads, kHeadDim, 0, 0.0f);
    const double s = seconds_per_call(gpu, reps, [&](int) { gpu.attention(layer, q, ap, o); });
    gpu.free(q);
    gpu.free(o);
    return s;
}

void bench_attention_decode(Backend& gpu, int seqs, int ctx) {
    FilledCache c = fill_cache(gpu, seqs, ctx);
    std::vector<std::pair<int, int>> parts;
    for (int s = 0; s < seqs; ++s) parts.emplace_back(s, 1);
    const Batch b = c.paged.batch(parts);  // one new token each
    gpu.set_batch(b.info());
    store_random_kv(gpu, c.layer, b);
    const double s = time_attention(gpu, c.layer, seqs, 200);
    const double bytes = double(seqs) * (ctx + 1) * kKvDim * 2 * 2;  // K and V, F16
    char what[96];
    std::snprintf(what, sizeof what, "attention decode %d seqs x %d (8B layer)", seqs, ctx);
    bench_row(what, bytes / s / 1e9, "GB/s", us_note(s, "K+V bytes once"));
    gpu.free(c.layer.k);
    gpu.free(c.layer.v);
}

void bench_attention_prefill(Backend& gpu, int n) {
    FilledCache c = fill_cache(gpu, 1, n);  // the fill's batch is the prefill itself
    gpu.set_batch(c.fill.info());
    const double s = time_attention(gpu, c.layer, n, 10);
    const double flops = 4.0 * kHeadDim * kHeads * (double(n) * (n + 1) / 2);  // QK^T and PV, causal
    char what[96];
    std::snprintf(what, sizeof what, "attention prefill %d causal (8B layer)", n);
    bench_row(what, flops / s / 1e12, "TFLOP/s", us_note(s, "FP32 CUDA cores"));
    gpu.free(c.layer.k);
    gpu.free(c.layer.v);
}

void bench_small_launch(Backend& gpu) {
    Tensor x = put(gpu, random_floats(4096), 4096, 1), w = put(gpu, random_floats(4096), 4096, 1);
    Tensor y = gpu.alloc(MemoryKind::Activations, DType::F32, 4096, 1, "y");
    const double s = seconds_per_call(gpu, 2000, [&](int) { gpu.rms_norm(x, w, 1e-5f, y); });
    bench_row("rms_norm 1x4096 (a launch)", s * 1e6, "us", "queued back to back: launch rate bound");
    for (Tensor* t : {&x, &w, &y}) gpu.free(*t);
}

}  // namespace

void bench_ops(Backend& gpu) {
    std::printf("\n[bench] single ops at Llama-3-8B shapes (weights rotated over >= 256 MiB)\n");
    try {
        bench_small_launch(gpu);
        for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K})
            bench_matmul(gpu, t, 4096, 4096, {1, 8, 16});
        bench_matmul(gpu, DType::Q4_K, 14336, 4096, {1, 16, 512});
        // The rest of a Llama-3-8B Q4_K_M layer's decode shapes (k/v 1024 rows; ffn_down and
        // attn_v are Q6_K in the mix): with the rows above, one layer's matvecs sum to
        // q + k + v + o + gate + up + down, to set against the decode's time per layer.
        bench_matmul(gpu, DType::Q4_K, 1024, 4096, {1});
        bench_matmul(gpu, DType::Q6_K, 1024, 4096, {1});
        bench_matmul(gpu, DType::Q6_K, 4096, 14336, {1});
        for (int ctx : {512, 4096}) bench_attention_decode(gpu, 16, ctx);
        for (int ctx : {512, 4096}) bench_attention_decode(gpu, 1, ctx);
        bench_attention_prefill(gpu, 2048);
        // Qwen3-30B-A3B's expert FFN at a 512-token prefill: gate (and up) 768 x 2048, down
        // 2048 x 768 per expert; Q4_K (Q4_K_M files) and MXFP4 (gpt-oss's expert type).
        for (DType t : {DType::Q4_K, DType::MXFP4}) {
            bench_moe_matmul(gpu, t, 768, 2048, 512, false);
            bench_moe_matmul(gpu, t, 2048, 768, 512, true);
        }
    } catch (const std::exception& e) {
        fail("bench", "single ops", e.what());
    }
}

}  // namespace ember::gpucheck
