// Op checks of rms_norm and rope against float64 references. Each case names its shape,
// parameters and error bound.
#include <cstdio>

#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using namespace ember::opdata;

namespace {

// rms_norm: rows x cols of large activations (scale 30), weights near 1.
struct RmsNormCase {
    int64_t rows, cols;
    float eps;
    bool in_place;
    double rel_l2;
};
const RmsNormCase kRmsNormCases[] = {
    {33, 4096, 1e-5f, false, 1e-5},
    {160, 128, 1e-6f, true, 1e-5},
    {7, 2048, 1e-6f, true, 1e-5},
    {40, 8, 1e-5f, false, 1e-5},
};

std::vector<double> ref_rms_norm(const std::vector<float>& x, const std::vector<float>& w, const RmsNormCase& c) {
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < c.rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < c.cols; ++i) ss += double(x[r * c.cols + i]) * x[r * c.cols + i];
        const double k = 1.0 / std::sqrt(ss / c.cols + c.eps);
        for (int64_t i = 0; i < c.cols; ++i) ref[r * c.cols + i] = x[r * c.cols + i] * k * w[i];
    }
    return ref;
}

void check_rms_norm_case(Pair& p, const RmsNormCase& c, const std::string& name) {
    const auto x = random_floats(static_cast<size_t>(c.rows * c.cols), 30.0f);
    auto w = random_floats(static_cast<size_t>(c.cols));
    for (auto& v : w) v += 1.0f;
    Tensor xg = put(p.gpu, x, c.cols, c.rows);
    Tensor wg = p.gpu.load_weight(w.data(), DType::F32, c.cols, 1, "norm");
    Tensor yg = c.in_place ? xg : p.gpu.alloc(MemoryKind::Activations, DType::F32, c.cols, c.rows, "y");
    if (!c.in_place) poison(p.gpu, yg);
    p.gpu.rms_norm(xg, wg, c.eps, yg);
    const auto g = get(p.gpu, yg);
    record("ops", name, "rel_l2", count_nonfinite(g) ? INFINITY : rel_l2(g, ref_rms_norm(x, w, c)), c.rel_l2);
    p.gpu.free(xg);
    if (!c.in_place) p.gpu.free(yg);
    p.gpu.free(wg);
}

// rope: 37 tokens at random positions up to 2e5 (and 0, 1); the bound is max|err| / max|x|.
struct RopeCase {
    int n_heads, head_dim, n_rot;
    bool neox;
    float base, scale;
    bool factors;
    double max_rel;
};
const RopeCase kRopeCases[] = {
    {8, 128, 128, false, 10000.0f, 1.0f, false, 1e-5}, {8, 128, 128, true, 1e6f, 1.0f, false, 1e-5},
    {4, 128, 64, false, 10000.0f, 0.25f, false, 1e-5}, {32, 64, 64, false, 500000.0f, 1.0f, true, 1e-5},
    {2, 256, 256, true, 10000.0f, 0.125f, true, 1e-5}, {8, 8, 8, false, 10000.0f, 1.0f, false, 1e-5},
};
constexpr int64_t kRopeTokens = 37;

// The rotation in float64, the angle in double as the CPU backend forms it.
std::vector<double> ref_rope(const std::vector<float>& x, const std::vector<int32_t>& pos,
                             const std::vector<float>& factors, const RopeCase& c) {
    std::vector<double> ref(x.begin(), x.end());
    const int half = c.n_rot / 2;
    for (size_t t = 0; t < pos.size(); ++t) {
        for (int h = 0; h < c.n_heads; ++h) {
            double* v = ref.data() + (static_cast<int64_t>(t) * c.n_heads + h) * c.head_dim;
            for (int i = 0; i < half; ++i) {
                const double ff = c.factors ? factors[static_cast<size_t>(i)] : 1.0;
                const double f = c.scale * std::pow(double(c.base), -2.0 * i / c.n_rot) / ff;
                const double th = pos[t] * f;
                const int a = c.neox ? i : 2 * i, bb = c.neox ? i + half : 2 * i + 1;
                const double x0 = v[a], x1 = v[bb];
                v[a] = x0 * std::cos(th) - x1 * std::sin(th);
                v[bb] = x0 * std::sin(th) + x1 * std::cos(th);
            }
        }
    }
    return ref;
}

void check_rope_case(Pair& p, const RopeCase& c, const char* name) {
    const int64_t n = kRopeTokens;
    const RopeInputs in = random_rope_inputs(n, c.n_rot);
    const auto x = random_floats(static_cast<size_t>(n * c.n_heads * c.head_dim));
    Batch b = simple_batch(n, in.pos);
    p.gpu.set_batch(b.info());
    Tensor xg = put(p.gpu, x, c.head_dim, n * c.n_heads);
    const RopeParams rp =
        rope_params(c.n_heads, c.head_dim, c.n_rot, c.neox, c.base, c.scale, c.factors ? in.factors.data() : nullptr);
    p.gpu.rope(xg, rp);
    const auto g = get(p.gpu, xg);
    const std::vector<double> ref = ref_rope(x, in.pos, in.factors, c);
    double xmax = 0, emax = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        xmax = std::max(xmax, std::fabs(ref[i]));
        emax = std::max(emax, std::isfinite(g[i]) ? std::fabs(g[i] - ref[i]) : INFINITY);
    }
    record("ops", name, "max_rel", emax / xmax, c.max_rel);
    p.gpu.free(xg);
}

}  // namespace

void check_rms_norm(Pair& p) {
    std::printf("\n[ops] rms_norm: GPU vs float64, rel_l2 <= 1e-5 (large activations, in place too)\n");
    for (const RmsNormCase& c : kRmsNormCases) {
        const std::string name =
            "rms_norm " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + (c.in_place ? " in place" : "");
        try {
            check_rms_norm_case(p, c, name);
        } catch (const std::exception& e) {
            fail("ops", name, e.what());
        }
    }
}

void check_rope(Pair& p) {
    std::printf(
        "\n[ops] rope: GPU vs float64 (angle in double as the CPU), positions up to 2e5: max|err|/max|x| <= 1e-5\n");
    for (const RopeCase& c : kRopeCases) {
        char name[128];
        std::snprintf(name, sizeof name, "rope h%d d%d rot%d %s%s%s", c.n_heads, c.head_dim, c.n_rot,
                      c.neox ? "neox" : "norm", c.scale != 1.0f ? " scaled" : "", c.factors ? " factors" : "");
        try {
            check_rope_case(p, c, name);
        } catch (const std::exception& e) {
            fail("ops", name, e.what());
        }
    }
}

}  // namespace ember::gpucheck
