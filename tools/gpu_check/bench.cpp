// ember-gpu-check (c): device copy bandwidth (in gpu_check.cpp, through the module), decode
// tok/s (CUDA graphs off and on) and achieved GB/s of a model, prefill of 2048 tokens against
// cuBLAS FP16 GEMM time for the same shapes.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/transformer.h"
#include "kernels/common/error.h"
#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using opdata::Batch;
using opdata::next_seed;

namespace {

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

}  // namespace

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

}  // namespace ember::gpucheck
