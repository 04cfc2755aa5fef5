// The CPU implementation of the backend interface: weights used in place from the file
// map, activations and KV cache in aligned host memory, every op spread over one persistent
// thread pool.
#include <sys/mman.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/alloc_size.h"
#include "kernels/common/topk.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/linear_attn.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}
    ~CpuBackend() override {
        for (auto& [ptr, a] : allocations_) std::free(ptr);
    }

    std::string name() const override {
        return "cpu (" + std::string(cpu::isa_name(cpu::active_isa())) + ", " + std::to_string(pool_.size()) +
               " threads)";
    }
    // kv_layout.h's head-grouped blocks; the ISA, since its kernels' roundings differ.
    std::string kv_layout() const override { return "cpu-heads/" + std::string(cpu::isa_name(cpu::active_isa())); }

    Tensor alloc(MemoryKind kind, DType type, int64_t cols, int64_t rows, const char* tag) override {
        Tensor t = alloc_uninitialized(kind, type, cols, rows, tag);
        std::memset(t.data, 0, padded_alloc_bytes(t.bytes(), kCpuAllocAlign));
        return t;
    }

    // alloc without the zero fill, for a buffer that is written whole at once (a repacked weight).
    Tensor alloc_uninitialized(MemoryKind kind, DType type, int64_t cols, int64_t rows, const char* tag) {
        Tensor t = Tensor::shaped(type, cols, rows);
        const size_t bytes = padded_alloc_bytes(t.bytes(), kCpuAllocAlign);
        t.data = kind == MemoryKind::Weights ? alloc_huge(bytes) : std::aligned_alloc(64, bytes);
        if (!t.data)
            throw Error(std::string("out of host memory allocating ") + tag + " (" + std::to_string(bytes) + " bytes)");
        std::lock_guard lock(mutex_);
        allocations_[t.data] = {kind, bytes};
        report_.bytes[static_cast<int>(kind)] += bytes;
        return t;
    }

    void free(Tensor& t) override {
        std::lock_guard lock(mutex_);
        auto it = allocations_.find(t.data);
        if (it != allocations_.end()) {
            report_.bytes[static_cast<int>(it->second.kind)] -= it->second.bytes;
            std::free(it->first);
            allocations_.erase(it);
        } else if (t.data) {
            report_.mapped_weight_bytes -= t.bytes();  // a view of the file map: nothing to free
        }
        t = Tensor{};
    }

    // Weights are used in place from the file map, unless the kernels run faster from
    // another arrangement of the same bytes (cpu::preferred_layout): then they are copied
    // into it once, here, and count as allocated weights.
    Tensor load_weight(const void* host, DType type, int64_t cols, int64_t rows, const char* tag) override {
        const bool is_vector = rows == 1 && type == DType::F32;
        if (!is_vector && !cpu::matmul_supports(type))
            throw Error("weight type " + std::string(dtype_name(type)) + " is not supported by the CPU backend");
        const cpu::WeightLayout layout = cpu::preferred_layout(type, rows, cols);
        if (layout != cpu::WeightLayout::Rows) {
            Tensor t = alloc_uninitialized(MemoryKind::Weights, type, cols, rows, tag);
            std::memset(static_cast<uint8_t*>(t.data) + t.bytes(), 0,
                        padded_alloc_bytes(t.bytes(), kCpuAllocAlign) - t.bytes());
            cpu::repack_weight(cpu::make_weight_matrix(type, rows, cols, host), layout, t.data, pool_);
            t.layout = static_cast<uint8_t>(layout);
            return t;
        }
        return map_rows(host, type, cols, rows);
    }

    // Weights used in place, in rows.
    Tensor map_rows(const void* host, DType type, int64_t cols, int64_t rows) {
        Tensor t = Tensor::shaped(type, cols, rows);
        t.data = const_cast<void*>(host);  // read-only: no op writes to weights
        std::lock_guard lock(mutex_);
        report_.mapped_weight_bytes += t.bytes();
        return t;
    }

    // Each expert rearranged on its own: an expert's rows then form a matrix of the layout
    // whatever their count (whole-matrix panels would straddle experts of 32k + r rows).
    Tensor load_expert_weight(const void* host, DType type, int64_t cols, int64_t rows_per_expert, int64_t n_expert,
                              const char* tag) override {
        const cpu::WeightLayout layout = cpu::preferred_layout(type, rows_per_expert, cols);
        if (!cpu::matmul_supports(type)) return load_weight(host, type, cols, rows_per_expert * n_expert, tag);
        // Experts of < 32 rows stay in rows: load_weight would pack the whole matrix's panels
        // across the experts' boundaries.
        if (layout == cpu::WeightLayout::Rows) return map_rows(host, type, cols, rows_per_expert * n_expert);
        Tensor t = alloc_uninitialized(MemoryKind::Weights, type, cols, rows_per_expert * n_expert, tag);
        std::memset(static_cast<uint8_t*>(t.data) + t.bytes(), 0,
                    padded_alloc_bytes(t.bytes(), kCpuAllocAlign) - t.bytes());
        const size_t expert_bytes = static_cast<size_t>(rows_per_expert) * t.row_bytes;
        for (int64_t e = 0; e < n_expert; ++e) {
            const auto* src = static_cast<const uint8_t*>(host) + static_cast<size_t>(e) * expert_bytes;
            cpu::repack_weight(cpu::make_weight_matrix(type, rows_per_expert, cols, src), layout,
                               static_cast<uint8_t*>(t.data) + static_cast<size_t>(e) * expert_bytes, pool_);
        }
        t.layout = static_cast<uint8_t>(layout);
        return t;
    }

    MemoryReport memory() const override {
        std::lock_guard lock(mutex_);
        return report_;
    }

    void synchronize() override {}

protected:
    // The ops, with arguments checked by Backend (kernels/backend.cpp).
    void do_upload(Tensor& dst, const void* src, size_t n) override { std::memcpy(dst.data, src, n); }
    void do_download(const Tensor& src, void* dst, size_t n) override { std::memcpy(dst, src.data, n); }

    void do_set_batch(const BatchInfo&) override {}

    void do_embed(const Tensor& table, float scale, Tensor& out) override {
        const auto& ids = batch().tokens;
        pool_.parallel_for(static_cast<int64_t>(ids.size()), [&](int64_t b, int64_t e, int) {
            cpu::get_rows(weight_matrix(table), ids.data() + b, static_cast<int>(e - b), row(out, b));
            if (scale != 1.0f)
                for (int64_t i = b * out.cols; i < e * out.cols; ++i) static_cast<float*>(out.data)[i] *= scale;
        });
    }

    void do_matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override {
        cpu::matmul(weight_matrix(w), static_cast<const float*>(x.data), x.rows, static_cast<float*>(y.data), pool_);
        if (bias) add_bias(*bias, x.rows, y);
    }

    void do_matmul_shared(const Tensor& x, std::span<const MatmulOut> outs) override {
        std::vector<cpu::SharedOut> shared;
        for (const MatmulOut& o : outs) shared.push_back({weight_matrix(*o.w), static_cast<float*>(o.y->data)});
        cpu::matmul_shared(shared.data(), static_cast<int>(shared.size()), static_cast<const float*>(x.data), x.rows,
                           pool_);
        for (const MatmulOut& o : outs)
            if (o.bias) add_bias(*o.bias, x.rows, *o.y);
    }

    void do_rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) override {
        cpu::ops::rms_norm(f32(x), f32(w), f32(y), x.rows, x.cols, eps, &pool_);
    }

    void do_rope(Tensor& x, const RopeParams& p) override {
        cpu::ops::RopeSpec spec;
        spec.head_dim = p.head_dim;
        spec.n_rot = p.n_rot;
        spec.neox = p.neox;
        spec.freq_base = p.freq_base;
        spec.freq_scale = p.freq_scale;
        spec.reverse = p.reverse;
        spec.freq_factors = p.freq_factors;
        spec.ext_factor = p.ext_factor;
        spec.attn_factor = p.attn_factor;
        spec.beta_fast = p.beta_fast;
        spec.beta_slow = p.beta_slow;
        spec.n_ctx_orig = p.n_ctx_orig;
        cpu::ops::rope(f32(x), x.rows / p.n_heads, p.n_heads, batch().positions.data(), spec, &pool_);
    }

    void do_glu(const Tensor& gate, const Tensor& up, GluAct act, Tensor& out) override {
        const size_t packed = static_cast<size_t>(gate.cols) * sizeof(float);
        if (gate.row_bytes != packed || up.row_bytes != packed) {  // halves of a fused gate+up result: row by row
            pool_.parallel_for(gate.rows, [&](int64_t r0, int64_t r1, int) {
                for (int64_t r = r0; r < r1; ++r)
                    glu_elems(row(gate, r), row(up, r), row(out, r), gate.cols, act, nullptr);
            });
            return;
        }
        glu_elems(f32(gate), f32(up), f32(out), gate.rows * gate.cols, act, &pool_);
    }

    // n elements of act(gate) * up, on the pool or not.
    static void glu_elems(const float* gate, const float* up, float* out, int64_t n, GluAct act,
                          cpu::ThreadPool* pool) {
        if (act == GluAct::GeluTanh) cpu::ops::geglu(gate, up, out, n, pool);
        else if (act == GluAct::Sigmoid) cpu::linear_attn::sigmoid_gate(gate, up, out, n, pool);
        else if (act == GluAct::SwigluOai) cpu::ops::swiglu_oai(gate, up, out, n, pool);
        else cpu::ops::swiglu(gate, up, out, n, pool);
    }

    void do_add(Tensor& x, const Tensor& y) override { cpu::ops::add(f32(x), f32(y), f32(x), x.rows * x.cols, &pool_); }
    void do_scale(Tensor& x, float s) override { cpu::ops::scale(f32(x), s, x.rows * x.cols, &pool_); }
    void do_softcap(Tensor& x, float cap) override { cpu::ops::softcap(f32(x), cap, x.rows * x.cols, &pool_); }
    void do_add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) override {
        cpu::ops::add_rms_norm(f32(x), f32(y), f32(w), f32(out), x.rows, x.cols, eps, &pool_);
    }

    void do_moe_route(const Tensor& logits, const MoeRouting& r, Tensor& ids, Tensor& weights,
                      const Tensor* expert_scale) override {
        cpu::moe::route(f32(logits), logits.rows, static_cast<int>(logits.cols), r.n_used, static_cast<int>(r.gating),
                        r.normalize, r.scale, expert_scale ? f32(*expert_scale) : nullptr,
                        static_cast<int32_t*>(ids.data), f32(weights), pool_);
    }

    void do_moe_matmul(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, Tensor& y,
                       const Tensor* bias) override {
        const int64_t slots = ids.rows * ids.cols;
        cpu::moe::matmul(weight_matrix(w), n_expert, f32(x), x.rows != slots, static_cast<int>(ids.cols),
                         static_cast<const int32_t*>(ids.data), slots, f32(y), bias ? f32(*bias) : nullptr, pool_);
    }

    void do_moe_combine(const Tensor& y, const Tensor& weights, Tensor& out) override {
        cpu::moe::combine(f32(y), f32(weights), weights.rows, static_cast<int>(weights.cols), y.cols, f32(out), pool_);
    }

    void do_copy(const Tensor& src, Tensor& dst) override {
        pool_.parallel_for(src.rows, [&](int64_t r0, int64_t r1, int) {
            const size_t bytes = static_cast<size_t>(dst.cols) * sizeof(float);  // either may be a column view
            for (int64_t r = r0; r < r1; ++r) std::memcpy(row(dst, r), row(src, r), bytes);
        });
    }

    cpu::linear_attn::SeqTokens seq_tokens() const {
        return {batch().seq_of.data(), batch().state_slot.data(), batch_tokens(), batch().n_seqs};
    }

    void do_ssm_conv(RecurrentLayer& state, const Tensor& x, const Tensor& w, Tensor& out) override {
        cpu::linear_attn::conv_silu(seq_tokens(), f32(x), f32(w), state.conv_kernel, state.conv_channels,
                                    f32(state.conv), f32(out), pool_);
    }

    void do_gated_delta_rule(RecurrentLayer& state, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& alpha, const Tensor& beta, const DeltaRuleParams& p, Tensor& out) override {
        const auto stride = [](const Tensor& t) { return static_cast<int64_t>(t.row_bytes / sizeof(float)); };
        const cpu::linear_attn::DeltaRuleArgs a{
            f32(q),          f32(k),         f32(v),           stride(q), stride(k),      stride(v),
            f32(alpha),      f32(beta),      f32(*p.dt_bias),  f32(*p.a), p.l2_eps,       state.n_k_heads,
            state.n_v_heads, state.head_dim, f32(state.delta), f32(out),  p.grouped_heads};
        cpu::linear_attn::gated_delta_rule(seq_tokens(), a, pool_);
    }

    void do_sigmoid_scale_rows(Tensor& x, const Tensor& s) override {
        cpu::moe::sigmoid_scale_rows(f32(x), f32(s), x.rows, x.cols, pool_);
    }

    void do_store_kv(KvLayer& layer, const Tensor& k, const Tensor& v) override {
        cpu::ops::store_kv(kv_view(layer), layer.k.data, layer.v.data, f32(k), f32(v), batch().kv_slot.data(), k.rows,
                           &pool_);
    }

    void do_load_kv(const KvLayer& layer, Tensor& k, Tensor& v) override {
        cpu::ops::load_kv(kv_view(layer), f32(k), f32(v), batch().kv_slot.data(), k.rows, &pool_);
    }

    void do_attention(const KvLayer& layer, const Tensor& q, const AttentionParams& p, Tensor& out) override {
        cpu::ops::AttentionBatchArgs a;
        a.q = f32(q);
        a.out = f32(out);
        a.n_tokens = q.rows;
        a.n_heads = p.n_heads;
        a.positions = batch().positions.data();
        a.seq_of = batch().seq_of.data();
        a.block_table = batch().block_table.data();
        a.max_blocks = batch().max_blocks;
        a.window = p.window;
        a.scale = p.scale;
        a.softcap = p.softcap;
        a.sinks = p.sinks ? f32(*p.sinks) : nullptr;
        cpu::ops::attention(kv_view(layer), a, &pool_);
    }

    void do_gather_output_rows(const Tensor& x, Tensor& out) override {
        const auto& rows = batch().output_rows;
        for (size_t i = 0; i < rows.size(); ++i)
            std::memcpy(row(out, static_cast<int64_t>(i)), row(x, rows[i]), x.row_bytes);
    }

    void do_top_k(Tensor& logits, int32_t k, std::span<const TopKRow> rows, std::span<TopKCandidate> out,
                  std::span<int32_t> counts) override {
        // One row per sequence of the batch, each a pass over the whole vocabulary: in
        // parallel (a 16-sequence step over 128k logits spent 3 % of its time here).
        keys_.resize(static_cast<size_t>(pool_.size()));
        pool_.parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t b, int64_t e, int thread) {
            for (auto r = static_cast<size_t>(b); r < static_cast<size_t>(e); ++r) {
                float* l = row(logits, static_cast<int64_t>(r));
                apply_adjustments(std::span<float>(l, static_cast<size_t>(logits.cols)), rows[r]);
                counts[r] =
                    select_row(l, logits.cols, k, out.subspan(r * static_cast<size_t>(k), static_cast<size_t>(k)),
                               keys_[static_cast<size_t>(thread)]);
            }
        });
    }

private:
    struct Allocation {
        MemoryKind kind;
        size_t bytes;
    };

    static float* row(const Tensor& t, int64_t r) {
        return reinterpret_cast<float*>(static_cast<uint8_t*>(t.data) + static_cast<size_t>(r) * t.row_bytes);
    }
    static float* f32(const Tensor& t) { return static_cast<float*>(t.data); }
    static void add_bias(const Tensor& bias, int64_t n_rows, Tensor& y) {
        const float* bp = f32(bias);
        for (int64_t t = 0; t < n_rows; ++t) {
            float* yr = row(y, t);
            for (int64_t i = 0; i < y.cols; ++i) yr[i] += bp[i];
        }
    }
    // Weights the kernels stream at every step: on 2 MiB pages where the kernel gives them
    // (transparent huge pages in "madvise" mode need the advice), as the file map does.
    static void* alloc_huge(size_t bytes) {
        constexpr size_t kHuge = size_t{2} << 20;
        if (bytes < kHuge) return std::aligned_alloc(64, bytes);
        void* p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
        if (p) madvise(p, bytes, MADV_HUGEPAGE);
        return p;
    }
    static cpu::WeightMatrix weight_matrix(const Tensor& w) {
        return {w.type, w.rows, w.cols, w.data, w.row_bytes, static_cast<cpu::WeightLayout>(w.layout)};
    }
    // The first index from i on whose logit reaches `bound` (not NaN), or n. Most of a row is
    // below the running bound, so it is skipped 4 entries to a compare (SSE2: every x86-64).
    static int64_t next_reaching(const float* l, int64_t i, int64_t n, float bound) {
#if defined(__SSE2__)
        const __m128 b = _mm_set1_ps(bound);
        while (i + 4 <= n && _mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(l + i), b)) == 0) i += 4;
#endif
        while (i < n && !(l[i] >= bound)) ++i;
        return i;
    }

    // The k best non-NaN entries in the order of topk::order_key (the GPU's order too), in one
    // pass with a running bound: an entry is keyed only if its logit reaches the k-th best
    // seen so far, and the candidates are cut back to k whenever 4k have gathered. A row of
    // 49152 logits then costs a compare per entry (it was a key per entry, then a heap pass:
    // 7 % of a 16-sequence SmolLM2 step).
    static int32_t select_row(const float* l, int64_t n, int32_t k, std::span<TopKCandidate> out,
                              std::vector<uint64_t>& keys) {
        const auto kk = static_cast<size_t>(k);
        const size_t cap = std::max<size_t>(4 * kk, 256);
        keys.clear();
        keys.reserve(cap);
        uint64_t bound = topk::kNoCandidate;                          // keys >= bound are not among the k best
        float bound_logit = -std::numeric_limits<float>::infinity();  // its logit: a cheaper first test
        for (int64_t i = 0; i < n; ++i) {
            i = next_reaching(l, i, n, bound_logit);
            if (i == n) break;
            const uint64_t key = topk::order_key(l[i], static_cast<int32_t>(i));
            if (key >= bound) continue;
            keys.push_back(key);
            if (keys.size() < cap) continue;
            std::nth_element(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(kk - 1), keys.end());
            keys.resize(kk);
            bound = keys[kk - 1];
            bound_logit = l[topk::key_id(bound)];
        }
        const size_t m = std::min(keys.size(), kk);
        std::partial_sort(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(m), keys.end());
        for (size_t i = 0; i < m; ++i) {
            const int32_t id = topk::key_id(keys[i]);
            out[i] = {id, l[id]};
        }
        return static_cast<int32_t>(m);
    }

    static cpu::KvCacheView kv_view(const KvLayer& layer) {
        cpu::KvCacheView v;
        v.type = layer.k.type;
        v.k = layer.k.data;
        v.v = layer.v.data;
        v.row_bytes = layer.k.row_bytes;
        v.n_kv_heads = layer.n_kv_heads;
        v.head_dim = layer.head_dim;
        v.block_tokens = layer.block_tokens;
        return v;
    }

    cpu::ThreadPool pool_;
    mutable std::mutex mutex_;
    std::map<void*, Allocation> allocations_;
    MemoryReport report_;
    std::vector<std::vector<uint64_t>> keys_;  // top_k scratch, one per pool thread
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace ember
