// The decoder-only transformer shared by llama, qwen2, qwen3, qwen3moe, gemma3, gemma4, gpt-oss:
// loads the weights onto a backend and runs batched forward passes over a block KV cache.
// Architecture differences are the flags and per-layer shapes in ModelConfig; there is one
// forward pass, not one per model family. Generic mechanisms it offers the families:
// per-layer head and FFN shapes, layers that attend over an earlier layer's K/V (KV
// sharing), mixture-of-experts FFNs, per-layer token embeddings added after each layer, a
// per-layer output scale, soft-capped logits.
#pragma once
#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/dump.h"
#include "engine/models/model_config.h"
#include "kernels/common/error.h"
#include "kernels/backend.h"

namespace ember {

// A pass given up between layers because its PassStop said so: layers [0, layers_done) wrote
// their K/V rows and recurrent states for the batch, the rest did not, so the caller must
// drop what the pass wrote (KvCache::truncate; a recurrent sequence is not reusable).
struct PassStopped : Error {
    PassStopped(int32_t done, int32_t total)
        : Error("forward pass stopped after layer " + std::to_string(done) + " of " + std::to_string(total)),
          layers_done(done),
          layers(total) {}
    int32_t layers_done, layers;
};

class Transformer {
public:
    // Loads every weight through backend.load_weight (zero-copy on the CPU). Throws
    // ember::Error naming the tensor for a missing tensor, a wrong shape or a type the
    // backend cannot run.
    Transformer(std::shared_ptr<const GgufFile> file, Backend& backend);
    // Partial offload: the embedding and layers [0, n_first_layers) run on `first` (the GPU),
    // the remaining layers and the output head on `rest` (the CPU). The activations cross
    // over once per pass (n_tokens x n_embd floats, and the per-layer inputs where the model
    // has them). A layer and the layer whose K/V it shares run on the same device
    // (split_supported); another split throws ember::Error.
    // With experts (a mixture-of-experts model), n_first_expert_layers >= 0 keeps only the
    // first n_first_expert_layers layers' experts and routers on `first`; the others' live on
    // `rest` and run there, their input and output crossing over (n_tokens x n_embd floats
    // each way): the attention of every layer on the GPU, the experts in RAM.
    Transformer(std::shared_ptr<const GgufFile> file, Backend& first, Backend& rest, int n_first_layers,
                int n_first_expert_layers = -1);
    ~Transformer();
    Transformer(const Transformer&) = delete;
    Transformer& operator=(const Transformer&) = delete;

    const ModelConfig& config() const { return config_; }
    const GgufFile& file() const { return *file_; }
    Backend& backend() { return *devices_.front().backend; }
    // The backend each layer's weights live on.
    std::vector<Backend*> layer_backends() const;
    // The backend of each KV cache layer (the layers that keep K/V of their own), for KvCache.
    std::vector<Backend*> kv_backends() const;
    // The backend of each recurrent layer's state (linear attention: qwen35), for KvCache.
    std::vector<Backend*> recurrent_backends() const;

    // The KV cache layout this model needs for `n_ctx` tokens of `n_seqs` sequences.
    KvCacheConfig kv_config(int64_t n_ctx, int32_t n_seqs, DType kv_type = DType::F16) const;

    // ---- sizes, shared with the fit planner (engine/fit), which sizes a model before it
    // is loaded: these are the formulas the load itself uses, so the plan cannot drift.
    static KvCacheConfig kv_config(const ModelConfig& c, int64_t n_ctx, int32_t n_seqs, DType kv_type);
    // The context a model is loaded with when none is asked for: its trained one, at most 4096.
    static int64_t default_context(const ModelConfig& c) { return std::min<int64_t>(c.n_ctx_train, 4096); }
    // The KV cache layer that model layer `layer` reads (its own, or its KV source's).
    static int32_t kv_layer_of(const ModelConfig& c, int32_t layer);
    // The recurrent state layer (KvCache::recurrent) of a linear-attention layer.
    static int32_t recurrent_layer_of(const ModelConfig& c, int32_t layer);
    // Whether layers [0, n_first_layers) on one device and the rest on another keep every
    // layer beside the layer whose K/V it shares.
    static bool split_supported(const ModelConfig& c, int32_t n_first_layers);
    // Tensors of a layer that the load skips: the K/V projections of a layer that shares an
    // earlier layer's K/V.
    static bool skips_tensor(const ModelConfig& c, int32_t layer, const std::string& name);
    // How many weights a tensor is loaded as: per_layer_model_proj is cut into one
    // [n_embd_per_layer x n_embd] matrix per layer (each output is a layer's input); 1 else.
    static int32_t load_pieces(const ModelConfig& c, const std::string& name);
    // One activation buffer of the per-pass scratch: rows x cols F32.
    struct ScratchBuffer {
        const char* tag;
        int64_t cols, rows;
        DType type = DType::F32;  // I32: the experts' ids
    };
    static constexpr int kScratchBuffers = 11;       // a dense model's
    static constexpr int kMoeScratchBuffers = 6;     // added for experts
    static constexpr int kPleScratchBuffers = 2;     // added for per-layer embeddings
    static constexpr int kLinearScratchBuffers = 6;  // added for linear attention
    // The scratch one device holds for passes of up to `n_tokens` tokens and `n_outputs`
    // output rows (every device of a split holds all of it): x, xn, q, k, v, attn, proj,
    // gate, up, out_x, logits (widths: the widest layer's); with experts (c.moe()) also
    // router [T x n_expert], expert_ids and expert_weights [T x n_expert_used], and
    // expert_gate, expert_up [T*n_expert_used x n_ff_exp], expert_down [T*n_expert_used x
    // n_embd] (gate and up then have no columns: no layer is dense); with per-layer
    // embeddings ple [n_layers*T x n_embd_per_layer] and ple_tmp [T x n_embd_per_layer]; with
    // linear attention (c.recurrent()) lin_mix [T x max(conv_channels, 2*q_dim, qkvz_dim if
    // ssm_in_fused)] (the input projection; full attention's q and gate), lin_conv [T x conv_channels], lin_z [T x
    // max(value_dim, q_dim)] (the output gates), lin_alpha, lin_beta [T x n_v_heads], lin_out
    // [T x value_dim].
    static std::vector<ScratchBuffer> scratch_layout(const ModelConfig& c, int64_t n_tokens, int64_t n_outputs);
    // Their bytes on a backend that rounds each allocation up to `alloc_align`.
    static uint64_t scratch_bytes(const ModelConfig& c, int64_t n_tokens, int64_t n_outputs, size_t alloc_align);

    // Asked between layers whether the pass is still wanted (the scheduler: every sequence in
    // it cancelled, or the engine stopping), so that a long prefill chunk does not hold a
    // shutdown for its whole length. True: the pass throws PassStopped.
    using PassStop = std::function<bool()>;
    // One forward pass over `batch` (its kv slots already reserved in `kv`). Writes the
    // logits of batch.output_rows to `logits` (output_rows.size() x n_vocab, row-major).
    void forward(const BatchInfo& batch, KvCache& kv, std::vector<float>& logits, const PassStop& stop = {});
    // The same pass without the download: the logits rows (output_rows.size() x n_vocab, F32)
    // where they were computed, on output_backend(); valid until the next pass. An empty
    // Tensor when the batch wants no outputs.
    Tensor forward_device(const BatchInfo& batch, KvCache& kv, const PassStop& stop = {});
    // The backend of the output head (the last layer's).
    Backend& output_backend() { return *layers_.back().device->backend; }

    // ---- a rolled context (engine/models/kv_roll.cpp) ------------------------------------
    // Why this model's cached keys are not moved to other positions (empty: they are): layers
    // that share another layer's K/V, or that attend over a sliding window.
    std::string roll_refusal() const;
    // Drops positions [at, at + by) of sequence `seq` and moves [at + by, end) down by `by`:
    // each key turned back by `by` positions (RoPE's angles are linear in the position), each
    // value copied; the sequence then holds end - by tokens. Throws ember::Error with
    // roll_refusal() where it is not empty. The moved rows hold keys and values computed with
    // the dropped tokens in view, which no pass over the shorter sequence computes: they must
    // not be published to the prefix cache.
    void roll_kv(KvCache& kv, int32_t seq, int32_t at, int32_t by, int32_t end);

    // Where the named intermediates of each pass go (engine/models/dump.h); by default from
    // $EMBER_DUMP, read when the model is loaded.
    void set_dump(TensorDump dump) { dump_ = std::move(dump); }

private:
    // Activation buffers of one device, sized for the largest pass so far (rows = capacity).
    struct Scratch {
        int64_t tokens = 0, outputs = 0;
        Tensor x, xn, q, k, v, attn, proj, gate, up, out_x, logits;
        Tensor router, expert_ids, expert_weights, expert_gate, expert_up, expert_down;
        Tensor ple, ple_tmp;
        Tensor lin_mix, lin_conv, lin_z, lin_alpha, lin_beta, lin_out;
        static constexpr int kBuffers =
            kScratchBuffers + kMoeScratchBuffers + kPleScratchBuffers + kLinearScratchBuffers;
        // Every buffer, and its scratch_layout tag, in the same order.
        std::array<Tensor*, kBuffers> buffers() {
            return {&x,           &xn,        &q,           &k,      &v,       &attn,       &proj,
                    &gate,        &up,        &out_x,       &logits, &router,  &expert_ids, &expert_weights,
                    &expert_gate, &expert_up, &expert_down, &ple,    &ple_tmp, &lin_mix,    &lin_conv,
                    &lin_z,       &lin_alpha, &lin_beta,    &lin_out};
        }
        static constexpr std::array<const char*, kBuffers> kTags = {
            "x",           "xn",        "q",           "k",      "v",       "attn",       "proj",
            "gate",        "up",        "out_x",       "logits", "router",  "expert_ids", "expert_weights",
            "expert_gate", "expert_up", "expert_down", "ple",    "ple_tmp", "lin_mix",    "lin_conv",
            "lin_z",       "lin_alpha", "lin_beta",    "lin_out"};
    };
    // One pass's activations on one device: the scratch buffers cut to the pass's T tokens
    // (O output rows). q, k, v, attn, gate, up have room for the widest layer; a layer
    // views them at its own width (Layer::rows_of).
    struct Activations {
        Tensor x;         // [T x n_embd]   residual stream
        Tensor xn;        // [T x n_embd]   normed input of a block
        Tensor q, k, v;   // [T x q_dim], [T x kv_dim], [T x kv_dim]
        Tensor attn;      // [T x q_dim]    attention output
        Tensor proj;      // [T x n_embd]   a block's output before the residual add
        Tensor gate, up;  // [T x n_ff]
        Tensor out_x;     // [O x n_embd]   the output rows
        Tensor logits;    // [O x n_vocab]
        // Experts (k = n_expert_used): router logits [T x n_expert], ids and weights [T x k],
        // gate/up [T*k x n_ff_exp], down [T*k x n_embd].
        Tensor router, expert_ids, expert_weights, expert_gate, expert_up, expert_down;
        Tensor ple;      // [n_layers*T x n_embd_per_layer]  each layer's input, layer-major
        Tensor ple_tmp;  // [T x n_embd_per_layer]
        // Linear attention and gated attention (qwen35; widths in scratch_layout).
        Tensor lin_mix, lin_conv, lin_z, lin_alpha, lin_beta, lin_out;
    };
    struct Device {
        Backend* backend = nullptr;
        Scratch scratch;
        Activations act;                           // this pass's
        std::vector<std::pair<int, Tensor>> ones;  // [head_dim] of 1.0f: norms without a weight
    };
    // One layer, everything resolved at load: where it runs, its rope and attention
    // parameters, its weights. Weight shapes are [rows x cols] as the matmul sees them
    // (y = x W^T: W is [out x in]); an absent optional weight has no data.
    struct Layer {
        int index = 0;
        Device* device = nullptr;
        Device* expert_device = nullptr;  // where the router and experts live and run
        LayerShape shape;
        int32_t kv_layer = 0;       // the KV cache layer it attends over
        bool stores_kv = true;      // false: it shares an earlier layer's K/V (no K/V of its own)
        RopeParams rope_q, rope_k;  // differ in n_heads only
        AttentionParams attention;
        Tensor attn_norm;  // [n_embd]
        Tensor wq, wk,
            wv;  // [q_dim x n_embd], [kv_dim x n_embd], [kv_dim x n_embd] (wv absent: V = K's projection, gemma4)
        Tensor bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim]        (qwen2)
        Tensor q_norm, k_norm;  // [head_dim], per head               (gemma3)
        Tensor v_norm;          // [head_dim] of ones, per head       (gemma4; Device::ones)
        Tensor wo;              // [n_embd x q_dim]
        Tensor bo;              // [n_embd]                           (gpt-oss)
        Tensor sinks;           // [n_heads] attention sink logits    (gpt-oss)
        Tensor post_attn_norm;  // [n_embd]                           (gemma3)
        Tensor ffn_norm;        // [n_embd]
        Tensor w_gate, w_up;    // [n_ff x n_embd]
        Tensor w_down;          // [n_embd x n_ff]
        Tensor post_ffn_norm;   // [n_embd]                           (gemma3)
        // Experts (qwen3moe, gemma4), each 3-D tensor as n_expert stacked matrices:
        Tensor ffn_gate_inp;                // [n_expert x n_embd]  the router
        Tensor ffn_gate_exps, ffn_up_exps;  // [n_expert*n_ff_exp x n_embd]
        Tensor ffn_gate_up_exps;            // [n_expert*2*n_ff_exp x n_embd]  fused (gemma4), else absent
        Tensor ffn_down_exps;               // [n_expert*n_embd x n_ff_exp]
        // Their biases (gpt-oss): [n_expert], [n_expert x n_ff_exp] twice, [n_expert x n_embd].
        Tensor ffn_gate_inp_b, ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
        // gemma4's expert branch beside the dense FFN (ModelConfig::shared_ffn):
        Tensor ffn_gate_inp_scale;   // [n_embd]    the router's input: rms_norm(x) * this / sqrt(n_embd)
        Tensor ffn_down_exps_scale;  // [n_expert]  each expert's output scale (absent: 1)
        Tensor pre_ffn_norm_2;       // [n_embd]    the experts' input norm
        Tensor post_ffn_norm_2;      // [n_embd]    the experts' output norm
        Tensor post_ffn_norm_1;      // [n_embd]    the dense FFN's output norm (on `device`)
        // qwen35moe's shared expert (ModelConfig::shared_expert), on `device`:
        Tensor ffn_gate_inp_shexp;            // [1 x n_embd]  its gate's logit
        Tensor ffn_gate_shexp, ffn_up_shexp;  // [n_ff_shexp x n_embd]
        Tensor ffn_down_shexp;                // [n_embd x n_ff_shexp]
        // After the FFN's residual add (gemma4): the per-layer embedding block, then a scale.
        Tensor pl_gate;          // [n_embd_per_layer x n_embd]
        Tensor pl_proj;          // [n_embd x n_embd_per_layer]
        Tensor pl_post_norm;     // [n_embd]
        float out_scale = 1.0f;  // layer_output_scale
        bool has_tail() const { return pl_gate.data || out_scale != 1.0f; }
        // Linear attention (qwen35, LayerShape::recurrent; widths: ModelConfig::ssm_*), its state
        // KvCache::recurrent(state_layer):
        int32_t state_layer = -1;
        Tensor ssm_in;      // [conv_channels x n_embd]  attn_qkv: q, k, v before the convolution
                            // (ModelConfig::ssm_in_fused: ssm_in, [qkvz_dim x n_embd], with z)
        Tensor ssm_z;       // [value_dim x n_embd]      attn_gate: the output gate (absent: fused)
        Tensor ssm_alpha;   // [n_v_heads x n_embd]      the decay's input
        Tensor ssm_beta;    // [n_v_heads x n_embd]      the update's strength
        Tensor ssm_ba;      // [2*n_v_heads x n_embd]    both, grouped per key head (qwen3next)
        Tensor ssm_conv1d;  // [conv_channels x conv_kernel] F32
        Tensor ssm_dt;      // [n_v_heads]  bias of alpha
        Tensor ssm_a;       // [n_v_heads]  -exp(A_log)
        Tensor ssm_norm;    // [head_dim]   the output's RMS norm, per head
        Tensor ssm_out;     // [n_embd x value_dim]
        std::vector<Tensor*> weights() {
            return {&attn_norm,
                    &wq,
                    &wk,
                    &wv,
                    &bq,
                    &bk,
                    &bv,
                    &q_norm,
                    &k_norm,
                    &wo,
                    &post_attn_norm,
                    &ffn_norm,
                    &w_gate,
                    &w_up,
                    &w_down,
                    &post_ffn_norm,
                    &bo,
                    &sinks,
                    &post_ffn_norm_1,
                    &pl_gate,
                    &pl_proj,
                    &pl_post_norm,
                    &ssm_in,
                    &ssm_z,
                    &ssm_alpha,
                    &ssm_beta,
                    &ssm_ba,
                    &ssm_conv1d,
                    &ssm_dt,
                    &ssm_a,
                    &ssm_norm,
                    &ssm_out,
                    &ffn_gate_inp_shexp,
                    &ffn_gate_shexp,
                    &ffn_up_shexp,
                    &ffn_down_shexp};
        }
        // On expert_device (fit::is_expert_tensor counts the same tensors).
        std::vector<Tensor*> expert_weights() {
            return {&ffn_gate_inp,       &ffn_gate_exps,       &ffn_up_exps,    &ffn_gate_up_exps, &ffn_down_exps,
                    &ffn_gate_inp_scale, &ffn_down_exps_scale, &pre_ffn_norm_2, &post_ffn_norm_2,  &ffn_gate_inp_b,
                    &ffn_gate_exps_b,    &ffn_up_exps_b,       &ffn_down_exps_b};
        }
    };

    // The first rows x cols floats of an activation buffer, as packed rows: a layer's view of
    // a buffer sized for the widest layer.
    static Tensor rows_of(const Tensor& buf, int64_t cols, int64_t rows);
    // Per layer, the index in devices_ of its device and of its experts' device.
    void load_weights(const std::vector<int>& layer_device, const std::vector<int>& expert_device);
    Layer load_layer(int index, Device& device, Device& expert_device);
    void load_attention(Layer& l, Device& device, const std::string& prefix);
    void load_experts(Layer& l, Backend& be, const std::string& prefix);
    Tensor weight(Backend& be, const std::string& name, int64_t cols, int64_t rows, bool required = true);
    // A 3-D expert tensor [n_expert][rows][cols] (Backend::load_expert_weight).
    Tensor expert_weight(Backend& be, const std::string& name, int64_t cols, int64_t rows);
    GluAct glu_act() const {
        return config_.swiglu_oai ? GluAct::SwigluOai : config_.gelu ? GluAct::GeluTanh : GluAct::Silu;
    }
    void ensure_scratch(Device& d, int64_t n_tokens, int64_t n_outputs);
    void free_scratch(Device& d);
    void begin_pass(Device& d, const BatchInfo& batch);
    // A layer's two sublayers. Each starts from a.xn, its input already normalized, and ends
    // with the residual add fused with the norm of the sublayer that follows (next: the next
    // layer where it runs on the same device; else only the add).
    void attention_block(const Layer& l, KvLayer& cache, Activations& a);
    // ---- linear attention (qwen35), engine/models/transformer_linear_attn.cpp
    void load_linear_attention(Layer& l, Backend& be, const std::string& prefix);
    // The recurrent layer's sublayer, a.xn -> the residual add and FFN norm, as attention_block.
    void linear_attention_block(const Layer& l, RecurrentLayer& state, Activations& a);
    // Gated attention's q projection: each head's q and its gate, into q and a.lin_z.
    void project_gated_q(const Layer& l, Activations& a, Tensor& q);
    // The input projections of a linear-attention sublayer: a.xn -> mix (q | k | v), z, and
    // a.lin_alpha, a.lin_beta, whichever tensors the file splits them into.
    void project_linear_inputs(const Layer& l, Activations& a, Tensor& mix, Tensor& z);
    // qwen3next's fused alpha/beta projection [T x 2*n_v_heads] into a.lin_beta, a.lin_alpha.
    void split_beta_alpha(const Layer& l, const Tensor& ba, Activations& a);
    // Its first conversions' fused q/k/v/z projection (a.lin_mix, [T x qkvz_dim]) into mix
    // (the same buffer, [T x conv_channels]) and z, through a.lin_conv.
    void split_qkvz(const Layer& l, Activations& a, Tensor& mix, Tensor& z);
    void ffn_block(const Layer& l, const Layer* next, Activations& a);
    // The FFN proper, a.xn -> a.proj: dense (gate, up, down) or mixture of experts.
    void dense_ffn(const Layer& l, Activations& a, Tensor& out);
    void moe_ffn(const Layer& l, Activations& a);
    // qwen35moe: the shared expert of a.xn, gated by sigmoid(a.xn . w), added to a.proj.
    void shared_expert_ffn(const Layer& l, Activations& a);
    // The experts of a routed batch (a.router holds the router's logits; a on the experts'
    // device): route, gate/up (fused or not), glu, down, the weighted sum of x's rows to out.
    void run_experts(const Layer& l, Activations& a, const Tensor& x, Tensor& out);
    // gemma4 (ModelConfig::shared_ffn): the experts, from the attention output a.x, into
    // a.proj, then the dense FFN of a.xn beside them, summed into a.proj.
    void gemma4_moe_ffn(const Layer& l, Activations& a);
    // The expert branch on the experts' device: attn_out (not e.proj) -> e.proj.
    void gemma4_experts(const Layer& l, Activations& e, const Tensor& attn_out);
    // moe_ffn on the experts' device: a.xn there and the result back into a.proj.
    void remote_moe_ffn(const Layer& l, Activations& a);
    void copy_rows(Device& from, const Tensor& src, Device& to, Tensor& dst);
    // Every cache layer's rows at src[i] to dst[i], keys turned back by back[i] positions.
    void move_kv(KvCache& kv, std::span<const int32_t> src, std::span<const int32_t> dst,
                 std::span<const int32_t> back);
    void move_activations(Device& from, Device& to);
    // ---- per-layer token embeddings (gemma4), engine/models/transformer_ple.cpp
    void load_per_layer_embeddings(Backend& first);
    // Every layer's input for this pass into a.ple: the batch's rows of the per-layer table
    // (read on the host, where the table stays) plus a projection of the embedding.
    void per_layer_inputs(Device& d, const BatchInfo& batch);
    // After a layer's FFN: its per-layer embedding block and its output scale.
    void layer_tail(const Layer& l, Activations& a);
    // ---- per-layer shapes
    void load_layer_tail(Layer& l, Backend& be, const std::string& prefix);
    const Tensor& ones(Device& d, int head_dim);

    std::shared_ptr<const GgufFile> file_;
    ModelConfig config_;
    std::vector<Device> devices_;  // 1, or 2 with partial offload; never resized after load
    // Weights outside the layers: embedding on the first layer's device, the rest on the last's.
    Tensor tok_embd_;                       // [n_vocab x n_embd]
    Tensor output_norm_;                    // [n_embd]
    Tensor output_;                         // [n_vocab x n_embd] (tok_embd_ when tied on one device)
    std::vector<float> rope_freq_factors_;  // [n_rot/2] or empty
    std::vector<Layer> layers_;
    std::vector<float> ones_;  // host 1.0f values behind Device::ones (the CPU uses them in place)
    // Per-layer token embeddings (gemma4): the table stays in the file map, on the host.
    const GgufTensor* ple_table_ = nullptr;  // [n_vocab x n_layers*n_embd_per_layer]
    std::vector<Tensor> ple_model_proj_;     // per layer [n_embd_per_layer x n_embd], on the first device
    Tensor ple_proj_norm_;                   // [n_embd_per_layer]
    std::vector<float> ple_host_;            // this pass's table rows, [n_layers][T][n_embd_per_layer]
    std::vector<float> crossing_;            // host buffer for activations moving between devices
    TensorDump dump_ = TensorDump::from_env();
};

}  // namespace ember
