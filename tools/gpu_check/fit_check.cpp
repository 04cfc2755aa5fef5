// ember-gpu-check (d): the fit planner (engine/fit) against what a model load then holds on
// the GPU. Each case loads a model with the CUDA backend at a context and batch, runs one
// prefill of a full batch (the pass that sizes the per-pass scratch and the backend's
// grow-only buffers), and compares, per kind, Model::memory_use() with fit::plan_layers():
// weights, KV cache, scratch (the transformer's plus the backend's own buffers, which the
// planner estimates) within the 2 %, and the device's free memory before and after
// (cudaMemGetInfo: what the card really gave, the cuBLAS workspace and allocation rounding
// included) against the plan's total. A split case checks both sides. With --cpu-as-gpu
// the same runs on the CPU backend (the planner's CPU profile), so the stage runs in ctest.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/fit/planner.h"
#include "engine/kv/kv_batch.h"
#include "engine/runtime/model.h"
#include "tools/gpu_check/check.h"

namespace ember::gpucheck {

namespace {

constexpr int32_t kFitBatch = 512;

// One prefill of min(kFitBatch, n_ctx) tokens into a new sequence, then freed.
void prefill_batch(Model& m, int64_t n_ctx) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(kFitBatch, n_ctx));
    KvCache& kv = m.kv();
    const int32_t seq = kv.new_sequence();
    std::vector<int32_t> toks;
    for (int32_t i = 0; i < n; ++i) toks.push_back(1 + i % 97);
    KvBatch batch;
    batch.add(seq, toks, kv.append(seq, n), 0, true);
    std::vector<float> logits;
    m.transformer().forward(batch.info(kv), kv, logits);
    kv.free_sequence(seq);
}

double rel_diff(uint64_t planned, uint64_t actual) {
    const double d = planned > actual ? double(planned - actual) : double(actual - planned);
    return actual ? d / double(actual) : (planned ? 1.0 : 0.0);
}

std::string bytes_note(uint64_t planned, uint64_t actual) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "planned %.1f MiB, actual %.1f MiB", planned / 1048576.0, actual / 1048576.0);
    return buf;
}

void compare_side(const std::string& label, const fit::DeviceBytes& planned, const DeviceMemory& used) {
    auto row = [&](const char* kind, uint64_t p, uint64_t a, double tol) {
        record("fit", label + " " + kind, "rel_diff", rel_diff(p, a), tol, bytes_note(p, a));
    };
    row("weights", planned.weights + planned.mapped_weights, used.weights + used.mapped_weights, 0.02);
    row("kv cache", planned.kv_cache, used.kv_cache, 0.02);
    if (planned.state + used.state > 0) row("state", planned.state, used.state, 0.02);
    // On the GPU the backend's own buffers are accounted as activations too (an estimate).
    row("scratch", planned.scratch + planned.backend_scratch, used.scratch, 0.02);
    row("held", planned.total() - planned.overhead, used.held(), 0.02);
}

// `gpu_layers` -1: all on the GPU; else a split with the first gpu_layers layers on it.
void check_fit_case(const std::string& path, const std::string& name, int64_t n_ctx, int32_t gpu_layers, Backend& gpu,
                    bool cpu_as_gpu) {
    char label[160];
    std::snprintf(label, sizeof label, "%s ctx %lld%s", name.c_str(), static_cast<long long>(n_ctx),
                  gpu_layers >= 0 ? (" split " + std::to_string(gpu_layers)).c_str() : "");
    try {
        LoadOptions lo;
        lo.path = path;
        lo.device = cpu_as_gpu ? BackendPreference::Cpu : BackendPreference::Cuda;
        lo.n_ctx = n_ctx;
        lo.n_batch = kFitBatch;
        lo.n_gpu_layers = gpu_layers;
        const uint64_t free_before = gpu.memory().device_free;
        auto model = Model::load(lo);
        prefill_batch(*model, n_ctx);  // returns logits: the pass has finished
        const uint64_t free_after = gpu.memory().device_free;
        const std::vector<DeviceMemory> used = model->memory_use();

        const fit::FitOptions fo{n_ctx, 1, kFitBatch, DType::F16};
        const fit::Budget budget{cpu_as_gpu ? 0 : free_before, uint64_t{1} << 40, true};
        const fit::FitPlan plan = fit::plan_layers(fit::fit_model(model->file()), fo, budget, gpu_layers);
        std::printf("\n[fit] %s: %s; %s\n", label, fit::placement_name(plan.placement), plan.reason.c_str());
        if (cpu_as_gpu) {
            compare_side(label, plan.cpu, used.at(0));
            return;
        }
        compare_side(std::string(label) + " gpu", plan.gpu, used.at(0));
        if (used.size() > 1) compare_side(std::string(label) + " cpu", plan.cpu, used.at(1));
        // What the card gave: cudaMalloc's rounding and the new backend's cuBLAS workspace are
        // in this and not in the per-kind report. Tiny models: information only.
        const uint64_t delta = free_before > free_after ? free_before - free_after : 0;
        const uint64_t planned = plan.gpu.total() - plan.gpu.overhead;
        record("fit", std::string(label) + " device free drop", "rel_diff", rel_diff(planned, delta),
               planned >= (uint64_t{256} << 20) ? 0.02 : -1.0, bytes_note(planned, delta));
    } catch (const std::exception& e) {
        fail("fit", label, e.what());
    }
}

}  // namespace

void check_fit(const std::vector<std::string>& models, Backend& gpu, bool cpu_as_gpu) {
    const MemoryReport start = gpu.memory();
    if (!cpu_as_gpu && start.device_total) {
        // Held before any model: the CUDA context, this process's first backend, other processes.
        const uint64_t held = start.device_total - start.device_free;
        record("fit", "device memory held before any model", "vs_estimate",
               double(held) / double(fit::kCudaContextBytes), -1,
               bytes_note(fit::kCudaContextBytes, held) + " (kCudaContextBytes)");
    }
    auto name_of = [](const std::string& path) { return path.substr(path.find_last_of('/') + 1); };
    for (const std::string& path : models)
        for (int64_t ctx : {2048, 8192}) check_fit_case(path, name_of(path), ctx, -1, gpu, cpu_as_gpu);
    // The first 8 layers on the GPU, the rest and the output head on the CPU (largest model last).
    if (!cpu_as_gpu && !models.empty()) check_fit_case(models.back(), name_of(models.back()), 8192, 8, gpu, false);
}

}  // namespace ember::gpucheck
