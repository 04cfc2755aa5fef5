// Quantizer round trips against a float64 reference, on fresh random data every run (the seed
// is printed; EMBER_TEST_SEED=N repeats a run). For each type the bound on every element's
// error is derived from the block format, not tuned:
//
//  - Legacy symmetric types (Q8_0, Q4_0, Q5_0): the encoder sets d' = max / -n (max: the
//    signed extreme, n = 127, 8, 16) and picks round(x / d'); the decoder multiplies by the
//    stored half-float d, |d - d'| <= 2^-11 |d'|. So |x - y| <= |d'| / 2 + n_codes * |d - d'|,
//    except where x / d' is beyond the top code (only near -max for Q4_0/Q5_0: there the
//    clamp costs up to |d'|).
//  - Legacy affine types (Q4_1, Q5_1): d' = (max - min) / n, codes round((x - min) / d');
//    the stored d and m are half floats: |x - y| <= d' / 2 + n * |d - d'| + |m - min|.
//  - K-quants (Q4_K, Q5_K: x ~ d*sc*q - dmin*m; Q6_K: x ~ d*sc*(q - 32)): whatever scales
//    the search picks, each element must get the code nearest to it under the block's stored
//    scales: |x - y| <= step / 2 inside the representable range, and the distance to the range
//    outside it. And the search must pay off: the tensor's rms error must not exceed that of
//    plain min/max fitting with exact (unquantized) float64 scales.
//  - F16 / BF16: round to nearest, |x - y| <= 2^-11 |x| (2^-8 for BF16) for normal values.
// A float32 slack of 1e-6 relative covers the decoder's float arithmetic.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/common/fp16.h"
#include "kernels/cpu/quant.h"

using ember::DType;
using namespace ember::cpu;

namespace {

uint32_t test_seed() {
    static const uint32_t seed = [] {
        const char* env = std::getenv("EMBER_TEST_SEED");
        const uint32_t s = env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
        MESSAGE("random seed ", s, " (repeat with EMBER_TEST_SEED=", s, ")");
        return s;
    }();
    return seed;
}

// Gaussian weights whose scale varies per 32 elements over two decades (real matrices vary
// by row and by block), with rare 8-sigma outliers and a shifted mean in some blocks (so the
// affine types' minimum matters).
std::vector<float> weights(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> v(n);
    float sigma = 1, mean = 0;
    for (size_t i = 0; i < n; ++i) {
        if (i % 32 == 0) {
            sigma = std::pow(10.0f, u(rng) * 2 - 1);  // 0.1 .. 10
            mean = u(rng) < 0.25f ? sigma * (u(rng) * 2 - 1) : 0.0f;
        }
        v[i] = mean + sigma * normal(rng) * (u(rng) < 0.002f ? 8.0f : 1.0f);
    }
    return v;
}

double h(uint16_t bits) { return ember::fp16_to_f32(bits); }

struct Check {
    double worst_excess = 0;  // max over elements of |x - y| - bound (must stay <= 0)
    size_t worst_index = 0;
    void add(size_t i, double err, double bound) {
        const double excess = err - bound * (1 + 1e-6) - 1e-7;
        if (excess > worst_excess) worst_excess = excess, worst_index = i;
    }
};

double signed_absmax(const float* x, int n) {
    double m = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    return m;
}

// Q8_0, Q4_0, Q5_0: n = 127 (no clamp), 8, 16; d in the first two bytes of each block.
void check_symmetric(const std::vector<float>& x, const std::vector<float>& y, const uint8_t* q, size_t block_bytes,
                     int n, Check& c) {
    for (size_t b = 0; b < x.size() / 32; ++b) {
        uint16_t bits;
        std::memcpy(&bits, q + b * block_bytes, 2);
        const double mx = signed_absmax(&x[b * 32], 32);
        const double d_true = n == 127 ? std::fabs(mx) / 127 : mx / -n;
        const double dd = std::fabs(h(bits) - d_true);
        for (size_t i = b * 32; i < b * 32 + 32; ++i) {
            const double t = d_true != 0 ? x[i] / d_true : 0;
            const double step = t > n - 0.5 ? 1.0 : 0.5;  // only -max reaches past the top code
            c.add(i, std::fabs(double(x[i]) - y[i]), step * std::fabs(d_true) + n * dd);
        }
    }
}

// Q4_1, Q5_1: d, m half floats at bytes 0 and 2.
void check_affine(const std::vector<float>& x, const std::vector<float>& y, const uint8_t* q, size_t block_bytes, int n,
                  Check& c) {
    for (size_t b = 0; b < x.size() / 32; ++b) {
        uint16_t d_bits, m_bits;
        std::memcpy(&d_bits, q + b * block_bytes, 2);
        std::memcpy(&m_bits, q + b * block_bytes + 2, 2);
        const auto [lo, hi] = std::minmax_element(x.begin() + long(b * 32), x.begin() + long(b * 32 + 32));
        const double d_true = (double(*hi) - *lo) / n;
        const double bound = d_true / 2 + n * std::fabs(h(d_true ? d_bits : 0) - d_true) + std::fabs(h(m_bits) - *lo);
        for (size_t i = b * 32; i < b * 32 + 32; ++i) c.add(i, std::fabs(double(x[i]) - y[i]), bound);
    }
}

// Error of a code grid {offset + step * k, k = 0..nmax} for x: half a step inside, the
// distance to the nearest end outside.
double grid_bound(double x, double step, double offset, int nmax) {
    const double a = offset, b = offset + step * nmax;
    const double lo = std::min(a, b), hi = std::max(a, b);
    if (x < lo) return lo - x;
    if (x > hi) return x - hi;
    return std::fabs(step) / 2;
}

// Plain min/max fitting per sub-block with exact scales: the baseline a search must beat.
double minmax_sq_error(const std::vector<float>& x, int sub, int nmax, bool affine) {
    double e = 0;
    for (size_t s = 0; s < x.size(); s += size_t(sub)) {
        double lo = x[s], hi = x[s];
        for (int i = 0; i < sub; ++i) lo = std::min(lo, double(x[s + i])), hi = std::max(hi, double(x[s + i]));
        if (affine) lo = std::min(lo, 0.0);  // K-quant mins are >= 0 (x ~ d q - m)
        // Symmetric (Q6_K): the signed extreme maps to the most negative code, -(nmax+1)/2.
        const double mx = std::fabs(lo) > std::fabs(hi) ? lo : hi;
        const double step = affine ? (hi - lo) / nmax : mx / -((nmax + 1) / 2.0);
        const double off = affine ? lo : -((nmax + 1) / 2.0) * step;
        for (int i = 0; i < sub; ++i) {
            const double k = step != 0 ? std::clamp(std::round((x[s + i] - off) / step), 0.0, double(nmax)) : 0;
            e += std::pow(x[s + i] - (off + k * step), 2);
        }
    }
    return e;
}

void check_k_affine(DType t, const std::vector<float>& x, const std::vector<float>& y, const uint8_t* q, Check& c) {
    const size_t bb = t == DType::Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ5_K);
    const int nmax = t == DType::Q4_K ? 15 : 31;
    for (size_t b = 0; b < x.size() / 256; ++b) {
        const uint8_t* blk = q + b * bb;  // d, dmin, scales[12] lead both layouts
        uint16_t d_bits, m_bits;
        std::memcpy(&d_bits, blk, 2);
        std::memcpy(&m_bits, blk + 2, 2);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            unpack_scale_min_k4(blk + 4, j, sc, m);
            const double step = float(h(d_bits)) * float(sc), off = -(float(h(m_bits)) * float(m));
            for (size_t i = b * 256 + size_t(j) * 32; i < b * 256 + size_t(j) * 32 + 32; ++i)
                c.add(i, std::fabs(double(x[i]) - y[i]), grid_bound(x[i], step, off, nmax));
        }
    }
}

void check_q6_k(const std::vector<float>& x, const std::vector<float>& y, const uint8_t* q, Check& c) {
    for (size_t b = 0; b < x.size() / 256; ++b) {
        const auto& blk = *reinterpret_cast<const BlockQ6_K*>(q + b * sizeof(BlockQ6_K));
        for (int j = 0; j < 16; ++j) {
            const double step = float(h(blk.d)) * float(blk.scales[j]);
            for (size_t i = b * 256 + size_t(j) * 16; i < b * 256 + size_t(j) * 16 + 16; ++i)
                c.add(i, std::fabs(double(x[i]) - y[i]), grid_bound(x[i], step, -32 * step, 63));
        }
    }
}

double sq_error(const std::vector<float>& x, const std::vector<float>& y) {
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e += std::pow(double(x[i]) - y[i], 2);
    return e;
}

}  // namespace

TEST_CASE("every quantizer type rounds each element within its format's bound") {
    const DType types[] = {DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
    const size_t n = 256 * 64;
    for (DType t : types) {
        const std::string name(ember::dtype_name(t));
        SUBCASE(name.c_str()) {
            const std::vector<float> x = weights(n, test_seed() + static_cast<uint32_t>(t));
            const auto info = *ember::dtype_info(static_cast<uint32_t>(t));
            std::vector<uint8_t> q(ember::row_bytes(info, n));
            std::vector<float> y(n);
            quantize_row(t, x.data(), q.data(), int64_t(n));
            dequantize_row(t, q.data(), y.data(), int64_t(n));
            Check c;
            switch (t) {
                case DType::F16:
                case DType::BF16:
                    for (size_t i = 0; i < n; ++i)
                        c.add(i, std::fabs(double(x[i]) - y[i]),
                              std::ldexp(std::fabs(x[i]), t == DType::F16 ? -11 : -8));
                    break;
                case DType::Q8_0:
                    check_symmetric(x, y, q.data(), info.block_bytes, 127, c);
                    break;
                case DType::Q4_0:
                case DType::Q5_0:
                    check_symmetric(x, y, q.data(), info.block_bytes, t == DType::Q4_0 ? 8 : 16, c);
                    break;
                case DType::Q4_1:
                case DType::Q5_1:
                    check_affine(x, y, q.data(), info.block_bytes, t == DType::Q4_1 ? 15 : 31, c);
                    break;
                case DType::Q4_K:
                case DType::Q5_K:
                    check_k_affine(t, x, y, q.data(), c);
                    break;
                default:
                    check_q6_k(x, y, q.data(), c);
            }
            CAPTURE(c.worst_index);
            CAPTURE(x[c.worst_index]);
            CAPTURE(y[c.worst_index]);
            CHECK(c.worst_excess <= 0);
            if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K) {
                const bool affine = t != DType::Q6_K;
                const double ours = sq_error(x, y);
                const double base = minmax_sq_error(x, affine ? 32 : 16,
                                                    t == DType::Q4_K   ? 15
                                                    : t == DType::Q5_K ? 31
                                                                       : 63,
                                                    affine);
                MESSAGE(name, " squared error / min-max fitting's: ", ours / base);
                CHECK(ours <= base);
            }
        }
    }
}

TEST_CASE("all-zero and constant blocks decode exactly") {
    for (DType t :
         {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        CAPTURE(ember::dtype_name(t));
        const auto info = *ember::dtype_info(static_cast<uint32_t>(t));
        std::vector<float> x(256, 0.0f), y(256);
        std::vector<uint8_t> q(ember::row_bytes(info, 256));
        quantize_row(t, x.data(), q.data(), 256);
        dequantize_row(t, q.data(), y.data(), 256);
        for (float v : y) REQUIRE(v == 0.0f);
    }
}
