// Portable matmul kernels: the fallback for CPUs without AVX2, and the plain statement of what
// the SIMD kernels compute (same int8 activation format, same block arithmetic).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/unpack_int8.h"

namespace ember::cpu::detail {

namespace {

// Quantizes one G-block of activations: d = max|x| / 127, q = round(x / d).
void quantize_block(const float* x, int n, int G, const Int8Kind& kind, int8_t* q, float& d, int32_t& init,
                    float& dsum) {
    float amax = 0.0f;
    for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
    d = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < n; ++j) {
        q[j] = static_cast<int8_t>(std::lrintf(x[j] * id));
        sum += q[j];
    }
    for (int j = n; j < G; ++j) q[j] = 0;
    init = -kind.offset * sum;
    dsum = d * static_cast<float>(sum);
}

void quantize_act(const float* X, int64_t t0, int64_t t1, const Int8Kind& kind, ActQ8& a) {
    const int G = kind.G;
    for (int64_t t = t0; t < t1; ++t) {
        const float* x = X + t * a.cols;
        int8_t* q = a.qs + t * a.kpad;
        for (int64_t b = 0; b < a.nb(); ++b) {
            const int64_t e0 = b * G;
            const int n = static_cast<int>(std::clamp<int64_t>(a.cols - e0, 0, G));
            const int64_t i = t * a.nb() + b;
            quantize_block(x + e0, n, G, kind, q + e0, a.d[i], a.init[i], a.dsum[i]);
        }
    }
}

// Per row: unpack each 512-element chunk once, then one integer dot per block and token,
// folded into the token's 16 lanes in the canonical order (matmul_internal.h). std::fma:
// the fused rounding the SIMD kernels use (one call each; this is the fallback path).
void gemv_q8(const WeightMatrix& W, const Int8Kind& kind, const ActQ8& a, int64_t r0, int64_t r1, float* Y,
             Scratch& s) {
    const UnpackChunkFn unpack = unpack_fn(W.type);
    const int G = kind.G, nbc = kChunk / G;
    uint8_t* q = s.data;
    float* scale = reinterpret_cast<float*>(s.data + kChunk);
    float* min = scale + nbc;
    std::vector<float> acc(static_cast<size_t>(a.n_tokens * kLanes));
    for (int64_t r = r0; r < r1; ++r) {
        const auto* row = static_cast<const uint8_t*>(W.data) + r * W.row_bytes;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t c = 0; c < a.kpad / kChunk; ++c) {
            unpack(row, c, W.cols, q, scale, min);
            for (int64_t t = 0; t < a.n_tokens; ++t) {
                const int8_t* x = a.qs + t * a.kpad + c * kChunk;
                const int64_t bi = t * a.nb() + c * nbc;
                float* lanes = acc.data() + t * kLanes;
                for (int b = 0; b < std::min<int64_t>(nbc, W.cols / G - c * nbc); ++b) {  // padding skipped
                    int32_t dot = a.init[bi + b];
                    for (int j = 0; j < G; ++j) dot += q[b * G + j] * x[b * G + j];
                    float& l = lanes[b % kLanes];  // nbc is a multiple of 16
                    const float f = static_cast<float>(dot) * a.d[bi + b];
                    l = std::fma(f, scale[b], l);
                    if (kind.has_min) l = std::fma(min[b], a.dsum[bi + b], l);
                }
            }
        }
        for (int64_t t = 0; t < a.n_tokens; ++t)
            Y[t * W.rows + r] = reduce16(acc.data() + t * kLanes, [](float u, float v) { return u + v; });
    }
}

float dot_f32(const float* a, const float* b, int64_t n) {
    // Eight independent partial sums: vectorizable and less rounding error than one chain.
    float p[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) p[j] += a[i + j] * b[i + j];
    }
    float s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Float weights in the canonical order: column c feeds lane c % 16.
void gemv_f32(const WeightMatrix& W, const float* X, int64_t n_tokens, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    float* w = reinterpret_cast<float*>(s.data);
    for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(W.type, static_cast<const uint8_t*>(W.data) + r * W.row_bytes, w, W.cols);
        for (int64_t t = 0; t < n_tokens; ++t) {
            const float* x = X + t * W.cols;
            float lanes[kLanes] = {};
            for (int64_t c = 0; c < W.cols; ++c) lanes[c % kLanes] = std::fma(w[c], x[c], lanes[c % kLanes]);
            Y[t * W.rows + r] = reduce16(lanes, [](float u, float v) { return u + v; });
        }
    }
}

size_t scratch_bytes(const WeightMatrix& W, int64_t) {
    return static_cast<size_t>(W.cols) * 4 + kChunk + 2 * 32 * 4 + 256;
}

}  // namespace

const KernelTable& kernels_scalar() {
    static const KernelTable t{quantize_act, gemv_q8, gemv_q8, gemv_f32, gemv_f32,      dot_f32,
                               16,           0,       0,       4,        scratch_bytes, nullptr};
    return t;
}

}  // namespace ember::cpu::detail
