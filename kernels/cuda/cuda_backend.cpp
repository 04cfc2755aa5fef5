// The CUDA backend: device memory with per-kind accounting, one stream for every op, the
// batch layout uploaded once per set_batch, and the op launchers of kernels/cuda/*.cu.
//
// Op semantics are those of the CPU backend (kernels/cpu/cpu_backend.cpp); the self-check
// (ember-gpu-check, tools/gpu_check/gpu_check.cpp) compares every op against it.
//
// Ordering: every op is enqueued on stream_ and runs asynchronously; download() and
// synchronize() wait. Host-side staging buffers are only reused after an event says the
// device has consumed them.
//
// CUDA graphs (graphs.h): the launches of a batch of <= kGraphMaxTokens tokens (decode) are
// recorded by the GraphRunner and issued at the next sync point: every method below that is
// not an op (set_batch, upload, download, alloc, free, synchronize, top_k) first flushes.
// For a replay to be valid across tokens, everything per token lives in device memory
// written by set_batch before the pass (token ids, positions, KV slots, block table, query
// tiles), and launch arguments stay fixed: the block table is uploaded with its row stride
// rounded up to kBlockTableStride blocks (so it changes every 1024 tokens, not every 16),
// attention splits each tile's key range in the kernel (only the split count, which changes
// every 256 positions up to its cap, is an argument), and scratch buffers only grow
// (growing flushes the pending launches eagerly and drops the cached graphs). Prefill and
// the cuBLAS GEMM path always run eagerly. EMBER_CUDA_GRAPHS=0 turns graphs off.
#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kernels/common/alloc_size.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"
#include "kernels/common/rope_yarn.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/graphs.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/repack.h"
#include "kernels/cuda/sampling.h"

namespace ember::cuda {
namespace {

constexpr size_t kAlign = kCudaAllocAlign;
constexpr int64_t kWeightTileElems = int64_t{32} << 20;  // FP16 weight tile: 64 MiB of scratch
// Quantized weights: up to this many tokens the matrix-vector kernels (re-reading the
// weights once per 8 tokens) beat dequantize-to-FP16 + GEMM; float weights switch above 8.
constexpr int64_t kQuantMatvecMaxTokens = 32;
constexpr int64_t kGraphMaxTokens = 8;  // batches recorded for CUDA graphs (decode)
// moe_matmul: up to this many slots (tokens x experts per token) the per-slot matvec, above
// it the slots grouped by expert (moe.cu). A decode step has at most kGraphMaxTokens tokens x
// k <= 8 experts = 64 slots, which with 32-128 experts rarely share one: grouping would add
// a launch (the sort) for next to no reuse. Prefill chunks average T * k / n_expert slots per
// expert (Qwen3-30B-A3B, T = 512: 32), and reading each expert once per 16 of them is what
// pays there.
constexpr int64_t kMoeMatvecMaxSlots = 64;
constexpr int32_t kBlockTableStride = 64;  // block table rows padded to a multiple of this

bool graphs_from_env() {
    const char* v = std::getenv("EMBER_CUDA_GRAPHS");
    return !(v && std::string(v) == "0");
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

bool weight_type_supported(DType t) {
    const int id = static_cast<int>(t);
    return is_block_type(id) || is_float_type(id);
}

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device) : device_(device) {
        try {
            EMBER_CUDA_CHECK(cudaSetDevice(device_));
            EMBER_CUDA_CHECK(cudaGetDeviceProperties(&props_, device_));
            EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
            EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&staging_done_, cudaEventDisableTiming));
            EMBER_CUBLAS_CHECK(cublasCreate(&cublas_));
            EMBER_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
            graphs_ = std::make_unique<GraphRunner>(stream_);
        } catch (...) {  // the destructor does not run for a throwing constructor
            if (cublas_) cublasDestroy(cublas_);
            if (staging_done_) cudaEventDestroy(staging_done_);
            if (stream_) cudaStreamDestroy(stream_);
            throw;
        }
        graphs_->set_enabled(graphs_from_env());
        // FP16 inputs with FP32 accumulation is asked per call (CUBLAS_COMPUTE_32F); keep the
        // default math mode so FP32 GEMMs stay true FP32 (no TF32).
        name_ = "cuda:" + std::to_string(device_) + " " + props_.name + " (sm_" + std::to_string(props_.major) +
                std::to_string(props_.minor) + ", " + format_bytes(props_.totalGlobalMem) + ")";
    }

    ~CudaBackend() override {
        cudaSetDevice(device_);
        graphs_.reset();
        if (stream_) cudaStreamSynchronize(stream_);
        for (auto& [ptr, a] : allocations_) cudaFree(ptr);
        for (Scratch* s : {&xq_, &xh_, &wtile_, &partial_, &batch_dev_, &topk_dev_, &moe_groups_})
            if (s->ptr) cudaFree(s->ptr);
        if (staging_host_) cudaFreeHost(staging_host_);
        if (topk_host_) cudaFreeHost(topk_host_);
        if (cublas_) cublasDestroy(cublas_);
        if (staging_done_) cudaEventDestroy(staging_done_);
        if (stream_) cudaStreamDestroy(stream_);
    }

    std::string name() const override { return name_; }
    // Slot rows (kv.cu); the compute capability, whose kernels' roundings may differ.
    std::string kv_layout() const override {
        return "cuda-rows/sm_" + std::to_string(props_.major) + std::to_string(props_.minor);
    }

    // ---- memory ---------------------------------------------------------------------
    Tensor alloc(MemoryKind kind, DType type, int64_t cols, int64_t rows, const char* tag) override {
        graphs_->flush();
        Tensor t = Tensor::shaped(type, cols, rows);
        t.data = device_alloc(kind, padded_alloc_bytes(t.bytes(), kAlign), tag);
        EMBER_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), stream_));
        return t;
    }

    void free(Tensor& t) override {
        if (!t.data) return;
        graphs_->flush();
        std::lock_guard lock(mutex_);
        auto it = allocations_.find(t.data);
        if (it != allocations_.end()) {
            cudaSetDevice(device_);
            // Ops still queued may use the buffer: let them finish first.
            cudaStreamSynchronize(stream_);
            cudaFree(it->first);
            report_.bytes[static_cast<int>(it->second.kind)] -= it->second.bytes;
            allocations_.erase(it);
        }
        t = Tensor{};
    }

    Tensor load_weight(const void* host, DType type, int64_t cols, int64_t rows, const char* tag) override {
        const bool is_vector = rows == 1 && type == DType::F32;
        if (!is_vector && !weight_type_supported(type))
            throw Error("weight type " + std::string(dtype_name(type)) + " is not supported by the CUDA backend");
        graphs_->flush();
        Tensor t = Tensor::shaped(type, cols, rows);
        t.data = device_alloc(MemoryKind::Weights, padded_alloc_bytes(t.bytes(), kAlign), tag);
        if (repackable(static_cast<int>(type), cols)) return upload_repacked(t, host);
        // Pageable source: the runtime stages it, so `host` may go away after the call.
        EMBER_CUDA_CHECK(cudaMemcpyAsync(t.data, host, t.bytes(), cudaMemcpyHostToDevice, stream_));
        return t;
    }

    // Experts stay in the file's rows: the MoE kernels (moe.cu) read GGUF blocks.
    Tensor load_expert_weight(const void* host, DType type, int64_t cols, int64_t rows_per_expert, int64_t n_expert,
                              const char* tag) override {
        if (!weight_type_supported(type))
            throw Error("weight type " + std::string(dtype_name(type)) + " is not supported by the CUDA backend");
        graphs_->flush();
        Tensor t = Tensor::shaped(type, cols, rows_per_expert * n_expert);
        t.data = device_alloc(MemoryKind::Weights, padded_alloc_bytes(t.bytes(), kAlign), tag);
        EMBER_CUDA_CHECK(cudaMemcpyAsync(t.data, host, t.bytes(), cudaMemcpyHostToDevice, stream_));
        return t;
    }

    MemoryReport memory() const override {
        MemoryReport r;
        {
            std::lock_guard lock(mutex_);
            r = report_;
        }
        size_t free_b = 0, total_b = 0;
        if (cudaSetDevice(device_) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
            r.device_free = free_b;
            r.device_total = total_b;
        } else {
            cudaGetLastError();
            r.device_total = props_.totalGlobalMem;
        }
        return r;
    }

    void synchronize() override {
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        graphs_->flush();
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    bool set_graphs(bool enabled) override {
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        graphs_->set_enabled(enabled);
        return true;
    }
    GraphStats graph_stats() const override { return graphs_->stats(); }

protected:
    // The ops, with arguments checked by Backend (kernels/backend.cpp); what is left here is
    // what only this backend requires.
    void do_upload(Tensor& dst, const void* src, size_t n) override {
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        graphs_->flush();
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, n, cudaMemcpyHostToDevice, stream_));
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void do_download(const Tensor& src, void* dst, size_t n) override {
        if (src.layout != 0) throw Error("CUDA download: a repacked weight's bytes are not the file's");
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        graphs_->flush();
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, n, cudaMemcpyDeviceToHost, stream_));
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    // ---- batch ------------------------------------------------------------------------
    // Copies the batch arrays (and the attention query tiles built from them) into one pinned
    // staging buffer and uploads it with one copy; ops then read them from device memory.
    // The upload is issued eagerly (never recorded): a replayed graph reads this batch.
    void do_set_batch(const BatchInfo& b) override {
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        graphs_->flush();
        n_tokens_ = static_cast<int64_t>(b.tokens.size());
        n_outputs_ = static_cast<int64_t>(b.output_rows.size());
        n_seqs_ = b.n_seqs;
        max_blocks_ = std::max<int32_t>(kBlockTableStride,
                                        (b.max_blocks + kBlockTableStride - 1) / kBlockTableStride * kBlockTableStride);
        max_pos_ = 0;
        for (int32_t p : b.positions) max_pos_ = std::max(max_pos_, p);
        build_tiles(b);
        upload_batch(b);
        graphs_->record(n_tokens_ > 0 && n_tokens_ <= kGraphMaxTokens);
    }

    // ---- ops --------------------------------------------------------------------------
    void do_embed(const Tensor& table, float scale, Tensor& out) override {
        if (!weight_type_supported(table.type))
            throw Error("CUDA embed: table type " + std::string(dtype_name(table.type)) + " is not supported");
        graphs_->launch<&cuda::embed>(kernel_type(table), const_bytes(table.data), table.row_bytes, table.rows,
                                      table.cols, d_tokens_, n_tokens_, scale, floats(out));
    }

    void do_matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override {
        const int64_t n = x.rows;
        if (!weight_type_supported(w.type))
            throw Error("CUDA matmul: weight type " + std::string(dtype_name(w.type)) + " is not supported");
        const float* bp = bias ? static_cast<const float*>(bias->data) : nullptr;
        if (n == 0) return;
        const int type = kernel_type(w);
        const bool quant = is_block_type(type);
        if (n <= (quant ? kQuantMatvecMaxTokens : kMatvecMaxTokens)) {
            if (quant) {
                const size_t q_bytes = align_up(static_cast<size_t>(n * w.cols), kAlign);
                auto* base = static_cast<uint8_t*>(
                    scratch(xq_, q_bytes + static_cast<size_t>(n * (w.cols / 32)) * sizeof(float2), "q8 activations"));
                auto* xq = reinterpret_cast<int8_t*>(base);
                auto* ds = reinterpret_cast<float2*>(base + q_bytes);
                graphs_->launch<&quantize_q8>(const_floats(x), n, w.cols, xq, static_cast<float2*>(ds));
                graphs_->launch<&matvec_quant>(type, const_bytes(w.data), w.row_bytes, w.rows, w.cols, const_int8(xq),
                                               static_cast<const float2*>(ds), n, floats(y), bp);
            } else {
                graphs_->launch<&matvec_float>(type, const_bytes(w.data), w.row_bytes, w.rows, w.cols, const_floats(x),
                                               n, floats(y), bp);
            }
            return;
        }
        graphs_->flush(false);  // cuBLAS is never recorded
        gemm(w, x, y, n);
        if (bp) add_bias(floats(y), n, w.rows, bp, stream_);
    }

    void do_moe_route(const Tensor& logits, const MoeRouting& r, Tensor& ids, Tensor& weights,
                      const Tensor* expert_scale) override {
        const float* es = expert_scale ? const_floats(*expert_scale) : nullptr;
        graphs_->launch<&cuda::moe_route>(const_floats(logits), int64_t{logits.rows}, static_cast<int>(logits.cols),
                                          int{r.n_used}, static_cast<int>(r.gating), bool{r.normalize}, float{r.scale},
                                          es, static_cast<int32_t*>(ids.data), floats(weights));
    }

    // Per-slot matrix-vector products for a few slots, grouped by expert above
    // kMoeMatvecMaxSlots (moe.cu): on tensor cores when the expert tiles are full on average
    // (moe_grouped_tensor_cores), else with the matvec arithmetic; x quantized once per row
    // for quantized experts off the tensor cores.
    void do_moe_matmul(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, Tensor& y,
                       const Tensor* bias) override {
        if (!weight_type_supported(w.type))
            throw Error("CUDA moe_matmul: weight type " + std::string(dtype_name(w.type)) + " is not supported");
        if (w.layout != 0) throw Error("CUDA moe_matmul: experts must be loaded with load_expert_weight");
        const int64_t slots = ids.rows * ids.cols, rows = w.rows / n_expert;
        const int x_div = x.rows == slots ? 1 : static_cast<int>(ids.cols);
        const float* bp = bias ? static_cast<const float*>(bias->data) : nullptr;
        const auto* idp = static_cast<const int32_t*>(ids.data);
        const int type = static_cast<int>(w.type);
        const bool grouped = slots > kMoeMatvecMaxSlots && n_expert <= kMoeGroupMaxExperts;
        void* groups = grouped ? scratch(moe_groups_, moe_group_bytes(slots, n_expert), "expert groups") : nullptr;
        const auto* wp = const_bytes(w.data);
        if (grouped && moe_grouped_tensor_cores(type, w.cols, slots, n_expert)) {
            graphs_->launch<&moe_grouped_tc>(type, wp, w.row_bytes, rows, n_expert, int64_t{w.cols}, const_floats(x),
                                             x_div, idp, slots, floats(y), bp, groups);
            return;
        }
        if (!is_block_type(type)) {
            if (grouped)
                graphs_->launch<&moe_grouped_float>(type, wp, w.row_bytes, rows, n_expert, int64_t{w.cols},
                                                    const_floats(x), x_div, idp, slots, floats(y), bp, groups);
            else
                graphs_->launch<&moe_matvec_float>(type, wp, w.row_bytes, rows, n_expert, int64_t{w.cols},
                                                   const_floats(x), x_div, idp, slots, floats(y), bp);
            return;
        }
        const int64_t n = x.rows;
        const size_t q_bytes = align_up(static_cast<size_t>(n * w.cols), kAlign);
        auto* base = static_cast<uint8_t*>(
            scratch(xq_, q_bytes + static_cast<size_t>(n * (w.cols / 32)) * sizeof(float2), "q8 activations"));
        auto* xq = reinterpret_cast<int8_t*>(base);
        auto* ds = reinterpret_cast<float2*>(base + q_bytes);
        graphs_->launch<&quantize_q8>(const_floats(x), n, int64_t{w.cols}, xq, ds);
        if (grouped)
            graphs_->launch<&moe_grouped_quant>(type, wp, w.row_bytes, rows, n_expert, int64_t{w.cols}, const_int8(xq),
                                                static_cast<const float2*>(ds), x_div, idp, slots, floats(y), bp,
                                                groups);
        else
            graphs_->launch<&moe_matvec_quant>(type, wp, w.row_bytes, rows, n_expert, int64_t{w.cols}, const_int8(xq),
                                               static_cast<const float2*>(ds), x_div, idp, slots, floats(y), bp);
    }

    void do_moe_combine(const Tensor& y, const Tensor& weights, Tensor& out) override {
        graphs_->launch<&cuda::moe_combine>(const_floats(y), const_floats(weights), int64_t{weights.rows},
                                            static_cast<int>(weights.cols), int64_t{y.cols}, floats(out));
    }

    void do_rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) override {
        graphs_->launch<&cuda::rms_norm>(const_floats(x), const_floats(w), x.rows, x.cols, eps, floats(y));
    }

    void do_rope(Tensor& x, const RopeParams& p) override {
        const int64_t n_tokens = x.rows / p.n_heads;
        graphs_->launch<&cuda::rope>(floats(x), n_tokens, int{p.n_heads}, int{p.head_dim}, int{p.n_rot}, bool{p.neox},
                                     d_positions_, rope_table(p), rope_magnitude(p));
    }

    void do_glu(const Tensor& gate, const Tensor& up, GluAct act, Tensor& out) override {
        const auto ld = [](const Tensor& t) { return static_cast<int64_t>(t.row_bytes / sizeof(float)); };
        if (ld(gate) != gate.cols || ld(up) != up.cols) {  // halves of a fused gate+up result
            graphs_->launch<&cuda::glu_rows>(const_floats(gate), ld(gate), const_floats(up), ld(up), floats(out),
                                             int64_t{gate.rows}, int64_t{gate.cols}, static_cast<int>(act));
            return;
        }
        graphs_->launch<&cuda::glu>(const_floats(gate), const_floats(up), floats(out), gate.rows * gate.cols,
                                    static_cast<int>(act));
    }

    void do_add(Tensor& x, const Tensor& y) override {
        graphs_->launch<&cuda::add>(floats(x), const_floats(y), x.rows * x.cols);
    }

    void do_scale(Tensor& x, float s) override { graphs_->launch<&cuda::scale>(floats(x), s, x.rows * x.cols); }

    void do_softcap(Tensor& x, float cap) override { graphs_->launch<&cuda::softcap>(floats(x), cap, x.rows * x.cols); }

    void do_add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) override {
        graphs_->launch<&cuda::add_rms_norm>(floats(x), const_floats(y), const_floats(w), x.rows, x.cols, eps,
                                             floats(out));
    }

    void do_sigmoid_scale_rows(Tensor& x, const Tensor& s) override {
        graphs_->launch<&cuda::sigmoid_scale_rows>(floats(x), const_floats(s), int64_t{x.rows}, int64_t{x.cols});
    }

    void do_copy(const Tensor& src, Tensor& dst) override {
        const auto ld = [](const Tensor& t) { return static_cast<int64_t>(t.row_bytes / sizeof(float)); };
        graphs_->launch<&cuda::copy_rows>(const_floats(src), ld(src), floats(dst), ld(dst), int64_t{dst.rows},
                                          int64_t{dst.cols});
    }

    // Linear attention (qwen35): kernels/cuda/linear_attn.cu.
    void do_ssm_conv(RecurrentLayer& state, const Tensor& x, const Tensor& w, Tensor& out) override {
        if (state.conv_kernel > 16) throw Error("CUDA ssm_conv: a kernel of more than 16 taps is not supported");
        cuda::ConvArgs a;
        a.x = const_floats(x), a.w = const_floats(w), a.state = floats(state.conv), a.out = floats(out);
        a.seq_of = d_seq_of_, a.slot_of_seq = d_state_slot_;
        a.n_tokens = n_tokens_, a.channels = x.cols, a.kernel = state.conv_kernel, a.n_seqs = n_seqs_;
        graphs_->launch<&cuda::ssm_conv>(a);
    }
    void do_gated_delta_rule(RecurrentLayer& state, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& alpha, const Tensor& beta, const DeltaRuleParams& p, Tensor& out) override {
        if (state.head_dim > 1024) throw Error("CUDA gated_delta_rule: head_dim above 1024 is not supported");
        const auto ld = [](const Tensor& t) { return static_cast<int64_t>(t.row_bytes / sizeof(float)); };
        cuda::DeltaArgs a;
        a.q = const_floats(q), a.k = const_floats(k), a.v = const_floats(v);
        a.alpha = const_floats(alpha), a.beta = const_floats(beta);
        a.dt_bias = const_floats(*p.dt_bias), a.a = const_floats(*p.a);
        a.state = floats(state.delta), a.out = floats(out), a.seq_of = d_seq_of_, a.slot_of_seq = d_state_slot_;
        a.q_ld = ld(q), a.k_ld = ld(k), a.v_ld = ld(v), a.n_tokens = n_tokens_, a.l2_eps = p.l2_eps;
        a.n_k_heads = state.n_k_heads, a.n_v_heads = state.n_v_heads, a.head_dim = state.head_dim, a.n_seqs = n_seqs_;
        a.grouped_heads = p.grouped_heads ? 1 : 0;
        graphs_->launch<&cuda::gated_delta_rule>(a);
    }

    void do_store_kv(KvLayer& layer, const Tensor& k, const Tensor& v) override {
        const DType kt = layer.k.type;
        graphs_->launch<&cuda::store_kv>(static_cast<int>(kt), layer.k.data, layer.v.data, layer.k.row_bytes, k.cols,
                                         const_floats(k), const_floats(v), d_kv_slot_, k.rows);
    }

    void do_load_kv(const KvLayer& layer, Tensor& k, Tensor& v) override {
        graphs_->launch<&cuda::load_kv>(static_cast<int>(layer.k.type), layer.k.data, layer.v.data, layer.k.row_bytes,
                                        k.cols, floats(k), floats(v), d_kv_slot_, k.rows);
    }

    void do_attention(const KvLayer& layer, const Tensor& q, const AttentionParams& p, Tensor& out) override {
        AttentionArgs a = AttentionArgs();  // value-initialized: no stray bytes (graphs compare bytes)
        a.k = static_cast<const uint8_t*>(layer.k.data);
        a.v = static_cast<const uint8_t*>(layer.v.data);
        a.kv_row_bytes = layer.k.row_bytes;
        a.kv_type = static_cast<int>(layer.k.type);
        a.block_tokens = layer.block_tokens;
        a.q = const_floats(q);
        a.out = floats(out);
        a.positions = d_positions_;
        a.seq_of = d_seq_of_;
        a.block_table = d_block_table_;
        a.max_blocks = max_blocks_;
        a.tiles = d_tiles_;
        a.n_tiles = static_cast<int>(tiles_.size());
        a.n_tokens = static_cast<int>(n_tokens_);
        a.n_heads = p.n_heads;
        a.n_kv_heads = p.n_kv_heads;
        a.head_dim = p.head_dim;
        a.scale = p.scale;
        a.softcap = p.softcap;
        a.sinks = p.sinks ? const_floats(*p.sinks) : nullptr;
        a.window = p.window;
        a.sm_count = props_.multiProcessorCount;
        a.smem_optin = props_.sharedMemPerBlockOptin;
        attention_validate(a);  // here, not when a recorded launch runs
        const int splits = attention_splits(a, max_pos_);
        a.partial = static_cast<float*>(
            scratch(partial_, attention_partial_floats(a, splits) * sizeof(float), "attention partials"));
        graphs_->launch<&cuda::attention>(a, splits);
    }

    void do_gather_output_rows(const Tensor& x, Tensor& out) override {
        graphs_->launch<&gather_rows>(const_floats(x), x.cols, d_output_rows_, n_outputs_, floats(out));
    }

    // ---- sampling -----------------------------------------------------------------------
    // One pinned upload of the adjustment lists, the selection kernels (sampling.cu), one
    // download of rows x k candidates. Runs eagerly after the pass's recorded launches.
    void do_top_k(Tensor& logits, int32_t k, std::span<const TopKRow> rows, std::span<TopKCandidate> out,
                  std::span<int32_t> counts) override {
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        graphs_->flush();
        if (rows.empty()) return;
        const TopKLayout L = topk_layout(rows, k, logits.cols);
        auto* host = static_cast<uint8_t*>(topk_staging(L.total_host));
        fill_topk_staging(rows, host, L);
        auto* dev = static_cast<uint8_t*>(scratch(topk_dev_, L.total_dev, "top-k", false));
        TopKArgs a;
        a.logits = floats(logits);
        a.row_stride = static_cast<size_t>(logits.cols);
        a.n_vocab = logits.cols;
        a.n_rows = static_cast<int>(rows.size());
        a.k = k;
        a.rows = reinterpret_cast<const TopKRowDev*>(dev + L.rows);
        a.penalties = reinterpret_cast<const PenaltyDev*>(dev + L.pen);
        a.biases = reinterpret_cast<const BiasDev*>(dev + L.bias);
        a.out = reinterpret_cast<CandidateDev*>(dev + L.out);
        a.counts = reinterpret_cast<int32_t*>(dev + L.counts);
        a.keys[0] = reinterpret_cast<uint64_t*>(dev + L.keys[0]);
        a.keys[1] = reinterpret_cast<uint64_t*>(dev + L.keys[1]);
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dev, host, L.out, cudaMemcpyHostToDevice, stream_));
        cuda::topk(a, stream_);
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(host + L.out, dev + L.out, L.total_host - L.out, cudaMemcpyDeviceToHost, stream_));
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
        const size_t n_out = rows.size() * static_cast<size_t>(k);
        std::memcpy(out.data(), host + L.out, n_out * sizeof(TopKCandidate));
        std::memcpy(counts.data(), host + L.counts, rows.size() * sizeof(int32_t));
    }

private:
    struct Allocation {
        MemoryKind kind;
        size_t bytes;
    };
    struct Scratch {
        void* ptr = nullptr;
        size_t bytes = 0;
    };
    struct RopeTable {
        int n_rot;
        float base, scale;
        std::vector<float> factors;
        float yarn[4];  // ext_factor, attn_factor, beta_fast, beta_slow
        int n_ctx_orig;
        bool reverse;
        double* dev;
    };

    // Typed views for graphs_->launch<Fn>(args...), which forwards its arguments' own types
    // to the launcher: each must already be the launcher's parameter type.
    static float* floats(const Tensor& t) { return static_cast<float*>(t.data); }
    static const void* const_bytes(const void* p) { return p; }
    static const int8_t* const_int8(const int8_t* p) { return p; }
    static const float* const_floats(const Tensor& t) { return static_cast<const float*>(t.data); }
    // Attention query tiles: runs of <= kAttnTileTokens consecutive tokens of one sequence.
    void build_tiles(const BatchInfo& b) {
        tiles_.clear();
        for (int64_t t = 0; t < n_tokens_;) {
            int64_t e = t + 1;
            while (e < n_tokens_ && e - t < kAttnTileTokens &&
                   b.seq_of[static_cast<size_t>(e)] == b.seq_of[static_cast<size_t>(t)])
                ++e;
            tiles_.push_back(
                int2{.x = static_cast<int32_t>(t), .y = static_cast<int32_t>(e - t)});  // first token, count
            t = e;
        }
    }

    // One pinned staging buffer, one copy. The block table goes up with rows of max_blocks_
    // (the padded stride; padding entries are 0 and never read).
    void upload_batch(const BatchInfo& b) {
        const size_t table_rows =
            std::max<size_t>(static_cast<size_t>(std::max(n_seqs_, 0)),
                             b.max_blocks > 0 ? b.block_table.size() / static_cast<size_t>(b.max_blocks) : 0);
        const size_t table_bytes = table_rows * static_cast<size_t>(max_blocks_) * sizeof(int32_t);
        struct Part {
            const void* src;
            size_t bytes;
            size_t offset;
        };
        Part parts[8] = {
            {b.tokens.data(), b.tokens.size_bytes(), 0},
            {b.positions.data(), b.positions.size_bytes(), 0},
            {b.seq_of.data(), b.seq_of.size_bytes(), 0},
            {b.kv_slot.data(), b.kv_slot.size_bytes(), 0},
            {nullptr, table_bytes, 0},  // filled row by row below
            {b.output_rows.data(), b.output_rows.size_bytes(), 0},
            {tiles_.data(), tiles_.size() * sizeof(int2), 0},
            {b.state_slot.data(), b.state_slot.size_bytes(), 0},
        };
        size_t total = 0;
        for (Part& p : parts) {
            p.offset = total;
            total += align_up(std::max<size_t>(p.bytes, 1), kAlign);
        }
        // The previous batch's upload must have left the staging buffer before we reuse it.
        EMBER_CUDA_CHECK(cudaEventSynchronize(staging_done_));
        grow_pinned(staging_host_, staging_bytes_, total);
        auto* dev = static_cast<uint8_t*>(scratch(batch_dev_, total, "batch"));
        auto* host = static_cast<uint8_t*>(staging_host_);
        for (const Part& p : parts)
            if (p.bytes && p.src) std::memcpy(host + p.offset, p.src, p.bytes);
        auto* table = reinterpret_cast<int32_t*>(host + parts[4].offset);
        std::memset(table, 0, table_bytes);
        for (size_t sq = 0; sq < table_rows; ++sq)
            std::copy_n(b.block_table.data() + sq * static_cast<size_t>(b.max_blocks), b.max_blocks,
                        table + sq * static_cast<size_t>(max_blocks_));
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dev, host, total, cudaMemcpyHostToDevice, stream_));
        EMBER_CUDA_CHECK(cudaEventRecord(staging_done_, stream_));
        d_tokens_ = reinterpret_cast<const int32_t*>(dev + parts[0].offset);
        d_positions_ = reinterpret_cast<const int32_t*>(dev + parts[1].offset);
        d_seq_of_ = reinterpret_cast<const int32_t*>(dev + parts[2].offset);
        d_kv_slot_ = reinterpret_cast<const int32_t*>(dev + parts[3].offset);
        d_block_table_ = reinterpret_cast<const int32_t*>(dev + parts[4].offset);
        d_output_rows_ = reinterpret_cast<const int32_t*>(dev + parts[5].offset);
        d_tiles_ = reinterpret_cast<const int2*>(dev + parts[6].offset);
        d_state_slot_ = reinterpret_cast<const int32_t*>(dev + parts[7].offset);
    }

    // Byte offsets of the top_k buffers: [rows | penalties | biases | out | counts] mirrored
    // in pinned host memory (uploaded up to `out`, downloaded from it), then two key buffers
    // on the device only.
    struct TopKLayout {
        size_t rows = 0, pen = 0, bias = 0, out = 0, counts = 0, total_host = 0;
        size_t keys[2] = {0, 0};
        size_t total_dev = 0;
    };
    static_assert(sizeof(PenaltyDev) == sizeof(TokenCount) && sizeof(BiasDev) == sizeof(TokenBias) &&
                  sizeof(CandidateDev) == sizeof(TopKCandidate));

    static TopKLayout topk_layout(std::span<const TopKRow> rows, int32_t k, int64_t n_vocab) {
        size_t n_pen = 0, n_bias = 0;
        for (const TopKRow& r : rows) {
            n_pen += r.penalized.size();
            n_bias += r.bias.size();
        }
        TopKLayout L;
        size_t at = 0;
        auto place = [&](size_t bytes) {
            const size_t off = at;
            at += align_up(std::max<size_t>(bytes, 1), kAlign);
            return off;
        };
        L.rows = place(rows.size() * sizeof(TopKRowDev));
        L.pen = place(n_pen * sizeof(PenaltyDev));
        L.bias = place(n_bias * sizeof(BiasDev));
        L.out = place(rows.size() * static_cast<size_t>(k) * sizeof(CandidateDev));
        L.counts = place(rows.size() * sizeof(int32_t));
        L.total_host = at;
        const size_t key_bytes = topk_scratch_keys(n_vocab, k, static_cast<int>(rows.size())) * sizeof(uint64_t);
        L.keys[0] = place(key_bytes);
        L.keys[1] = place(key_bytes);
        L.total_dev = at;
        return L;
    }

    static void fill_topk_staging(std::span<const TopKRow> rows, uint8_t* host, const TopKLayout& L) {
        auto* hdr = reinterpret_cast<TopKRowDev*>(host + L.rows);
        auto* pen = reinterpret_cast<PenaltyDev*>(host + L.pen);
        auto* bias = reinterpret_cast<BiasDev*>(host + L.bias);
        int32_t n_pen = 0, n_bias = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            const TopKRow& r = rows[i];
            hdr[i] = {.pen_offset = n_pen,
                      .pen_count = static_cast<int32_t>(r.penalized.size()),
                      .bias_offset = n_bias,
                      .bias_count = static_cast<int32_t>(r.bias.size()),
                      .repeat = r.repeat_penalty,
                      .presence = r.presence_penalty,
                      .frequency = r.frequency_penalty,
                      .unused = 0};
            if (!r.penalized.empty()) std::memcpy(pen + n_pen, r.penalized.data(), r.penalized.size_bytes());
            if (!r.bias.empty()) std::memcpy(bias + n_bias, r.bias.data(), r.bias.size_bytes());
            n_pen += static_cast<int32_t>(r.penalized.size());
            n_bias += static_cast<int32_t>(r.bias.size());
        }
    }

    // Pinned host buffer of top_k (grow-only; top_k synchronizes before returning, so the
    // next call may reuse it).
    void* topk_staging(size_t bytes) {
        grow_pinned(topk_host_, topk_host_bytes_, bytes);
        return topk_host_;
    }

    // Grow-only pinned host buffer (twice what is needed, so growth stays rare). The caller
    // makes sure the device no longer reads the old one.
    static void grow_pinned(void*& ptr, size_t& capacity, size_t need) {
        if (need <= capacity) return;
        if (ptr) EMBER_CUDA_CHECK(cudaFreeHost(ptr));
        ptr = nullptr;
        capacity = 0;
        const size_t want = align_up(need * 2, 1 << 16);
        EMBER_CUDA_CHECK(cudaMallocHost(&ptr, want));
        capacity = want;
    }

    void* device_alloc(MemoryKind kind, size_t bytes, const char* tag) {
        EMBER_CUDA_CHECK(cudaSetDevice(device_));
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();  // clear the (non-sticky) allocation error
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            throw Error("out of GPU memory allocating " + std::string(tag ? tag : "buffer") + ": " +
                        format_bytes(bytes) + " requested, " + format_bytes(free_b) + " free of " +
                        format_bytes(total_b) + " on " + name_ + " (" + cudaGetErrorName(e) + ")");
        }
        std::lock_guard lock(mutex_);
        allocations_[p] = {kind, bytes};
        report_.bytes[static_cast<int>(kind)] += bytes;
        return p;
    }

    // A grow-only scratch buffer (accounted as activations). Growing waits for queued ops,
    // which may still read the old buffer.
    // in_graphs: recorded launches and cached graphs may hold the buffer's address.
    void* scratch(Scratch& s, size_t bytes, const char* what, bool in_graphs = true) {
        if (bytes <= s.bytes) return s.ptr;
        // Recorded launches may use the old buffer: issue them now; drop graphs holding it.
        graphs_->flush(false);
        if (in_graphs) graphs_->drop_graphs();
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
        const size_t want = align_up(std::max(bytes, s.bytes + s.bytes / 2), 1 << 20);
        if (s.ptr) {
            cudaFree(s.ptr);
            std::lock_guard lock(mutex_);
            report_.bytes[static_cast<int>(MemoryKind::Activations)] -= s.bytes;
            s.ptr = nullptr;
            s.bytes = 0;
        }
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, want);
        if (e != cudaSuccess) {
            cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            throw Error(std::string("out of GPU memory for the ") + what + " scratch buffer: " + format_bytes(want) +
                        " requested, " + format_bytes(free_b) + " free of " + format_bytes(total_b) + " on " + name_);
        }
        s.ptr = p;
        s.bytes = want;
        std::lock_guard lock(mutex_);
        report_.bytes[static_cast<int>(MemoryKind::Activations)] += want;
        return p;
    }

    // freq[i] = rope_pair_freq (freq_scale * base^(-2i/n_rot) / factors[i], or YaRN's blend) in
    // double, exactly as the CPU (kernels/cpu/ops.cpp) computes it; cached per (n_rot, base,
    // scale, factors, YaRN parameters).
    const double* rope_table(const RopeParams& p) {
        const int half = p.n_rot / 2;
        std::vector<float> factors;
        if (p.freq_factors) factors.assign(p.freq_factors, p.freq_factors + half);
        const float yarn[4] = {p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow};
        for (const RopeTable& r : rope_tables_)
            if (r.n_rot == p.n_rot && r.base == p.freq_base && r.scale == p.freq_scale && r.factors == factors &&
                std::equal(yarn, yarn + 4, r.yarn) && r.n_ctx_orig == p.n_ctx_orig && r.reverse == p.reverse)
                return r.dev;
        std::vector<double> freq(static_cast<size_t>(std::max(half, 1)));
        for (int i = 0; i < half; ++i)
            freq[static_cast<size_t>(i)] =
                rope_pair_freq(p, i, factors.empty() ? 1.0 : factors[static_cast<size_t>(i)]) *
                (p.reverse ? -1.0 : 1.0);
        RopeTable r{p.n_rot, p.freq_base, p.freq_scale, std::move(factors), {}, p.n_ctx_orig, p.reverse, nullptr};
        std::copy(yarn, yarn + 4, r.yarn);
        r.dev = static_cast<double*>(
            device_alloc(MemoryKind::Activations, align_up(freq.size() * sizeof(double), kAlign), "rope table"));
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(r.dev, freq.data(), freq.size() * sizeof(double), cudaMemcpyHostToDevice, stream_));
        rope_tables_.push_back(std::move(r));
        return rope_tables_.back().dev;
    }

    // Q4_0/Q5_0/Q8_0 weights, repacked on the host into row tiles (repack.h) of the same
    // bytes, then one copy; the staging buffer is freed when the copy has finished.
    Tensor upload_repacked(Tensor& t, const void* host) {
        std::vector<uint8_t> packed(t.bytes());
        repack_matrix(static_cast<int>(t.type), static_cast<const uint8_t*>(host), t.row_bytes, t.rows, t.cols,
                      packed.data());
        EMBER_CUDA_CHECK(cudaMemcpyAsync(t.data, packed.data(), t.bytes(), cudaMemcpyHostToDevice, stream_));
        EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
        t.layout = kLayoutGroups;
        return t;
    }

    // The type id the kernels dispatch on: the device layout's for repacked weights.
    static int kernel_type(const Tensor& w) {
        const int type = static_cast<int>(w.type);
        return w.layout == kLayoutGroups ? repacked_type(type) : type;
    }

    // Prefill: y (n x rows) = x (n x cols) W^T. cuBLAS is column-major: C = Y^T (rows x n,
    // ldc = rows) = op(A) * B with A = W as stored (cols x rows column-major, op = T) and
    // B = X^T (cols x n, ldb = cols).
    void gemm(const Tensor& w, const Tensor& x, Tensor& y, int64_t n) {
        const float alpha = 1.0f, beta = 0.0f;
        const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols), nn = static_cast<int>(n);
        if (w.type == DType::F32) {
            // FP32 weights (small models): a true FP32 GEMM, no conversion.
            EMBER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, nn, cols, &alpha, w.data,
                                            CUDA_R_32F, static_cast<int>(w.row_bytes / 4), x.data, CUDA_R_32F, cols,
                                            &beta, y.data, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            return;
        }
        // Activations to FP16 (first part of the scratch), weights as FP16 tiles (second part).
        const size_t xh_bytes = align_up(static_cast<size_t>(n * w.cols) * 2, kAlign);
        auto* xh = static_cast<__half*>(scratch(xh_, xh_bytes, "FP16 activations"));
        f32_to_f16(const_floats(x), n * w.cols, xh, stream_);
        if (w.type == DType::F16) {
            EMBER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, nn, cols, &alpha, w.data,
                                            CUDA_R_16F, static_cast<int>(w.row_bytes / 2), xh, CUDA_R_16F, cols, &beta,
                                            y.data, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            return;
        }
        int64_t tile_rows = std::max<int64_t>(64, kWeightTileElems / w.cols);
        if (tile_rows >= w.rows) tile_rows = w.rows;
        else tile_rows = tile_rows / 64 * 64;  // so every range starts on a row tile (repack.h)
        auto* wt =
            static_cast<__half*>(scratch(wtile_, static_cast<size_t>(tile_rows * w.cols) * 2, "FP16 weight tile"));
        for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
            const int64_t R = std::min(tile_rows, w.rows - r0);
            dequant_f16(kernel_type(w), static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r0) * w.row_bytes,
                        w.row_bytes, R, w.cols, wt, stream_);
            EMBER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(R), nn, cols, &alpha,
                                            wt, CUDA_R_16F, cols, xh, CUDA_R_16F, cols, &beta, floats(y) + r0,
                                            CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }

    int device_;
    cudaDeviceProp props_{};
    std::string name_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t staging_done_ = nullptr;
    cublasHandle_t cublas_ = nullptr;

    mutable std::mutex mutex_;
    std::map<void*, Allocation> allocations_;
    MemoryReport report_;

    // Current batch (host copies of what the host needs; device pointers into batch_dev_).
    int64_t n_tokens_ = 0, n_outputs_ = 0;
    int32_t n_seqs_ = 0, max_blocks_ = 0, max_pos_ = 0;
    std::vector<int2> tiles_;
    void* staging_host_ = nullptr;
    size_t staging_bytes_ = 0;
    Scratch batch_dev_;
    const int32_t* d_state_slot_ = nullptr;  // [n_seqs] (models with linear attention)
    const int32_t *d_tokens_ = nullptr, *d_positions_ = nullptr, *d_seq_of_ = nullptr, *d_kv_slot_ = nullptr,
                  *d_block_table_ = nullptr, *d_output_rows_ = nullptr;
    const int2* d_tiles_ = nullptr;

    Scratch xq_, xh_, wtile_, partial_, topk_dev_;
    Scratch moe_groups_;  // the grouped moe_matmul's sort of the slots (moe_group_bytes)
    void* topk_host_ = nullptr;
    size_t topk_host_bytes_ = 0;
    std::unique_ptr<GraphRunner> graphs_;
    std::vector<RopeTable> rope_tables_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace ember::cuda
