// Op checks of the elementwise ops: glu (SiLU and GELU-tanh gates) vs float64, add and
// gather_output_rows exact. Each case names its shape and error bound.
#include <cstdio>

#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using namespace ember::opdata;

namespace {

constexpr int64_t kElementwiseN = 3 * 8192 + 7;  // several blocks and a ragged tail

struct GluCase {
    const char* name;
    bool gelu, in_place;
    double rel_l2;
};
const GluCase kGluCases[] = {
    {"swiglu", false, false, 1e-6},
    {"swiglu in place", false, true, 1e-6},
    {"geglu", true, false, 1e-6},
    {"geglu in place", true, true, 1e-6},
};
constexpr double kAddMaxAbs = 0.0;
// gather_output_rows: 10 rows of 2048, rows {9, 0, 4, 4} out (one twice).
constexpr int64_t kGatherRows = 10, kGatherCols = 2048;
constexpr double kGatherMaxAbs = 0.0;

std::vector<double> ref_glu(const std::vector<float>& g, const std::vector<float>& u, bool gelu) {
    std::vector<double> ref(g.size());
    for (size_t i = 0; i < ref.size(); ++i) {
        const double x = g[i];
        const double a = gelu ? 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                              : x / (1.0 + std::exp(-x));
        ref[i] = a * u[i];
    }
    return ref;
}

void check_glu_case(Pair& p, const GluCase& c) {
    const int64_t n = kElementwiseN;
    const auto g = random_floats(static_cast<size_t>(n), 3.0f), u = random_floats(static_cast<size_t>(n));
    Tensor gg = put(p.gpu, g, n, 1), ug = put(p.gpu, u, n, 1);
    Tensor og = c.in_place ? gg : p.gpu.alloc(MemoryKind::Activations, DType::F32, n, 1, "o");
    if (!c.in_place) poison(p.gpu, og);
    p.gpu.glu(gg, ug, c.gelu, og);
    const auto o = get(p.gpu, og);
    record("ops", c.name, "rel_l2", count_nonfinite(o) ? INFINITY : rel_l2(o, ref_glu(g, u, c.gelu)), c.rel_l2);
    p.gpu.free(gg);
    p.gpu.free(ug);
    if (!c.in_place) p.gpu.free(og);
}

void check_add(Pair& p) {
    const int64_t n = kElementwiseN;
    const auto a = random_floats(static_cast<size_t>(n)), b = random_floats(static_cast<size_t>(n));
    Tensor ag = put(p.gpu, a, n, 1), bg = put(p.gpu, b, n, 1);
    p.gpu.add(ag, bg);
    const auto o = get(p.gpu, ag);
    std::vector<float> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] + b[i];
    record("ops", "add", "max_abs", max_abs_diff(o, ref), kAddMaxAbs);
    p.gpu.free(ag);
    p.gpu.free(bg);
}

void check_gather(Pair& p) {
    const int64_t rows = kGatherRows, cols = kGatherCols;
    const auto x = random_floats(static_cast<size_t>(rows * cols));
    Batch b = simple_batch(rows);
    b.output_rows = {9, 0, 4, 4};
    p.gpu.set_batch(b.info());
    Tensor xg = put(p.gpu, x, cols, rows);
    Tensor og = p.gpu.alloc(MemoryKind::Activations, DType::F32, cols, 4, "o");
    poison(p.gpu, og);
    p.gpu.gather_output_rows(xg, og);
    const auto o = get(p.gpu, og);
    std::vector<float> ref;
    for (int32_t r : b.output_rows) ref.insert(ref.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    record("ops", "gather_output_rows", "max_abs", max_abs_diff(o, ref), kGatherMaxAbs);
    p.gpu.free(xg);
    p.gpu.free(og);
}

}  // namespace

void check_elementwise(Pair& p) {
    std::printf("\n[ops] glu / add / gather: GPU vs float64 (glu, rel_l2 <= 1e-6) or exact (add, gather)\n");
    for (const GluCase& c : kGluCases) {
        try {
            check_glu_case(p, c);
        } catch (const std::exception& e) {
            fail("ops", c.name, e.what());
        }
    }
    try {
        check_add(p);
    } catch (const std::exception& e) {
        fail("ops", "add", e.what());
    }
    try {
        check_gather(p);
    } catch (const std::exception& e) {
        fail("ops", "gather_output_rows", e.what());
    }
}

}  // namespace ember::gpucheck
