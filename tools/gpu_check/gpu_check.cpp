// ember-gpu-check: the CUDA backend against the CPU backend, and the GPU's speed, in one run
// on a bare CUDA machine (scripts/gpu-check.sh builds it with the `gpu` preset and runs it).
//
//   (a) ops: the op check table (op_table.cpp, in the style of llama.cpp's test-backend-ops):
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
//   (c) bench: device copy bandwidth, single ops at Llama-3-8B shapes (bench_ops.cpp), decode tok/s (CUDA graphs off
//   and on) and achieved GB/s
//       of synthetic models, prefill of 2048 tokens against cuBLAS FP16 GEMM time for the
//       same shapes.
//   (d) fit: the fit planner's bytes against a model load on the GPU, per kind and as the
//       card's free memory drop (fit_check.cpp), for the real models found and the
//       --bench-model files, at 2048 and 8192 tokens, and a split.
//
// Usage: ember-gpu-check [--models DIR]... [--bench-model FILE]... [--prefill-model FILE]
//                        [--only STAGE[+STAGE...]] [--op NAME]... [--json FILE] [--device N]
//                        [--module PATH] [--seed N] [--require-models] [--cpu-as-gpu]
//        ember-gpu-check --list-ops                  (the op check table)
//        ember-gpu-check --synth SHAPE TYPE FILE      (write a synthetic model)
//        --only: stages ops, models, bench, fit (default: all four; with --cpu-as-gpu
//        ops+models+fit); opbench: only bench's single-op table (also with --cpu-as-gpu). --op NAME: run only these
//        rows of the op table. --require-models: a model not found is a failure, not a skip. --cpu-as-gpu: run the
//        harness with a second CPU backend in the GPU's place (tests the checker itself on a machine without a GPU;
//        ctest runs it as gpu_check_cpu_as_gpu); quantized matmuls are then held to the tolerance of the CPU's 8-bit
//        activations at every n, and the bench section is skipped.
// Exit status: 0 all checks passed, 1 some failed, 2 no CUDA backend.
//
// This file is the driver; the checks are in ops_*.cpp, models.cpp and bench.cpp (check.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/synthetic.h"
#include "kernels/backend.h"
#include "kernels/backend_loader.h"
#include "kernels/common/error.h"
#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

using namespace ember;
using namespace ember::gpucheck;

namespace {

struct Options {
    std::vector<std::string> model_dirs, bench_models, ops;
    std::string prefill_model, only, json, module;
    int device = 0;
    bool cpu_as_gpu = false, require_models = false;
    uint32_t seed = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
};

int usage() {
    std::fprintf(
        stderr,
        "usage: ember-gpu-check [--models DIR]... [--bench-model FILE]... [--prefill-model FILE]\n"
        "                       [--only ops|models|bench|fit[+...]] [--op NAME]... [--json FILE] [--device N]\n"
        "                       [--module PATH] [--seed N] [--require-models] [--cpu-as-gpu]\n"
        "       ember-gpu-check --list-ops\n"
        "       ember-gpu-check --synth SHAPE TYPE FILE\n");
    return 2;
}

// Fills `o` from argv; returns -1 to go on, else the exit status (--list-ops, --synth, errors).
int parse_args(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) throw Error("missing value after " + a);
            return argv[++i];
        };
        try {
            if (a == "--models") o.model_dirs.push_back(val());
            else if (a == "--bench-model") o.bench_models.push_back(val());
            else if (a == "--prefill-model") o.prefill_model = val();
            else if (a == "--only") o.only = val();
            else if (a == "--json") o.json = val();
            else if (a == "--device") o.device = std::stoi(val());
            else if (a == "--module") o.module = val();
            else if (a == "--cpu-as-gpu") o.cpu_as_gpu = true;
            else if (a == "--op") o.ops.push_back(val());
            else if (a == "--seed") o.seed = static_cast<uint32_t>(std::stoul(val()));
            else if (a == "--require-models") o.require_models = true;
            else if (a == "--list-ops") {
                for (const OpCheck& c : op_checks()) std::printf("%-12s %s\n", c.name, c.what);
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
    for (const std::string& name : o.ops)
        if (std::none_of(op_checks().begin(), op_checks().end(), [&](const OpCheck& c) { return name == c.name; })) {
            std::fprintf(stderr, "ember-gpu-check: no op check '%s' (--list-ops)\n", name.c_str());
            return 2;
        }
    return -1;
}

void run_ops(Pair& p, const Options& o) {
    for (const OpCheck& c : op_checks())
        if (o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), c.name) != o.ops.end()) c.run(p);
}

// The first of `dirs` (or its models/ folder) holding `file`; empty when none does.
std::string find_model(const std::vector<std::string>& dirs, const std::string& file) {
    for (const auto& d : dirs)
        for (const std::string& cand : {d + "/" + file, d + "/models/" + file})
            if (std::filesystem::exists(cand)) return cand;
    return "";
}

// Whether --only names `stage` (a list joined by '+'); no --only: every stage.
bool wants(const Options& o, const std::string& stage) {
    if (o.only.empty()) return true;
    size_t at = 0;
    for (size_t plus; (plus = o.only.find('+', at)) != std::string::npos; at = plus + 1)
        if (o.only.compare(at, plus - at, stage) == 0) return true;
    return o.only.compare(at, std::string::npos, stage) == 0;
}

// The real models of the model checks. stories260K (F32): GPU paths are FP32 (cuBLAS FP32
// GEMM, f32 matvec): tight. Quantized models: the GPU prefill uses FP16 GEMMs, the CPU 8-bit
// activations.
struct RealModel {
    const char* file;
    const char* label;
    double tol;
};
constexpr RealModel kRealModels[] = {{"stories260K.gguf", "stories260K F32", 1e-3},
                                     {"SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M Q4_1", 0.35},
                                     {"gemma-3-270m-q4_k_m.gguf", "Gemma-3-270M Q4_K_M", 0.35}};

// The fit stage's models: the real ones found, then the --bench-model files (largest last).
std::vector<std::string> fit_models(const Options& o) {
    std::vector<std::string> out;
    for (const RealModel& m : kRealModels)
        if (std::string f = find_model(o.model_dirs, m.file); !f.empty()) out.push_back(f);
    out.insert(out.end(), o.bench_models.begin(), o.bench_models.end());
    return out;
}

void run_models(Pair& p, const Options& o) {
    for (const RealModel& m : kRealModels) {
        const std::string found = find_model(o.model_dirs, m.file);
        if (found.empty()) {
            std::printf("\n[models] !!! SKIPPED %s: %s not found in any --models dir !!!\n", m.label, m.file);
            if (o.require_models) fail("models", m.label, std::string(m.file) + " not found (--require-models)");
            else
                record("models", std::string(m.label) + " (missing file)", "skipped", 0, -1,
                       "SKIPPED: not on this machine");
            continue;
        }
        check_model(found, m.label, m.tol, p);
    }
}

void run_bench(Backend& gpu, const CudaModule* mod, const Options& o) {
    std::printf("\n[bench] device copy bandwidth (cudaMemcpy D2D, 2 x 2 GiB, median of 20; read + write)\n");
    double gbps = 0;
    char buf[512] = {};
    if (mod && mod->bench_copy && mod->bench_copy(o.device, 2ull << 30, 20, &gbps, buf, sizeof buf))
        bench_row("copy bandwidth D2D", gbps, "GB/s");
    else fail("bench", "copy bandwidth", buf);
    bench_ops(gpu);
    for (const auto& m : o.bench_models) bench_decode(m, gpu);
    if (!o.prefill_model.empty()) bench_prefill(o.prefill_model, gpu, mod, o.device);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (const int rc = parse_args(argc, argv, o); rc >= 0) return rc;
    opdata::set_seed(o.seed);

    BackendRequest req;
    req.preference = BackendPreference::Cuda;
    req.cuda_module = o.module;
    req.cuda_device = o.device;
    BackendChoice gpu;
    if (o.cpu_as_gpu) {
        gpu.backend = make_cpu_backend(0);
        gpu.device = "cpu-as-gpu";
        if (o.only.empty()) o.only = "ops+models+fit";
    } else {
        gpu = choose_backend(req);
    }
    if (gpu.device == "cpu") {
        std::printf("ember-gpu-check: no CUDA backend: %s\n", gpu.reason.c_str());
        return 2;
    }
    std::string why;
    const CudaModule* mod = o.cpu_as_gpu ? nullptr : load_cuda_module(req, why);
    std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    std::printf("GPU backend: %s (module %s)\nCPU backend: %s\nrandom seed %u\n", gpu.backend->name().c_str(),
                mod ? mod->path.c_str() : "?", cpu->name().c_str(), o.seed);
    Pair p{*cpu, *gpu.backend, o.cpu_as_gpu};
    // Graphs on whatever EMBER_CUDA_GRAPHS says: the model checks compare them with graphs off.
    std::printf("CUDA graphs: %s\n", gpu.backend->set_graphs(true)
                                         ? "on (the model checks repeat the decode with them off)"
                                         : "not a feature of this backend");

    try {
        if (wants(o, "ops")) run_ops(p, o);
        if (wants(o, "models")) run_models(p, o);
        if (wants(o, "fit")) check_fit(fit_models(o), *gpu.backend, o.cpu_as_gpu);
        if (wants(o, "bench")) run_bench(*gpu.backend, mod, o);
        else if (wants(o, "opbench")) bench_ops(*gpu.backend);
    } catch (const std::exception& e) {
        fail("main", "unexpected error", e.what());
    }

    const MemoryReport mr = gpu.backend->memory();
    std::printf("\nGPU memory now: %.2f GiB used by Ember, %.1f of %.1f GiB free\n", mr.total() / double(1ull << 30),
                mr.device_free / double(1ull << 30), mr.device_total / double(1ull << 30));
    if (!o.json.empty()) write_json(o.json, gpu.backend->name());
    print_summary();
    return all_passed() ? 0 : 1;
}
