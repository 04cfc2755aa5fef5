// The parts of ember-gpu-check (gpu_check.cpp is the driver): every check records its
// result here; the op check table (op_table.cpp, one ops_*.cpp per op family), the model
// checks (models.cpp) and the benchmarks (bench.cpp). Inputs come from tools/op_data.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_loader.h"

namespace ember::gpucheck {

// ---- results (report.cpp) ---------------------------------------------------------------
// A check passes when its metric is finite and <= tol; tol < 0 is information only.
void record(const std::string& section, const std::string& name, const std::string& metric, double value, double tol,
            const std::string& note = "");
void fail(const std::string& section, const std::string& name, const std::string& why);
void bench_row(const std::string& what, double value, const std::string& unit, const std::string& note = "");
bool all_passed();
void print_summary();
void write_json(const std::string& path, const std::string& device);

// ---- metrics -----------------------------------------------------------------------------
size_t count_nonfinite(const std::vector<float>& v);
// ||a - ref|| / ||ref||
template <class R>
double rel_l2(const std::vector<float>& a, const std::vector<R>& ref) {
    double e = 0, r = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = double(a[i]) - double(ref[i]);
        e += d * d;
        r += double(ref[i]) * double(ref[i]);
    }
    if (!std::isfinite(e)) return INFINITY;
    return r > 0 ? std::sqrt(e / r) : std::sqrt(e);
}
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
// Elements whose bits differ (NaN == NaN when the bits match); sizes must match.
size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b);

// ---- (a) op checks -------------------------------------------------------------------------
struct Pair {
    Backend& cpu;
    Backend& gpu;
    bool cpu_as_gpu = false;  // the "GPU" is a CPU backend: its matmul uses 8-bit activations at every n
};

// One op family of the table: its cases (shapes, types, error bounds) are a table in its file.
struct OpCheck {
    const char* name;
    const char* what;
    void (*run)(Pair&);
};
std::span<const OpCheck> op_checks();  // in the order they run (--op NAME selects rows)

void check_matmul(Pair& p);       // ops_matmul.cpp
void check_embed(Pair& p);        // ops_matmul.cpp
void check_rms_norm(Pair& p);     // ops_norm.cpp
void check_rope(Pair& p);         // ops_norm.cpp
void check_elementwise(Pair& p);  // ops_elementwise.cpp
void check_attention(Pair& p);    // ops_attention.cpp
void check_top_k(Pair& p);        // ops_top_k.cpp

// ---- (b) real models (models.cpp) ----------------------------------------------------------
void check_model(const std::string& path, const std::string& label, double logit_tol, Pair& p);
int argmax(const std::vector<float>& v);
GraphStats stats_delta(const GraphStats& a, const GraphStats& b);

// ---- (c) benchmarks (bench.cpp) --------------------------------------------------------------
void bench_decode(const std::string& path, Backend& gpu);
void bench_prefill(const std::string& path, Backend& gpu, const CudaModule* mod, int device);
void bench_ops(Backend& gpu);  // bench_ops.cpp: single ops at Llama-3-8B shapes

// ---- (d) the fit planner against a load on the GPU (fit_check.cpp) ---------------------------
void check_fit(const std::vector<std::string>& models, Backend& gpu, bool cpu_as_gpu);

}  // namespace ember::gpucheck
