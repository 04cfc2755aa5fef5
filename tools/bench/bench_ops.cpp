// ember-bench-ops: throughput of the attention kernel (and the cheap ops) at Llama-3.2-1B
// geometry (32 query heads, 8 KV heads, head_dim 64, F16 cache): prefill of a 512-token
// prompt (causal, each token over its prefix) and decode of one token over a long context.
//
//   ember-bench-ops [--threads N] [--isa scalar|avx2|avx512] [--ctx N] [--prompt N]
//                   [--seqs S] [--batch-ctx C] [--heads Q/KV] [--kv f16|q8_0] [--new N] [--peak]
//
// --heads: query and KV heads (default 32/8; SmolLM2's 9/3 has 3 query heads per KV head).
// --kv: the cache type (default f16).
// --new N: also N new tokens of a turn after a cached history of 512, 2048 and 4096 tokens
// (a long chat's prefill: each new token sees the whole history and the new tokens before it).
// --peak: first, one core's AVX-512 f32 FMA and VNNI int8 peaks (16 independent register
// chains; the ceiling the attention GFLOP/s compare with).
//
// Last, a batched decode step as a server runs it: S sequences (16), one token each at
// context C (256), over 16 layers whose caches (S x C tokens each, blocks shuffled) together
// outgrow the CPU's caches, so the keys come from DRAM as in serving.
//
// GFLOP/s counts 4 * head_dim flops per (query head, visible key) pair (q.k and p.v); the
// CPU columns divide by the process's CPU time instead (the figure that repeats on a shared
// machine; with several threads it includes the pool's waiting).
#include <algorithm>
#include <chrono>
#include <cstdio>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/ops.h"

using namespace ember;
using namespace ember::cpu;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of the whole process (all pool threads).
double cpu_now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// The least CPU time of one call over repeated calls, beside `best_of`'s wall time: on a
// loaded machine a long call is preempted, so its wall time measures the neighbours.
double best_cpu = 0;

template <class F>
double best_of(F&& f, double min_time) {
    f();
    double best = 1e30;
    best_cpu = 1e30;
    const double start = now();
    for (int i = 0; (now() - start < min_time || i < 3) && i < 10000; ++i) {
        const double t0 = now(), c0 = cpu_now();
        f();
        best = std::min(best, now() - t0);
        best_cpu = std::min(best_cpu, cpu_now() - c0);
    }
    return best;
}

// Attention over `pos.size()` tokens (scale 1/8 = head_dim 64); seq_of null: one sequence.
ops::AttentionBatchArgs batch_args(const std::vector<float>& q, std::vector<float>& out, int n_heads,
                                   const std::vector<int32_t>& pos, const std::vector<int32_t>& table, int max_blocks,
                                   const int32_t* seq_of = nullptr) {
    return {.q = q.data(),
            .out = out.data(),
            .n_tokens = static_cast<int64_t>(pos.size()),
            .n_heads = n_heads,
            .positions = pos.data(),
            .seq_of = seq_of,
            .block_table = table.data(),
            .max_blocks = max_blocks,
            .scale = 0.125f};
}

// One decode token for each of `seqs` sequences at context ctx, over kLayers layers' caches
// (same geometry as kv; contents random, not computed: only the timing matters here).
void batched_decode(ThreadPool& pool, KvCacheView kv, int seqs, int ctx, int n_heads, std::mt19937& rng) {
    constexpr int kLayers = 16;
    const int B = kv.block_tokens, per_seq = (ctx + B - 1) / B, D = kv.head_dim;
    const size_t layer_bytes = kv.row_bytes * size_t(seqs) * per_seq * B;
    std::vector<uint8_t> kp(layer_bytes * kLayers), vp(kp.size());
    for (size_t i = 0; i < kp.size(); ++i) kp[i] = vp[i] = static_cast<uint8_t>(rng() & 0x3b);  // finite halves
    std::vector<int32_t> table(size_t(seqs) * per_seq);  // sequence s: row s, its blocks shuffled
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<float> q(size_t(seqs) * n_heads * D, 0.1f), out(q.size());
    std::vector<int32_t> pos(static_cast<size_t>(seqs), ctx - 1), seq_of(static_cast<size_t>(seqs));
    std::iota(seq_of.begin(), seq_of.end(), 0);
    const ops::AttentionBatchArgs a = batch_args(q, out, n_heads, pos, table, per_seq, seq_of.data());
    const double t = best_of(
        [&] {
            for (int l = 0; l < kLayers; ++l) {
                kv.k = kp.data() + l * layer_bytes;
                kv.v = vp.data() + l * layer_bytes;
                ops::attention(kv, a, &pool);
            }
        },
        1.0);
    std::printf("decode step, %d sequences at %d, x%d layers %9.3f ms %8.1f GFLOP/s (%.0f MiB of caches)\n", seqs, ctx,
                kLayers, t * 1e3, double(seqs) * ctx * n_heads * 4.0 * D * kLayers / t * 1e-9,
                2.0 * kp.size() / 1048576.0);
}

#if defined(__x86_64__)
// One core's peak rates: 16 independent register chains (more than the ports' latency x
// throughput needs), n rounds each; the CPU seconds they took.
__attribute__((target("avx512f"))) double fma_peak_seconds(long n) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_set1_ps(0.001f * float(i));
    const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-4f);
    const double c0 = cpu_now();
    for (long k = 0; k < n; ++k) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = _mm512_fmadd_ps(r[i], x, y);
    }
    const double t = cpu_now() - c0;
    float sum = 0, lanes[16];  // used, so the chains are computed
    for (auto& v : r) {
        _mm512_storeu_ps(lanes, v);
        sum += lanes[0];
    }
    if (sum == 1.2345f) std::printf(" ");
    return t;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni_peak_seconds(long n) {
    __m512i r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_set1_epi32(i);
    const __m512i u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(5);
    const double c0 = cpu_now();
    for (long k = 0; k < n; ++k) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = _mm512_dpbusd_epi32(r[i], u, v);
    }
    const double t = cpu_now() - c0;
    int lanes[16];
    long sum = 0;
    for (auto& x : r) {
        _mm512_storeu_si512(lanes, x);
        sum += lanes[0];
    }
    if (sum == 12345) std::printf(" ");
    return t;
}

void print_peaks() {
    if (active_isa() != Isa::Avx512) return (void)std::printf("peaks: AVX-512 only\n");
    constexpr long kRounds = 20'000'000;
    double f = 1e30, i8 = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        f = std::min(f, fma_peak_seconds(kRounds));
        i8 = std::min(i8, vnni_peak_seconds(kRounds));
    }
    std::printf("one core's peaks per CPU second: f32 FMA %.1f GFLOP/s, VNNI u8 x s8 %.1f Gop/s\n",
                kRounds * 16.0 * 32 / f * 1e-9, kRounds * 16.0 * 128 / i8 * 1e-9);
}
#else
void print_peaks() { std::printf("peaks: x86-64 only\n"); }
#endif

}  // namespace

int main(int argc, char** argv) {
    int threads = 0, ctx = 4096, prompt = 512, seqs = 16, batch_ctx = 256, n_heads = 32, n_kv = 8, n_new = 0;
    bool peak = false;
    DType kv_type = DType::F16;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--peak") {
            peak = true;
            continue;
        }
        if (i + 1 >= argc) break;
        const std::string v = argv[++i];
        if (a == "--threads") threads = std::stoi(v);
        else if (a == "--ctx") ctx = std::stoi(v);
        else if (a == "--prompt") prompt = std::stoi(v);
        else if (a == "--new") n_new = std::stoi(v);
        else if (a == "--seqs") seqs = std::stoi(v);
        else if (a == "--batch-ctx") batch_ctx = std::stoi(v);
        else if (a == "--heads") n_heads = std::stoi(v), n_kv = std::stoi(v.substr(v.find('/') + 1));
        else if (a == "--kv") kv_type = v == "q8_0" ? DType::Q8_0 : DType::F16;
        else if (a == "--isa") force_isa(v == "scalar" ? Isa::Scalar : v == "avx2" ? Isa::Avx2 : Isa::Avx512);
    }
    ThreadPool pool(threads);
    const int D = 64, B = 16;
    constexpr int kHistories[] = {512, 2048, 4096};
    const int max_tokens = std::max({ctx, prompt, n_new > 0 ? kHistories[2] + n_new : 0});
    const int n_blocks = (max_tokens + B - 1) / B;
    KvCacheView kv;
    kv.type = kv_type;
    kv.n_kv_heads = n_kv;
    kv.head_dim = D;
    kv.block_tokens = B;
    kv.row_bytes = kv_row_bytes(kv_type, int64_t{n_kv} * D);
    std::vector<uint8_t> kp(kv.row_bytes * size_t(n_blocks) * B), vp(kp.size());
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    {
        std::vector<float> k(size_t(n_kv) * D), v(k.size());
        for (int s = 0; s < n_blocks * B; ++s) {
            for (auto& x : k) x = normal(rng);
            for (auto& x : v) x = normal(rng);
            const int32_t slot = s;
            ops::store_kv(kv, kp.data(), vp.data(), k.data(), v.data(), &slot, 1, nullptr);
        }
    }
    kv.k = kp.data();
    kv.v = vp.data();
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);

    if (peak) print_peaks();
    std::printf("ember-bench-ops: isa %s, %d threads; heads %d/%d, head_dim %d, %s KV, block %d\n",
                std::string(isa_name(active_isa())).c_str(), pool.size(), n_heads, n_kv, D,
                std::string(dtype_name(kv_type)).c_str(), B);
    auto run = [&](int n_tok, int first_pos, const char* what) {
        std::vector<float> q(size_t(n_tok) * n_heads * D), out(q.size());
        for (auto& x : q) x = normal(rng);
        std::vector<int32_t> pos(static_cast<size_t>(n_tok));
        std::iota(pos.begin(), pos.end(), first_pos);
        const ops::AttentionBatchArgs a = batch_args(q, out, n_heads, pos, table, n_blocks);
        const double t = best_of([&] { ops::attention(kv, a, &pool); }, 1.0);
        double pairs = 0;
        for (int p : pos) pairs += double(p + 1) * n_heads;
        std::printf("%-38s %9.3f ms %8.1f GFLOP/s   CPU %9.3f ms %8.1f GFLOP/s\n", what, t * 1e3,
                    pairs * 4.0 * D / t * 1e-9, best_cpu * 1e3, pairs * 4.0 * D / best_cpu * 1e-9);
    };
    char label[64];
    std::snprintf(label, sizeof label, "attention prefill %d tokens", prompt);
    run(prompt, 0, label);
    std::snprintf(label, sizeof label, "attention decode at %d context", ctx);
    run(1, ctx - 1, label);
    std::snprintf(label, sizeof label, "attention 4 tokens at %d context", ctx);
    run(4, ctx - 4, label);
    for (int h : kHistories) {
        if (n_new <= 0) break;
        std::snprintf(label, sizeof label, "attention %d new after %d history", n_new, h);
        run(n_new, h, label);
    }
    batched_decode(pool, kv, seqs, batch_ctx, n_heads, rng);
    return 0;
}
