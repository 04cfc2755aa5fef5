// The fit planner: how many bytes a model takes on each device before it is loaded, from
// the same formulas the load uses (tensor bytes from the GGUF table, the KV pool of
// KvCacheConfig, the per-pass scratch of Transformer::scratch_layout, each allocation padded
// as the backend pads it, kernels/common/alloc_size.h), and the placement that follows from a
// VRAM and RAM budget: all layers on the GPU, the first N of M on the GPU (the rest and the
// output head on the CPU, as Transformer's split constructor places them), or the CPU.
//
// Exact for what the engine accounts in Model::memory_use() (tests/engine/fit checks it
// within 2 % on real models on the CPU). Two GPU terms are estimates and are reported apart
// (DeviceBytes::backend_scratch, ::overhead): the CUDA backend's own grow-only buffers
// (FP16 weight tiles, quantized activations, attention partials) and, for a budget given as a
// card size rather than measured, the CUDA context and cuBLAS workspace.
#pragma once
#include <cstdint>
#include <string>

#include "engine/fit/fit_model.h"

namespace ember::fit {

// How one kind of backend turns buffers into bytes.
struct DeviceProfile {
    bool gpu = false;
    size_t alloc_align = 64;   // each allocation rounded up to this (kernels/common/alloc_size.h)
    bool maps_weights = true;  // weights used in place from the file map (CPU) or copied (GPU)
};
DeviceProfile cpu_profile();
DeviceProfile cuda_profile();

struct FitOptions {
    int64_t n_ctx = 0;      // tokens per sequence; 0 = Transformer::default_context
    int32_t n_seqs = 1;     // sequences the KV cache holds
    int32_t n_batch = 512;  // prompt tokens per pass (the scratch is sized for the largest pass)
    DType kv_type = DType::F16;
};

// Bytes free for the model. vram = 0: no GPU. A measured budget (free memory reported by the
// backend after it started) already excludes the CUDA context; a stated one (`--vram 24GiB`,
// a card's size) does not, and the planner takes kCudaContextBytes off it.
struct Budget {
    uint64_t vram = 0;
    uint64_t ram = 0;
    bool vram_measured = false;
};
// Estimates, not yet checked on a GPU: `ember-gpu-check --only fit` (scripts/gpu-run.sh fit)
// compares the plan with loads on one, the card's free-memory drop included.
constexpr uint64_t kCudaContextBytes = uint64_t{512} << 20;  // context + cuBLAS handle and workspace

// What one device holds, by the kinds of Model::memory_use() (DeviceMemory), plus the GPU
// estimates.
struct DeviceBytes {
    int32_t layers = 0;           // whole layers (attention, norms, shared FFN, KV cache)
    int32_t expert_layers = 0;    // layers whose experts are here (MoE models)
    uint64_t expert_weights = 0;  // of weights + mapped_weights: the experts' bytes
    uint64_t weights = 0;         // allocated copies (GPU)
    uint64_t mapped_weights = 0;  // used in place from the file map (CPU): resident in RAM
    uint64_t kv_cache = 0;
    uint64_t state = 0;            // linear-attention layers' recurrent state, a slot per sequence
    uint64_t scratch = 0;          // the transformer's per-pass activations
    uint64_t backend_scratch = 0;  // the CUDA backend's own buffers (estimate)
    uint64_t overhead = 0;         // the CUDA context, for a stated budget (estimate)
    uint64_t total() const {
        return weights + mapped_weights + kv_cache + state + scratch + backend_scratch + overhead;
    }
};

// ExpertsInRam: every layer on the GPU except the experts of its last layers, which stay in
// RAM and run on the CPU.
enum class Placement { Gpu, Split, Cpu, TooLarge, ExpertsInRam };
const char* placement_name(Placement p);  // "gpu", "split", "cpu", "too large", "experts in RAM"

struct FitPlan {
    Placement placement = Placement::TooLarge;
    int32_t n_layers = 0;
    int32_t gpu_layers = 0;  // layers on the GPU (== n_layers for Gpu, 0 for Cpu)
    // Of those, the layers whose experts are on the GPU too: the first gpu_expert_layers
    // (== gpu_layers but for ExpertsInRam; always gpu_layers for a model without experts).
    int32_t gpu_expert_layers = 0;
    int32_t n_expert = 0, n_expert_used = 0;  // the model's (0: no experts)
    int64_t n_ctx = 0;                        // as resolved (0 in the options -> the default)
    int32_t n_batch = 0;
    DeviceBytes gpu, cpu;
    Budget budget;
    std::string reason;  // one line: what goes where and why
};

// The bytes of a given placement: gpu_layers = -1 all on the GPU (or all on the CPU when
// the budget has no GPU), 0..n_layers-1 a split (the first gpu_layers on the GPU);
// gpu_expert_layers = -1 the experts follow their layers, else only the first
// gpu_expert_layers layers' experts are on the GPU (at most gpu_layers). Does not judge
// whether it fits.
// `gpu` describes the GPU side (a test passes cpu_profile() to check a split between two
// CPU backends exactly).
FitPlan plan_layers(const FitModel& m, const FitOptions& o, const Budget& b, int32_t gpu_layers,
                    const DeviceProfile& gpu = cuda_profile(), int32_t gpu_expert_layers = -1);
// The best placement for the budget: all on the GPU if it fits; for a model with experts,
// every layer on the GPU with the experts of as many layers as fit (the rest in RAM); else
// the most layers that leave both sides within budget; else the CPU; else TooLarge (the
// reason says by how much).
FitPlan plan(const FitModel& m, const FitOptions& o, const Budget& b);
// A target with a draft model for speculative decoding (engine/scheduler/draft_model.h), as
// `ember run --draft` loads them: the target first, planned as plan() plans it; then the draft,
// with the same options (context, sequences, batch: it follows every token the target holds),
// planned by plan() in the budget the target left (its bytes taken off both sides; the CUDA
// context counted once). fits() when both do.
struct DraftFitPlan {
    FitPlan target, draft;
    uint64_t gpu_total() const { return target.gpu.total() + draft.gpu.total(); }
    uint64_t cpu_total() const { return target.cpu.total() + draft.cpu.total(); }
};
DraftFitPlan plan_with_draft(const FitModel& target, const FitModel& draft, const FitOptions& o, const Budget& b);
bool fits(const DraftFitPlan& p);
// "an 8192-token context", "a 4096-token context": for the one-line reasons.
std::string context_words(int64_t n_ctx);
// Whether the model has expert tensors ("blk.N.ffn_*_exps.*"; with their router,
// "blk.N.ffn_gate_inp.*", and gemma4's "blk.N.{pre,post}_ffw_norm_2.*", they are a layer's
// experts, on the experts' device).
bool has_experts(const FitModel& m);
bool is_expert_tensor(const std::string& name);
// Whether a plan's two sides are within its budget.
bool fits(const FitPlan& p);

}  // namespace ember::fit
