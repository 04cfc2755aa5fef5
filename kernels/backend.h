// The backend interface: everything the engine asks of a compute device (CPU threads or a
// CUDA GPU). The engine owns the model logic and calls these ops in order; a backend owns
// only the arithmetic and the memory it hands out.
//
// Shapes: a Tensor is a row-major matrix, `cols` contiguous elements per row. Activations
// are F32 with one row per token (or per token*head when viewed per head). Weights keep the
// file's type (quantized). Every op works on a whole batch: the rows of all sequences that
// take part in this forward pass, described once by set_batch(). That is what lets the
// scheduler run several chats and API requests in one pass.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"

namespace ember {

// What a buffer holds, so a backend can report exactly where every byte goes.
// Append only (a kind's number indexes MemoryReport::bytes). State: the recurrent state of
// linear-attention layers (RecurrentLayer), per sequence like the KV cache, shown beside it.
enum class MemoryKind : uint8_t { Weights = 0, KvCache = 1, Activations = 2, State = 3 };
constexpr int kMemoryKinds = 4;

struct Tensor {
    void* data = nullptr;  // device memory of the backend that made it (host memory on CPU)
    DType type = DType::F32;
    int64_t cols = 0;  // elements per row (contiguous)
    int64_t rows = 0;
    size_t row_bytes = 0;  // stride between rows
    // How a weight's bytes are arranged, backend-specific: 0 = the file's rows (always for
    // activations). The CPU backend may rearrange weights at load (cpu::WeightLayout).
    uint8_t layout = 0;

    size_t bytes() const { return row_bytes * static_cast<size_t>(rows); }
    // The header (no data) of `rows` rows of `cols` elements of `type`, rows packed. Throws
    // ember::Error for an unknown type or cols that are not a whole number of its blocks.
    static Tensor shaped(DType type, int64_t cols, int64_t rows);
    // Rows [first, first + n) as a tensor of its own (no copy).
    Tensor slice_rows(int64_t first, int64_t n) const;
    // The same bytes seen as rows of `new_cols` (e.g. per-head view of q: cols=head_dim).
    Tensor reshape(int64_t new_cols) const;
    // Columns [first, first + n) of every row: a view whose rows stay row_bytes apart, so not
    // contiguous. Only glu() takes such views (gate and up, the halves of a fused gate+up
    // expert result: gemma4's ffn_gate_up_exps).
    Tensor slice_cols(int64_t first, int64_t n) const;
};

struct MemoryReport {
    uint64_t bytes[kMemoryKinds] = {};  // live bytes this backend allocated, per kind
    uint64_t mapped_weight_bytes = 0;   // weights used in place from the file map (CPU)
    uint64_t device_total = 0;          // device capacity (0 if unknown)
    uint64_t device_free = 0;
    uint64_t total() const { return bytes[0] + bytes[1] + bytes[2]; }
};

// One forward pass's layout, set once before the ops that need it.
struct BatchInfo {
    std::span<const int32_t> tokens;     // [n_tokens] token ids (for embedding lookup)
    std::span<const int32_t> positions;  // [n_tokens] position of each token in its sequence
    std::span<const int32_t> seq_of;     // [n_tokens] index of the token's sequence in this batch
    // KV cache addressing, in units of cache slots (block * block_tokens + offset):
    std::span<const int32_t> kv_slot;      // [n_tokens] where this token's K/V is written
    std::span<const int32_t> block_table;  // [n_seqs * max_blocks] block ids of each sequence
    int32_t n_seqs = 0;
    int32_t max_blocks = 0;                // row stride of block_table
    std::span<const int32_t> output_rows;  // rows whose logits are wanted (gather before LM head)
    // Models with recurrent layers (RecurrentLayer): the state slot of each sequence [n_seqs].
    // A sequence's tokens are read in batch order, which must be their order in the sequence.
    std::span<const int32_t> state_slot;
};

// KV cache storage for one layer: `n_blocks` blocks of `block_tokens` tokens, each token
// holding n_kv_heads*head_dim keys and as many values. A block's bytes are laid out as its
// backend's kernels read them (CPU: kernels/cpu/kv_layout.h, grouped by head within a block,
// F16 keys transposed; CUDA: a row per token); blocks themselves are the same for every backend.
struct KvLayer {
    Tensor k, v;  // rows = n_blocks * block_tokens, cols = n_kv_heads * head_dim
    int32_t block_tokens = 16;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
};

// The recurrent state of one linear-attention layer (Gated DeltaNet: qwen35), for n_slots
// sequences: what replaces a growing KV cache in those layers, fixed in size per sequence.
// F32, allocated as MemoryKind::State; a slot's rows are zero for a fresh sequence.
struct RecurrentLayer {
    // Per slot, the causal convolution's last conv_kernel - 1 inputs, oldest first:
    // rows = n_slots * (conv_kernel - 1), cols = conv_channels.
    Tensor conv;
    // Per slot and value head h, the delta rule's matrix S (head_dim x head_dim), row j the
    // value index and column i the key index (o = S q): rows = n_slots * n_v_heads * head_dim,
    // cols = head_dim.
    Tensor delta;
    int32_t n_slots = 0, conv_kernel = 0, conv_channels = 0;
    int32_t n_k_heads = 0, n_v_heads = 0, head_dim = 0;  // key and value heads share head_dim
    uint64_t bytes() const { return conv.bytes() + delta.bytes(); }
};

// The gated delta rule's inputs besides q, k, v (Backend::gated_delta_rule).
struct DeltaRuleParams {
    float l2_eps = 1e-6f;             // q and k are L2-normalized first: x / sqrt(sum x^2 + l2_eps)
    const Tensor* dt_bias = nullptr;  // [n_v_heads] F32, added to alpha before the softplus
    const Tensor* a = nullptr;        // [n_v_heads] F32, -exp(A_log): the decay's rate (negative)
    // Which key head value head h reads. Tiled (qwen35, whose converter reorders the value
    // heads for ggml's broadcast): h % n_k_heads. Grouped (qwen3next, the checkpoint's order):
    // h / (n_v_heads / n_k_heads), each key head's value heads side by side.
    bool grouped_heads = false;
};

struct RopeParams {
    int32_t n_heads = 0;  // rows per token in the tensor being rotated
    int32_t head_dim = 0;
    int32_t n_rot = 0;  // leading dims rotated (== head_dim for all supported models)
    bool neox = false;  // NeoX pairing (i, i+n/2) instead of (2i, 2i+1)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;              // linear scaling: positions multiplied by this
    const float* freq_factors = nullptr;  // [n_rot/2] Llama 3 style per-frequency divisors (host)
    // YaRN (ggml_rope_ext's arguments; formulas in kernels/common/rope_yarn.h). ext_factor 0
    // leaves plain scaling; attn_factor multiplies the rotated dims in every case.
    float ext_factor = 0.0f;   // 1 for a "yarn" file: the extrapolation mix of the ramp
    float attn_factor = 1.0f;  // llama.cpp's yarn_attn_factor
    float beta_fast = 32.0f;   // ramp ends, in turns over n_ctx_orig
    float beta_slow = 1.0f;
    int32_t n_ctx_orig = 0;  // the training context YaRN extends (rope.scaling.original_context_length)
    // Rotate by minus each position's angle: keys rotated at p, turned back by d, are keys at
    // p - d (every angle is linear in the position). Moves cached keys (Transformer::roll_kv).
    bool reverse = false;
};

struct AttentionParams {
    int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
    float scale = 1.0f;    // applied to q.k
    int32_t window = 0;    // sliding window in tokens (0 = global causal)
    float softcap = 0.0f;  // tanh soft-capping of scores (0 = off)
    // Attention sinks (gpt-oss): per query head a logit with no value, whose exp joins that
    // head's softmax denominator (ggml_soft_max_add_sinks). F32, n_heads values, loaded
    // like a weight (blk.N.attn_sinks.weight); null = none.
    const Tensor* sinks = nullptr;
};

// The activation of a gated FFN: out = act(gate) * up, or gpt-oss's clamped form.
enum class GluAct : uint8_t {
    Silu = 0,       // silu(g) * u
    GeluTanh = 1,   // gelu_tanh(g) * u
    SwigluOai = 2,  // ggml_swiglu_oai: x = min(g, 7), y = clamp(u, -7, 7), x * sigmoid(1.702 x) * (y + 1)
    Sigmoid = 3,    // sigmoid(g) * u: qwen35's output gate of full attention
};
constexpr float kSwigluOaiAlpha = 1.702f;  // llama.cpp's constants for gpt-oss
constexpr float kSwigluOaiLimit = 7.0f;

// One output of Backend::matmul_shared: y = x * w^T (+ bias if bias and bias->data).
struct MatmulOut {
    const Tensor* w = nullptr;
    Tensor* y = nullptr;
    const Tensor* bias = nullptr;
};

// ---- mixture of experts (Backend::moe_route, moe_matmul, moe_combine) ------------------
// A MoE FFN of T tokens, k = n_used experts each (llama.cpp's build_moe_ffn):
//   logits = x * router^T                  [T x n_expert]   (matmul)
//   moe_route(logits) -> ids, weights      [T x k] each     (which experts, how much)
//   gate = moe_matmul(gate_exps, x, ids)   [T*k x n_ff]     (row t*k+j: expert ids[t,j])
//   up   = moe_matmul(up_exps, x, ids)
//   glu(gate, up)                                            (SiLU: qwen3moe; GELU: gemma4)
//   down = moe_matmul(down_exps, gate, ids) [T*k x n_embd]
//   out  = moe_combine(down, weights)      [T x n_embd]     (out[t] = sum_j w[t,j] down[t*k+j])
// Expert weights are the file's 3-D tensor [n_expert][rows][cols], loaded with
// load_expert_weight and seen as (n_expert*rows) x cols. A fused gate+up tensor (gemma4's
// ffn_gate_up_exps) is one moe_matmul with rows = 2*n_ff, then glu() of its two
// slice_cols halves.
enum class MoeGating : uint8_t {
    // softmax over all experts, then the k largest probabilities (qwen3moe, llama.cpp's
    // LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX)
    Softmax = 0,
    // the k largest logits, then softmax over those k (gpt-oss: SOFTMAX_WEIGHT)
    SoftmaxTopK = 1,
};
struct MoeRouting {
    int32_t n_used = 0;  // k, 1 <= k <= n_expert
    MoeGating gating = MoeGating::Softmax;
    // Divide the k weights by their sum (clamped below at 2^-14, as llama.cpp does).
    bool normalize = false;
    float scale = 1.0f;  // then multiply them by this
};

// ---- sampling support (Backend::top_k) -------------------------------------------------
constexpr int32_t kMaxTopK = 1024;  // the most candidates top_k returns per row

struct TokenCount {  // a token seen `count` (>= 1) times in the penalty window
    int32_t id;
    int32_t count;
};
struct TokenBias {
    int32_t id;
    float bias;  // added to the logit; -inf bans the token
};
// One output row's sampler adjustments, applied before the selection (Sampler semantics:
// engine/sampling/sampler.h; the arithmetic is kernels/common/topk.h).
struct TopKRow {
    float repeat_penalty = 1.0f;            // llama.cpp: positive logits divided, negative multiplied
    float presence_penalty = 0.0f;          // subtracted once per penalized token
    float frequency_penalty = 0.0f;         // subtracted per occurrence
    std::span<const TokenCount> penalized;  // distinct ids
    std::span<const TokenBias> bias;        // distinct ids, applied after the penalties
};
struct TopKCandidate {
    int32_t id;
    float logit;  // after penalties and bias
};

// Applies `adj`'s penalties, then its bias, to one logits row on the host (ids outside the
// row are ignored): Sampler::sample and the CPU backend's top_k; GPU backends do the same
// arithmetic (kernels/common/topk.h) on the device.
void apply_adjustments(std::span<float> row, const TopKRow& adj);

// What a backend's decode-pass graphs did so far (CUDA graphs; always zero on the CPU).
struct GraphStats {
    uint64_t eager = 0;     // op segments launched one by one
    uint64_t captured = 0;  // segments captured into a new graph and run from it
    uint64_t replayed = 0;  // segments run by replaying a cached graph
    uint64_t failures = 0;  // failed captures (graphs are then off for that backend)
};

// The contract every backend implements. The public methods are not virtual: each checks
// its arguments once, here, for every backend (shapes, types, sizes, ids against the batch;
// a violation throws ember::Error naming the op and the shapes), then calls the protected
// virtual `do_` op, which may assume valid arguments. Activations (x, y, q, k, v, out, ...)
// must be contiguous F32 rows.
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;  // "cpu (avx512, 2 threads)", "cuda:0 H200"
    // How this backend lays out a KV block's bytes, and whose arithmetic wrote them: blocks
    // saved from one backend (the prefix cache's disk tier) are read back only by a backend
    // that answers the same ("cpu-heads/avx512", "cuda-rows/sm_90").
    virtual std::string kv_layout() const = 0;

    // ---- memory ---------------------------------------------------------------------
    // Allocates rows x cols of `type`; throws ember::Error with the sizes on failure.
    virtual Tensor alloc(MemoryKind kind, DType type, int64_t cols, int64_t rows, const char* tag) = 0;
    virtual void free(Tensor& t) = 0;
    // Makes a weight usable by this backend. `host` points into the model file map; the CPU
    // backend uses it in place, a GPU backend copies it to device memory.
    virtual Tensor load_weight(const void* host, DType type, int64_t cols, int64_t rows, const char* tag) = 0;
    // A 3-D expert tensor [n_expert][rows][cols] as an (n_expert*rows) x cols weight for
    // moe_matmul: like load_weight, but a backend that rearranges weights does it per expert
    // (the CPU's 32-row panels), so each expert's rows stay a matrix of their own.
    virtual Tensor load_expert_weight(const void* host, DType type, int64_t cols, int64_t rows_per_expert,
                                      int64_t n_expert, const char* tag) {
        return load_weight(host, type, cols, rows_per_expert * n_expert, tag);
    }
    virtual MemoryReport memory() const = 0;
    // Copies n_bytes (<= the tensor's bytes) between host memory and the tensor.
    void upload(Tensor& dst, const void* src, size_t n_bytes);
    void download(const Tensor& src, void* dst, size_t n_bytes);

    // ---- ops (in issue order; a GPU backend may queue them and run at synchronize) -------
    // The layout of the next ops; the spans must outlive them. positions, seq_of and kv_slot
    // have one entry per token; output_rows index the batch's tokens.
    void set_batch(const BatchInfo& batch);
    const BatchInfo& batch() const { return batch_; }
    int64_t batch_tokens() const { return static_cast<int64_t>(batch_.tokens.size()); }
    // out[t] = dequant(table[batch.tokens[t]]) * scale
    void embed(const Tensor& table, float scale, Tensor& out);
    // y = x * W^T  (x: n x cols, W: rows x cols, y: n x rows); + bias if bias.data
    void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias = nullptr);
    // matmul() of one x with several matrices (q/k/v, gate/up), each result bitwise the same;
    // a backend may quantize x once and run them as one job.
    void matmul_shared(const Tensor& x, std::span<const MatmulOut> outs);
    // y = x / rms(x) * w, per row (w has x.cols elements, F32). In place allowed.
    void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);
    // In place, positions from the batch: x is (n_tokens * p.n_heads) x p.head_dim.
    void rope(Tensor& x, const RopeParams& p);
    // out = act(gate) * up (GluAct); out may be gate. gate and up may be slice_cols views (F32
    // rows further apart than their columns); out is contiguous and then must not overlap
    // them. The bool form: GELU(tanh) or SiLU.
    void glu(const Tensor& gate, const Tensor& up, GluAct act, Tensor& out);
    void glu(const Tensor& gate, const Tensor& up, bool gelu, Tensor& out) {
        glu(gate, up, gelu ? GluAct::GeluTanh : GluAct::Silu, out);
    }
    void add(Tensor& x, const Tensor& y);  // x += y
    void scale(Tensor& x, float s);        // x *= s (finite s)
    // x = cap * tanh(x / cap) elementwise, cap > 0: gemma's soft-capping of the final logits.
    void softcap(Tensor& x, float cap);
    // add(x, y), then rms_norm(x, w, eps, out): the residual add that ends a sublayer and the
    // next sublayer's norm, one pass over x where the backend fuses them (the same bits).
    // A backend whose matmul quantizes its input may quantize `out` in the same pass and keep
    // it for the matmuls that read `out` next (CUDA: kernels/cuda/NOTES.md, "Fused decode
    // ops"); so may rms_norm and glu for their outputs.
    void add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out);
    // rms_norm(y, wy, eps, y) in place, then add_rms_norm(x, y, w, eps, out): a sublayer's
    // post-norm (gemma3's post_attention_norm, post_ffw_norm), the residual add and the next
    // norm, one pass where the backend fuses them (the same bits).
    void norm_add_rms_norm(Tensor& x, Tensor& y, const Tensor& wy, const Tensor& w, float eps, Tensor& out);
    // ---- mixture of experts (see MoeRouting above) --------------------------------------
    // Per row t of logits [T x n_expert] (F32): the k = r.n_used chosen experts, best first,
    // to ids[t] (I32, T x k) and their weights to weights[t] (F32, T x k). Selection is by
    // value descending, ties to the lower expert id (ggml's argsort leaves ties unspecified;
    // exact ties of float logits do not occur in practice). Softmax uses expf of x - max.
    // expert_scale: null, or n_expert F32 factors (gemma4's ffn_down_exps.scale), each chosen
    // weight multiplied by its expert's last: the expert's output scaled, as moe_combine sums.
    void moe_route(const Tensor& logits, const MoeRouting& r, Tensor& ids, Tensor& weights,
                   const Tensor* expert_scale = nullptr);
    // y[s] = x_s * W_e^T (+ bias[e]) for every slot s < ids.rows*ids.cols, e = ids[s] (ids
    // flattened, T x k). w: n_expert experts of rows(w)/n_expert rows each (load_expert_weight).
    // x: T x cols, shared by a token's k slots (x_s = x[s / k]), or T*k x cols (x_s = x[s]).
    // y: T*k x rows. bias: null or n_expert x rows F32 (gpt-oss). Each result equals
    // matmul() of expert e's rows with x_s up to the activation quantization, which a
    // backend does per expert group; the backend groups the slots by expert, so that each
    // expert's weights are read once per call (prefill, batched decode).
    void moe_matmul(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, Tensor& y,
                    const Tensor* bias = nullptr);
    // out[t] = sum_j weights[t,j] * y[t*k + j], j in order (k = weights.cols).
    void moe_combine(const Tensor& y, const Tensor& weights, Tensor& out);
    // x[t] *= sigmoid(s[t]) for every row t of x, s: x.rows x 1 (qwen35moe's gate on its shared
    // expert's output: one logit per token).
    void sigmoid_scale_rows(Tensor& x, const Tensor& s);
    // dst = src, row by row: either may be a slice_cols view (F32 rows further apart than their
    // columns), with the same shape. qwen35 separates q from its gate with it; qwen3next's
    // first conversions' fused q/k/v/z projection is regrouped with it (into column views).
    void copy(const Tensor& src, Tensor& dst);
    // ---- linear attention (Gated DeltaNet, qwen35; RecurrentLayer above) --------------------
    // Causal depthwise convolution over each sequence's inputs with its rolling state, then
    // SiLU: for token t of a sequence, window = [the last conv_kernel-1 inputs, x_t] and
    // out_t[c] = silu(sum_k window[k][c] * w[c][k]); the state then holds the window's last
    // conv_kernel-1 inputs (state slots: batch.state_slot). x, out: T x conv_channels;
    // w: conv_channels x conv_kernel F32 (the file's ssm_conv1d.weight).
    void ssm_conv(RecurrentLayer& state, const Tensor& x, const Tensor& w, Tensor& out);
    // The gated delta rule, recurrent form, token by token per sequence and value head h
    // (key head h % n_k_heads, or h / (n_v_heads / n_k_heads) with p.grouped_heads), with S
    // the head's state:
    //   q, k L2-normalized (p.l2_eps); g = softplus(alpha + dt_bias[h]) * a[h]; b = sigmoid(beta)
    //   S = exp(g) S;  S += b (v - S k) k^T;  out = S q / sqrt(head_dim)
    // q, k: T x n_k_heads*head_dim, v and out: T x n_v_heads*head_dim, alpha, beta: T x
    // n_v_heads. q, k, v may be slice_cols views (F32 rows: the convolution's output).
    void gated_delta_rule(RecurrentLayer& state, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& alpha,
                          const Tensor& beta, const DeltaRuleParams& p, Tensor& out);
    // Writes this batch's K/V rows (n_tokens x n_kv_heads*head_dim) into the cache slots.
    void store_kv(KvLayer& layer, const Tensor& k, const Tensor& v);
    // rope(q), rope(k), then store_kv(layer, k, v): the step between the q/k/v projections and
    // attention, one launch where the backend fuses it (the same bits). q: n_tokens x
    // pq.n_heads*pq.head_dim, k and v: n_tokens x pk.n_heads*pk.head_dim (token rows, not
    // per-head views); q and k are rotated in place.
    void rope_store_kv(KvLayer& layer, Tensor& q, Tensor& k, const Tensor& v, const RopeParams& pq,
                       const RopeParams& pk);
    // The inverse: the K/V rows of this batch's cache slots back into F32 (n_tokens x
    // n_kv_heads*head_dim), exactly the values the cache holds. With rope() and store_kv() it
    // moves cached keys to other positions (a rolled context: engine/models/kv_roll.cpp).
    void load_kv(const KvLayer& layer, Tensor& k, Tensor& v);
    // Causal attention of every query row over its sequence's cache (including this batch).
    void attention(const KvLayer& layer, const Tensor& q, const AttentionParams& p, Tensor& out);
    // out[i] = x[batch.output_rows[i]]
    void gather_output_rows(const Tensor& x, Tensor& out);
    virtual void synchronize() = 0;

    // ---- sampling ---------------------------------------------------------------------
    // For each row r < rows.size() of `logits` (F32): applies rows[r]'s penalties, then its
    // bias, to the row in place (ids outside the row are ignored), exactly as
    // Sampler::sample does on the host; then writes the min(k, non-NaN logits) best tokens
    // of the row, by logit descending then id ascending, to out[r * k ...] and their number
    // to counts[r]. 1 <= k <= kMaxTopK. Waits for the result (a device sync on a GPU).
    void top_k(Tensor& logits, int32_t k, std::span<const TopKRow> rows, std::span<TopKCandidate> out,
               std::span<int32_t> counts);

    // ---- execution options ------------------------------------------------------------
    // Whether repeated small (decode) passes are replayed as CUDA graphs: on by default
    // unless EMBER_CUDA_GRAPHS=0. Returns false where the backend has no graphs (the CPU).
    virtual bool set_graphs(bool enabled) {
        (void)enabled;
        return false;
    }
    virtual GraphStats graph_stats() const { return {}; }

protected:
    // The ops proper, called with checked arguments (see the public methods).
    virtual void do_upload(Tensor& dst, const void* src, size_t n_bytes) = 0;
    virtual void do_download(const Tensor& src, void* dst, size_t n_bytes) = 0;
    virtual void do_set_batch(const BatchInfo& batch) = 0;
    virtual void do_embed(const Tensor& table, float scale, Tensor& out) = 0;
    virtual void do_matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) = 0;  // bias: null or data
    virtual void do_matmul_shared(const Tensor& x, std::span<const MatmulOut> outs) {  // biases: null or data
        for (const MatmulOut& o : outs) do_matmul(*o.w, x, *o.y, o.bias);
    }
    virtual void do_rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) = 0;
    virtual void do_rope(Tensor& x, const RopeParams& p) = 0;
    virtual void do_glu(const Tensor& gate, const Tensor& up, GluAct act, Tensor& out) = 0;
    virtual void do_add(Tensor& x, const Tensor& y) = 0;
    virtual void do_scale(Tensor& x, float s) = 0;
    virtual void do_softcap(Tensor& x, float cap) = 0;
    virtual void do_add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
        do_add(x, y);
        do_rms_norm(x, w, eps, out);
    }
    virtual void do_norm_add_rms_norm(Tensor& x, Tensor& y, const Tensor& wy, const Tensor& w, float eps, Tensor& out) {
        do_rms_norm(y, wy, eps, y);
        do_add_rms_norm(x, y, w, eps, out);
    }
    virtual void do_moe_route(const Tensor& logits, const MoeRouting& r, Tensor& ids, Tensor& weights,
                              const Tensor* expert_scale) = 0;
    virtual void do_moe_matmul(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, Tensor& y,
                               const Tensor* bias) = 0;  // bias: null or data
    virtual void do_moe_combine(const Tensor& y, const Tensor& weights, Tensor& out) = 0;
    virtual void do_sigmoid_scale_rows(Tensor& x, const Tensor& s) = 0;
    virtual void do_copy(const Tensor& src, Tensor& dst) = 0;
    virtual void do_ssm_conv(RecurrentLayer& state, const Tensor& x, const Tensor& w, Tensor& out) = 0;
    virtual void do_gated_delta_rule(RecurrentLayer& state, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& alpha, const Tensor& beta, const DeltaRuleParams& p,
                                     Tensor& out) = 0;
    virtual void do_store_kv(KvLayer& layer, const Tensor& k, const Tensor& v) = 0;
    // q and k as per-head views (rows of head_dim), as do_rope takes them.
    virtual void do_rope_store_kv(KvLayer& layer, Tensor& q_heads, Tensor& k_heads, const Tensor& k, const Tensor& v,
                                  const RopeParams& pq, const RopeParams& pk) {
        do_rope(q_heads, pq);
        do_rope(k_heads, pk);
        do_store_kv(layer, k, v);
    }
    virtual void do_load_kv(const KvLayer& layer, Tensor& k, Tensor& v) = 0;
    virtual void do_attention(const KvLayer& layer, const Tensor& q, const AttentionParams& p, Tensor& out) = 0;
    virtual void do_gather_output_rows(const Tensor& x, Tensor& out) = 0;
    virtual void do_top_k(Tensor& logits, int32_t k, std::span<const TopKRow> rows, std::span<TopKCandidate> out,
                          std::span<int32_t> counts) = 0;

private:
    void check_kv_rows(const KvLayer& layer, const Tensor& k, const Tensor& v, const char* op) const;
    BatchInfo batch_;  // the last set_batch (spans owned by the caller)
};

// The CPU backend (always available). n_threads <= 0 means one per core.
std::unique_ptr<Backend> make_cpu_backend(int n_threads);

}  // namespace ember
