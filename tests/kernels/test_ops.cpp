// Transformer ops against float64 references on seeded random data, on every ISA path.
//
// Tolerances (per element, relative to the magnitude involved, stated at each check):
//  * add/mul/scale: exact (one float operation each); softcap: exactly its formula.
//  * rms_norm: 4 * cols * 2^-24 relative (f32 sum of squares) + 2^-22.
//  * rope: 1e-6 * (|a| + |b|) of the rotated pair (cos/sin are rounded from double).
//  * softmax, silu/gelu: 2e-6 relative + 1e-9 absolute (exp approximation < 2e-7 relative).
//  * attention: 2e-5 * max|v| (f32 dot products over head_dim, online-softmax rescaling).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "tools/op_data/op_data.h"
#include "kernels/common/fp16.h"
#include "kernels/cpu/kv_layout.h"
#include "kernels/common/rope_yarn.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

using ember::DType;
using namespace ember::cpu;

namespace {

// Runs the statements once per available ISA, with that ISA forced.
#define FOR_EACH_ISA(...)                            \
    for (Isa isa_ : ktest::available_isas()) {       \
        ktest::ForceIsa force_{isa_};                \
        const std::string isa_name_(isa_name(isa_)); \
        __VA_ARGS__                                  \
    }

double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

// A KV cache of n_blocks blocks with random contents in `type`, plus the f32 values it holds.
struct Cache {
    KvCacheView view;
    std::vector<uint8_t> k, v;
    std::vector<float> kf, vf;  // dequantized, [slot][n_kv_heads * head_dim]
};

Cache make_cache(DType type, int n_blocks, int B, int n_kv_heads, int D, uint32_t seed) {
    Cache c;
    const int64_t dim = int64_t{n_kv_heads} * D, n_slots = int64_t{n_blocks} * B;
    c.view.type = type;
    c.view.row_bytes = kv_row_bytes(type, dim);
    c.view.n_kv_heads = n_kv_heads;
    c.view.head_dim = D;
    c.view.block_tokens = B;
    c.k.resize(c.view.row_bytes * size_t(n_slots));
    c.v.resize(c.view.row_bytes * size_t(n_slots));
    const auto kx = ktest::random_floats(size_t(n_slots * dim), seed),
               vx = ktest::random_floats(size_t(n_slots * dim), seed + 1);
    std::vector<int32_t> all(static_cast<size_t>(n_slots));
    std::iota(all.begin(), all.end(), 0);
    ops::store_kv(c.view, c.k.data(), c.v.data(), kx.data(), vx.data(), all.data(), n_slots, nullptr);
    c.view.k = c.k.data();
    c.view.v = c.v.data();
    // The keys as stored, through rows in the cache type (F16 keys are stored transposed per
    // block, kv_layout.h; the round trip test checks that layout).
    std::vector<uint8_t> key_rows(c.k.size());
    for (int64_t i = 0; i < n_slots; ++i)
        quantize_row(type, kx.data() + i * dim, key_rows.data() + size_t(i) * c.view.row_bytes, dim);
    c.kf = ktest::dequantize_matrix(type, key_rows.data(), n_slots, dim);
    // The values as rows again (a block's bytes are grouped by head; the round trip test
    // checks that layout).
    const size_t head_bytes = kv_row_bytes(type, D);
    std::vector<uint8_t> value_rows(c.v.size());
    for (int64_t i = 0; i < n_slots; ++i)
        for (int h = 0; h < n_kv_heads; ++h)
            std::memcpy(value_rows.data() + size_t(i) * c.view.row_bytes + h * head_bytes,
                        head_row(c.view, c.v.data(), i, h), head_bytes);
    c.vf = ktest::dequantize_matrix(type, value_rows.data(), n_slots, dim);
    return c;
}

// float64 attention of one query head over positions [start, n_kv) of a sequence; with a
// sink, exp(sink) joins the softmax denominator (a logit with no value).
std::vector<double> attention_ref(const Cache& c, const float* q, int kv_head, const int32_t* table, int64_t start,
                                  int64_t n_kv, double scale, double cap, const float* sink = nullptr) {
    const int D = c.view.head_dim;
    const int64_t dim = int64_t{c.view.n_kv_heads} * D;
    std::vector<double> s;
    double mx = -INFINITY;
    for (int64_t j = start; j < n_kv; ++j) {
        const float* k = c.kf.data() + c.view.slot(table, j) * dim + int64_t{kv_head} * D;
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += double(q[i]) * k[i];
        dot *= scale;
        if (cap > 0) dot = cap * std::tanh(dot / cap);
        s.push_back(dot);
        mx = std::max(mx, dot);
    }
    if (sink) mx = std::max(mx, double(*sink));
    double sum = sink ? std::exp(*sink - mx) : 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    std::vector<double> out(size_t(D), 0.0);
    for (int64_t j = start; j < n_kv; ++j) {
        const float* v = c.vf.data() + c.view.slot(table, j) * dim + int64_t{kv_head} * D;
        for (int i = 0; i < D; ++i) out[size_t(i)] += s[size_t(j - start)] / sum * v[i];
    }
    return out;
}

// rope's output x against x0 rotated in float64 by theta(token, pair) and scaled by mscale:
// each pair within 1e-6 mscale (|a| + |b|) (cos/sin rounded from double), dims past n_rot
// unchanged.
struct RopeShape {
    int n_heads, D, n_rot;
    bool neox;
};
template <class Theta>
void check_rotated(const std::vector<float>& x0, const std::vector<float>& x, RopeShape r, double mscale, Theta theta,
                   const std::string& isa) {
    const int64_t n = int64_t(x0.size()) / (int64_t{r.n_heads} * r.D);
    for (int64_t t = 0; t < n; ++t) {
        for (int h = 0; h < r.n_heads; ++h) {
            const float* a = x0.data() + (t * r.n_heads + h) * r.D;
            const float* g = x.data() + (t * r.n_heads + h) * r.D;
            for (int i = 0; i < r.n_rot / 2; ++i) {
                const double th = theta(t, i);
                const int i0 = r.neox ? i : 2 * i, i1 = r.neox ? i + r.n_rot / 2 : 2 * i + 1;
                const double r0 = (a[i0] * std::cos(th) - a[i1] * std::sin(th)) * mscale;
                const double r1 = (a[i0] * std::sin(th) + a[i1] * std::cos(th)) * mscale;
                const double tol = 1e-6 * mscale * (std::fabs(a[i0]) + std::fabs(a[i1]));
                REQUIRE_MESSAGE((std::fabs(g[i0] - r0) <= tol && std::fabs(g[i1] - r1) <= tol), isa, " neox=", r.neox,
                                " D=", r.D, " t=", t, " i=", i, ": ", g[i0], " ", g[i1], " vs ", r0, " ", r1);
            }
            for (int i = r.n_rot; i < r.D; ++i) REQUIRE(g[i] == a[i]);  // not rotated
        }
    }
}

}  // namespace

TEST_CASE("elementwise ops are exact") {
    ThreadPool pool(2);
    FOR_EACH_ISA({
        for (int64_t n : {1, 15, 1000, 100003}) {
            const auto a = ktest::random_floats(size_t(n), 1), b = ktest::random_floats(size_t(n), 2);
            std::vector<float> out(static_cast<size_t>(n)), x = a;
            ops::add(a.data(), b.data(), out.data(), n, &pool);
            for (int64_t i = 0; i < n; ++i) REQUIRE(out[size_t(i)] == a[size_t(i)] + b[size_t(i)]);
            ops::mul(a.data(), b.data(), out.data(), n, &pool);
            for (int64_t i = 0; i < n; ++i) REQUIRE(out[size_t(i)] == a[size_t(i)] * b[size_t(i)]);
            ops::scale(x.data(), 0.37f, n, &pool);
            for (int64_t i = 0; i < n; ++i) REQUIRE(x[size_t(i)] == a[size_t(i)] * 0.37f);
            x = a;
            ops::softcap(x.data(), 3.0f, n, &pool);  // cap * tanh(x * (1 / cap)), as written
            for (int64_t i = 0; i < n; ++i) REQUIRE(x[size_t(i)] == 3.0f * std::tanh(a[size_t(i)] * (1.0f / 3.0f)));
            x = a;  // in place: x += b
            ops::add(x.data(), b.data(), x.data(), n, &pool);
            for (int64_t i = 0; i < n; ++i) REQUIRE(x[size_t(i)] == a[size_t(i)] + b[size_t(i)]);
        }
    })
}

// Batch invariance of the per-row ops: a row (token) gets the same bits in a batch of many
// rows (odd length, so rows start at every alignment; large enough to be split over the
// pool) as alone in its own aligned buffer.
TEST_CASE("row ops are batch-invariant") {
    ThreadPool pool(3);
    const int64_t rows = 37, cols = 1029;
    const auto x = ktest::random_floats(size_t(rows * cols), 41), g = ktest::random_floats(size_t(rows * cols), 42),
               w = ktest::random_floats(size_t(cols), 43);
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) pos[size_t(r)] = int32_t(r * 977 % 5003);
    ops::RopeSpec spec;
    spec.head_dim = 64;
    spec.n_rot = 64;
    const int heads = 3;  // rope rows: 3 heads of 64 per token
    // op(in, out, n_rows, first row): runs the op on n_rows rows of `width` values.
    auto check = [&](const char* name, int64_t width, const std::function<void(float*, int64_t, int64_t)>& op) {
        std::vector<float> all(x.begin(), x.begin() + rows * width);
        op(all.data(), rows, 0);
        for (int64_t r = 0; r < rows; ++r) {
            std::vector<float> one(x.begin() + r * width, x.begin() + (r + 1) * width);
            op(one.data(), 1, r);
            REQUIRE_MESSAGE(std::memcmp(one.data(), all.data() + r * width, size_t(width) * 4) == 0, name, " row ", r);
        }
    };
    FOR_EACH_ISA({
        CAPTURE(isa_name_);
        check("rms_norm", cols,
              [&](float* v, int64_t n, int64_t) { ops::rms_norm(v, w.data(), v, n, cols, 1e-5f, &pool); });
        check("softmax", cols, [&](float* v, int64_t n, int64_t) { ops::softmax(v, n, cols, &pool); });
        check("rope", heads * 64,
              [&](float* v, int64_t n, int64_t r0) { ops::rope(v, n, heads, pos.data() + r0, spec, &pool); });
        check("swiglu", cols,
              [&](float* v, int64_t n, int64_t r0) { ops::swiglu(g.data() + r0 * cols, v, v, n * cols, &pool); });
        check("geglu", cols,
              [&](float* v, int64_t n, int64_t r0) { ops::geglu(g.data() + r0 * cols, v, v, n * cols, &pool); });
    })
}

TEST_CASE("rms_norm") {
    ThreadPool pool(2);
    FOR_EACH_ISA({
        for (int64_t cols : {1, 7, 576, 2048}) {
            for (int64_t rows : {1, 5, 33}) {
                const auto x = ktest::random_floats(size_t(rows * cols), 3), w = ktest::random_floats(size_t(cols), 4);
                for (bool with_w : {true, false}) {
                    std::vector<float> y = x;  // in place
                    ops::rms_norm(y.data(), with_w ? w.data() : nullptr, y.data(), rows, cols, 1e-6f, &pool);
                    for (int64_t r = 0; r < rows; ++r) {
                        double ss = 0;
                        for (int64_t i = 0; i < cols; ++i)
                            ss += double(x[size_t(r * cols + i)]) * x[size_t(r * cols + i)];
                        const double inv = 1.0 / std::sqrt(ss / double(cols) + 1e-6);
                        for (int64_t i = 0; i < cols; ++i) {
                            const double ref = x[size_t(r * cols + i)] * inv * (with_w ? w[size_t(i)] : 1.0);
                            const double tol =
                                (4.0 * double(cols) + 4.0) * std::ldexp(1.0, -24) * std::fabs(ref) + 1e-30;
                            REQUIRE_MESSAGE(std::fabs(y[size_t(r * cols + i)] - ref) <= tol, isa_name_, " cols=", cols,
                                            " r=", r, " i=", i, ": ", y[size_t(r * cols + i)], " vs ", ref);
                        }
                    }
                }
            }
        }
    })
}

// The fused residual add + norm is, bit for bit, add() and then rms_norm(), whatever the
// split over the pool (one row alone: on the caller; many: over the threads).
TEST_CASE("add_rms_norm is add then rms_norm") {
    ThreadPool pool(3);
    FOR_EACH_ISA({
        for (int64_t cols : {7, 576, 2048}) {
            for (int64_t rows : {1, 5, 16, 33}) {
                const auto x = ktest::random_floats(size_t(rows * cols), 7),
                           b = ktest::random_floats(size_t(rows * cols), 8), w = ktest::random_floats(size_t(cols), 9);
                std::vector<float> x_two = x, y_two(x.size()), x_one = x, y_one(x.size(), -1.0f);
                ops::add(x_two.data(), b.data(), x_two.data(), rows * cols, &pool);
                ops::rms_norm(x_two.data(), w.data(), y_two.data(), rows, cols, 1e-6f, &pool);
                ops::add_rms_norm(x_one.data(), b.data(), w.data(), y_one.data(), rows, cols, 1e-6f, &pool);
                CAPTURE(cols);
                CAPTURE(rows);
                REQUIRE(std::memcmp(x_one.data(), x_two.data(), x.size() * 4) == 0);
                REQUIRE(std::memcmp(y_one.data(), y_two.data(), x.size() * 4) == 0);
            }
        }
    })
}

TEST_CASE("rope") {
    ThreadPool pool(2);
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> posd(0, 100000);
    FOR_EACH_ISA({
        for (bool neox : {false, true}) {
            for (auto [D, n_rot] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{64, 32}})
                for (const bool reverse : {false, true}) {  // reverse: by minus the angle
                    const int n_heads = 3;
                    const int64_t n = 21;
                    std::vector<int32_t> pos(static_cast<size_t>(n));
                    for (auto& p : pos) p = posd(rng);
                    pos[0] = 0;
                    std::vector<float> ff(static_cast<size_t>(n_rot / 2));
                    for (int i = 0; i < n_rot / 2; ++i)
                        ff[size_t(i)] = 1.0f + 0.25f * float(i % 5);  // Llama-3-like divisors
                    ops::RopeSpec spec;
                    spec.head_dim = D;
                    spec.n_rot = n_rot;
                    spec.neox = neox;
                    spec.freq_base = 500000.0f;
                    spec.freq_scale = 0.5f;
                    spec.freq_factors = ff.data();
                    spec.reverse = reverse;
                    const auto x0 = ktest::random_floats(size_t(n * n_heads * D), 6);
                    std::vector<float> x = x0;
                    ops::rope(x.data(), n, n_heads, pos.data(), spec, &pool);
                    const auto theta = [&](int64_t t, int i) {
                        return pos[size_t(t)] * 0.5 * std::pow(500000.0, -2.0 * i / n_rot) / ff[size_t(i)] *
                               (reverse ? -1 : 1);
                    };
                    check_rotated(x0, x, {n_heads, D, n_rot, neox}, 1.0, theta, isa_name_);
                }
        }
    })
}

// YaRN (gpt-oss: base 150000, factor 32 over a 4096-token original context, beta 32 / 1),
// against ggml's rope_yarn written out in float64 here: per pair the angle
// theta = theta_interp (1 - mix) + theta_extrap mix with theta_extrap = pos base^(-2i/n),
// theta_interp = theta_extrap / factor, mix = ext_factor (1 - clamp((i - low) / (high - low)));
// low, high = floor / ceil of n ln(n_orig / (beta 2 pi)) / (2 ln base) (8.09 -> 8 and
// 17.40 -> 18 here); cos and sin times attn_factor (1 + 0.1 ln factor).
// Tolerance: 1e-6 (|a| + |b|) times that magnitude, as the plain rope's.
TEST_CASE("rope with YaRN matches ggml's formulas in float64") {
    ThreadPool pool(2);
    const int D = 64, n_rot = 64, n_heads = 3, n_orig = 4096;
    const double base = 150000, factor = 32, attn = 0.9;
    const double low = 8, high = 18;  // hand-computed above
    REQUIRE(std::floor(ember::yarn_corr_dim(n_rot, n_orig, 32.0, base)) == low);
    REQUIRE(std::ceil(ember::yarn_corr_dim(n_rot, n_orig, 1.0, base)) == high);
    const std::vector<int32_t> pos{0, 1, 7, 127, 4095, 4096, 30000, 131071};
    const int64_t n = int64_t(pos.size());
    for (bool neox : {false, true}) {
        ops::RopeSpec spec;
        spec.head_dim = D;
        spec.n_rot = n_rot;
        spec.neox = neox;
        spec.freq_base = float(base);
        spec.freq_scale = float(1.0 / factor);
        spec.ext_factor = 1.0f;
        spec.attn_factor = float(attn);
        spec.n_ctx_orig = n_orig;
        const double mscale = double(float(attn)) * (1.0 + 0.1 * std::log(1.0 / double(float(1.0 / factor))));
        const auto x0 = ktest::random_floats(size_t(n * n_heads * D), 16);
        FOR_EACH_ISA({
            std::vector<float> x = x0;
            ops::rope(x.data(), n, n_heads, pos.data(), spec, &pool);
            const auto theta = [&](int64_t t, int i) {
                const double extrap = pos[size_t(t)] * std::pow(base, -2.0 * i / n_rot);
                const double interp = extrap / factor;
                const double mix = 1.0 - std::min(1.0, std::max(0.0, (i - low) / (high - low)));
                return interp * (1 - mix) + extrap * mix;
            };
            check_rotated(x0, x, {n_heads, D, n_rot, neox}, mscale, theta, isa_name_);
        })
    }
}

// rope keeps its cos/sin tables between calls with the same spec and positions (q, then
// k): a change of any of them in place, at the same addresses, must be seen.
TEST_CASE("rope tables follow changes") {
    const int D = 64, n_rot = 64, n_heads = 2;
    const int64_t n = 3;
    std::vector<int32_t> pos{5, 900, 70000};
    std::vector<float> ff(size_t(n_rot / 2), 1.0f);
    ops::RopeSpec spec;
    spec.head_dim = D;
    spec.n_rot = n_rot;
    spec.freq_base = 10000.0f;
    spec.freq_factors = ff.data();
    const auto x0 = ktest::random_floats(size_t(n * n_heads * D), 8);
    auto check = [&](const char* what) {
        std::vector<float> x = x0;
        ops::rope(x.data(), n, n_heads, pos.data(), spec, nullptr);
        for (int64_t t = 0; t < n; ++t) {
            for (int i = 0; i < n_rot / 2; ++i) {
                const double theta = pos[size_t(t)] * spec.freq_scale *
                                     std::pow(double(spec.freq_base), -2.0 * i / n_rot) / ff[size_t(i)];
                const float* a = x0.data() + t * n_heads * D;
                const double r0 = a[2 * i] * std::cos(theta) - a[2 * i + 1] * std::sin(theta);
                const double tol = 1e-6 * (std::fabs(a[2 * i]) + std::fabs(a[2 * i + 1]));
                REQUIRE_MESSAGE(std::fabs(x[size_t(t * n_heads * D + 2 * i)] - r0) <= tol, what);
            }
        }
    };
    check("first call");
    check("same spec and positions again");
    pos[1] = 901;
    check("a position changed in place");
    ff[3] = 4.0f;
    check("a frequency factor changed in place");
    spec.freq_base = 500000.0f;
    check("another base");
    spec.freq_factors = nullptr;
    std::fill(ff.begin(), ff.end(), 1.0f);
    check("no factors");
}

TEST_CASE("softmax") {
    ThreadPool pool(2);
    FOR_EACH_ISA({
        for (int64_t cols : {1, 3, 100, 4099}) {
            const int64_t rows = 9;
            auto x = ktest::random_floats(size_t(rows * cols), 7, 8.0f);  // large logits: stability
            x[0] = 1000.0f;
            const auto x0 = x;
            ops::softmax(x.data(), rows, cols, &pool);
            for (int64_t r = 0; r < rows; ++r) {
                double mx = -INFINITY, sum = 0;
                for (int64_t i = 0; i < cols; ++i) mx = std::max(mx, double(x0[size_t(r * cols + i)]));
                for (int64_t i = 0; i < cols; ++i) sum += std::exp(x0[size_t(r * cols + i)] - mx);
                for (int64_t i = 0; i < cols; ++i) {
                    const double ref = std::exp(x0[size_t(r * cols + i)] - mx) / sum;
                    REQUIRE_MESSAGE(std::fabs(x[size_t(r * cols + i)] - ref) <= 2e-6 * ref + 1e-9, isa_name_,
                                    " cols=", cols, ": ", x[size_t(r * cols + i)], " vs ", ref);
                }
            }
        }
    })
}

TEST_CASE("gated activations") {
    ThreadPool pool(2);
    FOR_EACH_ISA({
        const int64_t n = 70001;
        auto g = ktest::random_floats(size_t(n), 8, 3.0f);
        g[0] = 120.0f;  // saturated regions
        g[1] = -120.0f;
        const auto u = ktest::random_floats(size_t(n), 9);
        std::vector<float> out(static_cast<size_t>(n));
        for (bool gelu : {false, true}) {
            if (gelu) ops::geglu(g.data(), u.data(), out.data(), n, &pool);
            else ops::swiglu(g.data(), u.data(), out.data(), n, &pool);
            for (int64_t i = 0; i < n; ++i) {
                const double ref = (gelu ? gelu_ref(g[size_t(i)]) : silu_ref(g[size_t(i)])) * u[size_t(i)];
                REQUIRE_MESSAGE(
                    std::fabs(out[size_t(i)] - ref) <= 2e-6 * std::fabs(ref) + 1e-9 * std::fabs(double(u[size_t(i)])),
                    isa_name_, " ", (gelu ? "gelu" : "silu"), " x=", g[size_t(i)], ": ", out[size_t(i)], " vs ", ref);
            }
        }
    })
}

// gpt-oss's clamped SwiGLU (ggml_swiglu_oai) in float64: x = min(g, 7), y = clamp(u, -7, 7),
// out = x sigmoid(alpha x) (y + 1), alpha = 1.702f as ggml has it in float. Gates and ups
// span both clamps (|g|, |u| up to ~30). Tolerance as silu's: 2e-6 relative (exp
// approximation, a few roundings) plus 1e-9 |y + 1|, plus |alpha x| 2^-24 relative: alpha x
// is rounded to float before the exponential.
TEST_CASE("gpt-oss clamped SwiGLU matches float64") {
    ThreadPool pool(2);
    const int64_t n = 70001;
    auto g = ktest::random_floats(size_t(n), 18, 10.0f);
    auto u = ktest::random_floats(size_t(n), 19, 10.0f);
    g[0] = 120.0f, g[1] = -120.0f, g[2] = 7.0f, u[3] = 7.5f, u[4] = -7.5f, u[5] = -1.0f;
    FOR_EACH_ISA({
        std::vector<float> out(static_cast<size_t>(n));
        ops::swiglu_oai(g.data(), u.data(), out.data(), n, &pool);
        for (int64_t i = 0; i < n; ++i) {
            const double x = std::min(double(g[size_t(i)]), 7.0), y = std::clamp(double(u[size_t(i)]), -7.0, 7.0);
            const double alpha = double(1.702f);
            const double ref = x / (1.0 + std::exp(-alpha * x)) * (y + 1.0);
            const double tol =
                (2e-6 + std::fabs(alpha * x) * std::ldexp(1.0, -24)) * std::fabs(ref) + 1e-9 * std::fabs(y + 1.0);
            REQUIRE_MESSAGE(std::fabs(out[size_t(i)] - ref) <= tol, isa_name_, " g=", g[size_t(i)], " u=", u[size_t(i)],
                            ": ", out[size_t(i)], " vs ", ref);
        }
    })
}

// GQA (e.g. 8 query heads on 2 KV heads), blocks handed out in shuffled order, lengths
// that end mid-block, sliding window, soft-capping, F16 and Q8_0 caches, three sequences.
// Head groups of 4 fill 16-row tiles with 4 tokens; 1 (MHA) with 16 tokens; 16 exceed an
// AVX2 tile (per-head kernel there); head_dim 72 leaves vector tails.
struct AttentionCase {
    const char* name;
    DType type;
    int head_dim, block, window;
    float softcap;
    int n_heads, n_kv_heads;
    bool sinks = false;  // gpt-oss attention sinks, one logit per query head
};

// Sink logits spread over the range of the test's scores (so they matter without drowning
// the keys: -1.5 .. 2.5).
std::vector<float> test_sinks(int n_heads) {
    std::vector<float> s(static_cast<size_t>(n_heads));
    for (int h = 0; h < n_heads; ++h) s[size_t(h)] = float(h % 5) - 1.5f;
    return s;
}

static void check_attention(const AttentionCase& ac) {
    const DType type = ac.type;
    const int head_dim = ac.head_dim, block = ac.block, window = ac.window, n_heads = ac.n_heads,
              n_kv_heads = ac.n_kv_heads;
    const float softcap = ac.softcap;
    const int n_blocks = 24, max_blocks = 8;
    const Cache c = make_cache(type, n_blocks, block, n_kv_heads, head_dim, 11);
    // Three sequences, each with a shuffled set of distinct blocks.
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(12));
    std::vector<int32_t> table(ids.begin(), ids.begin() + 3 * max_blocks);
    // Query tokens: decode-like (one token at the end) and prefill-like (a run).
    std::vector<int32_t> pos, seq;
    const int len[3] = {block * max_blocks, block * 3 + 5, 1};
    for (int s = 0; s < 3; ++s) {
        for (int p : {0, len[s] / 2, len[s] - 1}) {
            pos.push_back(p);
            seq.push_back(s);
        }
    }
    pos.push_back(block - 1);  // last slot of a block
    seq.push_back(0);
    for (int p = 0; p < 21; ++p) {  // a prompt: consecutive positions fill whole tiles
        pos.push_back(block + 3 + p);
        seq.push_back(1);
    }
    const int64_t n = int64_t(pos.size()), D = head_dim;
    const auto q = ktest::random_floats(size_t(n * n_heads * D), 13);
    const float scale = 1.0f / std::sqrt(float(D));
    double vmax = 0;
    for (float v : c.vf) vmax = std::max(vmax, double(std::fabs(v)));
    const std::vector<float> sinks = test_sinks(n_heads);
    ThreadPool pool(3);
    FOR_EACH_ISA({
        std::vector<float> out(static_cast<size_t>(n * n_heads * D), NAN);
        ops::AttentionBatchArgs a;
        a.q = q.data();
        a.out = out.data();
        a.n_tokens = n;
        a.n_heads = n_heads;
        a.positions = pos.data();
        a.seq_of = seq.data();
        a.block_table = table.data();
        a.max_blocks = max_blocks;
        a.window = window;
        a.scale = scale;
        a.softcap = softcap;
        a.sinks = ac.sinks ? sinks.data() : nullptr;
        ops::attention(c.view, a, &pool);
        // Decode: each token alone (a tile of one token takes the decode kernel).
        std::vector<float> single(out.size(), NAN);
        for (int64_t t = 0; t < n; ++t) {
            ops::AttentionBatchArgs one = a;
            one.q = q.data() + t * n_heads * D;
            one.out = single.data() + t * n_heads * D;
            one.n_tokens = 1;
            one.positions = pos.data() + t;
            one.seq_of = seq.data() + t;
            ops::attention(c.view, one, &pool);
        }
        for (int64_t t = 0; t < n; ++t) {
            const int64_t start = window > 0 ? std::max<int64_t>(0, pos[size_t(t)] - window + 1) : 0;
            for (int h = 0; h < n_heads; ++h) {
                const auto ref = attention_ref(c, q.data() + (t * n_heads + h) * D, h / (n_heads / n_kv_heads),
                                               table.data() + seq[size_t(t)] * max_blocks, start, pos[size_t(t)] + 1,
                                               scale, softcap, ac.sinks ? &sinks[size_t(h)] : nullptr);
                for (int i = 0; i < D; ++i) {
                    for (const auto* res : {&out, &single}) {
                        const float got = (*res)[size_t((t * n_heads + h) * D + i)];
                        REQUIRE_MESSAGE(std::fabs(got - ref[size_t(i)]) <= 2e-5 * vmax, isa_name_, " ",
                                        (res == &out ? "batch" : "one token"), " t=", t, " (pos ", pos[size_t(t)],
                                        ") h=", h, " i=", i, ": ", got, " vs ", ref[size_t(i)]);
                    }
                }
            }
        }
    })
}

TEST_CASE("attention matches the reference") {
    const AttentionCase cases[] = {
        {"f16 d64 b16", DType::F16, 64, 16, 0, 0.0f, 8, 2},
        {"f16 d128 b32 window", DType::F16, 128, 32, 37, 0.0f, 8, 2},
        {"f16 d256 b16 softcap", DType::F16, 256, 16, 0, 30.0f, 8, 2},
        {"q8_0 d64 b16 window", DType::Q8_0, 64, 16, 20, 0.0f, 8, 2},
        {"f16 d80 b16", DType::F16, 80, 16, 0, 0.0f, 8, 2},
        {"f16 d72 b16 mha", DType::F16, 72, 16, 0, 0.0f, 3, 3},
        {"f16 d64 b32 group16 window", DType::F16, 64, 32, 9, 0.0f, 16, 1},
        {"f16 d64 b16 window sinks", DType::F16, 64, 16, 20, 0.0f, 8, 2, true},
        {"q8_0 d64 b16 sinks", DType::Q8_0, 64, 16, 0, 0.0f, 8, 2, true},
        {"f16 d64 b32 group16 sinks", DType::F16, 64, 32, 0, 0.0f, 16, 1, true},
    };
    for (const AttentionCase& ac : cases) {
        SUBCASE(ac.name) { check_attention(ac); }
    }
}

// Batch invariance: a token's attention output has the same bits however its sequence's
// prompt was split into passes and whatever else shares the pass (one token of a sequence
// takes the decode kernel, several take the tile kernel; both follow one order).
static void check_attention_invariance(const AttentionCase& ac) {
    const int D = ac.head_dim, H = ac.n_heads, max_blocks = 8, n_seqs = 3, len = 45;
    const Cache c = make_cache(ac.type, n_seqs * max_blocks, ac.block, ac.n_kv_heads, D, 31);
    std::vector<int32_t> table(size_t(n_seqs * max_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(32));
    const int64_t row = int64_t{H} * D;
    const auto q = ktest::random_floats(size_t(n_seqs * len * row), 33);  // [seq][pos][H * D]
    const std::vector<float> sinks = test_sinks(H);
    ThreadPool pool(3);
    // One pass over the (sequence, position) tokens; returns their outputs in order.
    auto pass = [&](const std::vector<std::pair<int32_t, int32_t>>& toks) {
        std::vector<float> qb, out(toks.size() * size_t(row), NAN);
        std::vector<int32_t> pos, seq;
        for (const auto& [s, p] : toks) {
            const float* src = q.data() + (int64_t{s} * len + p) * row;
            qb.insert(qb.end(), src, src + row);
            pos.push_back(p);
            seq.push_back(s);
        }
        ops::AttentionBatchArgs a;
        a.q = qb.data();
        a.out = out.data();
        a.n_tokens = int64_t(toks.size());
        a.n_heads = H;
        a.positions = pos.data();
        a.seq_of = seq.data();
        a.block_table = table.data();
        a.max_blocks = max_blocks;
        a.window = ac.window;
        a.scale = 1.0f / std::sqrt(float(D));
        a.softcap = ac.softcap;
        a.sinks = ac.sinks ? sinks.data() : nullptr;
        ops::attention(c.view, a, &pool);
        return out;
    };
    // Sequence 0's prompt split into chunks of the given sizes, each pass optionally shared
    // with decode tokens of sequence 1 and a prefill chunk of sequence 2; returns sequence
    // 0's outputs, [pos][H * D].
    auto run = [&](const std::vector<int>& chunks, bool crowd) {
        std::vector<float> seq0(size_t(len * row));
        int p0 = 0, step = 0;
        for (int n : chunks) {
            std::vector<std::pair<int32_t, int32_t>> toks;
            if (crowd) toks.emplace_back(1, (7 * step + 3) % len);
            for (int i = 0; i < n; ++i) toks.emplace_back(0, p0 + i);
            if (crowd) {
                for (int i = 0; i < 5 + step % 4; ++i) toks.emplace_back(2, (3 * step + i) % len);
                toks.emplace_back(1, (5 * step + 11) % len);
            }
            const auto out = pass(toks);
            const size_t first = crowd ? 1 : 0;
            std::copy(out.begin() + int64_t(first) * row, out.begin() + int64_t(first + size_t(n)) * row,
                      seq0.begin() + int64_t(p0) * row);
            p0 += n;
            ++step;
        }
        REQUIRE(p0 == len);
        return seq0;
    };
    const std::vector<std::vector<int>> splits = {
        {len}, {7, 3, 13, 1, 21}, std::vector<int>(size_t(len), 1), {2, 17, 16, 9, 1}};
    FOR_EACH_ISA({
        const auto ref = run(splits[0], false);
        for (bool crowd : {false, true}) {
            for (size_t k = 0; k < splits.size(); ++k) {
                const auto got = run(splits[k], crowd);
                for (size_t i = 0; i < got.size(); ++i) {
                    REQUIRE_MESSAGE(std::memcmp(&got[i], &ref[i], 4) == 0, isa_name_, " split ", k,
                                    crowd ? " in a crowd" : " alone", " pos ", int64_t(i) / row, " value ",
                                    int64_t(i) % row, ": ", got[i], " vs ", ref[i]);
                }
            }
        }
    })
}

TEST_CASE("attention batch invariance") {
    const AttentionCase cases[] = {
        {"f16 d64 b16 gqa4", DType::F16, 64, 16, 0, 0.0f, 8, 2},
        {"f16 d64 b16 gqa3", DType::F16, 64, 16, 0, 0.0f, 9, 3},
        {"f16 d128 b32 window", DType::F16, 128, 32, 13, 0.0f, 8, 2},
        {"q8_0 d64 b16 window softcap", DType::Q8_0, 64, 16, 20, 30.0f, 8, 2},
        {"f16 d80 b16", DType::F16, 80, 16, 0, 0.0f, 8, 2},
        {"f16 d64 b8 mha", DType::F16, 64, 8, 5, 0.0f, 3, 3},
        // blocks not a multiple of the SIMD width (8 AVX2, 16 AVX-512): groups cut by a block's end
        {"f16 d64 b12 gqa4", DType::F16, 64, 12, 0, 0.0f, 8, 2},
        // one KV head (Gemma 3 270M): a token alone is one task, so its query heads are split
        // over the threads (ops.cpp head_split); in a crowd or a prompt they are not
        {"f16 d256 b16 one kv head", DType::F16, 256, 16, 0, 0.0f, 4, 1},
        {"q8_0 d64 b16 one kv head window", DType::Q8_0, 64, 16, 20, 0.0f, 8, 1},
        {"f16 d64 b16 gqa8 window sinks", DType::F16, 64, 16, 20, 0.0f, 64, 8, true},
        {"q8_0 d64 b16 sinks", DType::Q8_0, 64, 16, 0, 0.0f, 8, 2, true},
    };
    for (const AttentionCase& ac : cases) {
        SUBCASE(ac.name) { check_attention_invariance(ac); }
    }
}

// A turn of a long chat: n_new tokens after a cached history of `history` tokens (the prefill
// tile kernel's main case, its sub-tiles sharing each key group), at odd lengths: the history
// ends mid-block and the new tokens fill no whole tile.
struct LongHistoryCase {
    const char* name;
    DType type;
    int head_dim, block, window, n_heads, n_kv_heads, history, n_new;
};

static void check_long_history(const LongHistoryCase& lc) {
    const int D = lc.head_dim, H = lc.n_heads, B = lc.block, n_keys = lc.history + lc.n_new;
    const int n_blocks = (n_keys + B - 1) / B + 3;
    const Cache c = make_cache(lc.type, n_blocks, B, lc.n_kv_heads, D, 41);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(42));
    const int64_t row = int64_t{H} * D;
    const auto q = ktest::random_floats(size_t(lc.n_new * row), 43);
    std::vector<int32_t> pos(static_cast<size_t>(lc.n_new));
    std::iota(pos.begin(), pos.end(), lc.history);
    double vmax = 0;
    for (float v : c.vf) vmax = std::max(vmax, double(std::fabs(v)));
    // The short-case bound (2e-5 max|v|) plus f32 summation over this many keys: the
    // probability sum and each p.v accumulator add up to n_keys terms, each addition off by
    // at most 2^-24 of a partial sum bounded by l and l * max|v|.
    const double tol = (2e-5 + n_keys * std::ldexp(1.0, -24)) * vmax;
    // One thread: a pass's tiles hold several sub-tiles each (ops::attention keeps 4 tasks
    // per thread); three: one each.
    ThreadPool pool1(1), pool3(3);
    // Tokens [t0, t0 + n) of the turn in one pass; their outputs into out.
    const auto pass = [&](int t0, int n, std::vector<float>& out, ThreadPool* pool) {
        ops::AttentionBatchArgs a;
        a.q = q.data() + t0 * row;
        a.out = out.data() + t0 * row;
        a.n_tokens = n;
        a.n_heads = H;
        a.positions = pos.data() + t0;
        a.block_table = table.data();
        a.max_blocks = n_blocks;
        a.window = lc.window;
        a.scale = 1.0f / std::sqrt(float(D));
        ops::attention(c.view, a, pool);
    };
    FOR_EACH_ISA({
        std::vector<float> whole(size_t(lc.n_new * row), NAN), whole3(whole.size(), NAN), chunked(whole.size(), NAN),
            single(whole.size(), NAN);
        pass(0, lc.n_new, whole, &pool1);
        pass(0, lc.n_new, whole3, &pool3);
        for (int t0 = 0, k = 0; t0 < lc.n_new; t0 += 1 + 6 * (k++ % 3))
            pass(t0, std::min(1 + 6 * (k % 3), lc.n_new - t0), chunked, &pool3);
        for (int t = 0; t < lc.n_new; ++t) pass(t, 1, single, &pool3);  // the decode kernel
        for (int t = 0; t < lc.n_new; ++t) {
            const int64_t start = lc.window > 0 ? std::max<int64_t>(0, pos[size_t(t)] - lc.window + 1) : 0;
            for (int h = 0; h < H; ++h) {
                const auto ref = attention_ref(c, q.data() + t * row + h * D, h / (H / lc.n_kv_heads), table.data(),
                                               start, pos[size_t(t)] + 1, 1.0 / std::sqrt(double(D)), 0.0);
                for (int i = 0; i < D; ++i) {
                    const size_t at = size_t(t * row + h * D + i);
                    REQUIRE_MESSAGE(std::fabs(whole[at] - ref[size_t(i)]) <= tol, isa_name_, " t=", t, " h=", h,
                                    " i=", i, ": ", whole[at], " vs ", ref[size_t(i)]);
                    // Batch invariance at length: the same bits in other tiles, in chunks, alone.
                    REQUIRE_MESSAGE(std::memcmp(&whole[at], &whole3[at], 4) == 0, isa_name_, " 3 threads t=", t);
                    REQUIRE_MESSAGE(std::memcmp(&whole[at], &chunked[at], 4) == 0, isa_name_, " chunked t=", t);
                    REQUIRE_MESSAGE(std::memcmp(&whole[at], &single[at], 4) == 0, isa_name_, " alone t=", t);
                }
            }
        }
    })
}

TEST_CASE("attention over a long history matches the reference") {
    const LongHistoryCase cases[] = {
        {"f16 d64 gqa3 2053+37", DType::F16, 64, 16, 0, 9, 3, 2053, 37},
        {"q8_0 d64 gqa3 1501+23", DType::Q8_0, 64, 16, 0, 9, 3, 1501, 23},
        {"f16 d72 b32 gqa4 window 700, 1100+19", DType::F16, 72, 32, 700, 8, 2, 1100, 19},
        {"f16 d64 mha 4100+17", DType::F16, 64, 16, 0, 2, 2, 4100, 17},
    };
    for (const LongHistoryCase& lc : cases) {
        SUBCASE(lc.name) { check_long_history(lc); }
    }
}

TEST_CASE("attention_head with a single key") {
    // One visible key: the output is exactly that key's value row (softmax of one score).
    const Cache c = make_cache(DType::F16, 2, 16, 1, 64, 21);
    const int32_t table[] = {1, 0};
    const auto q = ktest::random_floats(2 * 64, 22);
    std::vector<float> out(2 * 64);
    ops::AttentionHeadArgs a;
    a.q = q.data();
    a.n_rep = 2;
    a.block_table = table;
    a.n_kv = 20;
    a.kv_start = 19;  // window of one
    a.scale = 0.125f;
    a.out = out.data();
    ops::attention_head(c.view, a);
    const float* v = c.vf.data() + c.view.slot(table, 19) * 64;
    for (int r = 0; r < 2; ++r)
        for (int i = 0; i < 64; ++i) REQUIRE(out[size_t(r * 64 + i)] == v[i]);
}

// A cache view of 2 heads of 64 in blocks of 8 tokens (store_kv's and load_kv's tests).
static KvCacheView two_head_view(DType t) {
    KvCacheView kv;
    kv.type = t;
    kv.n_kv_heads = 2;
    kv.head_dim = 64;
    kv.row_bytes = kv_row_bytes(t, 128);
    kv.block_tokens = 8;
    return kv;
}

TEST_CASE("store_kv round trip") {
    FOR_EACH_ISA(for (DType t
                      : {DType::F16, DType::Q8_0}) {
        CAPTURE(isa_name_);
        KvCacheView kv = two_head_view(t);  // a pool of one block
        std::vector<uint8_t> kp(kv.row_bytes * 8), vp(kv.row_bytes * 8);
        const size_t head_bytes = kv_row_bytes(t, 64);
        auto k = ktest::random_floats(3 * 128, 30);
        const auto v = ktest::random_floats(3 * 128, 31);
        // Half's rounding edges (F16 stores use F16C where the ISA has it): ties to even at 1 and
        // in the subnormals, the largest finite half and the overflow threshold, underflow to 0.
        const float edges[] = {
            1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.99f, 65520.0f, -65536.0f, 0x1p-25f,  0x1.8p-24f,
            0x1p-26f,        -0x1.4p-20f,         6.1e-5f,  -0.0f,     1e-8f,    3.14159f,  -2.71828f, 1e30f,
            0x1.ffep-15f};
        std::copy(std::begin(edges), std::end(edges), k.begin() + 128 + 5);
        const int32_t slot_ids[] = {5, 0, 7};
        ops::store_kv(kv, kp.data(), vp.data(), k.data(), v.data(), slot_ids, 3, nullptr);
        std::vector<uint8_t> expect(kv.row_bytes);
        for (int i = 0; i < 3; ++i) {
            quantize_row(t, k.data() + i * 128, expect.data(), 128);
            if (t == DType::F16) {  // keys transposed within the block: dimension d at d * B
                kv.k = kp.data();
                const auto* row = reinterpret_cast<const uint16_t*>(expect.data());
                for (int h = 0; h < 2; ++h) {
                    const uint16_t* key = key_f16(kv, slot_ids[i], h);
                    for (int d = 0; d < 64; ++d) REQUIRE(key[d * 8] == row[h * 64 + d]);
                }
                CHECK(key_f16(kv, slot_ids[i], 1) - key_f16(kv, slot_ids[i], 0) == 64 * 8);
            } else {  // Q8_0 keys: each head's part of the row at its place in the block
                for (int h = 0; h < 2; ++h)
                    REQUIRE(std::memcmp(expect.data() + h * head_bytes, head_row(kv, kp.data(), slot_ids[i], h),
                                        head_bytes) == 0);
            }
            quantize_row(t, v.data() + i * 128, expect.data(), 128);
            for (int h = 0; h < 2; ++h)  // values: likewise, for both types
                REQUIRE(std::memcmp(expect.data() + h * head_bytes, head_row(kv, vp.data(), slot_ids[i], h),
                                    head_bytes) == 0);
            // head 1's rows follow head 0's B rows within the block
            CHECK(head_row(kv, vp.data(), slot_ids[i], 1) - head_row(kv, vp.data(), slot_ids[i], 0) ==
                  std::ptrdiff_t(8 * head_bytes));
        }
    })
}

// load_kv reads back exactly what store_kv wrote (the cache type's rounding of the input, as
// dequantize_row gives it), and storing what it read gives the same bytes: moving cached rows
// (a rolled context) adds no rounding of its own.
TEST_CASE("load_kv reads back the stored values, and storing them again changes no byte") {
    FOR_EACH_ISA(for (DType t
                      : {DType::F16, DType::Q8_0}) {
        CAPTURE(isa_name_);
        KvCacheView kv = two_head_view(t);
        std::vector<uint8_t> kp(kv.row_bytes * 16), vp(kv.row_bytes * 16);
        const auto k = ktest::random_floats(5 * 128, 40), v = ktest::random_floats(5 * 128, 41);
        const int32_t slots[] = {5, 0, 7, 12, 9};  // two blocks, out of order
        ops::store_kv(kv, kp.data(), vp.data(), k.data(), v.data(), slots, 5, nullptr);
        kv.k = kp.data();
        kv.v = vp.data();
        std::vector<float> kr(k.size()), vr(v.size());
        ops::load_kv(kv, kr.data(), vr.data(), slots, 5, nullptr);
        std::vector<uint8_t> row(kv.row_bytes);
        std::vector<float> expect(128);
        for (int i = 0; i < 5; ++i)
            for (const auto& [in, out] : {std::pair{&k, &kr}, std::pair{&v, &vr}}) {
                quantize_row(t, in->data() + i * 128, row.data(), 128);
                dequantize_row(t, row.data(), expect.data(), 128);
                for (int e = 0; e < 128; ++e) REQUIRE(out->at(size_t(i * 128 + e)) == expect[size_t(e)]);
            }
        std::vector<uint8_t> kp2(kp.size()), vp2(vp.size());
        ops::store_kv(kv, kp2.data(), vp2.data(), kr.data(), vr.data(), slots, 5, nullptr);
        for (const int32_t slot : slots)
            for (int h = 0; h < 2; ++h) {
                const size_t hb = kv_row_bytes(t, 64);
                CHECK(std::memcmp(head_row(kv, vp.data(), slot, h), head_row(kv, vp2.data(), slot, h), hb) == 0);
                if (t == DType::Q8_0)
                    CHECK(std::memcmp(head_row(kv, kp.data(), slot, h), head_row(kv, kp2.data(), slot, h), hb) == 0);
            }
        if (t == DType::F16) CHECK(kp == kp2);  // every slot written, the rest zero in both
    })
}

// ---- mixture of experts (Backend::moe_route, moe_matmul, moe_combine) -----------------------
namespace {

using ember::Backend;
using ember::MemoryKind;
using ember::MoeGating;
using ember::MoeRouting;
using ember::Tensor;

Tensor upload_f32(Backend& be, const std::vector<float>& v, int64_t cols, int64_t rows) {
    return ember::opdata::put(be, v, cols, rows);
}

// float64 routing of one row: the ranking (value descending, ties to the lower id) and weights.
void route_ref(const float* l, int n, const MoeRouting& r, std::vector<int32_t>& ids, std::vector<double>& w) {
    std::vector<double> p(l, l + n);
    const double mx = *std::max_element(p.begin(), p.end());
    if (r.gating == MoeGating::Softmax) {
        double s = 0;
        for (double& v : p) s += (v = std::exp(v - mx));
        for (double& v : p) v /= s;
    }
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    ids.assign(order.begin(), order.begin() + r.n_used);
    w.clear();
    for (int32_t i : ids) w.push_back(p[size_t(i)]);
    if (r.gating == MoeGating::SoftmaxTopK) {
        const double top = w[0];
        double s = 0;
        for (double& v : w) s += (v = std::exp(v - top));
        for (double& v : w) v /= s;
    }
    double s = 0;
    for (double v : w) s += v;
    for (double& v : w) v = (r.normalize ? v / s : v) * r.scale;
}

}  // namespace

// Distinct logits a random permutation apart (gaps of 0.25: no float rounding reorders them),
// plus a row with exact ties. Weights: softmax of floats, 2e-6 relative per exp and sum.
TEST_CASE("moe_route chooses llama.cpp's experts with its weights") {
    auto be = ember::make_cpu_backend(2);
    const int n_expert = 128, T = 20;
    std::mt19937 rng(7);
    std::vector<float> logits(size_t(T * n_expert));
    for (int t = 0; t < T; ++t) {
        std::vector<int> perm(static_cast<size_t>(n_expert));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int i = 0; i < n_expert; ++i) logits[size_t(t * n_expert + i)] = 0.25f * float(perm[size_t(i)] - 64);
    }
    for (int i = 0; i < n_expert; ++i) logits[size_t(i)] = i % 3 == 0 ? 1.0f : -1.0f;  // row 0: ties
    Tensor lg = upload_f32(*be, logits, n_expert, T);
    const MoeRouting cases[] = {{8, MoeGating::Softmax, true, 1.0f},
                                {8, MoeGating::Softmax, false, 2.5f},
                                {4, MoeGating::SoftmaxTopK, false, 1.0f},
                                {1, MoeGating::Softmax, true, 1.0f}};
    for (const MoeRouting& r : cases) {
        CAPTURE(r.n_used);
        CAPTURE(int(r.gating));
        Tensor ids = be->alloc(MemoryKind::Activations, DType::I32, r.n_used, T, "ids");
        Tensor w = be->alloc(MemoryKind::Activations, DType::F32, r.n_used, T, "w");
        be->moe_route(lg, r, ids, w);
        std::vector<int32_t> got_ids(size_t(T * r.n_used));
        be->download(ids, got_ids.data(), ids.bytes());
        const std::vector<float> got_w = ember::opdata::get(*be, w);
        for (int t = 0; t < T; ++t) {
            std::vector<int32_t> ref_ids;
            std::vector<double> ref_w;
            route_ref(logits.data() + t * n_expert, n_expert, r, ref_ids, ref_w);
            for (int j = 0; j < r.n_used; ++j) {
                const size_t i = size_t(t * r.n_used + j);
                REQUIRE(got_ids[i] == ref_ids[size_t(j)]);
                CHECK(std::fabs(got_w[i] - ref_w[size_t(j)]) <= 1e-5 * std::fabs(ref_w[size_t(j)]) + 1e-9);
            }
        }
        be->free(ids);
        be->free(w);
    }
    be->free(lg);
}

// gemma4's ffn_down_exps.scale: each chosen weight times its expert's factor (one rounded
// product after the routing's own weights), the ids unchanged; a wrong count is refused.
TEST_CASE("moe_route's per-expert scale multiplies each chosen weight by its expert's factor") {
    auto be = ember::make_cpu_backend(2);
    const int n_expert = 16, T = 5, k = 4;
    std::vector<float> logits(static_cast<size_t>(T * n_expert)), factors(static_cast<size_t>(n_expert));
    for (int i = 0; i < T * n_expert; ++i) logits[size_t(i)] = 0.25f * float((i * 7) % n_expert) - 1.0f;
    for (int e = 0; e < n_expert; ++e) factors[size_t(e)] = 0.5f + 0.125f * float(e);
    Tensor lg = upload_f32(*be, logits, n_expert, T), sc = upload_f32(*be, factors, n_expert, 1);
    const MoeRouting r{k, MoeGating::Softmax, true, 1.0f};
    Tensor ids = be->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
    Tensor w = be->alloc(MemoryKind::Activations, DType::F32, k, T, "w");
    Tensor ids0 = be->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
    Tensor w0 = be->alloc(MemoryKind::Activations, DType::F32, k, T, "w");
    be->moe_route(lg, r, ids0, w0);
    be->moe_route(lg, r, ids, w, &sc);
    std::vector<int32_t> got_ids(size_t(T * k)), plain_ids(got_ids.size());
    be->download(ids, got_ids.data(), ids.bytes());
    be->download(ids0, plain_ids.data(), ids0.bytes());
    CHECK(got_ids == plain_ids);
    const std::vector<float> got = ember::opdata::get(*be, w), plain = ember::opdata::get(*be, w0);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == plain[i] * factors[size_t(got_ids[i])]);
    Tensor bad = upload_f32(*be, std::vector<float>(size_t(n_expert - 1), 1.0f), n_expert - 1, 1);
    CHECK_THROWS_WITH(be->moe_route(lg, r, ids, w, &bad), doctest::Contains("one factor per expert"));
    for (Tensor* t : {&lg, &sc, &ids, &w, &ids0, &w0, &bad}) be->free(*t);
}

// moe_matmul = matmul() of each expert with the rows that chose it, in slot order: the same
// bits, whatever the type and layout (Q4_0 / Q8_0 experts of 40 rows: panels per expert on
// AVX-512, one partial), on every ISA path. Plus a float64 check of the F32 path: 2 cols u sum|w x|.
TEST_CASE("moe_matmul is each expert's matmul of the slots that chose it") {
    auto be = ember::make_cpu_backend(2);
    const int64_t n_expert = 6, cols = 256, T = 5, k = 3;
    const std::vector<int32_t> id_v = {0, 5, 2, 5, 1, 0, 2, 5, 3, 0, 4, 5, 5, 2, 0};  // T x k; expert 3 once
    FOR_EACH_ISA(CAPTURE(isa_name_); for (DType type
                                          : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K,
                                             DType::MXFP4}) {
        for (int64_t rows : {int64_t{13}, int64_t{40}, int64_t{64}}) {  // 13: below one 32-row panel
            for (bool per_slot : {false, true}) {
                CAPTURE(ember::dtype_name(type));
                CAPTURE(rows);
                CAPTURE(per_slot);
                const auto host = ktest::random_weights(type, n_expert * rows, cols, 90);
                Tensor w = be->load_expert_weight(host.data(), type, cols, rows, n_expert, "exps");
                const int64_t x_rows = per_slot ? T * k : T;
                const auto xv = ktest::random_floats(size_t(x_rows * cols), 91);
                const auto bv = ktest::random_floats(size_t(n_expert * rows), 92);
                Tensor x = upload_f32(*be, xv, cols, x_rows), bias = upload_f32(*be, bv, rows, n_expert);
                Tensor ids = be->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
                be->upload(ids, id_v.data(), ids.bytes());
                Tensor y = be->alloc(MemoryKind::Activations, DType::F32, rows, T * k, "y");
                ember::opdata::poison(*be, y);
                be->moe_matmul(w, n_expert, x, ids, y, &bias);
                const std::vector<float> got = ember::opdata::get(*be, y);
                const size_t rb = ember::opdata::type_row_bytes(type, cols);
                for (int64_t e = 0; e < n_expert; ++e) {
                    std::vector<int64_t> slots;
                    for (int64_t s = 0; s < T * k; ++s)
                        if (id_v[size_t(s)] == e) slots.push_back(s);
                    std::vector<float> xg;
                    for (int64_t s : slots) {
                        const float* xr = xv.data() + (per_slot ? s : s / k) * cols;
                        xg.insert(xg.end(), xr, xr + cols);
                    }
                    Tensor we = be->load_weight(host.data() + size_t(e * rows) * rb, type, cols, rows, "e");
                    Tensor be_bias = upload_f32(
                        *be, std::vector<float>(bv.begin() + e * rows, bv.begin() + (e + 1) * rows), rows, 1);
                    Tensor xe = upload_f32(*be, xg, cols, int64_t(slots.size()));
                    Tensor ye = be->alloc(MemoryKind::Activations, DType::F32, rows, int64_t(slots.size()), "ye");
                    be->matmul(we, xe, ye, &be_bias);
                    const std::vector<float> want = ember::opdata::get(*be, ye);
                    for (size_t i = 0; i < slots.size(); ++i)
                        REQUIRE(std::memcmp(got.data() + slots[i] * rows, want.data() + i * size_t(rows),
                                            size_t(rows) * 4) == 0);
                    for (Tensor* t : {&we, &be_bias, &xe, &ye}) be->free(*t);
                }
                if (type == DType::F32) {
                    const auto wf = ktest::dequantize_matrix(type, host.data(), n_expert * rows, cols);
                    for (int64_t s = 0; s < T * k; ++s)
                        for (int64_t r = 0; r < rows; ++r) {
                            const float* wr = wf.data() + (id_v[size_t(s)] * rows + r) * cols;
                            const float* xr = xv.data() + (per_slot ? s : s / k) * cols;
                            double ref = bv[size_t(id_v[size_t(s)] * rows + r)], mag = std::fabs(ref);
                            for (int64_t c = 0; c < cols; ++c) {
                                ref += double(wr[c]) * xr[c];
                                mag += std::fabs(double(wr[c]) * xr[c]);
                            }
                            CHECK(std::fabs(got[size_t(s * rows + r)] - ref) <= 2.0 * cols * 0x1p-24 * mag + 1e-30);
                        }
                }
                for (Tensor* t : {&w, &x, &bias, &ids, &y}) be->free(*t);
            }
        }
    })
}

// out[t] = sum_j w[t,j] y[t*k+j]: k - 1 additions, so |err| <= k u sum_j |w y|.
TEST_CASE("moe_combine sums each token's weighted expert outputs") {
    auto be = ember::make_cpu_backend(2);
    const int64_t T = 19, k = 8, cols = 100;
    const auto yv = ktest::random_floats(size_t(T * k * cols), 93), wv = ktest::random_floats(size_t(T * k), 94);
    Tensor y = upload_f32(*be, yv, cols, T * k), w = upload_f32(*be, wv, k, T);
    Tensor out = be->alloc(MemoryKind::Activations, DType::F32, cols, T, "out");
    be->moe_combine(y, w, out);
    const std::vector<float> got = ember::opdata::get(*be, out);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < cols; ++c) {
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < k; ++j) {
                const double p = double(wv[size_t(t * k + j)]) * yv[size_t((t * k + j) * cols + c)];
                ref += p;
                mag += std::fabs(p);
            }
            CHECK(std::fabs(got[size_t(t * cols + c)] - ref) <= double(k) * 0x1p-24 * mag + 1e-30);
        }
    for (Tensor* t : {&y, &w, &out}) be->free(*t);
}

// qwen35moe's shared-expert gate: one float sigmoid (expf within 1 ulp on the host, three
// operations) and one multiply per element: 8 u of |result|.
TEST_CASE("sigmoid_scale_rows gates each row by the sigmoid of its logit") {
    auto be = ember::make_cpu_backend(2);
    for (int64_t T : {3, 40}) {
        const int64_t cols = 72;
        const auto xv = ktest::random_floats(size_t(T * cols), 95), sv = ktest::random_floats(size_t(T), 96, 4.0f);
        Tensor x = upload_f32(*be, xv, cols, T), s = upload_f32(*be, sv, 1, T);
        be->sigmoid_scale_rows(x, s);
        const std::vector<float> got = ember::opdata::get(*be, x);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t c = 0; c < cols; ++c) {
                const double ref = double(xv[size_t(t * cols + c)]) / (1 + std::exp(-double(sv[size_t(t)])));
                CHECK(std::fabs(got[size_t(t * cols + c)] - ref) <= 8 * 0x1p-24 * std::fabs(ref) + 1e-30);
            }
        for (Tensor* t : {&x, &s}) be->free(*t);
    }
}
