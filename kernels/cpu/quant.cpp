// Reference (scalar) dequantization and quantization of the GGUF block formats.
// Dequantizers keep ggml's float operation order — e.g. Q4_K computes (d * sc) * q - dmin * m
// in float, never fused — so they reproduce llama.cpp and the python gguf package bit for bit.
#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include "kernels/common/error.h"
#include <string>

#include "kernels/common/fp16.h"

namespace ember::cpu {

namespace {

inline float h2f(uint16_t h) { return fp16_to_f32(h); }
inline uint16_t f2h(float f) { return f32_to_fp16(f); }

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// ---------------------------------------------------------------------------------------
// Dequantization, one block at a time.

void dq_q4_0(const BlockQ4_0& b, float* y) {
    const float d = h2f(b.d);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
        y[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
}

void dq_q4_1(const BlockQ4_1& b, float* y) {
    const float d = h2f(b.d), m = h2f(b.m);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
        y[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
}

void dq_q5_0(const BlockQ5_0& b, float* y) {
    const float d = h2f(b.d);
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        const int hi0 = ((qh >> j) & 1) << 4, hi1 = ((qh >> (j + 16)) & 1) << 4;
        y[j] = static_cast<float>(((b.qs[j] & 0xF) | hi0) - 16) * d;
        y[j + 16] = static_cast<float>(((b.qs[j] >> 4) | hi1) - 16) * d;
    }
}

void dq_q5_1(const BlockQ5_1& b, float* y) {
    const float d = h2f(b.d), m = h2f(b.m);
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        const int hi0 = ((qh >> j) & 1) << 4, hi1 = ((qh >> (j + 16)) & 1) << 4;
        y[j] = static_cast<float>((b.qs[j] & 0xF) | hi0) * d + m;
        y[j + 16] = static_cast<float>((b.qs[j] >> 4) | hi1) * d + m;
    }
}

void dq_q8_0(const BlockQ8_0& b, float* y) {
    const float d = h2f(b.d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void dq_mxfp4(const BlockMXFP4& b, float* y) {
    const float d = e8m0_half_to_f32(b.e);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(kMxfp4Values[b.qs[j] & 0xF]) * d;
        y[j + 16] = static_cast<float>(kMxfp4Values[b.qs[j] >> 4]) * d;
    }
}

void dq_q8_1(const BlockQ8_1& b, float* y) {
    const float d = h2f(b.d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void dq_q2_k(const BlockQ2_K& b, float* y) {
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    int is = 0;
    for (int half = 0; half < 2; ++half) {
        const uint8_t* q = b.qs + 32 * half;
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {  // two sub-blocks of 16 per shift
                const uint8_t sc = b.scales[is++];
                const float dl = d * static_cast<float>(sc & 0xF);
                const float ml = dmin * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l) {
                    *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void dq_q3_k(const BlockQ3_K& b, float* y) {
    const float d = h2f(b.d);
    int8_t sc[16];
    unpack_scales_q3_k(b.scales, sc);
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half) {
        const uint8_t* q = b.qs + 32 * half;
        for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
            for (int part = 0; part < 2; ++part) {
                const float dl = d * static_cast<float>(sc[is++]);
                for (int l = 0; l < 16; ++l) {
                    const int i = 16 * part + l;
                    const int v = ((q[i] >> shift) & 3) - ((b.hmask[i] & m) ? 0 : 4);
                    *y++ = dl * static_cast<float>(v);
                }
            }
        }
    }
}

void dq_q4_k(const BlockQ4_K& b, float* y) {
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    for (int c = 0; c < 4; ++c) {  // 64-element chunks
        uint8_t sc, m;
        unpack_scale_min_k4(b.scales, 2 * c, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        unpack_scale_min_k4(b.scales, 2 * c + 1, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        const uint8_t* q = b.qs + 32 * c;
        for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
        y += 64;
    }
}

void dq_q5_k(const BlockQ5_K& b, float* y) {
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    for (int c = 0; c < 4; ++c) {
        uint8_t sc, m;
        unpack_scale_min_k4(b.scales, 2 * c, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        unpack_scale_min_k4(b.scales, 2 * c + 1, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        const uint8_t* q = b.qs + 32 * c;
        const uint8_t u1 = static_cast<uint8_t>(1u << (2 * c)), u2 = static_cast<uint8_t>(2u << (2 * c));
        for (int l = 0; l < 32; ++l) {
            y[l] = d1 * static_cast<float>((q[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
        }
        for (int l = 0; l < 32; ++l) {
            y[l + 32] = d2 * static_cast<float>((q[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
        }
        y += 64;
    }
}

void dq_q6_k(const BlockQ6_K& b, float* y) {
    const float d = h2f(b.d);
    for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = b.ql + 64 * half;
        const uint8_t* qh = b.qh + 32 * half;
        const int8_t* sc = b.scales + 8 * half;
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
            y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
        y += 128;
    }
}

void dq_q8_k(const BlockQ8_K& b, float* y) {
    for (int j = 0; j < kQK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
}

template <class Block, void (*Fn)(const Block&, float*)>
void dq_blocks(const void* src, float* dst, int64_t nb, int block_elems) {
    const Block* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < nb; ++i) Fn(b[i], dst + i * block_elems);
}

// ---------------------------------------------------------------------------------------
// Legacy quantization: ggml's reference rounding (scale from the extreme value).

// The element with the largest magnitude, sign kept (so d may be negative: the extreme
// then maps to the most negative code, which has one more step than the positive side).
float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void q_q4_0(const float* x, BlockQ4_0& b) {
    const float d = signed_absmax(x, 32) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f2h(d);
    for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
        const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
        b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
}

void q_q5_0(const float* x, BlockQ5_0& b) {
    const float d = signed_absmax(x, 32) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
        const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
        b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
        qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(b.qh, &qh, 4);
}

// Asymmetric: x ~ q * d + min over [min, max] with 2^bits levels.
template <class Block>
void q_affine(const float* x, Block& b, int nmax, uint32_t* qh_out) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; ++j) {
        mn = std::min(mn, x[j]);
        mx = std::max(mx, x[j]);
    }
    const float d = (mx - mn) / static_cast<float>(nmax);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f2h(d);
    b.m = f2h(mn);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(nmax, static_cast<int>((x[j] - mn) * id + 0.5f));
        const int q1 = std::min(nmax, static_cast<int>((x[j + 16] - mn) * id + 0.5f));
        b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
        qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    if (qh_out) *qh_out = qh;
}

void q_q4_1(const float* x, BlockQ4_1& b) { q_affine(x, b, 15, nullptr); }

void q_q5_1(const float* x, BlockQ5_1& b) {
    uint32_t qh;
    q_affine(x, b, 31, &qh);
    std::memcpy(b.qh, &qh, 4);
}

// The code whose value times d is nearest x; ties keep the lower code (ggml's search order).
uint8_t nearest_mxfp4(float x, float d) {
    uint8_t best = 0;
    float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
    for (uint8_t i = 1; i < 16; ++i) {
        const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
        if (err < best_err) best = i, best_err = err;
    }
    return best;
}

// ggml's scale choice: the largest |x| lands in [4, 8) * d, so 12 * d (the largest code)
// covers it. Exponents outside E8M0's range are clamped (ggml leaves them undefined).
void q_mxfp4(const float* x, BlockMXFP4& b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
    b.e = static_cast<uint8_t>(std::clamp(e, 0.0f, 254.0f));
    const float d = e8m0_half_to_f32(b.e);
    for (int j = 0; j < 16; ++j)
        b.qs[j] = static_cast<uint8_t>(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[j + 16], d) << 4));
}

void q_q8_0(const float* x, BlockQ8_0& b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f2h(d);
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
}

void q_q8_1(const float* x, BlockQ8_1& b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f2h(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
        sum += b.qs[j];
    }
    b.s = f2h(d * static_cast<float>(sum));
}

void q_q8_k(const float* x, BlockQ8_K& b) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
    if (amax == 0.0f) {
        std::memset(&b, 0, sizeof b);
        return;
    }
    const float iscale = 127.0f / amax;
    for (int j = 0; j < kQK_K; ++j) {
        b.qs[j] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lrintf(iscale * x[j])), -127, 127));
    }
    for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += b.qs[16 * g + l];
        b.bsums[g] = static_cast<int16_t>(s);
    }
    b.d = 1.0f / iscale;
}

// ---------------------------------------------------------------------------------------
// K-quant quantization: per sub-block scale search, then 6/8-bit quantized sub-scales.

inline int round_int(float v) { return static_cast<int>(std::lrintf(v)); }

// Importance of each element in the least-squares fits: large-magnitude elements matter
// more for the dot products the weights take part in.
void element_weights(const float* x, int n, float* w) {
    float sum2 = 0.0f;
    for (int j = 0; j < n; ++j) sum2 += x[j] * x[j];
    const float av = std::sqrt(sum2 / static_cast<float>(n));
    for (int j = 0; j < n; ++j) w[j] = av + std::fabs(x[j]);
}

struct AffineFit {
    float scale;
    float min;
};  // x ~ scale * q - min, min >= 0

// The two fits below try scales whose codes span nmax +- `tenths` / 10 levels, in tenths, and
// the whole spans below (nmax - 1 down to nmax / 2). A whole-span fit is kept only where it fits
// far better than the usual trials: a block that is a requantized source's grid leaves it only
// fp16 rounding, orders of magnitude below a quantization error. Where such a fit is merely
// somewhat better it is not taken: on real weights those lowered the weighted error but raised
// the KL divergence (Gemma 3 270M, Q4_K: 0.0590 with them, 0.0565 without).
// `trial(span, fit)` returns a fit's error (INFINITY: none) and sets the fit.
template <class Fit, class Trial>
Fit best_span_fit(int nmax, int tenths, Fit best, Trial trial) {
    constexpr double kGridFit = 0.1;
    Fit grid{}, f{};
    float best_err = INFINITY, grid_err = INFINITY;
    for (int step = -tenths; step <= tenths; ++step) {
        const float e = trial(static_cast<float>(nmax) + 0.1f * static_cast<float>(step), f);
        if (e < best_err) best_err = e, best = f;
    }
    for (int span = nmax - 1; span >= nmax / 2; --span) {
        const float e = trial(static_cast<float>(span), f);
        if (e < grid_err) grid_err = e, grid = f;
    }
    return grid_err < kGridFit * best_err ? grid : best;
}

// Fits x ~ scale * q - min with q in [0, nmax] and min >= 0: the codes of each span over
// [lo, hi] (best_span_fit), each refined by weighted least squares.
AffineFit fit_affine(const float* x, const float* w, int n, int nmax) {
    float lo = 0.0f, hi = x[0];
    for (int j = 0; j < n; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
    }
    if (hi <= lo) return {0.0f, -lo};
    // The least-squares fit of the codes that `span` levels over [lo, hi] give, and its error.
    auto trial = [&](float span, AffineFit& fit) {
        const float iscale = span / (hi - lo);
        double sw = 0, sq = 0, sq2 = 0, sx = 0, sqx = 0;
        for (int j = 0; j < n; ++j) {
            const double q = std::clamp(round_int(iscale * (x[j] - lo)), 0, nmax);
            sw += w[j];
            sq += w[j] * q;
            sq2 += w[j] * q * q;
            sx += w[j] * x[j];
            sqx += w[j] * q * x[j];
        }
        const double det = sw * sq2 - sq * sq;
        if (det <= 0) return INFINITY;
        double a = (sw * sqx - sq * sx) / det, c = (sq2 * sx - sq * sqx) / det;  // x ~ a q + c
        if (c > 0) {
            c = 0;
            a = sqx / sq2;
        }
        if (a <= 0) return INFINITY;
        double err = 0;
        for (int j = 0; j < n; ++j) {
            const double q = std::clamp(round_int(static_cast<float>((x[j] - c) / a)), 0, nmax);
            const double e = a * q + c - x[j];
            err += w[j] * e * e;
        }
        fit = {static_cast<float>(a), static_cast<float>(-c)};
        return static_cast<float>(err);
    };
    return best_span_fit(nmax, 10, AffineFit{(hi - lo) / static_cast<float>(nmax), -lo}, trial);
}

// Fits x ~ scale * q with q in [-nmax, nmax - 1]; scale may be negative so the extreme
// element can use the extra negative level.
float fit_symmetric(const float* x, const float* w, int n, int nmax) {
    const float max = signed_absmax(x, n);
    if (max == 0.0f) return 0.0f;
    double sx2 = 0;
    for (int j = 0; j < n; ++j) sx2 += w[j] * x[j] * x[j];
    // The least-squares scale sqx/sq2 of the codes that `span` levels give; its error is
    // sx2 - sqx^2/sq2.
    auto trial = [&](float span, float& scale) {
        const float iscale = -span / max;
        double sqx = 0, sq2 = 0;
        for (int j = 0; j < n; ++j) {
            const double q = std::clamp(round_int(iscale * x[j]), -nmax, nmax - 1);
            sqx += w[j] * q * x[j];
            sq2 += w[j] * q * q;
        }
        if (sq2 <= 0) return INFINITY;
        scale = static_cast<float>(sqx / sq2);
        return static_cast<float>(std::max(0.0, sx2 - sqx * sqx / sq2));
    };
    return best_span_fit(nmax, 9, max / static_cast<float>(-nmax), trial);
}

// Weighted squared error of x ~ ds * q - dm, q = nearest code in [0, nmax].
float affine_error(const float* x, const float* w, int n, float ds, float dm, int nmax) {
    float err = 0;
    for (int l = 0; l < n; ++l) {
        const int q = ds > 0 ? std::clamp(round_int((x[l] + dm) / ds), 0, nmax) : 0;
        const float e = ds * static_cast<float>(q) - dm - x[l];
        err += w[l] * e * e;
    }
    return err;
}

// The 6-bit code of a sub-block's min under dmin. Moving the min by k code steps (k * scale)
// moves every code by k and leaves the grid as it was, so where the codes leave levels unused
// [qlo, qhi] the k whose min is nearest a multiple of dmin is taken: for a block that is a
// requantized source's grid, that is the source's own min, stored exactly.
int min_code(float min, float scale, float dmin, int qlo, int qhi, int nmax) {
    if (dmin <= 0) return 0;
    float best_v = min / dmin, best_gap = std::fabs(best_v - std::nearbyint(best_v));
    for (int k = -qlo; k <= nmax - qhi; ++k) {
        const float v = (min + static_cast<float>(k) * scale) / dmin;
        const float gap = std::fabs(v - std::nearbyint(v));
        if (k != 0 && v >= -0.5f && v <= 63.5f && gap < best_gap) best_v = v, best_gap = gap;
    }
    return std::clamp(round_int(best_v), 0, 63);
}

// One sub-block's fit and the range of codes it uses.
struct SubBlock {
    float scale, min;
    int qlo, qhi;
};

SubBlock fit_sub_block(const float* x, const float* w, int nmax) {
    const AffineFit f = fit_affine(x, w, 32, nmax);
    SubBlock s{f.scale, f.min, nmax, 0};
    for (int l = 0; l < 32 && f.scale > 0; ++l) {
        const int q = std::clamp(round_int((x[l] + f.min) / f.scale), 0, nmax);
        s.qlo = std::min(s.qlo, q);
        s.qhi = std::max(s.qhi, q);
    }
    if (s.qlo > s.qhi) s.qlo = s.qhi = 0;
    return s;
}

// A sub-block's 6-bit scale and min codes under the super-block's d and dmin: the fit rounded,
// then the best of the 3 x 3 neighbouring codes (rounding the scale and the min both moves them
// off the fit, and the two errors can cancel). Returns the weighted squared error kept.
float sub_block_codes(const float* x, const float* w, const SubBlock& f, float d, float dmin, int nmax, bool refine,
                      uint8_t& sc, uint8_t& m) {
    const int sc0 = d > 0 ? std::clamp(round_int(f.scale / d), 0, 63) : 0;
    const int m0 = min_code(f.min, f.scale, dmin, f.qlo, f.qhi, nmax);
    sc = static_cast<uint8_t>(sc0), m = static_cast<uint8_t>(m0);
    float best = affine_error(x, w, 32, d * static_cast<float>(sc0), dmin * static_cast<float>(m0), nmax);
    if (!refine) return best;
    for (int a = std::max(0, sc0 - 1); a <= std::min(63, sc0 + 1); ++a) {
        for (int c = std::max(0, m0 - 1); c <= std::min(63, m0 + 1); ++c) {
            const float e = affine_error(x, w, 32, d * static_cast<float>(a), dmin * static_cast<float>(c), nmax);
            if (e < best) best = e, sc = static_cast<uint8_t>(a), m = static_cast<uint8_t>(c);
        }
    }
    return best;
}

// Shared by Q4_K and Q5_K: fits 8 sub-blocks of 32, quantizes their scales and mins to 6 bits,
// stores d/dmin/scales and returns the final codes in L[256] (0..nmax).
template <class Block>
void q_k_affine(const float* x, Block& b, int nmax, uint8_t* L) {
    float w[256];
    SubBlock fits[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        element_weights(x + 32 * j, 32, w + 32 * j);
        fits[j] = fit_sub_block(x + 32 * j, w + 32 * j, nmax);
        max_scale = std::max(max_scale, fits[j].scale);
        max_min = std::max(max_min, fits[j].min);
    }
    // d and dmin are the largest fitted scale and min over 63, rounded to fp16. A neighbouring
    // fp16 value can fit better (the largest sub-scale is itself a fit, and one ulp of d off a
    // source's grid costs up to a code step in every sub-block): of the 3 x 3 around, the one
    // whose codes just rounded fit best is kept, and its codes refined.
    const uint16_t d0 = f2h(max_scale / 63.0f), m0 = f2h(max_min / 63.0f);
    uint8_t sc[8], mq[8];
    float best = INFINITY;
    b.d = d0, b.dmin = m0;
    for (int i = d0 > 0 ? -1 : 0; i <= (d0 > 0 && d0 < 0x7bff ? 1 : 0); ++i) {
        for (int k = m0 > 0 ? -1 : 0; k <= (m0 > 0 && m0 < 0x7bff ? 1 : 0); ++k) {
            const auto dh = static_cast<uint16_t>(d0 + i), mh = static_cast<uint16_t>(m0 + k);
            float e = 0;
            for (int j = 0; j < 8 && e < best; ++j)
                e += sub_block_codes(x + 32 * j, w + 32 * j, fits[j], h2f(dh), h2f(mh), nmax, false, sc[j], mq[j]);
            if (e < best) best = e, b.d = dh, b.dmin = mh;
        }
    }
    for (int j = 0; j < 8; ++j)
        sub_block_codes(x + 32 * j, w + 32 * j, fits[j], h2f(b.d), h2f(b.dmin), nmax, true, sc[j], mq[j]);
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    std::memset(b.scales, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            b.scales[j] = sc[j];
            b.scales[j + 4] = mq[j];
        } else {
            b.scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mq[j] & 0xF) << 4));
            b.scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
            b.scales[j] |= static_cast<uint8_t>((mq[j] >> 4) << 6);
        }
    }
    for (int j = 0; j < 8; ++j) {
        const float ds = d * sc[j], dm = dmin * mq[j];
        for (int l = 0; l < 32; ++l) {
            L[32 * j + l] =
                static_cast<uint8_t>(ds > 0 ? std::clamp(round_int((x[32 * j + l] + dm) / ds), 0, nmax) : 0);
        }
    }
}

void q_q4_k(const float* x, BlockQ4_K& b) {
    uint8_t L[kQK_K];
    q_k_affine(x, b, 15, L);
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void q_q5_k(const float* x, BlockQ5_K& b) {
    uint8_t L[kQK_K];
    q_k_affine(x, b, 31, L);
    std::memset(b.qh, 0, 32);
    for (int i = 0; i < kQK_K; ++i) {
        if (L[i] > 15) b.qh[i % 32] |= static_cast<uint8_t>(1u << (i / 32));
    }
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            b.qs[32 * c + l] = static_cast<uint8_t>((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
        }
    }
}

// Weighted squared error of x ~ ds * q, q = nearest code in [-32, 31].
float q6_error(const float* x, const float* w, float ds) {
    float err = 0;
    for (int l = 0; l < 16; ++l) {
        const int q = ds != 0.0f ? std::clamp(round_int(x[l] / ds), -32, 31) : 0;
        const float e = ds * static_cast<float>(q) - x[l];
        err += w[l] * e * e;
    }
    return err;
}

// As refine_scale_min for Q6_K's int8 sub-scales under the stored d.
int8_t refine_scale_q6(const float* x, const float* w, float d, int8_t sc) {
    int8_t best_sc = sc;
    float best = q6_error(x, w, d * sc);
    for (int s = std::max(-128, sc - 1); s <= std::min(127, sc + 1); ++s) {
        const float e = q6_error(x, w, d * static_cast<float>(s));
        if (e < best) best = e, best_sc = static_cast<int8_t>(s);
    }
    return best_sc;
}

void q_q6_k(const float* x, BlockQ6_K& b) {
    float w[16], scales[16];
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; ++j) {
        element_weights(x + 16 * j, 16, w);
        scales[j] = fit_symmetric(x + 16 * j, w, 16, 32);
        if (std::fabs(scales[j]) > amax) {
            amax = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }
    uint8_t L[kQK_K];
    if (amax == 0.0f) {
        std::memset(&b, 0, sizeof b);
        std::memset(L, 32, sizeof L);
    } else {
        const float iscale = -128.0f / max_scale;  // extreme sub-scale -> -128
        b.d = f2h(1.0f / iscale);
        const float d = h2f(b.d);
        for (int j = 0; j < 16; ++j) {
            b.scales[j] = static_cast<int8_t>(std::clamp(round_int(iscale * scales[j]), -128, 127));
            element_weights(x + 16 * j, 16, w);
            b.scales[j] = refine_scale_q6(x + 16 * j, w, d, b.scales[j]);
            const float ds = d * b.scales[j];
            for (int l = 0; l < 16; ++l) {
                const int q = ds != 0.0f ? std::clamp(round_int(x[16 * j + l] / ds), -32, 31) : 0;
                L[16 * j + l] = static_cast<uint8_t>(q + 32);
            }
        }
    }
    for (int half = 0; half < 2; ++half) {
        uint8_t* ql = b.ql + 64 * half;
        uint8_t* qh = b.qh + 32 * half;
        const uint8_t* Lh = L + 128 * half;
        for (int l = 0; l < 32; ++l) {
            const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
            ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

template <class Block, void (*Fn)(const float*, Block&)>
void q_blocks(const float* src, void* dst, int64_t nb, int block_elems) {
    Block* b = static_cast<Block*>(dst);
    for (int64_t i = 0; i < nb; ++i) Fn(src + i * block_elems, b[i]);
}

[[noreturn]] void unsupported(const char* what, DType type) {
    throw Error(std::string(what) + ": unsupported type " + std::string(dtype_name(type)));
}

int64_t blocks_of(DType type, int64_t n, const char* what) {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    if (!info) unsupported(what, type);
    if (n < 0 || n % info->block_elems != 0) {
        throw Error(std::string(what) + ": " + std::to_string(n) + " elements is not a multiple of the " +
                    std::string(info->name) + " block size");
    }
    return n / info->block_elems;
}

}  // namespace

void unpack_scales_q3_k(const uint8_t* packed, int8_t out[16]) {
    // Bytes 0..7 hold the low 4 bits (low nibbles: scales 0..7, high nibbles: 8..15); bytes
    // 8..11 hold the high 2 bits, four per byte, byte 8 + (j % 4) at bit 2 * (j / 4).
    for (int j = 0; j < 16; ++j) {
        const int low = (packed[j % 8] >> (4 * (j / 8))) & 0xF;
        const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
}

bool can_dequantize(DType type) {
    switch (type) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q8_0:
        case DType::Q8_1:
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
        case DType::Q8_K:
        case DType::MXFP4:
            return true;
        default:
            return false;
    }
}

bool can_quantize(DType type) {
    switch (type) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q8_0:
        case DType::Q8_1:
        case DType::Q8_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
        case DType::MXFP4:
            return true;
        default:
            return false;
    }
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
    const int64_t nb = blocks_of(type, n, "dequantize_row");
    switch (type) {
        case DType::F32:
            std::memcpy(dst, src, static_cast<size_t>(n) * 4);
            return;
        case DType::F16: {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
            return;
        }
        case DType::BF16: {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
            return;
        }
        case DType::Q4_0:
            return dq_blocks<BlockQ4_0, dq_q4_0>(src, dst, nb, kQK);
        case DType::Q4_1:
            return dq_blocks<BlockQ4_1, dq_q4_1>(src, dst, nb, kQK);
        case DType::Q5_0:
            return dq_blocks<BlockQ5_0, dq_q5_0>(src, dst, nb, kQK);
        case DType::Q5_1:
            return dq_blocks<BlockQ5_1, dq_q5_1>(src, dst, nb, kQK);
        case DType::Q8_0:
            return dq_blocks<BlockQ8_0, dq_q8_0>(src, dst, nb, kQK);
        case DType::Q8_1:
            return dq_blocks<BlockQ8_1, dq_q8_1>(src, dst, nb, kQK);
        case DType::Q2_K:
            return dq_blocks<BlockQ2_K, dq_q2_k>(src, dst, nb, kQK_K);
        case DType::Q3_K:
            return dq_blocks<BlockQ3_K, dq_q3_k>(src, dst, nb, kQK_K);
        case DType::Q4_K:
            return dq_blocks<BlockQ4_K, dq_q4_k>(src, dst, nb, kQK_K);
        case DType::Q5_K:
            return dq_blocks<BlockQ5_K, dq_q5_k>(src, dst, nb, kQK_K);
        case DType::Q6_K:
            return dq_blocks<BlockQ6_K, dq_q6_k>(src, dst, nb, kQK_K);
        case DType::Q8_K:
            return dq_blocks<BlockQ8_K, dq_q8_k>(src, dst, nb, kQK_K);
        case DType::MXFP4:
            return dq_blocks<BlockMXFP4, dq_mxfp4>(src, dst, nb, kQK);
        default:
            unsupported("dequantize_row", type);
    }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
    const int64_t nb = blocks_of(type, n, "quantize_row");
    switch (type) {
        case DType::F32:
            std::memcpy(dst, src, static_cast<size_t>(n) * 4);
            return;
        case DType::F16: {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
            return;
        }
        case DType::BF16: {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
            return;
        }
        case DType::Q4_0:
            return q_blocks<BlockQ4_0, q_q4_0>(src, dst, nb, kQK);
        case DType::Q4_1:
            return q_blocks<BlockQ4_1, q_q4_1>(src, dst, nb, kQK);
        case DType::Q5_0:
            return q_blocks<BlockQ5_0, q_q5_0>(src, dst, nb, kQK);
        case DType::Q5_1:
            return q_blocks<BlockQ5_1, q_q5_1>(src, dst, nb, kQK);
        case DType::Q8_0:
            return q_blocks<BlockQ8_0, q_q8_0>(src, dst, nb, kQK);
        case DType::Q8_1:
            return q_blocks<BlockQ8_1, q_q8_1>(src, dst, nb, kQK);
        case DType::Q8_K:
            return q_blocks<BlockQ8_K, q_q8_k>(src, dst, nb, kQK_K);
        case DType::Q4_K:
            return q_blocks<BlockQ4_K, q_q4_k>(src, dst, nb, kQK_K);
        case DType::Q5_K:
            return q_blocks<BlockQ5_K, q_q5_k>(src, dst, nb, kQK_K);
        case DType::Q6_K:
            return q_blocks<BlockQ6_K, q_q6_k>(src, dst, nb, kQK_K);
        case DType::MXFP4:
            return q_blocks<BlockMXFP4, q_mxfp4>(src, dst, nb, kQK);
        default:
            unsupported("quantize_row", type);
    }
}

}  // namespace ember::cpu
