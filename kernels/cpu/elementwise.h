// Row-wise and element-wise ops of the transformer on f32 activations: RMSNorm, RoPE,
// gated activations (SwiGLU, GeGLU) and residual add. All are memory-bound; they are split
// over the thread pool when the work is large enough to pay for the wake-up.
#pragma once
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace ember::cpu {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for `rows` rows of `cols`. y may alias x.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* y, ThreadPool& pool);

struct RopeConfig {
    int32_t head_dim = 0;
    int32_t n_rot = 0;       // leading dims of each head that rotate
    bool neox = false;       // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    const float* freq_factors = nullptr;  // [n_rot/2] divisors of each frequency (Llama 3)
};

// Rotates x in place: n_tokens x n_heads rows of head_dim; token t at positions[t].
void rope(float* x, int64_t n_tokens, int32_t n_heads, const int32_t* positions, const RopeConfig& c, ThreadPool& pool);

// out = silu(gate) * up / gelu_tanh(gate) * up over n elements. out may alias gate.
void swiglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);
void geglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);

// x += y over n elements.
void add(float* x, const float* y, int64_t n, ThreadPool& pool);

}  // namespace ember::cpu
