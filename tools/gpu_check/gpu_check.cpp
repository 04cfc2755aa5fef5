// ember-gpu-check: the CUDA backend against the CPU backend, and the GPU's speed, in one run
// on a bare CUDA machine (scripts/gpu-check.sh builds it with the `gpu` preset and runs it).
//
//   (a) ops: the op check table (kOpChecks, in the style of llama.cpp's test-backend-ops):
//       every backend op on fresh random inputs (never zeros), GPU vs a float64
//       reference (matmul, norms, rope, glu) or vs the CPU backend (embed, store_kv,
//       attention, gather), with the tolerances stated next to each check. GPU outputs are
//       poisoned with NaN before each op, so an element the GPU never wrote fails.
//       Backend::top_k (the sampler's candidates): GPU vs CPU backend on 128256-wide rows
//       with penalties, bias, ties, -inf and NaN, k = 1, 40, 1024: identical ids, logit bits,
//       counts and adjusted rows.
//   (b) models: each real model found runs on both backends over the same prompt; final
//       logits are compared (max |error|) and 32 greedy tokens must be identical. (Per-layer
//       activations could be compared through the forward pass's dump, engine/models/dump.h;
//       only final logits are compared.) The GPU run is repeated with CUDA graphs off: tokens and every step's
//       logits must be bit-identical, and the graphs-on run must have replayed its decode.
//   (c) bench: device copy bandwidth, decode tok/s (CUDA graphs off and on) and achieved GB/s
//       of synthetic models, prefill of 2048 tokens against cuBLAS FP16 GEMM time for the
//       same shapes.
//
// Usage: ember-gpu-check [--models DIR]... [--bench-model FILE]... [--prefill-model FILE]
//                        [--only ops|models|bench] [--op NAME]... [--json FILE] [--device N]
//                        [--module PATH] [--seed N] [--require-models] [--cpu-as-gpu]
//        ember-gpu-check --list-ops                  (the op check table)
//        ember-gpu-check --synth SHAPE TYPE FILE      (write a synthetic model)
//        --op NAME: run only these rows of the op table. --require-models: a model not found
//        is a failure, not a skip. --cpu-as-gpu: run the harness with a second CPU backend in
//        the GPU's place (tests the checker itself on a machine without a GPU; ctest runs it
//        as gpu_check_cpu_as_gpu); quantized matmuls are then held to the tolerance of the CPU's
//        8-bit activations at every n, and the bench section is skipped.
// Exit status: 0 all checks passed, 1 some failed, 2 no CUDA backend.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"
#include "kernels/backend_loader.h"
#include "kernels/common/error.h"
#include "kernels/common/fp16.h"
#include "kernels/cpu/quant.h"

using namespace ember;

namespace {

// ---- results ----------------------------------------------------------------------------

struct Result {
    std::string section, name, metric;
    double value = 0, tol = -1;  // tol < 0: information only
    bool pass = true;
    std::string note;
};
std::vector<Result> g_results;

void record(const std::string& section, const std::string& name, const std::string& metric, double value, double tol,
            const std::string& note = "") {
    Result r{section, name, metric, value, tol, tol < 0 || (std::isfinite(value) && value <= tol), note};
    std::printf("  %-4s %-44s %-14s %11.3e  tol %-9s %s\n", r.pass ? "ok" : "FAIL", name.c_str(), metric.c_str(), value,
                tol < 0 ? "-"
                        : ([&] {
                              char b[32];
                              std::snprintf(b, sizeof b, "%.1e", tol);
                              return std::string(b);
                          })()
                              .c_str(),
                note.c_str());
    std::fflush(stdout);
    g_results.push_back(r);
}

void fail(const std::string& section, const std::string& name, const std::string& why) {
    Result r{section, name, "error", NAN, 0, false, why};
    std::printf("  FAIL %-44s %s\n", name.c_str(), why.c_str());
    std::fflush(stdout);
    g_results.push_back(r);
}

// ---- random data ------------------------------------------------------------------------

uint32_t g_seed = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
bool g_cpu_as_gpu = false;  // the "GPU" is a CPU backend: its matmul uses 8-bit activations at every n
uint32_t next_seed() { return g_seed = g_seed * 1664525u + 1013904223u; }

// Gaussian values whose scale changes every 32 elements over two decades, with outliers:
// like real activations and weights.
std::vector<float> random_floats(size_t n, float scale = 1.0f) {
    std::mt19937 rng(next_seed());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(-1.0f, 1.0f);
    std::vector<float> v(n);
    float s = scale;
    for (size_t i = 0; i < n; ++i) {
        if (i % 32 == 0) s = scale * std::pow(10.0f, mag(rng));
        v[i] = normal(rng) * s * (i % 97 == 13 ? 4.0f : 1.0f);
    }
    return v;
}

size_t type_row_bytes(DType t, int64_t cols) { return row_bytes(*dtype_info(static_cast<uint32_t>(t)), cols); }

// Weights of any matmul type: quantized random floats, or random blocks with moderate
// scales for the types without a quantizer (Q2_K, Q3_K).
std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols) {
    const size_t rb = type_row_bytes(type, cols);
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    if (cpu::can_quantize(type)) {
        const auto f = random_floats(static_cast<size_t>(rows * cols), 0.05f);
        for (int64_t r = 0; r < rows; ++r) cpu::quantize_row(type, f.data() + r * cols, w.data() + r * rb, cols);
        return w;
    }
    std::mt19937 rng(next_seed());
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const auto info = *dtype_info(static_cast<uint32_t>(type));
    const std::vector<int> halves = type == DType::Q2_K ? std::vector<int>{80, 82} : std::vector<int>{108};
    for (size_t blk = 0; blk < w.size() / info.block_bytes; ++blk) {
        for (int off : halves) {
            const uint16_t h = f32_to_fp16(std::ldexp(static_cast<float>(rng() % 1000 + 1) / 1000.0f, -9));
            std::memcpy(&w[blk * info.block_bytes + static_cast<size_t>(off)], &h, 2);
        }
    }
    return w;
}

// ---- tensors ------------------------------------------------------------------------------

Tensor put(Backend& b, const std::vector<float>& v, int64_t cols, int64_t rows,
           MemoryKind kind = MemoryKind::Activations) {
    Tensor t = b.alloc(kind, DType::F32, cols, rows, "check");
    b.upload(t, v.data(), v.size() * sizeof(float));
    return t;
}

std::vector<float> get(Backend& b, const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.rows * t.cols));
    b.download(t, v.data(), v.size() * sizeof(float));
    return v;
}

void poison(Backend& b, Tensor& t) {
    std::vector<float> nan(static_cast<size_t>(t.rows * t.cols), std::numeric_limits<float>::quiet_NaN());
    b.upload(t, nan.data(), nan.size() * sizeof(float));
}

size_t count_nonfinite(const std::vector<float>& v) {
    return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }));
}

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

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        if (!std::isfinite(d)) return INFINITY;
        m = std::max(m, d);
    }
    return m;
}

// Elements whose bits differ (NaN == NaN when the bits match); sizes must match.
size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

struct Batch {
    std::vector<int32_t> tokens, positions, seq_of, kv_slot, block_table, output_rows;
    int32_t n_seqs = 1, max_blocks = 0;
    BatchInfo info() const {
        BatchInfo b;
        b.tokens = tokens;
        b.positions = positions;
        b.seq_of = seq_of;
        b.kv_slot = kv_slot;
        b.block_table = block_table;
        b.n_seqs = n_seqs;
        b.max_blocks = max_blocks;
        b.output_rows = output_rows;
        return b;
    }
};

// A batch of n tokens of one sequence at positions 0..n-1 (for ops that only need positions).
Batch simple_batch(int64_t n, const std::vector<int32_t>& positions = {}) {
    Batch b;
    for (int64_t i = 0; i < n; ++i) {
        b.tokens.push_back(0);
        b.positions.push_back(positions.empty() ? static_cast<int32_t>(i) : positions[static_cast<size_t>(i)]);
        b.seq_of.push_back(0);
        b.kv_slot.push_back(static_cast<int32_t>(i));
    }
    b.block_table = {0};
    b.max_blocks = 1;
    return b;
}

// ---- (a) op checks ----------------------------------------------------------------------------

struct Pair {
    Backend& cpu;
    Backend& gpu;
};

constexpr int64_t kQuantMatvecMaxTokens = 32, kFloatMatvecMaxTokens = 8;  // as cuda_backend.cpp

void check_matmul(Pair& p) {
    std::printf(
        "\n[ops] matmul: W 1024 x 2048, GPU vs float64 (dequantized W, f32 x), 3 sampled tokens x 1024 rows\n"
        "      tolerances (relative L2): f32 paths 1e-5; 8-bit activation matvec (quant, n <= 32) 3e-2;\n"
        "      FP16 GEMM (n > 32 quant, n > 8 F16/BF16) 3e-3; the CPU backend's own error is shown as a note\n");
    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                           DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
    const int64_t rows = 1024, cols = 2048;
    for (DType type : types) {
        const std::string tn(dtype_name(type));
        try {
            const auto wbytes = random_weights(type, rows, cols);
            std::vector<float> wf(static_cast<size_t>(rows * cols));
            const size_t rb = type_row_bytes(type, cols);
            for (int64_t r = 0; r < rows; ++r)
                cpu::dequantize_row(type, wbytes.data() + r * rb, wf.data() + r * cols, cols);
            Tensor wc = p.cpu.load_weight(wbytes.data(), type, cols, rows, "w");
            Tensor wg = p.gpu.load_weight(wbytes.data(), type, cols, rows, "w");
            const bool quant = type != DType::F32 && type != DType::F16 && type != DType::BF16;
            for (int64_t n : {1, 3, 20, 64, 512}) {
                const bool with_bias = n == 3 || n == 64;
                const auto x = random_floats(static_cast<size_t>(n * cols));
                const auto bias = random_floats(static_cast<size_t>(rows));
                Tensor xc = put(p.cpu, x, cols, n), xg = put(p.gpu, x, cols, n);
                Tensor bc = put(p.cpu, bias, rows, 1), bg = put(p.gpu, bias, rows, 1);
                Tensor yc = p.cpu.alloc(MemoryKind::Activations, DType::F32, rows, n, "y");
                Tensor yg = p.gpu.alloc(MemoryKind::Activations, DType::F32, rows, n, "y");
                poison(p.gpu, yg);
                p.cpu.matmul(wc, xc, yc, with_bias ? &bc : nullptr);
                p.gpu.matmul(wg, xg, yg, with_bias ? &bg : nullptr);
                p.gpu.synchronize();
                const auto gy = get(p.gpu, yg), cy = get(p.cpu, yc);
                // float64 reference on tokens {0, n/2, n-1}, all rows
                std::vector<float> gs, cs;
                std::vector<double> ref;
                for (int64_t t : {int64_t{0}, n / 2, n - 1}) {
                    for (int64_t r = 0; r < rows; ++r) {
                        double acc = with_bias ? bias[static_cast<size_t>(r)] : 0.0;
                        const float* wr = wf.data() + r * cols;
                        const float* xr = x.data() + t * cols;
                        for (int64_t c = 0; c < cols; ++c) acc += double(wr[c]) * double(xr[c]);
                        ref.push_back(acc);
                        gs.push_back(gy[static_cast<size_t>(t * rows + r)]);
                        cs.push_back(cy[static_cast<size_t>(t * rows + r)]);
                    }
                }
                const bool matvec = n <= (quant ? kQuantMatvecMaxTokens : kFloatMatvecMaxTokens);
                double tol = 1e-5;
                if (quant && (matvec || g_cpu_as_gpu)) tol = 3e-2;
                else if (type != DType::F32 && !matvec) tol = 3e-3;
                const size_t bad = count_nonfinite(gy);
                char note[96];
                std::snprintf(note, sizeof note, "%s%s; cpu %.1e", matvec ? "matvec" : "gemm", with_bias ? "+bias" : "",
                              rel_l2(cs, ref));
                const std::string name = "matmul " + tn + " n=" + std::to_string(n);
                if (bad) fail("ops", name, std::to_string(bad) + " outputs not finite/unwritten");
                else record("ops", name, "rel_l2", rel_l2(gs, ref), tol, note);
                for (Tensor* t : {&xc, &bc, &yc}) p.cpu.free(*t);
                for (Tensor* t : {&xg, &bg, &yg}) p.gpu.free(*t);
            }
            p.cpu.free(wc);
            p.gpu.free(wg);
        } catch (const std::exception& e) {
            fail("ops", "matmul " + tn, e.what());
        }
    }
}

void check_embed(Pair& p) {
    std::printf(
        "\n[ops] embed: table 300 x 512, 17 tokens, GPU vs CPU backend (same dequantization): rel_l2 <= 1e-6\n");
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q5_1, DType::Q8_0, DType::Q3_K,
                       DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        const std::string name = "embed " + std::string(dtype_name(type));
        try {
            const int64_t vocab = 300, cols = 512, n = 17;
            const auto table = random_weights(type, vocab, cols);
            Tensor tc = p.cpu.load_weight(table.data(), type, cols, vocab, "tok_embd");
            Tensor tg = p.gpu.load_weight(table.data(), type, cols, vocab, "tok_embd");
            Batch b = simple_batch(n);
            std::mt19937 rng(next_seed());
            for (auto& t : b.tokens) t = static_cast<int32_t>(rng() % vocab);
            b.tokens[0] = 0;
            b.tokens[1] = static_cast<int32_t>(vocab - 1);
            p.cpu.set_batch(b.info());
            p.gpu.set_batch(b.info());
            for (float scale : {1.0f, 3.7f}) {
                Tensor oc = p.cpu.alloc(MemoryKind::Activations, DType::F32, cols, n, "x");
                Tensor og = p.gpu.alloc(MemoryKind::Activations, DType::F32, cols, n, "x");
                poison(p.gpu, og);
                p.cpu.embed(tc, scale, oc);
                p.gpu.embed(tg, scale, og);
                const auto g = get(p.gpu, og), c = get(p.cpu, oc);
                if (count_nonfinite(g)) fail("ops", name, "outputs not finite/unwritten");
                else record("ops", name + (scale != 1.0f ? " x3.7" : ""), "rel_l2", rel_l2(g, c), 1e-6);
                p.cpu.free(oc);
                p.gpu.free(og);
            }
            p.cpu.free(tc);
            p.gpu.free(tg);
        } catch (const std::exception& e) {
            fail("ops", name, e.what());
        }
    }
}

void check_rms_norm(Pair& p) {
    std::printf("\n[ops] rms_norm: GPU vs float64, rel_l2 <= 1e-5 (large activations, in place too)\n");
    struct Case {
        int64_t rows, cols;
        float eps;
        bool in_place;
    };
    for (const Case& c : {Case{33, 4096, 1e-5f, false}, Case{160, 128, 1e-6f, true}, Case{7, 2048, 1e-6f, true},
                          Case{40, 8, 1e-5f, false}}) {
        const std::string name =
            "rms_norm " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + (c.in_place ? " in place" : "");
        try {
            const auto x = random_floats(static_cast<size_t>(c.rows * c.cols), 30.0f);
            auto w = random_floats(static_cast<size_t>(c.cols));
            for (auto& v : w) v += 1.0f;
            Tensor xg = put(p.gpu, x, c.cols, c.rows);
            Tensor wg = p.gpu.load_weight(w.data(), DType::F32, c.cols, 1, "norm");
            Tensor yg = c.in_place ? xg : p.gpu.alloc(MemoryKind::Activations, DType::F32, c.cols, c.rows, "y");
            if (!c.in_place) poison(p.gpu, yg);
            p.gpu.rms_norm(xg, wg, c.eps, yg);
            const auto g = get(p.gpu, yg);
            std::vector<double> ref(g.size());
            for (int64_t r = 0; r < c.rows; ++r) {
                double ss = 0;
                for (int64_t i = 0; i < c.cols; ++i) ss += double(x[r * c.cols + i]) * x[r * c.cols + i];
                const double k = 1.0 / std::sqrt(ss / c.cols + c.eps);
                for (int64_t i = 0; i < c.cols; ++i) ref[r * c.cols + i] = x[r * c.cols + i] * k * w[i];
            }
            record("ops", name, "rel_l2", count_nonfinite(g) ? INFINITY : rel_l2(g, ref), 1e-5);
            p.gpu.free(xg);
            if (!c.in_place) p.gpu.free(yg);
            p.gpu.free(wg);
        } catch (const std::exception& e) {
            fail("ops", name, e.what());
        }
    }
}

void check_rope(Pair& p) {
    std::printf(
        "\n[ops] rope: GPU vs float64 (angle in double as the CPU), positions up to 2e5: max|err|/max|x| <= 1e-5\n");
    struct Case {
        int n_heads, head_dim, n_rot;
        bool neox;
        float base, scale;
        bool factors;
    };
    for (const Case& c :
         {Case{8, 128, 128, false, 10000.0f, 1.0f, false}, Case{8, 128, 128, true, 1e6f, 1.0f, false},
          Case{4, 128, 64, false, 10000.0f, 0.25f, false}, Case{32, 64, 64, false, 500000.0f, 1.0f, true},
          Case{2, 256, 256, true, 10000.0f, 0.125f, true}, Case{8, 8, 8, false, 10000.0f, 1.0f, false}}) {
        char nb[128];
        std::snprintf(nb, sizeof nb, "rope h%d d%d rot%d %s%s%s", c.n_heads, c.head_dim, c.n_rot,
                      c.neox ? "neox" : "norm", c.scale != 1.0f ? " scaled" : "", c.factors ? " factors" : "");
        try {
            const int64_t n = 37;
            std::mt19937 rng(next_seed());
            std::vector<int32_t> pos(static_cast<size_t>(n));
            for (auto& v : pos) v = static_cast<int32_t>(rng() % 200000);
            pos[0] = 0;
            pos[1] = 1;
            std::vector<float> factors(static_cast<size_t>(c.n_rot / 2));
            for (auto& f : factors) f = 1.0f + static_cast<float>(rng() % 700) / 100.0f;
            const auto x = random_floats(static_cast<size_t>(n * c.n_heads * c.head_dim));
            Batch b = simple_batch(n, pos);
            p.gpu.set_batch(b.info());
            Tensor xg = put(p.gpu, x, c.head_dim, n * c.n_heads);
            RopeParams rp;
            rp.n_heads = c.n_heads;
            rp.head_dim = c.head_dim;
            rp.n_rot = c.n_rot;
            rp.neox = c.neox;
            rp.freq_base = c.base;
            rp.freq_scale = c.scale;
            rp.freq_factors = c.factors ? factors.data() : nullptr;
            p.gpu.rope(xg, rp);
            const auto g = get(p.gpu, xg);
            std::vector<double> ref(x.begin(), x.end());
            const int half = c.n_rot / 2;
            double xmax = 0, emax = 0;
            for (int64_t t = 0; t < n; ++t) {
                for (int h = 0; h < c.n_heads; ++h) {
                    double* v = ref.data() + (t * c.n_heads + h) * c.head_dim;
                    for (int i = 0; i < half; ++i) {
                        const double ff = c.factors ? factors[static_cast<size_t>(i)] : 1.0;
                        const double f = c.scale * std::pow(double(c.base), -2.0 * i / c.n_rot) / ff;
                        const double th = pos[static_cast<size_t>(t)] * f;
                        const int a = c.neox ? i : 2 * i, bb = c.neox ? i + half : 2 * i + 1;
                        const double x0 = v[a], x1 = v[bb];
                        v[a] = x0 * std::cos(th) - x1 * std::sin(th);
                        v[bb] = x0 * std::sin(th) + x1 * std::cos(th);
                    }
                }
            }
            for (size_t i = 0; i < g.size(); ++i) {
                xmax = std::max(xmax, std::fabs(ref[i]));
                emax = std::max(emax, std::isfinite(g[i]) ? std::fabs(g[i] - ref[i]) : INFINITY);
            }
            record("ops", nb, "max_rel", emax / xmax, 1e-5);
            p.gpu.free(xg);
        } catch (const std::exception& e) {
            fail("ops", nb, e.what());
        }
    }
}

void check_elementwise(Pair& p) {
    std::printf("\n[ops] glu / add / gather: GPU vs float64 (glu, rel_l2 <= 1e-6) or exact (add, gather)\n");
    const int64_t n = 3 * 8192 + 7;
    for (bool gelu : {false, true}) {
        for (bool in_place : {false, true}) {
            const std::string name = std::string(gelu ? "geglu" : "swiglu") + (in_place ? " in place" : "");
            try {
                const auto g = random_floats(static_cast<size_t>(n), 3.0f), u = random_floats(static_cast<size_t>(n));
                Tensor gg = put(p.gpu, g, n, 1), ug = put(p.gpu, u, n, 1);
                Tensor og = in_place ? gg : p.gpu.alloc(MemoryKind::Activations, DType::F32, n, 1, "o");
                if (!in_place) poison(p.gpu, og);
                p.gpu.glu(gg, ug, gelu, og);
                const auto o = get(p.gpu, og);
                std::vector<double> ref(static_cast<size_t>(n));
                for (size_t i = 0; i < ref.size(); ++i) {
                    const double x = g[i];
                    const double a = gelu ? 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                                          : x / (1.0 + std::exp(-x));
                    ref[i] = a * u[i];
                }
                record("ops", name, "rel_l2", count_nonfinite(o) ? INFINITY : rel_l2(o, ref), 1e-6);
                p.gpu.free(gg);
                p.gpu.free(ug);
                if (!in_place) p.gpu.free(og);
            } catch (const std::exception& e) {
                fail("ops", name, e.what());
            }
        }
    }
    try {
        const auto a = random_floats(static_cast<size_t>(n)), b = random_floats(static_cast<size_t>(n));
        Tensor ag = put(p.gpu, a, n, 1), bg = put(p.gpu, b, n, 1);
        p.gpu.add(ag, bg);
        const auto o = get(p.gpu, ag);
        std::vector<float> ref(a.size());
        for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] + b[i];
        record("ops", "add", "max_abs", max_abs_diff(o, ref), 0.0);
        p.gpu.free(ag);
        p.gpu.free(bg);
    } catch (const std::exception& e) {
        fail("ops", "add", e.what());
    }
    try {
        const int64_t rows = 10, cols = 2048;
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
        record("ops", "gather_output_rows", "max_abs", max_abs_diff(o, ref), 0.0);
        p.gpu.free(xg);
        p.gpu.free(og);
    } catch (const std::exception& e) {
        fail("ops", "gather_output_rows", e.what());
    }
}

// store_kv + attention over a paged cache shared by three sequences with shuffled blocks:
// a prefill batch (all three sequences' histories), a decode batch (one token each) and a
// mixed batch; GPU vs the CPU backend.
void check_attention(Pair& p) {
    std::printf(
        "\n[ops] store_kv + attention: 3 sequences (lengths 300/45/1), shuffled 16-token blocks; prefill,\n"
        "      decode and mixed batches. KV bytes GPU vs CPU: F16 identical, Q8_0 <= 0.1%% bytes differ (ties);\n"
        "      attention output GPU vs CPU backend rel_l2 <= 1e-4\n");
    struct Case {
        int n_heads, n_kv_heads, head_dim;
        DType kv;
        int window;
        float softcap;
    };
    const Case cases[] = {
        {8, 2, 64, DType::F16, 0, 0.0f},     {32, 8, 128, DType::F16, 0, 0.0f},  {32, 8, 128, DType::Q8_0, 0, 0.0f},
        {4, 1, 256, DType::F16, 48, 50.0f},  {8, 4, 8, DType::F16, 0, 0.0f},     {9, 3, 64, DType::F16, 0, 0.0f},
        {16, 2, 64, DType::Q8_0, 100, 0.0f}, {40, 4, 128, DType::F16, 0, 30.0f},
    };
    for (const Case& c : cases) {
        char nb[128];
        std::snprintf(nb, sizeof nb, "attn h%d kv%d d%d %s%s%s", c.n_heads, c.n_kv_heads, c.head_dim,
                      std::string(dtype_name(c.kv)).c_str(),
                      c.window ? (" win" + std::to_string(c.window)).c_str() : "", c.softcap > 0 ? " cap" : "");
        try {
            const int bt = 16, n_blocks = 64, max_blocks = 24;
            const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim, q_dim = int64_t{c.n_heads} * c.head_dim;
            KvLayer lc, lg;
            lc.block_tokens = lg.block_tokens = bt;
            lc.n_kv_heads = lg.n_kv_heads = c.n_kv_heads;  // the CPU backend reads the layout from the layer
            lc.head_dim = lg.head_dim = c.head_dim;
            lc.k = p.cpu.alloc(MemoryKind::KvCache, c.kv, kv_dim, n_blocks * bt, "k");
            lc.v = p.cpu.alloc(MemoryKind::KvCache, c.kv, kv_dim, n_blocks * bt, "v");
            lg.k = p.gpu.alloc(MemoryKind::KvCache, c.kv, kv_dim, n_blocks * bt, "k");
            lg.v = p.gpu.alloc(MemoryKind::KvCache, c.kv, kv_dim, n_blocks * bt, "v");
            // Block tables: disjoint shuffled block ids.
            std::vector<int32_t> ids(n_blocks);
            std::iota(ids.begin(), ids.end(), 0);
            std::mt19937 rng(next_seed());
            std::shuffle(ids.begin(), ids.end(), rng);
            std::vector<int32_t> table(3 * max_blocks, 0);
            for (int s = 0; s < 3; ++s)
                for (int j = 0; j < max_blocks && s * 21 + j < n_blocks; ++j)
                    if (j < 21) table[s * max_blocks + j] = ids[static_cast<size_t>(s * 21 + j)];
            int32_t len[3] = {0, 0, 0};
            auto make_batch = [&](const std::vector<std::pair<int, int>>& parts) {  // (seq, n new tokens)
                Batch b;
                for (auto [s, k] : parts) {
                    for (int i = 0; i < k; ++i) {
                        const int32_t pos = len[s]++;
                        b.tokens.push_back(0);
                        b.positions.push_back(pos);
                        b.seq_of.push_back(s);
                        b.kv_slot.push_back(table[s * max_blocks + pos / bt] * bt + pos % bt);
                    }
                }
                b.block_table = table;
                b.n_seqs = 3;
                b.max_blocks = max_blocks;
                return b;
            };
            AttentionParams ap;
            ap.n_heads = c.n_heads;
            ap.n_kv_heads = c.n_kv_heads;
            ap.head_dim = c.head_dim;
            ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
            ap.window = c.window;
            ap.softcap = c.softcap;
            const std::pair<const char*, std::vector<std::pair<int, int>>> steps[] = {
                {"prefill", {{0, 300}, {1, 45}, {2, 1}}},
                {"decode", {{0, 1}, {1, 1}, {2, 1}}},
                {"mixed", {{0, 5}, {2, 1}}}};
            for (const auto& [label, parts] : steps) {
                const Batch b = make_batch(parts);
                const int64_t n = static_cast<int64_t>(b.tokens.size());
                const auto k = random_floats(static_cast<size_t>(n * kv_dim)),
                           v = random_floats(static_cast<size_t>(n * kv_dim));
                const auto q = random_floats(static_cast<size_t>(n * q_dim));
                p.cpu.set_batch(b.info());
                p.gpu.set_batch(b.info());
                Tensor kc = put(p.cpu, k, kv_dim, n), vc = put(p.cpu, v, kv_dim, n), qc = put(p.cpu, q, q_dim, n);
                Tensor kg = put(p.gpu, k, kv_dim, n), vg = put(p.gpu, v, kv_dim, n), qg = put(p.gpu, q, q_dim, n);
                Tensor oc = p.cpu.alloc(MemoryKind::Activations, DType::F32, q_dim, n, "o");
                Tensor og = p.gpu.alloc(MemoryKind::Activations, DType::F32, q_dim, n, "o");
                poison(p.gpu, og);
                p.cpu.store_kv(lc, kc, vc);
                p.gpu.store_kv(lg, kg, vg);
                p.cpu.attention(lc, qc, ap, oc);
                p.gpu.attention(lg, qg, ap, og);
                p.gpu.synchronize();
                const auto go = get(p.gpu, og), co = get(p.cpu, oc);
                const std::string name = std::string(nb) + " " + label;
                if (count_nonfinite(go))
                    fail("ops", name, std::to_string(count_nonfinite(go)) + " outputs not finite/unwritten");
                else record("ops", name, "rel_l2", rel_l2(go, co), 1e-4);
                for (Tensor* t : {&kc, &vc, &qc, &oc}) p.cpu.free(*t);
                for (Tensor* t : {&kg, &vg, &qg, &og}) p.gpu.free(*t);
            }
            // The caches after all three batches.
            for (int kvi = 0; kvi < 2; ++kvi) {
                const Tensor& tc = kvi ? lc.v : lc.k;
                const Tensor& tg = kvi ? lg.v : lg.k;
                std::vector<uint8_t> bc(tc.bytes()), bg(tg.bytes());
                p.cpu.download(tc, bc.data(), bc.size());
                p.gpu.download(tg, bg.data(), bg.size());
                size_t diff = 0;
                for (size_t i = 0; i < bc.size(); ++i) diff += bc[i] != bg[i];
                record("ops", std::string(nb) + (kvi ? " V cache" : " K cache"), "bytes_diff_frac",
                       double(diff) / double(bc.size()), c.kv == DType::F16 ? 0.0 : 1e-3);
            }
            for (Tensor* t : {&lc.k, &lc.v}) p.cpu.free(*t);
            for (Tensor* t : {&lg.k, &lg.v}) p.gpu.free(*t);
        } catch (const std::exception& e) {
            fail("ops", nb, e.what());
        }
    }
}

// Backend::top_k: three 128256-wide rows (ties; mostly -inf; mostly NaN), each with its own
// penalties and bias, GPU vs CPU backend. Everything must match bit for bit: the sampler's
// tokens depend on it.
struct TopKCase {
    std::vector<float> logits;  // n_rows x vocab
    std::vector<std::vector<TokenCount>> pen;
    std::vector<std::vector<TokenBias>> bias;
    std::vector<TopKRow> rows;
};

TopKCase make_top_k_case(int64_t vocab, int n_rows) {
    TopKCase c;
    std::mt19937 rng(next_seed());
    c.logits = random_floats(static_cast<size_t>(vocab * n_rows), 3.0f);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < vocab; ++i)
        c.logits[static_cast<size_t>(i)] = std::round(c.logits[static_cast<size_t>(i)] * 8) / 8;
    for (int64_t i = 0; i < vocab; ++i) {  // row 1: 700 finite values in -inf; row 2: 25 in NaN
        float& r1 = c.logits[static_cast<size_t>(vocab + i)];
        if (rng() % vocab >= 700) r1 = rng() % 1000 ? -inf : nan;
        float& r2 = c.logits[static_cast<size_t>(2 * vocab + i)];
        if (rng() % vocab >= 25) r2 = nan;
    }
    c.pen.resize(static_cast<size_t>(n_rows));
    c.bias.resize(static_cast<size_t>(n_rows));
    for (int r = 0; r < n_rows; ++r) {
        std::vector<int32_t> ids(static_cast<size_t>(vocab));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), rng);
        for (int i = 0; i < 64; ++i)
            c.pen[static_cast<size_t>(r)].push_back({ids[static_cast<size_t>(i)], static_cast<int32_t>(rng() % 5 + 1)});
        for (int i = 64; i < 74; ++i)  // ids[0..3] are penalized too: penalty, then bias
            c.bias[static_cast<size_t>(r)].push_back(
                {ids[static_cast<size_t>(i % 70)], i % 3 == 0 ? -inf : 5.0f - static_cast<float>(i % 7)});
        c.bias[static_cast<size_t>(r)].push_back({static_cast<int32_t>(vocab + 5), 1.0f});  // outside the row: ignored
    }
    for (int r = 0; r < n_rows; ++r) {
        TopKRow row;
        row.repeat_penalty = 1.0f + 0.15f * static_cast<float>(r + 1);
        row.presence_penalty = 0.25f * static_cast<float>(r);
        row.frequency_penalty = 0.125f + 0.1f * static_cast<float>(r);
        row.penalized = c.pen[static_cast<size_t>(r)];
        row.bias = c.bias[static_cast<size_t>(r)];
        c.rows.push_back(row);
    }
    return c;
}

void check_top_k(Pair& p) {
    std::printf(
        "\n[ops] top_k: 3 rows x 128256 (ties; mostly -inf; mostly NaN), penalties + bias, GPU vs CPU backend:\n"
        "      ids, logit bits, counts and the adjusted rows identical\n");
    const int64_t vocab = 128256;
    const int n_rows = 3;
    std::vector<TopKCandidate> oc(static_cast<size_t>(n_rows * kMaxTopK)), og(oc.size());
    for (int k : {1, 40, 1024}) {
        const std::string name = "top_k k=" + std::to_string(k);
        try {
            const TopKCase c = make_top_k_case(vocab, n_rows);
            Tensor lc = put(p.cpu, c.logits, vocab, n_rows), lg = put(p.gpu, c.logits, vocab, n_rows);
            std::fill(og.begin(), og.end(), TopKCandidate{-1, NAN});
            std::vector<int32_t> cc(n_rows), cg(n_rows, -1);
            p.cpu.top_k(lc, k, c.rows, oc, cc);
            p.gpu.top_k(lg, k, c.rows, og, cg);
            size_t bad = bits_differ(get(p.cpu, lc), get(p.gpu, lg));
            std::string note = "counts";
            for (int r = 0; r < n_rows; ++r) {
                note += " " + std::to_string(cg[static_cast<size_t>(r)]);
                if (cc[static_cast<size_t>(r)] != cg[static_cast<size_t>(r)]) {
                    bad += static_cast<size_t>(k);
                    continue;
                }
                for (int i = 0; i < cc[static_cast<size_t>(r)]; ++i) {
                    const TopKCandidate& a = oc[static_cast<size_t>(r * k + i)];
                    const TopKCandidate& b = og[static_cast<size_t>(r * k + i)];
                    bad += a.id != b.id || std::memcmp(&a.logit, &b.logit, sizeof(float)) != 0;
                }
            }
            note += " (cpu " + std::to_string(cc[0]) + " " + std::to_string(cc[1]) + " " + std::to_string(cc[2]) + ")";
            record("ops", name, "mismatches", static_cast<double>(bad), 0, note);
            p.cpu.free(lc);
            p.gpu.free(lg);
        } catch (const std::exception& e) {
            fail("ops", name, e.what());
        }
    }
}

// The op check table: one row per op family, run in this order (--op NAME selects rows).
struct OpCheck {
    const char* name;
    const char* what;
    void (*run)(Pair&);
};
const OpCheck kOpChecks[] = {
    {"matmul", "y = x W^T + bias, 13 weight types, n = 1..512, vs float64", check_matmul},
    {"embed", "dequantized table rows x scale, 10 types, vs the CPU backend", check_embed},
    {"rms_norm", "per row and per head, in place, vs float64", check_rms_norm},
    {"rope", "normal and NeoX, freq_factors, freq_scale, vs float64", check_rope},
    {"elementwise", "glu (SiLU, GELU), add, gather_output_rows", check_elementwise},
    {"attention", "store_kv + attention over a shuffled paged cache, F16 and Q8_0, vs the CPU backend",
     check_attention},
    {"top_k", "the sampler's candidates with penalties and bias, k = 1, 40, 1024, vs the CPU backend", check_top_k},
};

// ---- (b) real models ------------------------------------------------------------------------

struct RunOut {
    std::vector<float> prefill_logits;
    std::vector<std::vector<float>> step_logits;  // logits before each greedy token
    std::vector<int32_t> tokens;
    double prefill_s = 0, decode_s = 0;
};

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

// Prefill `prompt` (one pass, logits of the last token) then `n_gen` greedy steps.
RunOut run_model(std::shared_ptr<const GgufFile> file, Backend& backend, const std::vector<int32_t>& prompt,
                 int n_gen) {
    Transformer tr(file, backend);
    KvCache kv(backend, tr.kv_config(static_cast<int64_t>(prompt.size()) + n_gen + 16, 1));
    const int32_t seq = kv.new_sequence();
    RunOut out;
    auto step = [&](const std::vector<int32_t>& toks, std::vector<float>& logits) {
        const int32_t start = kv.length(seq);
        const auto slots = kv.append(seq, static_cast<int32_t>(toks.size()));
        Batch b;
        b.tokens = toks;
        for (size_t i = 0; i < toks.size(); ++i) {
            b.positions.push_back(start + static_cast<int32_t>(i));
            b.seq_of.push_back(0);
        }
        b.kv_slot = slots;
        b.block_table = kv.block_table(seq);
        b.max_blocks = static_cast<int32_t>(b.block_table.size());
        b.output_rows = {static_cast<int32_t>(toks.size() - 1)};
        tr.forward(b.info(), kv, logits);
    };
    auto t0 = std::chrono::steady_clock::now();
    step(prompt, out.prefill_logits);
    auto t1 = std::chrono::steady_clock::now();
    std::vector<float> logits = out.prefill_logits;
    for (int i = 0; i < n_gen; ++i) {
        out.step_logits.push_back(logits);
        const int32_t next = argmax(logits);
        out.tokens.push_back(next);
        if (i + 1 < n_gen) step({next}, logits);
    }
    auto t2 = std::chrono::steady_clock::now();
    out.prefill_s = std::chrono::duration<double>(t1 - t0).count();
    out.decode_s = std::chrono::duration<double>(t2 - t1).count();
    return out;
}

// The GPU's greedy decode again with CUDA graphs off: a replay issues the very launches the
// eager path does, so tokens and every step's logits must be bit-identical. `used` is what
// the graphs-on run did: its decode steps must (nearly all) have been replays.
void check_graphs(const std::shared_ptr<const GgufFile>& file, const std::string& label,
                  const std::vector<int32_t>& prompt, int n_gen, const RunOut& on, const GraphStats& used,
                  Backend& gpu) {
    if (!gpu.set_graphs(false)) {
        record("models", label + " graphs on vs off", "skipped", 0, -1, "this backend has no graphs");
        return;
    }
    RunOut off;
    try {
        off = run_model(file, gpu, prompt, n_gen);
    } catch (...) {
        gpu.set_graphs(true);
        throw;
    }
    gpu.set_graphs(true);
    size_t bad = bits_differ(on.prefill_logits, off.prefill_logits);
    for (size_t i = 0; i < on.step_logits.size() && i < off.step_logits.size(); ++i)
        bad += bits_differ(on.step_logits[i], off.step_logits[i]);
    for (size_t i = 0; i < on.tokens.size(); ++i) bad += i >= off.tokens.size() || on.tokens[i] != off.tokens[i];
    char note[160];
    std::snprintf(note, sizeof note, "decode %.3f s with graphs, %.3f s without", on.decode_s, off.decode_s);
    record("models", label + " graphs on vs off", "bits_differ", static_cast<double>(bad), 0, note);
    std::snprintf(note, sizeof note, "%llu replayed, %llu captured, %llu eager, %llu failed captures",
                  static_cast<unsigned long long>(used.replayed), static_cast<unsigned long long>(used.captured),
                  static_cast<unsigned long long>(used.eager), static_cast<unsigned long long>(used.failures));
    // n_gen - 1 decode passes: the first runs eagerly, the second is captured, the rest replay.
    record("models", label + " decode passes not replayed", "passes",
           static_cast<double>(used.eager + used.captured + used.failures), 4, note);
}

GraphStats stats_delta(const GraphStats& a, const GraphStats& b) {
    return {b.eager - a.eager, b.captured - a.captured, b.replayed - a.replayed, b.failures - a.failures};
}

void check_model(const std::string& path, const std::string& label, double logit_tol, Pair& p) {
    std::printf("\n[models] %s: %s\n", label.c_str(), path.c_str());
    try {
        auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
        auto tok = Tokenizer::from_gguf(*file);
        const std::string prompt_text =
            "Once upon a time, in a small village by the sea, there lived a curious girl who";
        std::vector<int32_t> prompt = tok->encode(prompt_text, true, false);
        if (prompt.empty() || (tok->bos() >= 0 && prompt.front() != tok->bos()))
            prompt.insert(prompt.begin(), tok->bos() >= 0 ? tok->bos() : 1);
        const int n_gen = 32;
        const RunOut c = run_model(file, p.cpu, prompt, n_gen);
        const GraphStats before = p.gpu.graph_stats();
        const RunOut g = run_model(file, p.gpu, prompt, n_gen);
        const GraphStats used = stats_delta(before, p.gpu.graph_stats());
        std::printf("  prompt %zu tokens; CPU prefill %.3f s, %d tokens %.3f s; GPU prefill %.3f s, %d tokens %.3f s\n",
                    prompt.size(), c.prefill_s, n_gen, c.decode_s, g.prefill_s, n_gen, g.decode_s);
        record("models", label + " prefill logits", "max_abs", max_abs_diff(g.prefill_logits, c.prefill_logits),
               logit_tol);
        // Greedy tokens: identical, except where the CPU's top-2 margin is within 2x the
        // logit tolerance (a near-tie either backend may break either way).
        int first_diff = -1;
        for (int i = 0; i < n_gen; ++i)
            if (g.tokens[static_cast<size_t>(i)] != c.tokens[static_cast<size_t>(i)]) {
                first_diff = i;
                break;
            }
        double step_err = 0;
        const int same_until = first_diff < 0 ? n_gen : first_diff;
        for (int i = 0; i < same_until; ++i)
            step_err = std::max(
                step_err, max_abs_diff(g.step_logits[static_cast<size_t>(i)], c.step_logits[static_cast<size_t>(i)]));
        record("models", label + " logits, every step", "max_abs", step_err, -1, "info (same tokens fed)");
        if (first_diff < 0) {
            record("models", label + " 32 greedy tokens", "mismatches", 0, 0);
        } else {
            auto l = c.step_logits[static_cast<size_t>(first_diff)];
            std::vector<float> s = l;
            std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
            const double margin = s[0] - s[1];
            const bool tie = margin < 2 * logit_tol;
            char note[160];
            std::snprintf(note, sizeof note, "first differs at step %d (CPU %d, GPU %d), CPU top-2 margin %.3f%s",
                          first_diff, c.tokens[static_cast<size_t>(first_diff)],
                          g.tokens[static_cast<size_t>(first_diff)], margin, tie ? ": near-tie, not counted" : "");
            record("models", label + " 32 greedy tokens", "mismatches", tie ? 0 : n_gen - first_diff, 0, note);
        }
        std::string cs, gs;
        for (int32_t t : c.tokens) cs += std::to_string(t) + " ";
        for (int32_t t : g.tokens) gs += std::to_string(t) + " ";
        std::printf("  CPU tokens: %s\n  GPU tokens: %s\n", cs.c_str(), gs.c_str());
        std::printf("  GPU text: %s\n", tok->decode(g.tokens).c_str());
        check_graphs(file, label, prompt, n_gen, g, used, p.gpu);
    } catch (const std::exception& e) {
        fail("models", label, e.what());
    }
}

// ---- (c) benchmarks -------------------------------------------------------------------------

struct BenchRow {
    std::string what;
    double value;
    std::string unit;
    std::string note;
};
std::vector<BenchRow> g_bench;

void bench_row(const std::string& what, double value, const std::string& unit, const std::string& note = "") {
    std::printf("  %-46s %10.2f %-8s %s\n", what.c_str(), value, unit.c_str(), note.c_str());
    std::fflush(stdout);
    g_bench.push_back({what, value, unit, note});
}

// Bytes a decode step must read: every weight matrix once (the embedding table only for one
// row, unless it is also the output matrix).
double decode_weight_bytes(const GgufFile& f) {
    double b = 0;
    const bool tied = f.find_tensor("output.weight") == nullptr;
    for (const auto& t : f.tensors()) {
        if (t.name == "token_embd.weight" && !tied) b += double(t.n_bytes) / double(t.rows());
        else b += double(t.n_bytes);
    }
    return b;
}

void bench_decode(const std::string& path, Backend& gpu) {
    std::printf("\n[bench] decode: %s\n", path.c_str());
    try {
        auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
        const double wbytes = decode_weight_bytes(*file);
        auto t0 = std::chrono::steady_clock::now();
        Transformer tr(file, gpu);
        gpu.synchronize();
        const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const int n_prompt = 32, n_warm = 4, n_timed = 64;
        KvCache kv(gpu, tr.kv_config(n_prompt + 2 * (n_warm + n_timed) + 16, 1));
        const int32_t seq = kv.new_sequence();
        std::vector<float> logits;
        std::mt19937 rng(next_seed());
        auto step = [&](std::vector<int32_t> toks) {
            const int32_t start = kv.length(seq);
            Batch b;
            b.tokens = toks;
            for (size_t i = 0; i < toks.size(); ++i) {
                b.positions.push_back(start + static_cast<int32_t>(i));
                b.seq_of.push_back(0);
            }
            b.kv_slot = kv.append(seq, static_cast<int32_t>(toks.size()));
            b.block_table = kv.block_table(seq);
            b.max_blocks = static_cast<int32_t>(b.block_table.size());
            b.output_rows = {static_cast<int32_t>(toks.size() - 1)};
            tr.forward(b.info(), kv, logits);
        };
        std::vector<int32_t> prompt(n_prompt);
        for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(tr.config().n_vocab));
        step(prompt);
        // Seconds per token and graph use, graphs off first (the later run has the longer context).
        auto timed = [&](bool graphs) {
            gpu.set_graphs(graphs);
            for (int i = 0; i < n_warm; ++i) step({argmax(logits)});
            const GraphStats g0 = gpu.graph_stats();
            const auto t1 = std::chrono::steady_clock::now();
            for (int i = 0; i < n_timed; ++i) step({argmax(logits)});
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() / n_timed;
            return std::make_pair(s, stats_delta(g0, gpu.graph_stats()));
        };
        const double s_off = timed(false).first;
        const auto [s, g_on] = timed(true);
        const std::string name = std::filesystem::path(path).stem().string();
        char note[160];
        std::snprintf(note, sizeof note, "%.1f ms/token, launch by launch", s_off * 1e3);
        bench_row("decode " + name + " (no graphs)", 1.0 / s_off, "tok/s", note);
        std::snprintf(note, sizeof note, "%.2f GB weights/token, %.1f ms/token, %llu/%d replayed, load %.1f s",
                      wbytes / 1e9, s * 1e3, static_cast<unsigned long long>(g_on.replayed), n_timed, load_s);
        bench_row("decode " + name + " (graphs)", 1.0 / s, "tok/s", note);
        bench_row("decode " + name + " achieved", wbytes / s / 1e9, "GB/s", "weight bytes / time per token, graphs");
    } catch (const std::exception& e) {
        fail("bench", "decode " + path, e.what());
    }
}

void bench_prefill(const std::string& path, Backend& gpu, const CudaModule* mod, int device) {
    const int n = 2048;
    std::printf("\n[bench] prefill %d tokens: %s\n", n, path.c_str());
    try {
        auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
        Transformer tr(file, gpu);
        const ModelConfig& c = tr.config();
        KvCache kv(gpu, tr.kv_config(n + 16, 2));
        std::mt19937 rng(next_seed());
        std::vector<float> logits;
        auto prefill = [&] {
            const int32_t seq = kv.new_sequence();
            Batch b;
            for (int i = 0; i < n; ++i) {
                b.tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_vocab)));
                b.positions.push_back(i);
                b.seq_of.push_back(0);
            }
            b.kv_slot = kv.append(seq, n);
            b.block_table = kv.block_table(seq);
            b.max_blocks = static_cast<int32_t>(b.block_table.size());
            b.output_rows = {n - 1};
            const auto t0 = std::chrono::steady_clock::now();
            tr.forward(b.info(), kv, logits);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            kv.free_sequence(seq);
            return s;
        };
        prefill();  // warm-up: scratch buffers, cuBLAS heuristics
        const double s = std::min(prefill(), prefill());
        const std::string name = std::filesystem::path(path).stem().string();
        bench_row("prefill " + std::to_string(n) + " " + name, n / s, "tok/s",
                  "best of 2 after warm-up, " + std::to_string(static_cast<int>(s * 1e3)) + " ms");
        // The same GEMMs alone (cuBLAS FP16, FP32 accumulate) per layer x layers.
        double gemm_s = 0;
        const int shapes[][2] = {{c.q_dim(), c.n_embd}, {c.kv_dim(), c.n_embd}, {c.kv_dim(), c.n_embd},
                                 {c.n_embd, c.q_dim()}, {c.n_ff, c.n_embd},     {c.n_ff, c.n_embd},
                                 {c.n_embd, c.n_ff}};
        double flops = 0;
        for (const auto& sh : shapes) {
            double t = 0;
            char why[512] = {};
            if (!mod || !mod->bench_gemm_f16 || !mod->bench_gemm_f16(device, sh[0], n, sh[1], 10, &t, why, sizeof why))
                throw Error(std::string("GEMM measurement failed: ") + (mod ? why : "no CUDA module"));
            gemm_s += t;
            flops += 2.0 * n * sh[0] * sh[1];
        }
        gemm_s *= c.n_layers;
        flops *= c.n_layers;
        char note[160];
        std::snprintf(note, sizeof note, "layer GEMMs alone: %.1f ms = %.0f%% of the prefill's %.1f ms", gemm_s * 1e3,
                      100.0 * gemm_s / s, s * 1e3);
        bench_row("cuBLAS FP16 GEMM, same shapes, n=" + std::to_string(n), flops / gemm_s / 1e12, "TFLOP/s", note);
    } catch (const std::exception& e) {
        fail("bench", "prefill " + path, e.what());
    }
}

// ---- main ------------------------------------------------------------------------------------

void print_summary() {
    std::printf("\n================================ summary ================================\n");
    for (const char* section : {"ops", "models", "bench"}) {
        int n = 0, bad = 0;
        for (const Result& r : g_results)
            if (r.section == section) {
                ++n;
                bad += !r.pass;
            }
        if (n) std::printf("%-7s %3d checks, %d failed\n", section, n, bad);
    }
    for (const Result& r : g_results)
        if (!r.pass)
            std::printf("FAILED  %-44s %s = %.3e (tol %.1e) %s\n", r.name.c_str(), r.metric.c_str(), r.value, r.tol,
                        r.note.c_str());
    if (!g_bench.empty()) {
        std::printf("\n%-46s %10s %-8s %s\n", "benchmark", "value", "unit", "note");
        for (const BenchRow& b : g_bench)
            std::printf("%-46s %10.2f %-8s %s\n", b.what.c_str(), b.value, b.unit.c_str(), b.note.c_str());
    }
}

void write_json(const std::string& path, const std::string& device) {
    std::ofstream o(path);
    auto esc = [](const std::string& s) {
        std::string r;
        for (char ch : s) {
            if (ch == '"' || ch == '\\') r += '\\';
            if (static_cast<unsigned char>(ch) >= 0x20) r += ch;
        }
        return r;
    };
    auto num = [](double v) { return std::isfinite(v) ? std::to_string(v) : std::string("null"); };
    o << "{\n  \"device\": \"" << esc(device) << "\",\n  \"checks\": [\n";
    for (size_t i = 0; i < g_results.size(); ++i) {
        const Result& r = g_results[i];
        o << "    {\"section\": \"" << r.section << "\", \"name\": \"" << esc(r.name) << "\", \"metric\": \""
          << r.metric << "\", \"value\": " << num(r.value) << ", \"tol\": " << num(r.tol)
          << ", \"pass\": " << (r.pass ? "true" : "false") << ", \"note\": \"" << esc(r.note) << "\"}"
          << (i + 1 < g_results.size() ? "," : "") << "\n";
    }
    o << "  ],\n  \"bench\": [\n";
    for (size_t i = 0; i < g_bench.size(); ++i) {
        const BenchRow& b = g_bench[i];
        o << "    {\"what\": \"" << esc(b.what) << "\", \"value\": " << num(b.value) << ", \"unit\": \"" << b.unit
          << "\", \"note\": \"" << esc(b.note) << "\"}" << (i + 1 < g_bench.size() ? "," : "") << "\n";
    }
    o << "  ]\n}\n";
}

int usage() {
    std::fprintf(stderr,
                 "usage: ember-gpu-check [--models DIR]... [--bench-model FILE]... [--prefill-model FILE]\n"
                 "                       [--only ops|models|bench] [--op NAME]... [--json FILE] [--device N]\n"
                 "                       [--module PATH] [--seed N] [--require-models] [--cpu-as-gpu]\n"
                 "       ember-gpu-check --list-ops\n"
                 "       ember-gpu-check --synth SHAPE TYPE FILE\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> model_dirs, bench_models;
    std::string prefill_model, only, json, module;
    int device = 0;
    bool cpu_as_gpu = false, require_models = false;
    std::vector<std::string> ops;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) throw Error("missing value after " + a);
            return argv[++i];
        };
        try {
            if (a == "--models") model_dirs.push_back(val());
            else if (a == "--bench-model") bench_models.push_back(val());
            else if (a == "--prefill-model") prefill_model = val();
            else if (a == "--only") only = val();
            else if (a == "--json") json = val();
            else if (a == "--device") device = std::stoi(val());
            else if (a == "--module") module = val();
            else if (a == "--cpu-as-gpu") cpu_as_gpu = true;
            else if (a == "--op") ops.push_back(val());
            else if (a == "--seed") g_seed = static_cast<uint32_t>(std::stoul(val()));
            else if (a == "--require-models") require_models = true;
            else if (a == "--list-ops") {
                for (const OpCheck& c : kOpChecks) std::printf("%-12s %s\n", c.name, c.what);
                return 0;
            } else if (a == "--synth") {
                if (i + 3 >= argc) return usage();
                const SyntheticShape shape = synthetic_shape(argv[i + 1]);
                write_synthetic_model(argv[i + 3], shape, argv[i + 2]);
                std::printf("wrote %s (%s, %s)\n", argv[i + 3], argv[i + 1], argv[i + 2]);
                return 0;
            } else if (a == "-h" || a == "--help") return usage();
            else {
                std::fprintf(stderr, "unknown argument %s\n", a.c_str());
                return usage();
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "ember-gpu-check: %s\n", e.what());
            return 2;
        }
    }

    BackendRequest req;
    req.preference = BackendPreference::Cuda;
    req.cuda_module = module;
    req.cuda_device = device;
    for (const std::string& name : ops)
        if (std::none_of(std::begin(kOpChecks), std::end(kOpChecks),
                         [&](const OpCheck& c) { return name == c.name; })) {
            std::fprintf(stderr, "ember-gpu-check: no op check '%s' (--list-ops)\n", name.c_str());
            return 2;
        }
    g_cpu_as_gpu = cpu_as_gpu;
    BackendChoice gpu;
    if (cpu_as_gpu) {
        gpu.backend = make_cpu_backend(0);
        gpu.device = "cpu-as-gpu";
        if (only.empty()) only = "ops+models";
    } else {
        gpu = choose_backend(req);
    }
    if (gpu.device == "cpu") {
        std::printf("ember-gpu-check: no CUDA backend: %s\n", gpu.reason.c_str());
        return 2;
    }
    std::string why;
    const CudaModule* mod = cpu_as_gpu ? nullptr : load_cuda_module(req, why);
    std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    std::printf("GPU backend: %s (module %s)\nCPU backend: %s\nrandom seed %u\n", gpu.backend->name().c_str(),
                mod ? mod->path.c_str() : "?", cpu->name().c_str(), g_seed);
    Pair p{*cpu, *gpu.backend};
    // Graphs on whatever EMBER_CUDA_GRAPHS says: the model checks compare them with graphs off.
    std::printf("CUDA graphs: %s\n", gpu.backend->set_graphs(true)
                                         ? "on (the model checks repeat the decode with them off)"
                                         : "not a feature of this backend");

    try {
        if (only.empty() || only == "ops" || only == "ops+models") {
            for (const OpCheck& c : kOpChecks)
                if (ops.empty() || std::find(ops.begin(), ops.end(), c.name) != ops.end()) c.run(p);
        }
        if (only.empty() || only == "models" || only == "ops+models") {
            // stories260K (F32): GPU paths are FP32 (cuBLAS FP32 GEMM, f32 matvec): tight.
            // Quantized models: the GPU prefill uses FP16 GEMMs, the CPU 8-bit activations.
            struct M {
                const char* file;
                const char* label;
                double tol;
            };
            const M models[] = {{"stories260K.gguf", "stories260K F32", 1e-3},
                                {"SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M Q4_1", 0.35},
                                {"gemma-3-270m-q4_k_m.gguf", "Gemma-3-270M Q4_K_M", 0.35}};
            for (const M& m : models) {
                std::string found;
                for (const auto& d : model_dirs) {
                    for (const std::string& cand : {d + "/" + m.file, d + "/models/" + m.file}) {
                        if (found.empty() && std::filesystem::exists(cand)) found = cand;
                    }
                }
                if (found.empty()) {
                    std::printf("\n[models] !!! SKIPPED %s: %s not found in any --models dir !!!\n", m.label, m.file);
                    if (require_models) fail("models", m.label, std::string(m.file) + " not found (--require-models)");
                    else
                        record("models", std::string(m.label) + " (missing file)", "skipped", 0, -1,
                               "SKIPPED: not on this machine");
                    continue;
                }
                check_model(found, m.label, m.tol, p);
            }
        }
        if (only.empty() || only == "bench") {
            std::printf("\n[bench] device copy bandwidth (cudaMemcpy D2D, 2 x 2 GiB, median of 20; read + write)\n");
            double gbps = 0;
            char buf[512] = {};
            if (mod && mod->bench_copy && mod->bench_copy(device, 2ull << 30, 20, &gbps, buf, sizeof buf))
                bench_row("copy bandwidth D2D", gbps, "GB/s");
            else fail("bench", "copy bandwidth", buf);
            for (const auto& m : bench_models) bench_decode(m, *gpu.backend);
            if (!prefill_model.empty()) bench_prefill(prefill_model, *gpu.backend, mod, device);
        }
    } catch (const std::exception& e) {
        fail("main", "unexpected error", e.what());
    }

    const MemoryReport mr = gpu.backend->memory();
    std::printf("\nGPU memory now: %.2f GiB used by Ember, %.1f of %.1f GiB free\n", mr.total() / double(1ull << 30),
                mr.device_free / double(1ull << 30), mr.device_total / double(1ull << 30));
    if (!json.empty()) write_json(json, gpu.backend->name());
    print_summary();
    for (const Result& r : g_results)
        if (!r.pass) return 1;
    return 0;
}
