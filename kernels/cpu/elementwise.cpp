#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <vector>

namespace ember::cpu {
namespace {

// Splits n elements over the pool only when there is enough work (~64K elements/thread).
template <class F> void for_chunks(int64_t n, ThreadPool& pool, F&& f) {
    if (n < 65536 || pool.size() == 1) {
        f(0, n);
        return;
    }
    const int64_t tasks = pool.size() * 4;
    pool.parallel_for(tasks, [&](int64_t b, int64_t e, int) {
        const int64_t lo = n * b / tasks, hi = n * e / tasks;
        if (hi > lo) f(lo, hi);
    });
}

template <class F> void for_rows(int64_t rows, int64_t cols, ThreadPool& pool, F&& f) {
    if (rows * cols < 32768 || rows == 1 || pool.size() == 1) {
        f(0, rows);
        return;
    }
    pool.parallel_for(rows, [&](int64_t b, int64_t e, int) { f(b, e); });
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* y, ThreadPool& pool) {
    for_rows(rows, cols, pool, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const float* xr = x + r * cols;
            float* yr = y + r * cols;
            double ss = 0;  // double: long rows of large activations (gemma) lose bits in f32
            for (int64_t i = 0; i < cols; ++i) ss += static_cast<double>(xr[i]) * xr[i];
            const float k = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(cols) + eps));
            for (int64_t i = 0; i < cols; ++i) yr[i] = xr[i] * k * w[i];
        }
    });
}

void rope(float* x, int64_t n_tokens, int32_t n_heads, const int32_t* positions, const RopeConfig& c, ThreadPool& pool) {
    const int32_t half = c.n_rot / 2;
    std::vector<float> inv_freq(static_cast<size_t>(half));
    for (int32_t i = 0; i < half; ++i) {
        float f = std::pow(c.freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(c.n_rot));
        if (c.freq_factors) f /= c.freq_factors[i];
        inv_freq[static_cast<size_t>(i)] = f;
    }
    for_rows(n_tokens, int64_t{n_heads} * c.head_dim, pool, [&](int64_t b, int64_t e) {
        std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
        for (int64_t t = b; t < e; ++t) {
            const float p = static_cast<float>(positions[t]) * c.freq_scale;
            for (int32_t i = 0; i < half; ++i) {
                const float theta = p * inv_freq[static_cast<size_t>(i)];
                cs[static_cast<size_t>(i)] = std::cos(theta);
                sn[static_cast<size_t>(i)] = std::sin(theta);
            }
            for (int32_t h = 0; h < n_heads; ++h) {
                float* v = x + (t * n_heads + h) * c.head_dim;
                for (int32_t i = 0; i < half; ++i) {
                    const int32_t a = c.neox ? i : 2 * i, bidx = c.neox ? i + half : 2 * i + 1;
                    const float x0 = v[a], x1 = v[bidx];
                    v[a] = x0 * cs[static_cast<size_t>(i)] - x1 * sn[static_cast<size_t>(i)];
                    v[bidx] = x0 * sn[static_cast<size_t>(i)] + x1 * cs[static_cast<size_t>(i)];
                }
            }
        }
    });
}

void swiglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool) {
    for_chunks(n, pool, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    });
}

void geglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for_chunks(n, pool, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const float g = gate[i];
            out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
        }
    });
}

void add(float* x, const float* y, int64_t n, ThreadPool& pool) {
    for_chunks(n, pool, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) x[i] += y[i];
    });
}

}  // namespace ember::cpu
