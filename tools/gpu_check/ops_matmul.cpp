// Op checks of the weight-reading ops: matmul (every weight type, matvec and GEMM paths) and
// embed (every table type). Each case names its types, shapes and error bound.
#include <cstdio>
#include <random>

#include "kernels/cpu/quant.h"
#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using namespace ember::opdata;

namespace {

constexpr int64_t kQuantMatvecMaxTokens = 32, kFloatMatvecMaxTokens = 8;  // as cuda_backend.cpp

// matmul: W rows x cols of `type` against n = 1..512 tokens (bias at n = 3 and 64); the bound
// is the relative L2 error vs float64 on the GPU's matvec path (n <= 32 quantized, <= 8
// float) and on its GEMM path (FP16, or FP32 for F32).
struct MatmulCase {
    DType type;
    double matvec_rel_l2, gemm_rel_l2;
};
constexpr int64_t kMatmulRows = 1024, kMatmulCols = 2048;
const int64_t kMatmulTokens[] = {1, 3, 20, 64, 512};
constexpr double kF32 = 1e-5, kAct8 = 3e-2, kFp16 = 3e-3;  // f32 paths; 8-bit activations; FP16 GEMM
const MatmulCase kMatmulCases[] = {
    {DType::F32, kF32, kF32},    {DType::F16, kF32, kFp16},   {DType::BF16, kF32, kFp16},  {DType::Q4_0, kAct8, kFp16},
    {DType::Q4_1, kAct8, kFp16}, {DType::Q5_0, kAct8, kFp16}, {DType::Q5_1, kAct8, kFp16}, {DType::Q8_0, kAct8, kFp16},
    {DType::Q2_K, kAct8, kFp16}, {DType::Q3_K, kAct8, kFp16}, {DType::Q4_K, kAct8, kFp16}, {DType::Q5_K, kAct8, kFp16},
    {DType::Q6_K, kAct8, kFp16},
};

bool is_quant(DType t) { return t != DType::F32 && t != DType::F16 && t != DType::BF16; }

// GPU and CPU outputs on tokens {0, n/2, n-1}, all rows, and their float64 reference.
struct Sampled {
    std::vector<float> gpu, cpu;
    std::vector<double> ref;
};
Sampled sample_matmul(const std::vector<float>& wf, const std::vector<float>& x, const std::vector<float>* bias,
                      const std::vector<float>& gy, const std::vector<float>& cy, int64_t n) {
    const int64_t rows = kMatmulRows, cols = kMatmulCols;
    Sampled s;
    for (int64_t t : {int64_t{0}, n / 2, n - 1}) {
        for (int64_t r = 0; r < rows; ++r) {
            double acc = bias ? (*bias)[static_cast<size_t>(r)] : 0.0;
            const float* wr = wf.data() + r * cols;
            const float* xr = x.data() + t * cols;
            for (int64_t c = 0; c < cols; ++c) acc += double(wr[c]) * double(xr[c]);
            s.ref.push_back(acc);
            s.gpu.push_back(gy[static_cast<size_t>(t * rows + r)]);
            s.cpu.push_back(cy[static_cast<size_t>(t * rows + r)]);
        }
    }
    return s;
}

// One n of one weight type: both backends on the same x (and bias).
void check_matmul_n(Pair& p, const MatmulCase& mc, const std::vector<float>& wf, const Tensor& wc, const Tensor& wg,
                    int64_t n) {
    const int64_t rows = kMatmulRows, cols = kMatmulCols;
    const bool quant = is_quant(mc.type), with_bias = n == 3 || n == 64;
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
    const Sampled s = sample_matmul(wf, x, with_bias ? &bias : nullptr, gy, cy, n);
    const bool matvec = n <= (quant ? kQuantMatvecMaxTokens : kFloatMatvecMaxTokens);
    // A CPU "GPU" uses 8-bit activations at every n: the matvec bound holds for it throughout.
    const double tol = matvec || (quant && p.cpu_as_gpu) ? mc.matvec_rel_l2 : mc.gemm_rel_l2;
    const size_t bad = count_nonfinite(gy);
    char note[96];
    std::snprintf(note, sizeof note, "%s%s; cpu %.1e", matvec ? "matvec" : "gemm", with_bias ? "+bias" : "",
                  rel_l2(s.cpu, s.ref));
    const std::string name = "matmul " + std::string(dtype_name(mc.type)) + " n=" + std::to_string(n);
    if (bad) fail("ops", name, std::to_string(bad) + " outputs not finite/unwritten");
    else record("ops", name, "rel_l2", rel_l2(s.gpu, s.ref), tol, note);
    for (Tensor* t : {&xc, &bc, &yc}) p.cpu.free(*t);
    for (Tensor* t : {&xg, &bg, &yg}) p.gpu.free(*t);
}

// embed: a vocab x cols table of `type`, n tokens (the first and last id among them), scales
// 1 and 3.7; GPU vs the CPU backend (the same dequantization).
struct EmbedCase {
    DType type;
    double rel_l2;
};
constexpr int64_t kEmbedVocab = 300, kEmbedCols = 512, kEmbedTokens = 17;
const EmbedCase kEmbedCases[] = {
    {DType::F32, 1e-6},  {DType::F16, 1e-6},  {DType::BF16, 1e-6}, {DType::Q4_0, 1e-6}, {DType::Q5_1, 1e-6},
    {DType::Q8_0, 1e-6}, {DType::Q3_K, 1e-6}, {DType::Q4_K, 1e-6}, {DType::Q5_K, 1e-6}, {DType::Q6_K, 1e-6},
};

void check_embed_case(Pair& p, const EmbedCase& ec) {
    const std::string name = "embed " + std::string(dtype_name(ec.type));
    const int64_t vocab = kEmbedVocab, cols = kEmbedCols, n = kEmbedTokens;
    const auto table = random_weights(ec.type, vocab, cols);
    Tensor tc = p.cpu.load_weight(table.data(), ec.type, cols, vocab, "tok_embd");
    Tensor tg = p.gpu.load_weight(table.data(), ec.type, cols, vocab, "tok_embd");
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
        else record("ops", name + (scale != 1.0f ? " x3.7" : ""), "rel_l2", rel_l2(g, c), ec.rel_l2);
        p.cpu.free(oc);
        p.gpu.free(og);
    }
    p.cpu.free(tc);
    p.gpu.free(tg);
}

}  // namespace

void check_matmul(Pair& p) {
    std::printf(
        "\n[ops] matmul: W 1024 x 2048, GPU vs float64 (dequantized W, f32 x), 3 sampled tokens x 1024 rows\n"
        "      tolerances (relative L2): f32 paths 1e-5; 8-bit activation matvec (quant, n <= 32) 3e-2;\n"
        "      FP16 GEMM (n > 32 quant, n > 8 F16/BF16) 3e-3; the CPU backend's own error is shown as a note\n");
    for (const MatmulCase& mc : kMatmulCases) {
        try {
            const auto wbytes = random_weights(mc.type, kMatmulRows, kMatmulCols);
            const std::vector<float> wf = dequantize_matrix(mc.type, wbytes.data(), kMatmulRows, kMatmulCols);
            Tensor wc = p.cpu.load_weight(wbytes.data(), mc.type, kMatmulCols, kMatmulRows, "w");
            Tensor wg = p.gpu.load_weight(wbytes.data(), mc.type, kMatmulCols, kMatmulRows, "w");
            for (int64_t n : kMatmulTokens) check_matmul_n(p, mc, wf, wc, wg, n);
            p.cpu.free(wc);
            p.gpu.free(wg);
        } catch (const std::exception& e) {
            fail("ops", "matmul " + std::string(dtype_name(mc.type)), e.what());
        }
    }
}

void check_embed(Pair& p) {
    std::printf(
        "\n[ops] embed: table 300 x 512, 17 tokens, GPU vs CPU backend (same dequantization): rel_l2 <= 1e-6\n");
    for (const EmbedCase& ec : kEmbedCases) {
        try {
            check_embed_case(p, ec);
        } catch (const std::exception& e) {
            fail("ops", "embed " + std::string(dtype_name(ec.type)), e.what());
        }
    }
}

}  // namespace ember::gpucheck
