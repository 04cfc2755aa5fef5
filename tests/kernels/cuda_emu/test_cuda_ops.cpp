// Every op of the CUDA backend against the CPU backend or a float64 reference, on fresh
// random inputs (the seed is printed; EMBER_TEST_SEED replays one), several shapes each
// (odd sizes, the real models' head dims 64/128/256/512). Built twice from this one source:
// test_cuda_emu runs the kernels under the host emulator (kernels/cuda/emu), test_cuda_gpu
// on a real GPU (scripts/gpu-check.sh).
//
// Tolerances are derived per element from how each side computes, never fitted:
//   u = 2^-24 (float unit roundoff);
//   quantized matvec: the GPU quantizes activations to 8 bits per 32 elements, d = max|x|/127,
//     so |err| <= sum_c |w_c| d_c / 2, plus 4e-6 sum|w x| for the float scaling;
//   FP16 GEMM: activations (and dequantized weights) rounded to FP16 (2^-11 relative each),
//     float accumulation: (2^-11 [+ 2^-11] + cols u) sum|w x|;
//   FP32 paths: 2 cols u sum|w x| (worst-case float summation);
//   norms, rope, glu: a few u of the values involved (see each check);
//   attention: score errors (D + 2) u scale sum|q k| (+ soft-cap), then the softmax-weighted
//     sum: |err| <= 3 max|v| (2 ds + (n_keys + 8) u) for each side; the GPU's tensor-core
//     prefill (FP16 operands, FP32 accumulators) adds Q (and a Q8_0 cache's K) rounded to
//     FP16 in the scores, 2^-11 scale sum|q k| each (+ 2^-25 per subnormal element), and P
//     (and a Q8_0 cache's V) rounded to FP16 in the sum, 2^-11 max|v| each (+ 2^-25 per
//     key), with twice the float terms (accumulation order and rounding unspecified);
//   embed, add, gather, KV cache, top_k: identical (up to one rounding for fused multiply-adds).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/dtype.h"
#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/quant.h"
#include "tests/kernels/cuda_emu/cuda_test_backend.h"
#include "tools/op_data/op_data.h"
#ifdef EMBER_CUDA_EMU
#include "kernels/cuda/emu/emu.h"
#endif

using namespace ember;
using namespace ember::opdata;

namespace {

constexpr double kU = 1.0 / (1 << 24);

// The seed stream of tools/op_data (what ember-gpu-check draws from), seeded once.
uint32_t initial_seed() {
    if (const char* s = std::getenv("EMBER_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
    const auto seed = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::printf("test_cuda ops (%s): EMBER_TEST_SEED=%u\n", test::cuda_test_flavour(), seed);
    return seed;
}
[[maybe_unused]] const bool g_seeded = (opdata::set_seed(initial_seed()), true);

// Every |got - ref| <= bound (per element; NaN fails). Reports the worst element.
template <class R, class B>
void check_within(const std::string& what, const std::vector<float>& got, const std::vector<R>& ref, const B& bound) {
    REQUIRE(got.size() == ref.size());
    size_t bad = 0, worst = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(double(got[i]) - double(ref[i]));
        const double b = double(bound[i]);
        const double ratio = std::isfinite(e) ? e / std::max(b, 1e-300) : INFINITY;
        if (!(e <= b)) ++bad;
        if (!(ratio <= worst_ratio)) {
            worst_ratio = ratio;
            worst = i;
        }
    }
    INFO(what << ": " << bad << " of " << got.size() << " elements outside the bound; worst [" << worst << "] got "
              << got[worst] << " ref " << double(ref[worst]) << " bound " << double(bound[worst]) << " (x"
              << worst_ratio << ")");
    CHECK(bad == 0);
}

struct Backends {
    std::unique_ptr<Backend> cpu = make_cpu_backend(2);
    std::unique_ptr<Backend> gpu = test::make_test_cuda_backend();
};

bool is_quant(DType t) { return t != DType::F32 && t != DType::F16 && t != DType::BF16; }

}  // namespace

// ---- matmul: matvec kernels (n <= 32 quantized, <= 8 float) and the GEMM path ---------------
TEST_CASE("matmul: every weight type, matvec and GEMM paths, vs float64 with derived bounds") {
    Backends be;
    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                           DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};
    for (DType type : types) {
        const bool quant = is_quant(type);
        struct Shape {
            int64_t rows, cols;
        };
        // Float types also get cols % 8 != 0 (the scalar-load kernel); quantized rows must be
        // whole blocks (256 for K-quants). Q4_0/Q5_0/Q8_0 are repacked at load into row tiles
        // (kernels/cuda/repack.h): matvec_t_kernel and the GEMM from it, at widths with a
        // partial last group of 32 chunks (96, 1152: Gemma 3) or whole ones (2048), row counts
        // with a partial last tile of 8 rows. So are Q4_K rows of whole super-block pairs (1536:
        // 3 pairs, a half warp-step at the end) and Q6_K rows of whole 8-super-block units
        // (matvec_kquant.cu).
        std::vector<Shape> shapes =
            quant ? std::vector<Shape>{{67, 256}, {130, 768}} : std::vector<Shape>{{67, 256}, {45, 100}};
        if (type == DType::Q4_0 || type == DType::Q5_0 || type == DType::Q8_0)
            shapes.insert(shapes.end(), {{37, 2048}, {21, 1152}, {13, 96}});
        if (type == DType::Q4_K) shapes.insert(shapes.end(), {{36, 1536}, {21, 4096}});
        if (type == DType::Q6_K) shapes.insert(shapes.end(), {{37, 2048}, {20, 4096}});
        const std::vector<int64_t> ns =
            quant ? std::vector<int64_t>{1, 2, 3, 5, 8, 13, 32, 33} : std::vector<int64_t>{1, 2, 3, 5, 8, 9, 20};
        for (const Shape& s : shapes) {
            const auto wbytes = random_weights(type, s.rows, s.cols);
            const std::vector<float> wf = dequantize_matrix(type, wbytes.data(), s.rows, s.cols);
            Tensor wg = be.gpu->load_weight(wbytes.data(), type, s.cols, s.rows, "w");
            for (int64_t n : ns) {
                const bool with_bias = n % 2 == 1;
                const auto x = random_floats(static_cast<size_t>(n * s.cols));
                const auto bias = random_floats(static_cast<size_t>(s.rows));
                Tensor xg = put(*be.gpu, x, s.cols, n), bg = put(*be.gpu, bias, s.rows, 1);
                Tensor yg = be.gpu->alloc(MemoryKind::Activations, DType::F32, s.rows, n, "y");
                poison(*be.gpu, yg);
                be.gpu->matmul(wg, xg, yg, with_bias ? &bg : nullptr);
                const auto y = get(*be.gpu, yg);
                const bool matvec = n <= (quant ? 32 : 8);
                std::vector<double> ref(y.size()), bound(y.size());
                for (int64_t t = 0; t < n; ++t) {
                    const float* xr = x.data() + t * s.cols;
                    std::vector<double> dq(static_cast<size_t>(s.cols / 32 + 1), 0.0);  // d / 2 of each 32-chunk
                    for (int64_t c = 0; c < s.cols; ++c)
                        dq[static_cast<size_t>(c / 32)] =
                            std::max(dq[static_cast<size_t>(c / 32)], std::fabs(double(xr[c])) / 127.0 / 2.0);
                    for (int64_t r = 0; r < s.rows; ++r) {
                        const float* wr = wf.data() + r * s.cols;
                        double acc = with_bias ? bias[static_cast<size_t>(r)] : 0.0, mag = 0, qerr = 0;
                        for (int64_t c = 0; c < s.cols; ++c) {
                            acc += double(wr[c]) * xr[c];
                            mag += std::fabs(double(wr[c]) * xr[c]);
                            qerr += std::fabs(double(wr[c])) * dq[static_cast<size_t>(c / 32)];
                        }
                        if (with_bias) mag += std::fabs(bias[static_cast<size_t>(r)]);
                        double b;
                        if (quant && matvec) b = qerr * 1.001 + 4e-6 * mag;
                        else if (matvec || type == DType::F32) b = 2.0 * s.cols * kU * mag;
                        else
                            b = (std::ldexp(1.0, -11) * (quant || type == DType::BF16 ? 2 : 1) + s.cols * kU) * mag *
                                    1.01 +
                                s.cols * std::ldexp(1.0, -25) * 0.2;  // FP16 subnormals of small products
                        ref[static_cast<size_t>(t * s.rows + r)] = acc;
                        bound[static_cast<size_t>(t * s.rows + r)] = b + 1e-30;
                    }
                }
                check_within("matmul " + std::string(dtype_name(type)) + " " + std::to_string(s.rows) + "x" +
                                 std::to_string(s.cols) + " n=" + std::to_string(n) + (matvec ? " matvec" : " gemm"),
                             y, ref, bound);
                for (Tensor* t : {&xg, &bg, &yg}) be.gpu->free(*t);
            }
            be.gpu->free(wg);
        }
    }
}

// ---- mixture of experts ---------------------------------------------------------------------------
// moe_route: the CPU backend's experts exactly (logits drawn a permutation apart: no rounding
// reorders them), weights within 1e-5 relative (expf differs in the last bits). moe_matmul:
// matmul's derived bounds per slot (quantized matvec, FP32), against float64 of the slot's
// expert. moe_combine: k - 1 rounded additions, k u sum|w y|.
TEST_CASE("moe_route, moe_matmul (every weight type, bias, shared or per-slot x), moe_combine, glu of halves") {
    Backends be;
    const int64_t n_expert = 16, T = 9, k = 4, cols = 256;
    std::mt19937 rng(next_seed());
    std::vector<float> logits(static_cast<size_t>(T * n_expert));
    for (int64_t t = 0; t < T; ++t) {
        std::vector<int> perm(static_cast<size_t>(n_expert));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t i = 0; i < n_expert; ++i)
            logits[static_cast<size_t>(t * n_expert + i)] = 0.3f * float(perm[static_cast<size_t>(i)] - 8);
    }
    std::vector<int32_t> ids_cpu(static_cast<size_t>(T * k)), ids_gpu(ids_cpu.size());
    std::vector<float> w_cpu, w_gpu;
    Tensor ids_g = be.gpu->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
    Tensor wts_g = be.gpu->alloc(MemoryKind::Activations, DType::F32, k, T, "w");
    for (MoeGating gating : {MoeGating::SoftmaxTopK, MoeGating::Softmax}) {  // Softmax last: its ids are used below
        const MoeRouting r{static_cast<int32_t>(k), gating, gating == MoeGating::Softmax, 1.5f};
        Tensor lc = put(*be.cpu, logits, n_expert, T), lg = put(*be.gpu, logits, n_expert, T);
        Tensor ids_c = be.cpu->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
        Tensor wts_c = be.cpu->alloc(MemoryKind::Activations, DType::F32, k, T, "w");
        be.cpu->moe_route(lc, r, ids_c, wts_c);
        be.gpu->moe_route(lg, r, ids_g, wts_g);
        be.cpu->download(ids_c, ids_cpu.data(), ids_c.bytes());
        be.gpu->download(ids_g, ids_gpu.data(), ids_g.bytes());
        CHECK(ids_cpu == ids_gpu);
        w_cpu = get(*be.cpu, wts_c), w_gpu = get(*be.gpu, wts_g);
        std::vector<double> bound(w_cpu.size());
        for (size_t i = 0; i < bound.size(); ++i) bound[i] = 1e-5 * std::fabs(w_cpu[i]) + 1e-30;
        check_within("moe_route gating " + std::to_string(int(gating)), w_gpu, w_cpu, bound);
        for (Tensor* t : {&lc, &ids_c, &wts_c}) be.cpu->free(*t);
        be.gpu->free(lg);
    }
    {  // gemma4's per-expert output scale on the weights: the CPU's product exactly
        std::vector<float> factors(static_cast<size_t>(n_expert));
        for (int64_t e = 0; e < n_expert; ++e) factors[static_cast<size_t>(e)] = 0.5f + 0.125f * float(e);
        const MoeRouting r{static_cast<int32_t>(k), MoeGating::Softmax, true, 1.0f};
        Tensor lc = put(*be.cpu, logits, n_expert, T), lg = put(*be.gpu, logits, n_expert, T);
        Tensor sc = put(*be.cpu, factors, n_expert, 1), sg = put(*be.gpu, factors, n_expert, 1);
        Tensor ids_c = be.cpu->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
        Tensor wts_c = be.cpu->alloc(MemoryKind::Activations, DType::F32, k, T, "w");
        Tensor ids_s = be.gpu->alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
        Tensor wts_s = be.gpu->alloc(MemoryKind::Activations, DType::F32, k, T, "w");
        be.cpu->moe_route(lc, r, ids_c, wts_c, &sc);
        be.gpu->moe_route(lg, r, ids_s, wts_s, &sg);
        std::vector<int32_t> ic(static_cast<size_t>(T * k)), ig(ic.size());
        be.cpu->download(ids_c, ic.data(), ids_c.bytes());
        be.gpu->download(ids_s, ig.data(), ids_s.bytes());
        CHECK(ic == ig);
        const std::vector<float> wc = get(*be.cpu, wts_c), wg = get(*be.gpu, wts_s);
        std::vector<double> bound(wc.size());
        for (size_t i = 0; i < bound.size(); ++i) bound[i] = 1e-5 * std::fabs(wc[i]) + 1e-30;
        check_within("moe_route expert_scale", wg, wc, bound);
        for (Tensor* t : {&lc, &sc, &ids_c, &wts_c}) be.cpu->free(*t);
        for (Tensor* t : {&lg, &sg, &ids_s, &wts_s}) be.gpu->free(*t);
    }
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                       DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4}) {
        const int64_t rows = 40;
        const auto wbytes = random_weights(type, n_expert * rows, cols);
        const std::vector<float> wf = dequantize_matrix(type, wbytes.data(), n_expert * rows, cols);
        Tensor wg = be.gpu->load_expert_weight(wbytes.data(), type, cols, rows, n_expert, "exps");
        for (bool per_slot : {false, true}) {
            const int64_t x_rows = per_slot ? T * k : T;
            const auto x = random_floats(static_cast<size_t>(x_rows * cols));
            const auto bias = random_floats(static_cast<size_t>(n_expert * rows));
            Tensor xg = put(*be.gpu, x, cols, x_rows), bg = put(*be.gpu, bias, rows, n_expert);
            Tensor yg = be.gpu->alloc(MemoryKind::Activations, DType::F32, rows, T * k, "y");
            poison(*be.gpu, yg);
            be.gpu->moe_matmul(wg, n_expert, xg, ids_g, yg, per_slot ? &bg : nullptr);
            const auto y = get(*be.gpu, yg);
            std::vector<double> ref(y.size()), bound(y.size());
            for (int64_t s = 0; s < T * k; ++s) {
                const int64_t e = ids_cpu[static_cast<size_t>(s)];
                const float* xr = x.data() + (per_slot ? s : s / k) * cols;
                for (int64_t r = 0; r < rows; ++r) {
                    const float* wr = wf.data() + (e * rows + r) * cols;
                    double acc = per_slot ? bias[static_cast<size_t>(e * rows + r)] : 0.0, mag = std::fabs(acc),
                           qerr = 0;
                    for (int64_t c = 0; c < cols; ++c) {
                        double dq = 0;  // d / 2 of x's 32-chunk
                        for (int64_t i = c / 32 * 32; i < c / 32 * 32 + 32; ++i)
                            dq = std::max(dq, std::fabs(double(xr[i])) / 127.0 / 2.0);
                        acc += double(wr[c]) * xr[c];
                        mag += std::fabs(double(wr[c]) * xr[c]);
                        qerr += std::fabs(double(wr[c])) * dq;
                    }
                    const size_t i = static_cast<size_t>(s * rows + r);
                    ref[i] = acc;
                    bound[i] = (is_quant(type) ? qerr * 1.001 + 4e-6 * mag : 2.0 * cols * kU * mag) + 1e-30;
                }
            }
            check_within("moe_matmul " + std::string(dtype_name(type)) + (per_slot ? " per slot" : " shared x"), y, ref,
                         bound);
            for (Tensor* t : {&xg, &bg, &yg}) be.gpu->free(*t);
        }
        be.gpu->free(wg);
    }
    const int64_t n = 100;
    const auto yv = random_floats(static_cast<size_t>(T * k * n));
    Tensor yg = put(*be.gpu, yv, n, T * k), og = be.gpu->alloc(MemoryKind::Activations, DType::F32, n, T, "out");
    poison(*be.gpu, og);
    be.gpu->moe_combine(yg, wts_g, og);
    const auto out = get(*be.gpu, og);
    std::vector<double> ref(out.size()), bound(out.size());
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < n; ++c) {
            double acc = 0, mag = 0;
            for (int64_t j = 0; j < k; ++j) {
                const double p =
                    double(w_gpu[static_cast<size_t>(t * k + j)]) * yv[static_cast<size_t>((t * k + j) * n + c)];
                acc += p;
                mag += std::fabs(p);
            }
            ref[static_cast<size_t>(t * n + c)] = acc;
            bound[static_cast<size_t>(t * n + c)] = double(k) * kU * mag + 1e-30;
        }
    check_within("moe_combine", out, ref, bound);
    for (Tensor* t : {&yg, &og, &ids_g, &wts_g}) be.gpu->free(*t);

    // glu of a fused gate+up result's halves (slice_cols): the contiguous kernel's bits.
    const int64_t ff = 96, rows = T * k;
    const auto gu = random_floats(static_cast<size_t>(rows * 2 * ff));
    std::vector<float> gate_v, up_v;
    for (int64_t r = 0; r < rows; ++r) {
        gate_v.insert(gate_v.end(), gu.begin() + r * 2 * ff, gu.begin() + r * 2 * ff + ff);
        up_v.insert(up_v.end(), gu.begin() + r * 2 * ff + ff, gu.begin() + (r + 1) * 2 * ff);
    }
    Tensor fused = put(*be.gpu, gu, 2 * ff, rows), gate = put(*be.gpu, gate_v, ff, rows),
           up = put(*be.gpu, up_v, ff, rows);
    Tensor o1 = be.gpu->alloc(MemoryKind::Activations, DType::F32, ff, rows, "o1");
    Tensor o2 = be.gpu->alloc(MemoryKind::Activations, DType::F32, ff, rows, "o2");
    for (bool gelu : {false, true}) {
        be.gpu->glu(fused.slice_cols(0, ff), fused.slice_cols(ff, ff), gelu, o1);
        be.gpu->glu(gate, up, gelu, o2);
        const auto a = get(*be.gpu, o1), b = get(*be.gpu, o2);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
    for (Tensor* t : {&fused, &gate, &up, &o1, &o2}) be.gpu->free(*t);
}

// ---- moe_matmul grouped by expert ------------------------------------------------------------
// Above 64 slots the CUDA backend sorts the slots by expert on the device and reads each
// expert's weights once per 16 slots (moe.cu), on one of two paths:
//  - tensor cores when the tiles are full on average (slots >= 16 n_expert, weights not F32):
//    FP16 x FP16 -> FP32 like the prefill GEMM. Against the exact product: x and the
//    (dequantized) weights rounded to FP16, 2^-11 relative each (F16 weights exact), FP32
//    accumulation in any order, cols u, all times sum|w x|; plus 2^-25 (|w| + |x|) per
//    column for values in FP16's subnormal range.
//  - otherwise the per-slot path's arithmetic in the same order: bit for bit the per-slot
//    path's result (reached by calling moe_matmul on pieces of <= 64 slots), and against the
//    exact product sum_c |w_c| (dx_c / 2) for its 8-bit activation blocks of 32 + 4e-6
//    sum|w x| (quantized), 2 cols u sum|w x| (float).
// Against the CPU backend's moe_matmul (its own grouping; 8-bit activation blocks of 32, or 16
// for Q2_K/Q3_K/Q6_K; FP32 FMA for float weights): the GPU's bound plus the CPU's, per element.
namespace {

struct MoeCase {
    int64_t T, k, n_expert, rows, cols;  // cols not a multiple of 256: types of 32-element blocks only
    int pattern;  // 0: experts e % 3 == 1 never chosen, 1: every slot the last expert, 2: any expert
    bool per_slot, bias;
};

// ids (T x k): distinct experts per token where the pattern allows, as routing gives.
std::vector<int32_t> moe_case_ids(const MoeCase& c, std::mt19937& rng) {
    std::vector<int32_t> allowed;
    for (int32_t e = 0; e < c.n_expert; ++e)
        if (c.pattern == 2 || (c.pattern == 0 && e % 3 != 1) || (c.pattern == 1 && e == c.n_expert - 1))
            allowed.push_back(e);
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < c.T; ++t) {
        std::shuffle(allowed.begin(), allowed.end(), rng);
        for (int64_t j = 0; j < c.k; ++j) ids.push_back(allowed[static_cast<size_t>(j) % allowed.size()]);
    }
    return ids;
}

Tensor put_ids(Backend& b, const std::vector<int32_t>& ids, int64_t k) {
    const int64_t T = static_cast<int64_t>(ids.size()) / k;
    Tensor t = b.alloc(MemoryKind::Activations, DType::I32, k, T, "ids");
    b.upload(t, ids.data(), ids.size() * sizeof(int32_t));
    return t;
}

// The per-slot path's result: moe_matmul on pieces of <= 64 slots (whole tokens).
std::vector<float> moe_per_slot(Backend& gpu, const Tensor& w, const MoeCase& c, const std::vector<float>& x,
                                int64_t cols, const std::vector<int32_t>& ids, const Tensor* bias) {
    std::vector<float> out;
    const int64_t piece = 64 / c.k;
    for (int64_t t0 = 0; t0 < c.T; t0 += piece) {
        const int64_t m = std::min(piece, c.T - t0), xr0 = c.per_slot ? t0 * c.k : t0, xn = c.per_slot ? m * c.k : m;
        const std::vector<float> xs(x.begin() + xr0 * cols, x.begin() + (xr0 + xn) * cols);
        const std::vector<int32_t> is(ids.begin() + t0 * c.k, ids.begin() + (t0 + m) * c.k);
        Tensor xg = put(gpu, xs, cols, xn), ig = put_ids(gpu, is, c.k);
        Tensor yg = gpu.alloc(MemoryKind::Activations, DType::F32, c.rows, m * c.k, "y");
        gpu.moe_matmul(w, c.n_expert, xg, ig, yg, bias);
        const auto y = get(gpu, yg);
        out.insert(out.end(), y.begin(), y.end());
        for (Tensor* t : {&xg, &ig, &yg}) gpu.free(*t);
    }
    return out;
}

// Whether the CUDA backend takes the tensor-core path (moe.cu's moe_grouped_tensor_cores,
// which the GPU flavour of this test cannot link: it lives in the module).
bool moe_tensor_cores(DType type, int64_t cols, int64_t slots, int64_t n_expert) {
    return type != DType::F32 && cols % 32 == 0 && slots >= 16 * n_expert;
}

// Per element of y: the CPU-vs-GPU bound described above.
std::vector<double> moe_cpu_bound(DType type, const MoeCase& c, const std::vector<float>& wf,
                                  const std::vector<float>& x, int64_t cols, const std::vector<int32_t>& ids,
                                  const std::vector<float>& bias, bool tc) {
    const bool quant = is_quant(type), w_rounded = quant || type == DType::BF16;
    const int64_t g_cpu = type == DType::Q2_K || type == DType::Q3_K || type == DType::Q6_K ? 16 : 32;
    std::vector<double> bound(static_cast<size_t>(c.T * c.k * c.rows));
    for (int64_t s = 0; s < c.T * c.k; ++s) {
        const float* xr = x.data() + (c.per_slot ? s : s / c.k) * cols;
        std::vector<double> dg(static_cast<size_t>(cols / 16), 0.0);  // max|x| per 16 elements
        for (int64_t i = 0; i < cols; ++i)
            dg[static_cast<size_t>(i / 16)] = std::max(dg[static_cast<size_t>(i / 16)], std::fabs(double(xr[i])));
        const int64_t e = ids[static_cast<size_t>(s)];
        for (int64_t r = 0; r < c.rows; ++r) {
            const float* wr = wf.data() + (e * c.rows + r) * cols;
            double mag = c.bias ? std::fabs(double(bias[static_cast<size_t>(e * c.rows + r)])) : 0.0;
            double q_gpu = 0, q_cpu = 0, sub = 0;
            for (int64_t i = 0; i < cols; ++i) {
                const double d32 =
                    std::max(dg[static_cast<size_t>(i / 32 * 2)], dg[static_cast<size_t>(i / 32 * 2 + 1)]);
                const double dc = g_cpu == 16 ? dg[static_cast<size_t>(i / 16)] : d32;
                mag += std::fabs(double(wr[i]) * xr[i]);
                q_gpu += std::fabs(double(wr[i])) * d32 / 127.0 / 2.0;
                q_cpu += std::fabs(double(wr[i])) * dc / 127.0 / 2.0;
                sub += (std::fabs(double(wr[i])) + std::fabs(double(xr[i]))) * std::ldexp(1.0, -25);
            }
            const double gpu = tc      ? ((std::ldexp(1.0, -11) * (w_rounded ? 2 : 1) + cols * kU) * mag + sub) * 1.01
                               : quant ? q_gpu * 1.001 + 4e-6 * mag
                                       : 2.0 * cols * kU * mag;
            const double cpu = quant ? q_cpu * 1.001 + 4e-6 * mag : 2.0 * cols * kU * mag;
            bound[static_cast<size_t>(s * c.rows + r)] = gpu + cpu + 1e-30;
        }
    }
    return bound;
}

void check_moe_grouped(Backends& be, DType type, const MoeCase& c, std::mt19937& rng) {
    const int64_t cols = c.cols;
    const auto wbytes = random_weights(type, c.n_expert * c.rows, cols);
    const std::vector<float> wf = dequantize_matrix(type, wbytes.data(), c.n_expert * c.rows, cols);
    const std::vector<int32_t> ids = moe_case_ids(c, rng);
    const int64_t slots = c.T * c.k, x_rows = c.per_slot ? slots : c.T;
    const auto x = random_floats(static_cast<size_t>(x_rows * cols));
    const auto bias = random_floats(static_cast<size_t>(c.n_expert * c.rows));
    Tensor wg = be.gpu->load_expert_weight(wbytes.data(), type, cols, c.rows, c.n_expert, "exps");
    Tensor xg = put(*be.gpu, x, cols, x_rows), ig = put_ids(*be.gpu, ids, c.k);
    Tensor bg = put(*be.gpu, bias, c.rows, c.n_expert);
    Tensor yg = be.gpu->alloc(MemoryKind::Activations, DType::F32, c.rows, slots, "y");
    poison(*be.gpu, yg);
    be.gpu->moe_matmul(wg, c.n_expert, xg, ig, yg, c.bias ? &bg : nullptr);
    const auto y = get(*be.gpu, yg);
    const auto y_slot = moe_per_slot(*be.gpu, wg, c, x, cols, ids, c.bias ? &bg : nullptr);

    Tensor wc = be.cpu->load_expert_weight(wbytes.data(), type, cols, c.rows, c.n_expert, "exps");
    Tensor xc = put(*be.cpu, x, cols, x_rows), ic = put_ids(*be.cpu, ids, c.k);
    Tensor bc = put(*be.cpu, bias, c.rows, c.n_expert);
    Tensor yc = be.cpu->alloc(MemoryKind::Activations, DType::F32, c.rows, slots, "y");
    be.cpu->moe_matmul(wc, c.n_expert, xc, ic, yc, c.bias ? &bc : nullptr);
    const auto y_cpu = get(*be.cpu, yc);

    const bool tc = moe_tensor_cores(type, cols, slots, c.n_expert);
    const std::string what = std::string(tc ? "tensor cores " : "") + std::string(dtype_name(type)) +
                             " T=" + std::to_string(c.T) + " k=" + std::to_string(c.k) +
                             " experts=" + std::to_string(c.n_expert) + " rows=" + std::to_string(c.rows) +
                             " pattern " + std::to_string(c.pattern) + (c.per_slot ? " x per slot" : " x per token") +
                             (c.bias ? " bias" : "");
    INFO("moe_matmul grouped " << what);
    REQUIRE(y_slot.size() == y.size());
    if (!tc) CHECK(std::memcmp(y.data(), y_slot.data(), y.size() * sizeof(float)) == 0);
    check_within("moe_matmul grouped vs CPU " + what, y, y_cpu, moe_cpu_bound(type, c, wf, x, cols, ids, bias, tc));
    for (Tensor* t : {&wg, &xg, &ig, &bg, &yg}) be.gpu->free(*t);
    for (Tensor* t : {&wc, &xc, &ic, &bc, &yc}) be.cpu->free(*t);
}

}  // namespace

TEST_CASE("moe_matmul grouped by expert: the per-slot path's bits or the FP16 bound, the CPU's within bounds") {
    Backends be;
    std::mt19937 rng(next_seed());
    // rows 42 / 37 / 13: not multiples of the 4- or 64-row blocks; slot counts not multiples
    // of 16. Tensor cores (>= 16 slots per expert on average) in the first three, else the
    // per-slot arithmetic (and always for F32).
    const MoeCase cases[] = {
        {64, 2, 8, 42, 256, 0, false, false},    // experts 1, 4, 7 with no slots; 128 slots
        {100, 8, 32, 13, 256, 1, false, true},   // one expert takes all 800 slots (13 rows: < one CPU panel)
        {72, 8, 16, 42, 256, 0, true, false},    // 576 slots, 11 of 16 experts, x per slot
        {200, 4, 128, 37, 256, 2, true, true},   // 800 slots over 128 experts (~6 each), x per slot, bias
        {130, 4, 64, 42, 256, 0, false, false},  // 520 slots, 43 of 64 experts
        {40, 8, 128, 13, 256, 1, false, true},   // one expert takes all 320 slots
        {64, 4, 8, 42, 96, 2, true, true},       // 96 columns: the tensor cores' last step half zeros
    };
    // Every type in Release; the sanitizer build (-O1, emulated tensor-core tiles ~10x slower)
    // takes one of each block layout (float, 256-value k-quant, MXFP4's 17-byte blocks) so the
    // asan stage stays short: every path runs, the per-type arithmetic is the Release build's
    // to check.
#if defined(NDEBUG)
    const std::vector<DType> types = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                      DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                      DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};
#else
    const std::vector<DType> types = {DType::F32, DType::Q4_K, DType::MXFP4};
#endif
    for (DType type : types)
        for (const MoeCase& c : cases)
            if (c.cols % dtype_info(static_cast<uint32_t>(type))->block_elems == 0) check_moe_grouped(be, type, c, rng);
}

// A slot whose expert id is out of range gets a NaN row on both grouped paths too (the
// per-slot path's behaviour; the CPU backend throws), the other slots their values.
TEST_CASE("moe_matmul grouped by expert: a bad expert id gives a NaN row") {
    Backends be;
    const int64_t n_expert = 8, rows = 6, cols = 64, k = 2;
    const auto wbytes = random_weights(DType::Q8_0, n_expert * rows, cols);
    Tensor wg = be.gpu->load_expert_weight(wbytes.data(), DType::Q8_0, cols, rows, n_expert, "exps");
    for (int64_t T : {40, 80}) {  // 80 slots: 8-bit path; 160: tensor cores
        std::vector<int32_t> ids(static_cast<size_t>(T * k));
        for (size_t s = 0; s < ids.size(); ++s) ids[s] = static_cast<int32_t>(s % n_expert);
        ids[5] = -1;
        ids[70] = 8;
        const auto x = random_floats(static_cast<size_t>(T * cols));
        Tensor xg = put(*be.gpu, x, cols, T), ig = put_ids(*be.gpu, ids, k);
        Tensor yg = be.gpu->alloc(MemoryKind::Activations, DType::F32, rows, T * k, "y");
        be.gpu->moe_matmul(wg, n_expert, xg, ig, yg);
        const auto y = get(*be.gpu, yg);
        for (int64_t s = 0; s < T * k; ++s)
            for (int64_t r = 0; r < rows; ++r) {
                const bool bad = s == 5 || s == 70;
                CHECK(std::isnan(y[static_cast<size_t>(s * rows + r)]) == bad);
            }
        for (Tensor* t : {&xg, &ig, &yg}) be.gpu->free(*t);
    }
    be.gpu->free(wg);
}

// Row tiles and the K-quant layouts (kernels/cuda/repack.h) rearrange a weight's bytes without
// adding any: the memory report (what the fit planner's bytes are checked against) grows by
// what the file's rows take, the same as an expert matrix that stays in GGUF blocks.
TEST_CASE("repacked weights take exactly the file's bytes on the device") {
    Backends be;
    const std::pair<DType, int64_t> cases[] = {
        {DType::Q4_0, 1152}, {DType::Q5_0, 1152}, {DType::Q8_0, 1152}, {DType::Q4_K, 1536}, {DType::Q6_K, 2048}};
    for (const auto& [type, cols] : cases) {
        CAPTURE(dtype_name(type));
        const int64_t rows = 21;
        const auto wbytes = random_weights(type, rows, cols);
        const auto weights = [&] { return be.gpu->memory().bytes[static_cast<int>(MemoryKind::Weights)]; };
        const uint64_t before = weights();
        Tensor tiled = be.gpu->load_weight(wbytes.data(), type, cols, rows, "w");
        const uint64_t tiled_bytes = weights() - before;
        Tensor gguf = be.gpu->load_expert_weight(wbytes.data(), type, cols, rows, 1, "exps");
        CHECK(tiled.layout != 0);
        CHECK(gguf.layout == 0);
        CHECK(tiled.bytes() == wbytes.size());
        CHECK(tiled.row_bytes == gguf.row_bytes);
        CHECK(tiled_bytes == weights() - before - tiled_bytes);
        be.gpu->free(tiled);
        be.gpu->free(gguf);
    }
}

// ---- embed ------------------------------------------------------------------------------------
TEST_CASE("embed: every table type vs the CPU backend") {
    Backends be;
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                       DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4}) {
        // Q4_0/Q5_0/Q8_0 tables are repacked at load (kernels/cuda/repack.h: row tiles; 1152
        // wide: a partial group of chunks; 300 rows: a partial last tile); so are Q4_K tables
        // of 512-wide rows and Q6_K of 2048-wide rows.
        const bool repacked = type == DType::Q4_0 || type == DType::Q5_0 || type == DType::Q8_0;
        const int64_t vocab = 300, n = 17;
        const int64_t cols = repacked ? 1152 : type == DType::Q6_K ? 2048 : is_quant(type) ? 512 : 100;
        const auto table = random_weights(type, vocab, cols);
        Tensor tc = be.cpu->load_weight(table.data(), type, cols, vocab, "tok_embd");
        Tensor tg = be.gpu->load_weight(table.data(), type, cols, vocab, "tok_embd");
        Batch b = simple_batch(n);
        std::mt19937 rng(next_seed());
        for (auto& t : b.tokens) t = static_cast<int32_t>(rng() % vocab);
        b.tokens[0] = 0;
        b.tokens[1] = static_cast<int32_t>(vocab - 1);
        be.cpu->set_batch(b.info());
        be.gpu->set_batch(b.info());
        for (float scale : {1.0f, 3.7f}) {
            Tensor oc = be.cpu->alloc(MemoryKind::Activations, DType::F32, cols, n, "x");
            Tensor og = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, n, "x");
            poison(*be.gpu, og);
            be.cpu->embed(tc, scale, oc);
            be.gpu->embed(tg, scale, og);
            const auto g = get(*be.gpu, og), c = get(*be.cpu, oc);
            // One rounding apart at most (a fused multiply-add of scale * q + offset on the
            // GPU): 2 u of the row's largest value, times the scale's rounding.
            std::vector<double> bound(c.size());
            for (int64_t t = 0; t < n; ++t) {
                double m = 0;
                for (int64_t i = 0; i < cols; ++i)
                    m = std::max(m, std::fabs(double(c[static_cast<size_t>(t * cols + i)])));
                for (int64_t i = 0; i < cols; ++i) bound[static_cast<size_t>(t * cols + i)] = 4 * kU * m + 1e-30;
            }
            check_within("embed " + std::string(dtype_name(type)) + " scale " + std::to_string(scale), g, c, bound);
            be.cpu->free(oc);
            be.gpu->free(og);
        }
        be.cpu->free(tc);
        be.gpu->free(tg);
    }
}

// ---- rms_norm ---------------------------------------------------------------------------------
TEST_CASE("rms_norm: shapes incl. odd widths and in place, vs float64") {
    Backends be;
    struct Case {
        int64_t rows, cols;
        float eps;
        bool in_place;
    };
    for (const Case& c : {Case{9, 4096, 1e-5f, false}, Case{160, 128, 1e-6f, true}, Case{7, 2048, 1e-6f, true},
                          Case{40, 8, 1e-5f, false}, Case{5, 100, 1e-6f, false}, Case{3, 640, 1e-6f, true},
                          Case{2, 1000, 1e-5f, false}}) {
        const auto x = random_floats(static_cast<size_t>(c.rows * c.cols), 30.0f);
        auto w = random_floats(static_cast<size_t>(c.cols));
        for (auto& v : w) v += 1.0f;
        Tensor xg = put(*be.gpu, x, c.cols, c.rows);
        Tensor wg = be.gpu->load_weight(w.data(), DType::F32, c.cols, 1, "norm");
        Tensor yg = c.in_place ? xg : be.gpu->alloc(MemoryKind::Activations, DType::F32, c.cols, c.rows, "y");
        if (!c.in_place) poison(*be.gpu, yg);
        be.gpu->rms_norm(xg, wg, c.eps, yg);
        const auto g = get(*be.gpu, yg);
        std::vector<double> ref(g.size()), bound(g.size());
        for (int64_t r = 0; r < c.rows; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < c.cols; ++i) ss += double(x[r * c.cols + i]) * x[r * c.cols + i];
            const double k = 1.0 / std::sqrt(ss / c.cols + c.eps);
            for (int64_t i = 0; i < c.cols; ++i) {
                const size_t j = static_cast<size_t>(r * c.cols + i);
                ref[j] = x[j] * k * w[static_cast<size_t>(i)];
                // sum of squares: cols u; 1/sqrt: 2 u; two products: 2 u.
                bound[j] = std::fabs(ref[j]) * (c.cols + 6) * kU + 1e-30;
            }
        }
        check_within("rms_norm " + std::to_string(c.rows) + "x" + std::to_string(c.cols), g, ref, bound);
        be.gpu->free(xg);
        if (!c.in_place) be.gpu->free(yg);
        be.gpu->free(wg);
    }
}

// The fused residual add + norm: bit for bit add() and then rms_norm() on the same backend
// (the layers' path), for widths below and above one element per thread.
TEST_CASE("add_rms_norm: the same bits as add then rms_norm") {
    Backends be;
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{16, 576}, {3, 4096}, {5, 33}, {1, 1152}}) {
        const auto x = random_floats(static_cast<size_t>(rows * cols), 30.0f), r = random_floats(x.size(), 10.0f);
        auto w = random_floats(static_cast<size_t>(cols));
        for (auto& v : w) v += 1.0f;
        Tensor x1 = put(*be.gpu, x, cols, rows), x2 = put(*be.gpu, x, cols, rows), rg = put(*be.gpu, r, cols, rows);
        Tensor wg = be.gpu->load_weight(w.data(), DType::F32, cols, 1, "norm");
        Tensor y1 = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, rows, "y1");
        Tensor y2 = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, rows, "y2");
        poison(*be.gpu, y1);
        be.gpu->add_rms_norm(x1, rg, wg, 1e-6f, y1);
        be.gpu->add(x2, rg);
        be.gpu->rms_norm(x2, wg, 1e-6f, y2);
        CAPTURE(rows);
        CAPTURE(cols);
        const auto a1 = get(*be.gpu, x1), a2 = get(*be.gpu, x2), b1 = get(*be.gpu, y1), b2 = get(*be.gpu, y2);
        REQUIRE(std::memcmp(a1.data(), a2.data(), a1.size() * 4) == 0);
        REQUIRE(std::memcmp(b1.data(), b2.data(), b1.size() * 4) == 0);
        for (Tensor* t : {&x1, &x2, &rg, &wg, &y1, &y2}) be.gpu->free(*t);
    }
}

// ---- rope -------------------------------------------------------------------------------------
TEST_CASE(
    "rope: normal/NeoX, partial rotation, scaling, freq factors, YaRN, reverse, head dims 64/128/256, vs float64") {
    Backends be;
    struct Case {
        int n_heads, head_dim, n_rot;
        bool neox;
        float base, scale;
        bool factors;
        bool yarn = false;  // gpt-oss: ext_factor 1 over a 4096-token original context
    };
    for (const Case& c :
         {Case{8, 128, 128, false, 10000.0f, 1.0f, false}, Case{8, 128, 128, true, 1e6f, 1.0f, false},
          Case{4, 128, 64, false, 10000.0f, 0.25f, false}, Case{9, 64, 64, false, 500000.0f, 1.0f, true},
          Case{2, 256, 256, true, 10000.0f, 0.125f, true}, Case{3, 8, 8, false, 10000.0f, 1.0f, false},
          Case{5, 80, 78, true, 10000.0f, 1.0f, false}, Case{8, 64, 64, true, 150000.0f, 1.0f / 32, false, true},
          Case{3, 128, 96, false, 10000.0f, 0.25f, true, true}})
        for (const bool reverse : {false, true}) {
            const int64_t n = 37;
            const RopeInputs in = random_rope_inputs(n, c.n_rot);
            const std::vector<int32_t>& pos = in.pos;
            const std::vector<float>& factors = in.factors;
            const auto x = random_floats(static_cast<size_t>(n * c.n_heads * c.head_dim));
            be.gpu->set_batch(simple_batch(n, pos).info());
            Tensor xg = put(*be.gpu, x, c.head_dim, n * c.n_heads);
            RopeParams rp = rope_params(c.n_heads, c.head_dim, c.n_rot, c.neox, c.base, c.scale,
                                        c.factors ? factors.data() : nullptr);
            if (c.yarn) rp.ext_factor = 1.0f, rp.attn_factor = 0.9f, rp.n_ctx_orig = 4096;
            rp.reverse = reverse;  // by minus the angle (moving cached keys back)
            // YaRN in float64 (ggml's rope_yarn): the ramp between the correction dims blends the
            // scaled and unscaled angle; cos and sin grow by attn_factor (1 + 0.1 ln(1 / scale)).
            const auto corr = [&](double beta) {
                return c.n_rot * std::log(4096 / (beta * 2 * M_PI)) / (2 * std::log(double(c.base)));
            };
            const double low = std::max(0.0, std::floor(corr(32))), high = std::min(c.n_rot - 1.0, std::ceil(corr(1)));
            const double mscale = c.yarn ? 0.9 * (1 + 0.1 * std::log(1 / double(c.scale))) : 1.0;
            be.gpu->rope(xg, rp);
            const auto g = get(*be.gpu, xg);
            std::vector<double> ref(x.begin(), x.end()), bound(x.size(), 1e-30);
            const int half = c.n_rot / 2;
            for (int64_t t = 0; t < n; ++t) {
                for (int h = 0; h < c.n_heads; ++h) {
                    const size_t row = static_cast<size_t>((t * c.n_heads + h) * c.head_dim);
                    for (int i = 0; i < half; ++i) {
                        const double ff = c.factors ? factors[static_cast<size_t>(i)] : 1.0;
                        const double extrap =
                            pos[static_cast<size_t>(t)] * std::pow(double(c.base), -2.0 * i / c.n_rot) / ff;
                        const double mix =
                            c.yarn ? 1 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low))) : 0.0;
                        const double th = (extrap * c.scale * (1 - mix) + extrap * mix) * (reverse ? -1 : 1);
                        const size_t a = row + static_cast<size_t>(c.neox ? i : 2 * i);
                        const size_t b = row + static_cast<size_t>(c.neox ? i + half : 2 * i + 1);
                        const double x0 = x[a], x1 = x[b];
                        ref[a] = (x0 * std::cos(th) - x1 * std::sin(th)) * mscale;
                        ref[b] = (x0 * std::sin(th) + x1 * std::cos(th)) * mscale;
                        // sin/cos rounded to float (u each), two products and a sum (3 u), and
                        // the angle itself formed in double (exact enough: pos * f < 2^18).
                        bound[a] = bound[b] = 6 * kU * mscale * (std::fabs(x0) + std::fabs(x1)) + 1e-30;
                    }
                }
            }
            char name[96];
            std::snprintf(name, sizeof name, "rope h%d d%d rot%d %s%s", c.n_heads, c.head_dim, c.n_rot,
                          c.neox ? "neox" : "normal", reverse ? " reverse" : "");
            check_within(name, g, ref, bound);
            be.gpu->free(xg);
        }
}

// ---- glu, add, gather -------------------------------------------------------------------------
TEST_CASE("glu (SiLU, GELU-tanh, gpt-oss clamped SwiGLU, in place), add, gather_output_rows") {
    Backends be;
    const int64_t n = 3 * 8192 + 7;
    for (GluAct act : {GluAct::Silu, GluAct::GeluTanh, GluAct::SwigluOai}) {
        const bool gelu = act == GluAct::GeluTanh, oai = act == GluAct::SwigluOai;
        for (bool in_place : {false, true}) {
            // The clamped form's gates and ups reach past its limits (7) on both sides.
            const auto g = random_floats(static_cast<size_t>(n), oai ? 10.0f : 3.0f),
                       u = random_floats(static_cast<size_t>(n), oai ? 10.0f : 1.0f);
            Tensor gg = put(*be.gpu, g, n, 1), ug = put(*be.gpu, u, n, 1);
            Tensor og = in_place ? gg : be.gpu->alloc(MemoryKind::Activations, DType::F32, n, 1, "o");
            if (!in_place) poison(*be.gpu, og);
            be.gpu->glu(gg, ug, act, og);
            const auto o = get(*be.gpu, og);
            std::vector<double> ref(static_cast<size_t>(n)), bound(ref.size());
            for (size_t i = 0; i < ref.size(); ++i) {
                if (oai) {
                    // ggml_swiglu_oai with its float alpha: expf within 2 ulp and a few float
                    // operations (12 u), plus the rounding of alpha * x, which the exponential
                    // turns into a relative error of |alpha x| u (large for very negative x).
                    const double alpha = double(kSwigluOaiAlpha);
                    const double x = std::min(double(g[i]), 7.0), y = std::clamp(double(u[i]), -7.0, 7.0);
                    ref[i] = x / (1.0 + std::exp(-alpha * x)) * (y + 1.0);
                    bound[i] = (12 + std::fabs(alpha * x)) * kU * std::fabs(ref[i]) + 1e-30;
                    continue;
                }
                const double x = g[i];
                const double a = gelu ? 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                                      : x / (1.0 + std::exp(-x));
                ref[i] = a * u[i];
                // expf / tanhf within 2 ulp on the GPU (1 on the host), a handful of float
                // operations; GELU's 1 + tanh cancels for large negative x: bound that part
                // by the tanh's own error times 0.5 |x u|.
                bound[i] = 12 * kU * std::fabs(ref[i]) + (gelu ? 8 * kU * 0.5 * std::fabs(x * u[i]) : 0.0) + 1e-30;
            }
            check_within(std::string(oai    ? "swiglu_oai"
                                     : gelu ? "geglu"
                                            : "swiglu") +
                             (in_place ? " in place" : ""),
                         o, ref, bound);
            be.gpu->free(gg);
            be.gpu->free(ug);
            if (!in_place) be.gpu->free(og);
        }
    }
    {
        const auto a = random_floats(static_cast<size_t>(n)), b = random_floats(static_cast<size_t>(n));
        Tensor ag = put(*be.gpu, a, n, 1), bg = put(*be.gpu, b, n, 1);
        be.gpu->add(ag, bg);
        const auto o = get(*be.gpu, ag);
        std::vector<float> ref(a.size()), zero(a.size(), 0.0f);
        for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] + b[i];
        check_within("add", o, ref, zero);
        be.gpu->free(ag);
        be.gpu->free(bg);
    }
    for (int64_t cols : {2048, 33}) {
        const int64_t rows = 10;
        const auto x = random_floats(static_cast<size_t>(rows * cols));
        Batch b = simple_batch(rows);
        b.output_rows = {9, 0, 4, 4};
        be.gpu->set_batch(b.info());
        Tensor xg = put(*be.gpu, x, cols, rows);
        Tensor og = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, 4, "o");
        poison(*be.gpu, og);
        be.gpu->gather_output_rows(xg, og);
        const auto o = get(*be.gpu, og);
        std::vector<float> ref;
        for (int32_t r : b.output_rows) ref.insert(ref.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
        check_within("gather_output_rows", o, ref, std::vector<float>(ref.size(), 0.0f));
        be.gpu->free(xg);
        be.gpu->free(og);
    }
}

// ---- qwen35: the sigmoid gate, copy of a column view; linear attention not yet on CUDA ------------
// sigmoid(g) * u: expf within 2 ulp and three float operations: 12 u of |result|. copy: exact.
TEST_CASE("qwen35: sigmoid gates and column copy") {
    Backends be;
    const int64_t rows = 37, D = 64;
    const auto both = random_floats(static_cast<size_t>(rows * 2 * D), 3.0f), u = random_floats(size_t(rows * D));
    Tensor bg = put(*be.gpu, both, 2 * D, rows), ug = put(*be.gpu, u, D, rows);
    Tensor gate = be.gpu->alloc(MemoryKind::Activations, DType::F32, D, rows, "gate");
    poison(*be.gpu, gate);
    be.gpu->copy(bg.slice_cols(D, D), gate);
    const auto g = get(*be.gpu, gate);
    std::vector<float> want;
    for (int64_t r = 0; r < rows; ++r)
        want.insert(want.end(), both.begin() + (2 * r + 1) * D, both.begin() + (2 * r + 2) * D);
    check_within("copy", g, want, std::vector<float>(want.size(), 0.0f));
    {  // into a column view: the first half of every row of a copy of `both`, the rest untouched
        Tensor into = put(*be.gpu, both, 2 * D, rows);
        Tensor first = into.slice_cols(0, D);
        be.gpu->copy(gate, first);
        std::vector<float> w = both;
        for (int64_t r = 0; r < rows; ++r) std::copy(g.begin() + r * D, g.begin() + (r + 1) * D, w.begin() + 2 * r * D);
        check_within("copy into a column view", get(*be.gpu, into), w, std::vector<float>(w.size(), 0.0f));
        be.gpu->free(into);
    }
    be.gpu->glu(gate, ug, GluAct::Sigmoid, gate);
    const auto o = get(*be.gpu, gate);
    std::vector<double> ref(o.size()), bound(o.size());
    for (size_t i = 0; i < o.size(); ++i) {
        ref[i] = double(u[i]) / (1.0 + std::exp(-double(g[i])));
        bound[i] = 12 * kU * std::fabs(ref[i]) + 1e-30;
    }
    check_within("sigmoid gate", o, ref, bound);
    {  // the shared expert's gate (qwen35moe): one sigmoid per row, the same 12 u
        const auto sv = random_floats(static_cast<size_t>(rows), 4.0f);
        Tensor sg = put(*be.gpu, sv, 1, rows), xg = put(*be.gpu, u, D, rows);
        be.gpu->sigmoid_scale_rows(xg, sg);
        const auto x = get(*be.gpu, xg);
        for (size_t i = 0; i < x.size(); ++i) {
            ref[i] = double(u[i]) / (1.0 + std::exp(-double(sv[i / size_t(D)])));
            bound[i] = 12 * kU * std::fabs(ref[i]) + 1e-30;
        }
        check_within("sigmoid_scale_rows", x, ref, bound);
        be.gpu->free(sg);
        be.gpu->free(xg);
    }
    for (Tensor* t : {&bg, &ug, &gate}) be.gpu->free(*t);
}

// ---- qwen35's linear attention: ssm_conv and gated_delta_rule against the CPU backend ----------
// Two sequences of a batch (7 and 2 tokens, then one decode step each) in state slots 2 and 0,
// states starting from random values; q/k/v as column views of one row, as the model passes
// them. Both sides walk tokens in order with float sums in different orders: the convolution
// 4 products (8 u of sum |x w|, SiLU's expf 2 ulp); the delta rule head_dim-long dot products
// per token whose errors carry over tokens, damped by the decay: 2e-5 (|ref| + max|v|), as
// test_linear_attn's float64 bound, on outputs and final states.
// Value heads read their key head tiled (qwen35) or grouped (qwen3next): both orders.
TEST_CASE("qwen35: ssm_conv and gated_delta_rule, prefill then decode, vs the CPU backend") {
    for (bool grouped : {false, true}) {
        CAPTURE(grouped);
        Backends be;
        const int32_t K = 4, Hk = 2, Hv = 4, D = 64, slots = 3;
        const int64_t key = int64_t{Hk} * D, value = int64_t{Hv} * D, C = 2 * key + value;
        auto make_state = [&](Backend& b, const std::vector<float>& conv, const std::vector<float>& delta) {
            RecurrentLayer st;
            st.n_slots = slots, st.conv_kernel = K, st.conv_channels = int32_t(C), st.n_k_heads = Hk, st.n_v_heads = Hv;
            st.head_dim = D;
            st.conv = put(b, conv, C, slots * (K - 1), MemoryKind::KvCache);
            st.delta = put(b, delta, D, int64_t{slots} * Hv * D, MemoryKind::KvCache);
            return st;
        };
        const auto conv0 = random_floats(size_t(slots * (K - 1) * C)),
                   delta0 = random_floats(size_t(slots * Hv * D * D), 0.1f);
        RecurrentLayer sc = make_state(*be.cpu, conv0, delta0), sg = make_state(*be.gpu, conv0, delta0);
        const auto wv = random_floats(size_t(C * K)), dtv = random_floats(size_t(Hv));
        std::vector<float> av;
        for (int h = 0; h < Hv; ++h) av.push_back(-0.5f * float(h + 1));
        const std::vector<int32_t> slot_of = {2, 0};
        for (auto [n0, n1] : {std::pair{7, 2}, std::pair{1, 1}}) {
            const int64_t T = n0 + n1;
            Batch b = simple_batch(T);
            b.n_seqs = 2;
            b.seq_of.assign(size_t(n0), 0);
            b.seq_of.insert(b.seq_of.end(), size_t(n1), 1);
            b.kv_slot.assign(size_t(T), 0);
            b.block_table = {0, 0};
            BatchInfo info = b.info();
            info.state_slot = slot_of;
            const auto xv = random_floats(size_t(T * C)), al = random_floats(size_t(T * Hv)),
                       bt = random_floats(size_t(T * Hv));
            std::vector<float> vmax_src;
            std::vector<std::vector<float>> outs;
            for (auto* side : {&be.cpu, &be.gpu}) {
                Backend& bk = **side;
                RecurrentLayer& st = side == &be.cpu ? sc : sg;
                bk.set_batch(info);
                Tensor x = put(bk, xv, C, T), w = put(bk, wv, K, C),
                       c = put(bk, std::vector<float>(size_t(T * C)), C, T), alpha = put(bk, al, Hv, T),
                       beta = put(bk, bt, Hv, T), dt = put(bk, dtv, Hv, 1), a = put(bk, av, Hv, 1),
                       o = put(bk, std::vector<float>(size_t(T * value)), value, T);
                bk.ssm_conv(st, x, w, c);
                outs.push_back(get(bk, c));
                const DeltaRuleParams p{1e-6f, &dt, &a, grouped};
                bk.gated_delta_rule(st, c.slice_cols(0, key), c.slice_cols(key, key), c.slice_cols(2 * key, value),
                                    alpha, beta, p, o);
                outs.push_back(get(bk, o));
                for (Tensor* t : {&x, &w, &c, &alpha, &beta, &dt, &a, &o}) bk.free(*t);
            }
            std::vector<double> bound(outs[0].size());
            for (size_t i = 0; i < bound.size(); ++i) bound[i] = 1e-5 * (std::fabs(outs[0][i]) + 1.0);
            check_within("ssm_conv", outs[2], outs[0], bound);
            float vmax = 0;
            for (float f : outs[0]) vmax = std::max(vmax, std::fabs(f));  // v is a part of the conv output
            bound.assign(outs[1].size(), 0.0);
            for (size_t i = 0; i < bound.size(); ++i) bound[i] = 2e-5 * (std::fabs(outs[1][i]) + vmax);
            check_within("gated_delta_rule", outs[3], outs[1], bound);
        }
        for (auto [t, name] :
             {std::pair{&RecurrentLayer::conv, "conv state"}, std::pair{&RecurrentLayer::delta, "delta state"}}) {
            const auto c = get(*be.cpu, sc.*t), g = get(*be.gpu, sg.*t);
            std::vector<double> bound(c.size());
            for (size_t i = 0; i < c.size(); ++i) bound[i] = 2e-5 * (std::fabs(c[i]) + 1.0);
            check_within(name, g, c, bound);
        }
        for (RecurrentLayer* st : {&sc, &sg}) {
            Backend& bk = st == &sc ? *be.cpu : *be.gpu;
            bk.free(st->conv);
            bk.free(st->delta);
        }
    }
}

// ---- scale, softcap -------------------------------------------------------------------------------
// scale: one float multiply, the same on both sides: bit for bit the CPU backend. softcap:
// cap * tanhf(x * (1 / cap)) against float64: 1 / cap and the two multiplies one rounding
// each, tanhf within 2 ulp on the GPU (1 on the host; an ulp is up to 2 u of the value):
// 8 u of |result| (x / cap near 0 too: tanh(y) ~ y).
TEST_CASE("scale and softcap (gemma's logit soft-capping), vs the CPU backend and float64") {
    Backends be;
    for (int64_t n : {int64_t{1}, int64_t{257}, int64_t{3 * 65536 + 5}}) {
        const auto x = random_floats(static_cast<size_t>(n), 40.0f);
        Tensor xg = put(*be.gpu, x, n, 1), xc = put(*be.cpu, x, n, 1);
        be.gpu->scale(xg, 0.0625f + 1e-3f);
        be.cpu->scale(xc, 0.0625f + 1e-3f);
        check_within("scale", get(*be.gpu, xg), get(*be.cpu, xc), std::vector<float>(x.size(), 0.0f));
        be.gpu->free(xg);
        be.cpu->free(xc);
        for (float cap : {30.0f, 3.0f}) {
            Tensor g = put(*be.gpu, x, n, 1), c = put(*be.cpu, x, n, 1);
            be.gpu->softcap(g, cap);
            be.cpu->softcap(c, cap);
            std::vector<double> ref(x.size()), bound(x.size());
            for (size_t i = 0; i < x.size(); ++i) {
                ref[i] = cap * std::tanh(double(x[i]) / cap);
                bound[i] = 8 * kU * std::fabs(ref[i]) + 1e-30;
            }
            check_within("softcap " + std::to_string(cap) + " gpu", get(*be.gpu, g), ref, bound);
            check_within("softcap " + std::to_string(cap) + " cpu", get(*be.cpu, c), ref, bound);
            be.gpu->free(g);
            be.cpu->free(c);
        }
    }
}

// ---- store_kv + attention -----------------------------------------------------------------------
// A paged cache shared by three sequences with shuffled 16-token blocks: a prefill batch of
// all three (several query tiles), a decode batch (one token each), a mixed batch, then
// sequence 0 grown past 1100 tokens (K/V written only) and decoded: the split-K
// (flash-decoding) path with its combine kernel.

// The head dims of the tensor-core prefill kernel (attention.cu, attention_tc_kernel).
static bool tc_head_dim(int d) { return d == 64 || d == 80 || d == 96 || d == 128 || d == 256; }

TEST_CASE("store_kv + attention: prefill, decode, mixed and split-K decode, GQA, windows, soft-cap, sinks") {
    Backends be;
    struct Case {
        int n_heads, n_kv_heads, head_dim;
        DType kv;
        int window;
        float softcap;
        bool sinks = false;  // gpt-oss: one sink logit per query head in each softmax
    };
    const Case cases[] = {
        {9, 3, 64, DType::F16, 0, 0.0f},           // SmolLM2 heads
        {8, 2, 128, DType::Q8_0, 0, 0.0f},         // Llama head_dim, 8-bit cache
        {4, 1, 256, DType::F16, 48, 50.0f},        // Gemma 3: head_dim 256, sliding window, soft-cap
        {8, 4, 8, DType::F16, 0, 0.0f},            // tiny heads
        {16, 2, 64, DType::Q8_0, 100, 0.0f},       // G = 8
        {6, 6, 80, DType::F16, 0, 30.0f},          // no GQA, head_dim not a multiple of 32
        {16, 2, 64, DType::F16, 128, 0.0f, true},  // gpt-oss: sinks, 128-token window
        {8, 2, 64, DType::Q8_0, 0, 0.0f, true},    // gpt-oss global layers: sinks, split-K combine
        {8, 1, 512, DType::F16, 0, 0.0f},          // Gemma 4's global layers: head_dim 512
        {12, 4, 96, DType::Q8_0, 0, 0.0f},         // head_dim 96 (Phi-3), G = 3: 21-token sub-tiles
    };
    for (const Case& c : cases) {
        char nb[128];
        std::snprintf(nb, sizeof nb, "attn h%d kv%d d%d %s win%d cap%g%s", c.n_heads, c.n_kv_heads, c.head_dim,
                      std::string(dtype_name(c.kv)).c_str(), c.window, double(c.softcap), c.sinks ? " sinks" : "");
        CAPTURE(nb);
        const int bt = 16, n_blocks = 90, max_blocks = 72;
        const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim, q_dim = int64_t{c.n_heads} * c.head_dim;
        KvLayer lc = alloc_kv_layer(*be.cpu, c.kv, c.n_kv_heads, c.head_dim, bt, n_blocks);
        KvLayer lg = alloc_kv_layer(*be.gpu, c.kv, c.n_kv_heads, c.head_dim, bt, n_blocks);
        // Sequence 0 gets 72 blocks (1152 tokens), 1 and 2 get 9 each.
        PagedSeqs seqs(n_blocks, max_blocks, bt, {0, 72, 81}, {72, 9, 9});
        std::vector<std::vector<float>> hk(3), hv(3);  // host history of each sequence's K/V rows
        AttentionParams ap = attention_params(c.n_heads, c.n_kv_heads, c.head_dim, c.window, c.softcap);
        // Sinks from -2 to 2: in the range of the scores, so they change every output.
        std::vector<float> sinks(static_cast<size_t>(c.n_heads));
        for (int h = 0; h < c.n_heads; ++h) sinks[static_cast<size_t>(h)] = -2.0f + 4.0f * float(h) / float(c.n_heads);
        Tensor sink_c = be.cpu->load_weight(sinks.data(), DType::F32, c.n_heads, 1, "attn_sinks");
        Tensor sink_g = be.gpu->load_weight(sinks.data(), DType::F32, c.n_heads, 1, "attn_sinks");
        AttentionParams apc = ap, apg = ap;
        if (c.sinks) apc.sinks = &sink_c, apg.sinks = &sink_g;
        struct Step {
            const char* label;
            std::vector<std::pair<int, int>> parts;
            bool attend;
        };
        const Step steps[] = {{"prefill", {{0, 70}, {1, 33}, {2, 1}}, true},
                              {"decode", {{0, 1}, {1, 1}, {2, 1}}, true},
                              {"mixed", {{0, 5}, {2, 1}}, true},
                              {"grow", {{0, 1024}}, false},
                              {"split-K decode", {{0, 1}, {1, 1}}, true}};
        for (const Step& st : steps) {
            CAPTURE(st.label);
            const Batch b = seqs.batch(st.parts);
            const int64_t n = static_cast<int64_t>(b.tokens.size());
            const auto k = random_floats(static_cast<size_t>(n * kv_dim)),
                       v = random_floats(static_cast<size_t>(n * kv_dim));
            const auto q = random_floats(static_cast<size_t>(n * q_dim));
            for (int64_t t = 0; t < n; ++t) {
                const int s = b.seq_of[static_cast<size_t>(t)];
                hk[static_cast<size_t>(s)].insert(hk[static_cast<size_t>(s)].end(), k.begin() + t * kv_dim,
                                                  k.begin() + (t + 1) * kv_dim);
                hv[static_cast<size_t>(s)].insert(hv[static_cast<size_t>(s)].end(), v.begin() + t * kv_dim,
                                                  v.begin() + (t + 1) * kv_dim);
            }
            be.cpu->set_batch(b.info());
            be.gpu->set_batch(b.info());
            Tensor kc = put(*be.cpu, k, kv_dim, n), vc = put(*be.cpu, v, kv_dim, n);
            Tensor kg = put(*be.gpu, k, kv_dim, n), vg = put(*be.gpu, v, kv_dim, n);
            be.cpu->store_kv(lc, kc, vc);
            be.gpu->store_kv(lg, kg, vg);
            if (st.attend) {
                Tensor qc = put(*be.cpu, q, q_dim, n), qg = put(*be.gpu, q, q_dim, n);
                Tensor oc = be.cpu->alloc(MemoryKind::Activations, DType::F32, q_dim, n, "o");
                Tensor og = be.gpu->alloc(MemoryKind::Activations, DType::F32, q_dim, n, "o");
                poison(*be.gpu, og);
                be.cpu->attention(lc, qc, apc, oc);
                const int64_t tc_before = test::kernel_launches("attention_tc_kernel");
                be.gpu->attention(lg, qg, apg, og);
                // The tensor-core kernel takes prefill batches (>= 16 tokens, >= 8 a query
                // tile) of the head dims it has; the emulator shows which kernel ran.
                const bool tc = n >= 16 && tc_head_dim(c.head_dim);
                if (tc_before >= 0) CHECK(test::kernel_launches("attention_tc_kernel") - tc_before == (tc ? 1 : 0));
                const auto go = get(*be.gpu, og), co = get(*be.cpu, oc);
                std::vector<double> bound(go.size());
                const int rep = c.n_heads / c.n_kv_heads;
                for (int64_t t = 0; t < n; ++t) {
                    const int s = b.seq_of[static_cast<size_t>(t)], p = b.positions[static_cast<size_t>(t)];
                    const int first = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
                    for (int h = 0; h < c.n_heads; ++h) {
                        const int kvh = h / rep;
                        const float* qp = q.data() + (t * c.n_heads + h) * c.head_dim;
                        double smax = 0, vmax = 0, ksum = 0, qsum = 0;
                        for (int d = 0; d < c.head_dim; ++d) qsum += std::fabs(double(qp[d]));
                        for (int j = first; j <= p; ++j) {
                            const float* kp =
                                hk[static_cast<size_t>(s)].data() + (int64_t{j} * kv_dim + kvh * c.head_dim);
                            const float* vp =
                                hv[static_cast<size_t>(s)].data() + (int64_t{j} * kv_dim + kvh * c.head_dim);
                            double m = 0, ks = 0;
                            for (int d = 0; d < c.head_dim; ++d) {
                                m += std::fabs(double(qp[d]) * kp[d]);
                                ks += std::fabs(double(kp[d]));
                                vmax = std::max(vmax, std::fabs(double(vp[d])));
                            }
                            smax = std::max(smax, m);
                            ksum = std::max(ksum, ks);
                        }
                        // Cached values are rounded (F16: 2^-11, Q8_0: up to 1/254 of a block's
                        // max) identically on both sides, so only arithmetic differs.
                        const double kv_scale = c.kv == DType::F16 ? 1.001 : 1.01;
                        const double ds = (c.head_dim + 2) * kU * ap.scale * smax * kv_scale +
                                          (c.softcap > 0 ? 4 * kU * c.softcap : 0.0);
                        const int n_terms = p - first + 1 + 8 + (c.sinks ? 1 : 0);
                        double bnd = 2 * 3 * vmax * kv_scale * (2 * ds + n_terms * kU) + 1e-30;
                        if (tc) {  // the GPU side's FP16 roundings and doubled float terms
                            const bool q8 = c.kv == DType::Q8_0;
                            const double h = 0x1p-11, sub = 0x1p-25;
                            const double ds_h = ap.scale * ((q8 ? 2 : 1) * h * smax * kv_scale +
                                                            sub * (ksum * kv_scale + (q8 ? qsum : 0.0)));
                            bnd += 3 * vmax * kv_scale * (2 * (ds + ds_h) + n_terms * kU) +
                                   (q8 ? 2 : 1) * (h * vmax * kv_scale + sub * (p - first + 1) * vmax);
                        }
                        for (int d = 0; d < c.head_dim; ++d)
                            bound[static_cast<size_t>((t * c.n_heads + h) * c.head_dim + d)] = bnd;
                    }
                }
                check_within(std::string(nb) + " " + st.label, go, co, bound);
                if (tc) {  // ember-gpu-check holds the GPU's tensor-core prefill to rel_l2 <= 4 x 2^-11
                    double e2 = 0, r2 = 0;
                    for (size_t i = 0; i < go.size(); ++i)
                        e2 += (double(go[i]) - co[i]) * (double(go[i]) - co[i]), r2 += double(co[i]) * co[i];
                    MESSAGE(nb << " " << std::string(st.label) << ": tensor-core rel_l2 " << std::sqrt(e2 / r2));
                }
                for (Tensor* x : {&qc, &oc}) be.cpu->free(*x);
                for (Tensor* x : {&qg, &og}) be.gpu->free(*x);
            }
            for (Tensor* x : {&kc, &vc}) be.cpu->free(*x);
            for (Tensor* x : {&kg, &vg}) be.gpu->free(*x);
        }
        // The caches after all steps: F16 identical; Q8_0 identical but for rounding ties.
        for (int kvi = 0; kvi < 2; ++kvi) {
            const Tensor& tc = kvi ? lc.v : lc.k;
            const Tensor& tg = kvi ? lg.v : lg.k;
            std::vector<uint8_t> bc(tc.bytes()), bg(tg.bytes());
            be.cpu->download(tc, bc.data(), bc.size());
            be.gpu->download(tg, bg.data(), bg.size());
            bc = opdata::cpu_cache_as_rows(lc, bc, kvi == 0);  // the CPU groups a block's bytes by head
            size_t diff = 0;
            for (size_t i = 0; i < bc.size(); ++i) diff += bc[i] != bg[i];
            INFO(nb << (kvi ? " V" : " K") << " cache: " << diff << " of " << bc.size() << " bytes differ");
            CHECK(double(diff) <= (c.kv == DType::F16 ? 0.0 : 1e-3 * double(bc.size())));
        }
        for (Tensor* t : {&lc.k, &lc.v, &sink_c}) be.cpu->free(*t);
        for (Tensor* t : {&lg.k, &lg.v, &sink_g}) be.gpu->free(*t);
    }
}

// ---- load_kv ----------------------------------------------------------------------------------------
// Rows stored at shuffled slots of an eight-block pool, read back by both backends:
// each equals the host's dequantization of its own cache bytes exactly (F16 and Q8_0 values
// are floats), whatever its layout.
TEST_CASE("load_kv: each backend reads back its cache's values exactly") {
    Backends be;
    struct Case {
        int n_kv_heads, head_dim;
        DType kv;
    };
    for (const Case c :
         {Case{3, 64, DType::F16}, Case{2, 128, DType::Q8_0}, Case{1, 256, DType::F16}, Case{4, 64, DType::Q8_0}}) {
        CAPTURE(c.head_dim);
        CAPTURE(std::string(dtype_name(c.kv)));
        const int bt = 16, n_blocks = 8, n = 50;
        const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
        KvLayer lc = alloc_kv_layer(*be.cpu, c.kv, c.n_kv_heads, c.head_dim, bt, n_blocks);
        KvLayer lg = alloc_kv_layer(*be.gpu, c.kv, c.n_kv_heads, c.head_dim, bt, n_blocks);
        Batch b = simple_batch(n);
        std::vector<int32_t> slots(bt * n_blocks);
        std::iota(slots.begin(), slots.end(), 0);
        const auto keys = random_floats(slots.size());  // a shuffle drawn from the seed stream
        std::sort(slots.begin(), slots.end(), [&](int32_t x, int32_t y) { return keys[size_t(x)] < keys[size_t(y)]; });
        b.kv_slot.assign(slots.begin(), slots.begin() + n);
        be.cpu->set_batch(b.info());
        be.gpu->set_batch(b.info());
        const auto k = random_floats(size_t(n * kv_dim)), v = random_floats(size_t(n * kv_dim));
        Tensor kc = put(*be.cpu, k, kv_dim, n), vc = put(*be.cpu, v, kv_dim, n);
        Tensor kg = put(*be.gpu, k, kv_dim, n), vg = put(*be.gpu, v, kv_dim, n);
        be.cpu->store_kv(lc, kc, vc);
        be.gpu->store_kv(lg, kg, vg);
        poison(*be.gpu, kg);
        poison(*be.gpu, vg);
        be.cpu->load_kv(lc, kc, vc);
        be.gpu->load_kv(lg, kg, vg);
        for (int kvi = 0; kvi < 2; ++kvi) {
            const Tensor &tc = kvi ? lc.v : lc.k, &tg = kvi ? lg.v : lg.k;
            std::vector<uint8_t> bc(tc.bytes()), bg(tg.bytes());
            be.cpu->download(tc, bc.data(), bc.size());
            be.gpu->download(tg, bg.data(), bg.size());
            bc = opdata::cpu_cache_as_rows(lc, bc, kvi == 0);
            std::vector<float> want_c(size_t(n * kv_dim)), want_g(want_c.size());
            for (int t = 0; t < n; ++t) {
                const size_t at = size_t(b.kv_slot[size_t(t)]) * tc.row_bytes;
                cpu::dequantize_row(c.kv, bc.data() + at, want_c.data() + t * kv_dim, kv_dim);
                cpu::dequantize_row(c.kv, bg.data() + at, want_g.data() + t * kv_dim, kv_dim);
            }
            CHECK(get(*be.cpu, kvi ? vc : kc) == want_c);
            CHECK(get(*be.gpu, kvi ? vg : kg) == want_g);
        }
        for (Tensor* t : {&kc, &vc, &lc.k, &lc.v}) be.cpu->free(*t);
        for (Tensor* t : {&kg, &vg, &lg.k, &lg.v}) be.gpu->free(*t);
    }
}

// ---- top_k ------------------------------------------------------------------------------------------
// Rows with ties, mostly -inf, mostly NaN, penalties and bias (a token penalized and biased,
// one outside the row): ids, logit bits, counts and the adjusted rows all identical.
TEST_CASE("top_k: k = 1, 40, 1024 with penalties and bias, vs the CPU backend bit for bit") {
    Backends be;
    for (auto [vocab, k] : {std::pair<int64_t, int>{128256, 1}, {128256, 40}, {50003, 1024}, {1000, 7}}) {
        const int n_rows = 3;
        const TopKCase c = make_top_k_case(vocab, n_rows);
        const std::vector<TopKRow>& rows = c.rows;
        Tensor lc = put(*be.cpu, c.logits, vocab, n_rows), lg = put(*be.gpu, c.logits, vocab, n_rows);
        std::vector<TopKCandidate> oc(static_cast<size_t>(n_rows * k)), og(oc.size(), TopKCandidate{-1, NAN});
        std::vector<int32_t> cc(n_rows), cg(n_rows, -1);
        be.cpu->top_k(lc, k, rows, oc, cc);
        be.gpu->top_k(lg, k, rows, og, cg);
        const auto ac = get(*be.cpu, lc), ag = get(*be.gpu, lg);
        size_t adj_diff = 0;
        for (size_t i = 0; i < ac.size(); ++i) adj_diff += std::memcmp(&ac[i], &ag[i], 4) != 0;
        INFO("vocab " << vocab << " k " << k);
        CHECK(adj_diff == 0);
        CHECK(cc == cg);
        for (int r = 0; r < n_rows; ++r) {
            for (int i = 0; i < std::min(cc[r], cg[r]); ++i) {
                const TopKCandidate& a = oc[static_cast<size_t>(r * k + i)];
                const TopKCandidate& b = og[static_cast<size_t>(r * k + i)];
                INFO("row " << r << " rank " << i << ": cpu " << a.id << " " << a.logit << ", cuda " << b.id << " "
                            << b.logit);
                CHECK(a.id == b.id);
                CHECK(std::memcmp(&a.logit, &b.logit, 4) == 0);
            }
        }
        be.cpu->free(lc);
        be.gpu->free(lg);
    }
}

// ---- fused decode ops (kernels/cuda/NOTES.md, "Fused decode ops") ---------------------------------
// The fused paths must give the bits of the ops they replace, so these compare with the same
// backend's unfused ops, bit for bit; under the emulator they also count the launches saved.
namespace {

#ifdef EMBER_CUDA_EMU
uint64_t emu_launches(const char* kernel) {
    for (const auto& k : ember::emu::kernel_counts())
        if (k.name == kernel) return k.launches;
    return 0;
}
#endif

std::vector<uint8_t> download_bytes(Backend& be, const Tensor& t) {
    std::vector<uint8_t> b(t.bytes());
    be.download(t, b.data(), b.size());
    return b;
}

}  // namespace

TEST_CASE("rope_store_kv: rope of q and k then store_kv, the bits of the three ops, F16 and Q8_0 caches") {
    Backends be;
    struct Case {
        int n_heads, n_kv_heads, head_dim;
        bool neox;
        DType kv;
        float k_base;  // != 10000: k rotated by another table (the unfused fallback)
    };
    for (const Case& c : {Case{32, 8, 64, false, DType::F16, 10000.0f}, Case{28, 4, 128, true, DType::Q8_0, 10000.0f},
                          Case{4, 1, 256, true, DType::F16, 10000.0f}, Case{9, 3, 64, false, DType::Q8_0, 10000.0f},
                          Case{8, 2, 64, true, DType::F16, 500000.0f}})
        for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{37}}) {
            CAPTURE(c.head_dim);
            CAPTURE(c.n_heads);
            CAPTURE(n);
            const int bt = 16, n_blocks = 8;
            const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim, q_dim = int64_t{c.n_heads} * c.head_dim;
            const RopeInputs in = random_rope_inputs(n, c.head_dim);
            Batch b = simple_batch(n, in.pos);
            std::vector<int32_t> slots(bt * n_blocks);
            std::iota(slots.begin(), slots.end(), 0);
            const auto keys = random_floats(slots.size());
            std::sort(slots.begin(), slots.end(),
                      [&](int32_t x, int32_t y) { return keys[size_t(x)] < keys[size_t(y)]; });
            b.kv_slot.assign(slots.begin(), slots.begin() + n);
            be.gpu->set_batch(b.info());
            const RopeParams pq = rope_params(c.n_heads, c.head_dim, c.head_dim, c.neox, 10000.0f, 1.0f, nullptr);
            const RopeParams pk = rope_params(c.n_kv_heads, c.head_dim, c.head_dim, c.neox, c.k_base, 1.0f, nullptr);
            const auto q = random_floats(size_t(n * q_dim), 3.0f), k = random_floats(size_t(n * kv_dim), 3.0f),
                       v = random_floats(size_t(n * kv_dim), 3.0f);
            KvLayer fused = alloc_kv_layer(*be.gpu, c.kv, c.n_kv_heads, c.head_dim, bt, n_blocks);
            KvLayer apart = alloc_kv_layer(*be.gpu, c.kv, c.n_kv_heads, c.head_dim, bt, n_blocks);
            Tensor q1 = put(*be.gpu, q, q_dim, n), k1 = put(*be.gpu, k, kv_dim, n), v1 = put(*be.gpu, v, kv_dim, n);
            Tensor q2 = put(*be.gpu, q, q_dim, n), k2 = put(*be.gpu, k, kv_dim, n), v2 = put(*be.gpu, v, kv_dim, n);
#ifdef EMBER_CUDA_EMU
            const uint64_t before = emu_launches("rope_store_kv_kernel");
#endif
            be.gpu->rope_store_kv(fused, q1, k1, v1, pq, pk);
            be.gpu->synchronize();  // a decode batch's launches are recorded until then (graphs)
#ifdef EMBER_CUDA_EMU
            CHECK(emu_launches("rope_store_kv_kernel") - before == (c.k_base == 10000.0f ? 1u : 0u));
#endif
            Tensor q2h = q2.reshape(c.head_dim), k2h = k2.reshape(c.head_dim);
            be.gpu->rope(q2h, pq);
            be.gpu->rope(k2h, pk);
            be.gpu->store_kv(apart, k2, v2);
            CHECK(get(*be.gpu, q1) == get(*be.gpu, q2));
            CHECK(get(*be.gpu, k1) == get(*be.gpu, k2));
            CHECK(download_bytes(*be.gpu, fused.k) == download_bytes(*be.gpu, apart.k));
            CHECK(download_bytes(*be.gpu, fused.v) == download_bytes(*be.gpu, apart.v));
            for (Tensor* t : {&q1, &k1, &v1, &q2, &k2, &v2, &fused.k, &fused.v, &apart.k, &apart.v}) be.gpu->free(*t);
        }
}

// gemma3's sublayer end: its post-norm in place, the residual add, the next norm.
TEST_CASE("norm_add_rms_norm: the same bits as rms_norm in place then add_rms_norm, in one launch") {
    Backends be;
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1152}, {4, 2048}, {40, 576}, {3, 33}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        const auto x = random_floats(static_cast<size_t>(rows * cols), 30.0f), y = random_floats(x.size(), 10.0f);
        auto wy = random_floats(static_cast<size_t>(cols)), w = random_floats(static_cast<size_t>(cols));
        for (auto* v : {&wy, &w})
            for (auto& e : *v) e += 1.0f;
        Tensor wyg = be.gpu->load_weight(wy.data(), DType::F32, cols, 1, "post norm");
        Tensor wg = be.gpu->load_weight(w.data(), DType::F32, cols, 1, "norm");
        Tensor x1 = put(*be.gpu, x, cols, rows), y1 = put(*be.gpu, y, cols, rows);
        Tensor x2 = put(*be.gpu, x, cols, rows), y2 = put(*be.gpu, y, cols, rows);
        Tensor o1 = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, rows, "o1");
        Tensor o2 = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, rows, "o2");
        be.gpu->set_batch(simple_batch(rows).info());
#ifdef EMBER_CUDA_EMU
        const uint64_t before = emu_launches("norm_add_rms_norm_kernel");
#endif
        be.gpu->norm_add_rms_norm(x1, y1, wyg, wg, 1e-6f, o1);
        be.gpu->synchronize();
#ifdef EMBER_CUDA_EMU
        CHECK(emu_launches("norm_add_rms_norm_kernel") - before == 1);
#endif
        be.gpu->rms_norm(y2, wyg, 1e-6f, y2);
        be.gpu->add_rms_norm(x2, y2, wg, 1e-6f, o2);
        for (const auto& [a, b] : {std::pair{&x1, &x2}, {&y1, &y2}, {&o1, &o2}}) {
            const auto ga = get(*be.gpu, *a), gb = get(*be.gpu, *b);
            CHECK(std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)) == 0);
        }
        for (Tensor* t : {&wyg, &wg, &x1, &y1, &x2, &y2, &o1, &o2}) be.gpu->free(*t);
    }
}

// add_rms_norm, rms_norm, norm_add_rms_norm and glu of decode-sized rows also write their output quantized; the
// matmuls that read it next (matmul_shared's q/k/v or gate/up) take those 8-bit activations
// instead of quantizing again. A scale by 1 between (same values, another launch) makes the
// matmul quantize for itself: the results must be the same bits, with no quantize launch on
// the fused path.
TEST_CASE("norms and glu write the q8 activations the next matmuls read: the bits of quantize_q8") {
    Backends be;
    struct W {
        DType type;
        int64_t rows;
    };
    const int64_t cols = 2048;  // Q4_0 / Q8_0 rows of whole groups: the repacked kernel too
    const W ws[] = {{DType::Q4_K, 96}, {DType::Q4_0, 64}, {DType::Q6_K, 40}, {DType::Q8_0, 24}};
    std::vector<Tensor> wg;
    for (const W& w : ws) {
        const auto bytes = random_weights(w.type, w.rows, cols);
        wg.push_back(be.gpu->load_weight(bytes.data(), w.type, cols, w.rows, "w"));
    }
    auto norm_w = random_floats(static_cast<size_t>(cols));
    for (auto& x : norm_w) x += 1.0f;
    Tensor nw = be.gpu->load_weight(norm_w.data(), DType::F32, cols, 1, "norm");
    for (const char* producer : {"add_rms_norm", "rms_norm", "glu", "norm_add_rms_norm"})
        for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{32}}) {
            CAPTURE(producer);
            CAPTURE(n);
            be.gpu->set_batch(simple_batch(n).info());
            const auto x = random_floats(size_t(n * cols), 5.0f), r = random_floats(x.size(), 2.0f);
            // Each run: the producer into `out`, optionally a scale by 1, then one matmul_shared
            // over the four weights. Returns the results and how many quantize launches it took.
            const auto run = [&](bool rescale, uint64_t& quantize_launches) {
                Tensor xa = put(*be.gpu, x, cols, n), ra = put(*be.gpu, r, cols, n);
                Tensor out = be.gpu->alloc(MemoryKind::Activations, DType::F32, cols, n, "out");
                std::vector<Tensor> ys;
                std::vector<MatmulOut> outs;
                for (size_t i = 0; i < wg.size(); ++i)
                    ys.push_back(be.gpu->alloc(MemoryKind::Activations, DType::F32, wg[i].rows, n, "y"));
                for (size_t i = 0; i < wg.size(); ++i) outs.push_back({&wg[i], &ys[i], nullptr});
#ifdef EMBER_CUDA_EMU
                const uint64_t before = emu_launches("quantize_q8_kernel");
#endif
                if (std::string(producer) == "add_rms_norm") be.gpu->add_rms_norm(xa, ra, nw, 1e-6f, out);
                else if (std::string(producer) == "rms_norm") be.gpu->rms_norm(xa, nw, 1e-6f, out);
                else if (std::string(producer) == "norm_add_rms_norm")
                    be.gpu->norm_add_rms_norm(xa, ra, nw, nw, 1e-6f, out);
                else be.gpu->glu(xa, ra, GluAct::Silu, out);
                if (rescale) be.gpu->scale(out, 1.0f);
                be.gpu->matmul_shared(out, outs);
                std::vector<std::vector<float>> got;
                for (const Tensor& y : ys) got.push_back(get(*be.gpu, y));
#ifdef EMBER_CUDA_EMU
                quantize_launches = emu_launches("quantize_q8_kernel") - before;
#else
                quantize_launches = 0;
#endif
                for (Tensor& y : ys) be.gpu->free(y);
                for (Tensor* t : {&xa, &ra, &out}) be.gpu->free(*t);
                return got;
            };
            uint64_t fused_q = 0, apart_q = 0;
            const auto fused = run(false, fused_q), apart = run(true, apart_q);
            for (size_t i = 0; i < fused.size(); ++i) {
                CAPTURE(std::string(dtype_name(ws[i].type)));
                REQUIRE(fused[i].size() == apart[i].size());
                CHECK(std::memcmp(fused[i].data(), apart[i].data(), fused[i].size() * sizeof(float)) == 0);
            }
#ifdef EMBER_CUDA_EMU
            CHECK(fused_q == 0);  // the producer's q8 rows served all four
            CHECK(apart_q == 1);  // quantized once for the four (matmul_shared)
#endif
        }
    for (Tensor& w : wg) be.gpu->free(w);
    be.gpu->free(nw);
}
