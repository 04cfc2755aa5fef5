#include "engine/fit/planner.h"

#include <algorithm>
#include <optional>
#include <set>

#include "engine/kv/kv_cache.h"
#include "engine/models/transformer.h"
#include "kernels/common/alloc_size.h"
#include "kernels/common/format.h"
#include "kernels/cpu/matmul.h"

namespace ember::fit {
namespace {

// Which tensors a device holds, as Transformer::load_weights places them: the layers in
// [first, end), the embedding on the first layer's device, the output norm and head on the
// last layer's (the embedding again when the head is tied to it and the devices differ).
// rope_freqs stays a host vector; the per-layer token table stays in the file map (read on
// the host per pass), its projection and norm go with the embedding.
// Experts (and their router): those of the layers in [expert_first, expert_end).
struct Part {
    int32_t first = 0, end = 0;
    int32_t expert_first = 0, expert_end = 0;
    bool embedding = false, head = false;
};

bool holds(const ModelConfig& c, const FitTensor& t, const Part& p, bool tied_copy) {
    if (t.layer >= 0 && is_expert_tensor(t.name)) return t.layer >= p.expert_first && t.layer < p.expert_end;
    if (t.layer >= 0) return t.layer >= p.first && t.layer < p.end && !Transformer::skips_tensor(c, t.layer, t.name);
    if (t.name == "token_embd.weight") return p.embedding || (p.head && tied_copy);
    if (t.name == "per_layer_model_proj.weight" || t.name == "per_layer_proj_norm.weight") return p.embedding;
    if (t.name == "output_norm.weight" || t.name == "output.weight") return p.head;
    return false;
}

bool has_tensor(const FitModel& m, const std::string& name) {
    return std::any_of(m.tensors.begin(), m.tensors.end(), [&](const FitTensor& t) { return t.name == name; });
}

uint64_t grown(uint64_t need) {  // a CUDA grow-only buffer: up to 1.5x what it needed, whole MiB
    return need ? (need + need / 2 + (1u << 20) - 1) / (1u << 20) * (1u << 20) : 0;
}

// The CUDA backend's own grow-only buffers at passes of up to T tokens (kernels/cuda/
// cuda_backend.cpp): q8 activations for matrix-vector passes, FP16 activations and weight
// tiles for GEMM passes, attention partials. An upper estimate, not checked on a GPU here.
uint64_t cuda_backend_scratch(const FitModel& m, const Part& p, bool tied_copy, int64_t T) {
    constexpr int64_t kQuantMatvecMax = 32, kFloatMatvecMax = 8, kTileElems = int64_t{32} << 20;
    int64_t max_cols = 0, max_tile = 0;
    bool quant = false, gemm = false;
    for (const FitTensor& t : m.tensors) {
        if (t.rows <= 1 || !holds(m.config, t, p, tied_copy)) continue;
        const bool q = dtype_info(static_cast<uint32_t>(t.type))->block_elems > 1;
        quant |= q;
        max_cols = std::max(max_cols, t.cols);
        if (t.type != DType::F32 && T > (q ? kQuantMatvecMax : kFloatMatvecMax)) {
            gemm = true;
            max_tile = std::max(max_tile, std::min(t.rows, std::max<int64_t>(64, kTileElems / t.cols)) * t.cols * 2);
        }
    }
    // Expert matmuls (moe.cu) quantize every slot's row, T * n_expert_used of them, at any T.
    const int64_t tq = std::max(std::min(T, kQuantMatvecMax), T * m.config.n_expert_used);
    uint64_t total = quant ? grown(static_cast<uint64_t>(tq * max_cols + tq * (max_cols / 32) * 8)) : 0;
    if (gemm) total += grown(static_cast<uint64_t>(T * max_cols * 2)) + grown(static_cast<uint64_t>(max_tile));
    const ModelConfig& c = m.config;
    const int64_t splits = 32;  // the most key-range splits a short pass uses, by assumption
    total += grown(static_cast<uint64_t>(std::max<int64_t>(T, kFloatMatvecMax) * splits * c.max_heads() *
                                         (c.max_head_dim() + 2) * 4));
    return total;
}

DeviceBytes device_bytes(const FitModel& m, const FitOptions& o, const DeviceProfile& d, const Part& p, bool measured) {
    const ModelConfig& c = m.config;
    const bool tied_copy = !p.embedding && !has_tensor(m, "output.weight");
    DeviceBytes out;
    out.layers = p.end - p.first;
    out.expert_layers = has_experts(m) ? p.expert_end - p.expert_first : 0;
    for (const FitTensor& t : m.tensors) {
        if (!holds(c, t, p, tied_copy)) continue;
        // Loaded as `pieces` allocations of rows / pieces rows each (Transformer::load_pieces).
        const int32_t pieces = Transformer::load_pieces(c, t.name);
        const uint64_t bytes = t.bytes / static_cast<uint64_t>(pieces);
        // The CPU backend maps weights in place unless its kernels want them rearranged (an
        // expert tensor: each expert's matrix, Backend::load_expert_weight).
        const bool mapped = d.maps_weights && cpu::preferred_layout(t.type, t.rows / pieces / t.matrices, t.cols) ==
                                                  cpu::WeightLayout::Rows;
        const uint64_t held =
            mapped ? t.bytes : static_cast<uint64_t>(pieces) * padded_alloc_bytes(bytes, d.alloc_align);
        (mapped ? out.mapped_weights : out.weights) += held;
        if (is_expert_tensor(t.name)) out.expert_weights += held;
    }
    // Transformer's Device::ones: a [head_dim] F32 weight per head size the V norms here use.
    std::set<int32_t> ones;
    for (int32_t i = p.first; i < p.end; ++i)
        if (c.v_norm && c.owns_kv(i)) ones.insert(c.layers[static_cast<size_t>(i)].head_dim);
    for (const int32_t dim : ones) {
        const uint64_t bytes = static_cast<uint64_t>(dim) * sizeof(float);
        if (d.maps_weights && cpu::preferred_layout(DType::F32, 1, dim) == cpu::WeightLayout::Rows)
            out.mapped_weights += bytes;
        else out.weights += padded_alloc_bytes(bytes, d.alloc_align);
    }
    // K and V pools of the layers here that keep K/V of their own, each at its layer's shape.
    const KvCacheConfig kv = Transformer::kv_config(c, o.n_ctx, o.n_seqs, o.kv_type);
    for (int32_t i = p.first; i < p.end; ++i)
        if (c.owns_kv(i))
            out.kv_cache += 2 * padded_alloc_bytes(kv.layer_pool_bytes(Transformer::kv_layer_of(c, i)), d.alloc_align);
    // The recurrent state of the linear-attention layers here (qwen35), one slot per sequence.
    for (int32_t i = p.first; i < p.end; ++i)
        if (c.layers[static_cast<size_t>(i)].recurrent)
            out.state += padded_alloc_bytes(kv.recurrent.conv_bytes(kv.state_slots), d.alloc_align) +
                         padded_alloc_bytes(kv.recurrent.delta_bytes(kv.state_slots), d.alloc_align);
    const int64_t T = std::min<int64_t>(o.n_batch, o.n_ctx);
    out.scratch = Transformer::scratch_bytes(c, T, o.n_seqs, d.alloc_align);
    if (d.gpu) {
        out.backend_scratch = cuda_backend_scratch(m, p, tied_copy, T);
        if (!measured) out.overhead = kCudaContextBytes;
    }
    return out;
}

std::string gib(uint64_t n) { return format_bytes(n); }

}  // namespace

DeviceProfile cpu_profile() { return {false, kCpuAllocAlign, true}; }
DeviceProfile cuda_profile() { return {true, kCudaAllocAlign, false}; }

const char* placement_name(Placement p) {
    switch (p) {
        case Placement::Gpu:
            return "gpu";
        case Placement::Split:
            return "split";
        case Placement::Cpu:
            return "cpu";
        case Placement::ExpertsInRam:
            return "experts in RAM";
        case Placement::TooLarge:
            break;
    }
    return "too large";
}

// The experts and their router: where the experts run, the router does (Transformer), and
// with them gemma4's router scale (ffn_gate_inp.scale), per-expert scales (_exps.scale) and
// the expert branch's norms (pre_ffw_norm_2, post_ffw_norm_2).
bool is_expert_tensor(const std::string& name) {
    return name.rfind("blk.", 0) == 0 &&
           (name.find("_exps.") != std::string::npos || name.find(".ffn_gate_inp.") != std::string::npos ||
            name.find("_ffw_norm_2.") != std::string::npos);
}

bool has_experts(const FitModel& m) {
    return std::any_of(m.tensors.begin(), m.tensors.end(), [](const FitTensor& t) { return is_expert_tensor(t.name); });
}

FitPlan plan_layers(const FitModel& m, const FitOptions& opts, const Budget& b, int32_t gpu_layers,
                    const DeviceProfile& gpu, int32_t gpu_expert_layers) {
    FitOptions o = opts;
    if (o.n_ctx <= 0) o.n_ctx = Transformer::default_context(m.config);
    const int32_t L = m.config.n_layers;
    FitPlan p;
    p.n_layers = L;
    p.n_ctx = o.n_ctx;
    p.n_batch = o.n_batch;
    p.budget = b;
    if (has_experts(m)) p.n_expert = m.config.n_expert, p.n_expert_used = m.config.n_expert_used;
    if (b.vram == 0) {
        p.placement = Placement::Cpu;
        p.cpu = device_bytes(m, o, cpu_profile(), {0, L, 0, L, true, true}, b.vram_measured);
        return p;
    }
    // Transformer's split: the embedding follows layer 0, the head the last layer; the
    // experts of the layers past the first e stay on the CPU.
    const int32_t g = gpu_layers < 0 || gpu_layers >= L ? L : gpu_layers;
    const int32_t e = gpu_expert_layers < 0 || !has_experts(m) ? g : std::min(gpu_expert_layers, g);
    p.placement = g < L ? Placement::Split : e < g ? Placement::ExpertsInRam : Placement::Gpu;
    p.gpu_layers = g;
    p.gpu_expert_layers = e;
    p.gpu = device_bytes(m, o, gpu, {0, g, 0, e, g > 0, g == L}, b.vram_measured);
    if (p.placement != Placement::Gpu)
        p.cpu = device_bytes(m, o, cpu_profile(), {g, L, e, L, g == 0, g < L}, b.vram_measured);
    return p;
}

bool fits(const FitPlan& p) {
    const bool gpu_ok = p.placement == Placement::Cpu || p.gpu.total() <= p.budget.vram;
    const bool cpu_ok = p.cpu.total() == 0 || p.cpu.total() <= p.budget.ram;
    return gpu_ok && cpu_ok;
}

namespace {

std::string gpu_line(const FitPlan& p) {
    return gib(p.gpu.total()) + " of " + gib(p.budget.vram) + (p.budget.vram_measured ? " free" : "") + " VRAM";
}
std::string ram_line(const FitPlan& p) { return gib(p.cpu.total()) + " of " + gib(p.budget.ram) + " RAM"; }
std::string ctx_line(const FitPlan& p) { return context_words(p.n_ctx); }

// Every layer on the GPU and the experts of as many layers as fit there, the rest in RAM:
// for a model with experts, before moving whole layers (and their attention) to the CPU.
std::optional<FitPlan> plan_experts_in_ram(const FitModel& m, const FitOptions& o, const Budget& b,
                                           const FitPlan& all) {
    if (!has_experts(m)) return std::nullopt;
    const int32_t L = m.config.n_layers;
    for (int32_t e = L - 1; e >= 0; --e) {
        FitPlan p = plan_layers(m, o, b, -1, cuda_profile(), e);
        if (!fits(p)) continue;
        p.reason = "all " + std::to_string(L) + " layers on the GPU with " + ctx_line(p) + ", " +
                   (e == 0 ? std::string("their experts") : "the experts of " + std::to_string(L - e) + " of them") +
                   " in RAM (" + gpu_line(p) + ", " + ram_line(p) + "): all on the GPU would need " +
                   gib(all.gpu.total()) + "; experts are read " + std::to_string(m.config.n_expert_used) + " of " +
                   std::to_string(m.config.n_expert) + " per token, attention for every token";
        return p;
    }
    return std::nullopt;
}

}  // namespace

std::string context_words(int64_t n_ctx) {
    const std::string n = std::to_string(n_ctx);
    return (n[0] == '8' ? "an " : "a ") + n + "-token context";
}

DraftFitPlan plan_with_draft(const FitModel& target, const FitModel& draft, const FitOptions& o, const Budget& b) {
    DraftFitPlan p;
    p.target = plan(target, o, b);
    FitOptions d = o;
    d.n_ctx = p.target.n_ctx;  // the target's context as resolved: the draft holds the same tokens
    const auto left = [](uint64_t have, uint64_t take) { return have > take ? have - take : 0; };
    Budget rest = b;
    rest.ram = left(b.ram, p.target.cpu.total());
    if (b.vram > 0) {
        // The target's plan took the CUDA context off a stated budget already: not twice.
        rest.vram = std::max<uint64_t>(left(b.vram, p.target.gpu.total()), 1);
        rest.vram_measured = true;
    }
    p.draft = plan(draft, d, rest);
    p.draft.budget = rest;
    return p;
}

bool fits(const DraftFitPlan& p) {
    return p.target.placement != Placement::TooLarge && p.draft.placement != Placement::TooLarge;
}

FitPlan plan(const FitModel& m, const FitOptions& o, const Budget& b) {
    const int32_t L = m.config.n_layers;
    if (b.vram > 0) {
        FitPlan all = plan_layers(m, o, b, -1);
        if (fits(all)) {
            all.reason = "all " + std::to_string(L) + " layers on the GPU with " + ctx_line(all) + ": " + gpu_line(all);
            return all;
        }
        if (std::optional<FitPlan> p = plan_experts_in_ram(m, o, b, all)) return *p;
        for (int32_t n = L - 1; n >= 1; --n) {
            if (!Transformer::split_supported(m.config, n)) continue;  // a layer apart from its K/V
            FitPlan p = plan_layers(m, o, b, n);
            if (!fits(p)) continue;
            p.reason = std::to_string(n) + " of " + std::to_string(L) + " layers on the GPU (" + gpu_line(p) +
                       "), the rest on the CPU (" + ram_line(p) + "); all on the GPU would need " +
                       gib(all.gpu.total());
            return p;
        }
        Budget cpu_only = b;
        cpu_only.vram = 0;
        FitPlan p = plan_layers(m, o, cpu_only, -1);
        p.budget = b;
        if (fits(p)) {
            p.reason = "on the CPU with " + ctx_line(p) + " (" + ram_line(p) + "): not one layer fits the GPU's " +
                       gib(b.vram) + (b.vram_measured ? " free" : "");
            return p;
        }
        p.placement = Placement::TooLarge;
        p.reason = "does not fit: " + ctx_line(p) + " needs " + gib(all.gpu.total()) + " on the GPU (" + gib(b.vram) +
                   " there) or " + gib(p.cpu.total()) + " of RAM (" + gib(b.ram) + " there)";
        return p;
    }
    FitPlan p = plan_layers(m, o, b, -1);
    if (fits(p)) {
        p.reason = "on the CPU (no GPU) with " + ctx_line(p) + ": " + ram_line(p);
        return p;
    }
    p.placement = Placement::TooLarge;
    p.reason =
        "does not fit: " + ctx_line(p) + " needs " + gib(p.cpu.total()) + " of RAM, " + gib(b.ram) + " there (no GPU)";
    return p;
}

}  // namespace ember::fit
