#include "kernels/cpu/linear_attn.h"

#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ember::cpu::linear_attn {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// ggml's softplus: x itself past 20, where log(1 + e^x) equals it in float.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float dot(const float* a, const float* b, int32_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int32_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

// The batch's token indices of each sequence, in batch order.
std::vector<std::vector<int64_t>> tokens_by_seq(const SeqTokens& b) {
    std::vector<std::vector<int64_t>> out(static_cast<size_t>(b.n_seqs));
    for (int64_t t = 0; t < b.n_tokens; ++t) out[static_cast<size_t>(b.seq_of[t])].push_back(t);
    return out;
}

// One channel range [c0, c1) of one sequence: a window of `kernel` inputs per channel slides
// over the tokens; the state is its first kernel - 1 rows before and after.
void conv_range(const std::vector<int64_t>& toks, const float* x, const float* w, int32_t kernel, int64_t channels,
                float* state, float* out, int64_t c0, int64_t c1) {
    const int32_t keep = kernel - 1;
    std::vector<float> win(static_cast<size_t>(kernel));
    for (int64_t c = c0; c < c1; ++c) {
        for (int32_t k = 0; k < keep; ++k) win[static_cast<size_t>(k)] = state[k * channels + c];
        const float* wc = w + c * kernel;
        for (int64_t t : toks) {
            win[static_cast<size_t>(keep)] = x[t * channels + c];
            out[t * channels + c] = silu(dot(win.data(), wc, kernel));
            std::memmove(win.data(), win.data() + 1, static_cast<size_t>(keep) * sizeof(float));
        }
        for (int32_t k = 0; k < keep; ++k) state[k * channels + c] = win[static_cast<size_t>(k)];
    }
}

constexpr int64_t kChannelBlock = 64;

// x / sqrt(sum x^2 + eps) into dst (llama.cpp's l2 norm of q and k in this layer).
void l2_normalize(const float* x, float* dst, int32_t n, float eps) {
    const float inv = 1.0f / std::sqrt(dot(x, x, n) + eps);
    for (int32_t i = 0; i < n; ++i) dst[i] = x[i] * inv;
}

// One value head of one sequence over its tokens. S is row-major [value j][key i].
void delta_head(const std::vector<int64_t>& toks, const DeltaRuleArgs& a, int32_t h, float* S) {
    const int32_t D = a.head_dim;
    const int32_t kh = a.grouped_heads ? h / (a.n_v_heads / a.n_k_heads) : h % a.n_k_heads;
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(D));
    std::vector<float> q(static_cast<size_t>(D)), k(static_cast<size_t>(D));
    for (int64_t t : toks) {
        l2_normalize(a.q + t * a.q_stride + int64_t{kh} * D, q.data(), D, a.l2_eps);
        l2_normalize(a.k + t * a.k_stride + int64_t{kh} * D, k.data(), D, a.l2_eps);
        const float* v = a.v + t * a.v_stride + int64_t{h} * D;
        const int64_t gi = t * a.n_v_heads + h;
        const float decay = std::exp(softplus(a.alpha[gi] + a.dt_bias[h]) * a.a[h]);
        const float beta = sigmoid(a.beta[gi]);
        float* o = a.out + t * int64_t{a.n_v_heads} * D + int64_t{h} * D;
        ops::delta_rule_token(S, D, k.data(), q.data(), v, decay, beta, q_scale, o);  // per ISA (ops_kernels.inc)
    }
}

}  // namespace

void conv_silu(const SeqTokens& b, const float* x, const float* w, int32_t kernel, int64_t channels, float* state,
               float* out, ThreadPool& pool) {
    const auto seqs = tokens_by_seq(b);
    const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
    const int64_t slot_floats = int64_t{kernel - 1} * channels;
    pool.parallel_for(int64_t{b.n_seqs} * blocks, [&](int64_t t0, int64_t t1, int) {
        for (int64_t task = t0; task < t1; ++task) {
            const int64_t s = task / blocks, c0 = task % blocks * kChannelBlock;
            float* st = state + b.slot_of_seq[s] * slot_floats;
            conv_range(seqs[static_cast<size_t>(s)], x, w, kernel, channels, st, out, c0,
                       std::min(channels, c0 + kChannelBlock));
        }
    });
}

void gated_delta_rule(const SeqTokens& b, const DeltaRuleArgs& a, ThreadPool& pool) {
    const auto seqs = tokens_by_seq(b);
    const int64_t head_floats = int64_t{a.head_dim} * a.head_dim;
    pool.parallel_for_dynamic(int64_t{b.n_seqs} * a.n_v_heads, 1, [&](int64_t t0, int64_t t1, int) {
        for (int64_t task = t0; task < t1; ++task) {
            const int64_t s = task / a.n_v_heads;
            const auto h = static_cast<int32_t>(task % a.n_v_heads);
            float* S = a.state + (b.slot_of_seq[s] * int64_t{a.n_v_heads} + h) * head_floats;
            delta_head(seqs[static_cast<size_t>(s)], a, h, S);
        }
    });
}

void sigmoid_gate(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool) {
    auto run = [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) out[i] = sigmoid(gate[i]) * up[i];
    };
    if (pool) pool->parallel_for(n, run);
    else run(0, n, 0);
}

}  // namespace ember::cpu::linear_attn
