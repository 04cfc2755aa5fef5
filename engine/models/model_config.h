// Hyperparameters of a supported architecture, read from GGUF metadata, with each
// architecture's fixed conventions (rope ordering, norms, activation) spelled out in one
// place, so the forward pass itself has no per-architecture branches beyond these flags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace ember {

// One layer's attention and FFN shape. Most architectures repeat one shape; gemma4 gives its
// sliding-window and global layers different heads, its FFNs different widths, and lets its
// last layers attend over the K/V of an earlier layer instead of their own.
struct LayerShape {
    int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0, n_rot = 0, n_ff = 0;
    bool sliding = false;
    bool recurrent = false;  // linear attention (qwen35's Gated DeltaNet): a recurrent state, no K/V
    int32_t kv_source = 0;   // the layer whose K/V this one attends over: itself, or an earlier one
    int32_t q_dim() const { return n_heads * head_dim; }
    int32_t kv_dim() const { return n_kv_heads * head_dim; }
};

struct ModelConfig {
    std::string arch;  // "llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gemma4", "gpt-oss", "qwen35", "qwen35moe",
                       // "qwen3next"
    int32_t n_vocab = 0, n_embd = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_ff = 0;
    int32_t n_rot = 0;
    int64_t n_ctx_train = 0;
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;        // global layers
    float rope_base_local = 10000.0f;  // sliding-window layers (gemma3)
    float rope_scale = 1.0f;           // linear position scaling (1 = none)
    bool rope_neox = false;
    float attn_scale = 0.0f;   // multiplier of q.k
    float embed_scale = 1.0f;  // gemma: sqrt(n_embd)
    bool qkv_bias = false;     // qwen2, gpt-oss
    bool qk_norm = false;      // gemma3, qwen3: RMSNorm per head on q and k
    bool post_norms = false;   // gemma3: norms after attention and FFN outputs
    bool gelu = false;         // GeGLU instead of SwiGLU
    int32_t sliding_window = 0;
    std::vector<bool> layer_sliding;  // per layer: uses the sliding window

    // gpt-oss. YaRN ("yarn" scaling; RopeParams' fields, 0 = off) with the values llama.cpp's
    // context uses, on the sliding-window layers too; the attention output's bias and sinks
    // (blk.N.attn_sinks.weight, one logit per head); the FFN's input norm under another name;
    // the clamped SwiGLU (GluAct::SwigluOai).
    float rope_ext_factor = 0.0f, rope_attn_factor = 1.0f, yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
    int32_t n_ctx_orig = 0;  // rope.scaling.original_context_length
    bool rope_scale_local = false;
    bool out_bias = false, attn_sinks = false;
    std::string ffn_norm = "ffn_norm";  // gpt-oss: post_attention_norm
    bool swiglu_oai = false;

    // gemma4
    bool v_norm = false;             // V RMS-normalized per head, without a weight
    float final_softcap = 0.0f;      // logits = cap * tanh(logits / cap) (0 = off)
    int32_t n_embd_per_layer = 0;    // width of the per-layer token embeddings (0 = none)
    std::vector<LayerShape> layers;  // per layer; the scalars above are the global layers'
    // Mixture of experts (qwen3moe: every layer's FFN; 0 experts = a dense model). GGUF keys
    // <arch>.expert_count, .expert_used_count, .expert_feed_forward_length,
    // .expert_shared_feed_forward_length, .expert_weights_scale.
    int32_t n_expert = 0, n_expert_used = 0;
    int32_t n_ff_exp = 0;              // rows of one expert's gate/up matrices
    int32_t n_ff_shexp = 0;            // the shared expert's (0: none)
    bool expert_weights_norm = false;  // the chosen experts' weights renormalised to sum 1 (qwen3moe)
    float expert_weights_scale = 1.0f;
    // gpt-oss: the k largest router logits, then softmax over them (MoeGating::SoftmaxTopK),
    // and biases on the router and every expert matrix.
    bool expert_softmax_top_k = false;
    bool expert_biases = false;
    // gemma4 (26B-A4B): every layer's dense FFN runs beside its experts (its own norms), the
    // router reads the scaled RMS norm of the attention output; the experts' gate and up may
    // be one fused tensor (ffn_gate_up_exps, gate rows first).
    bool shared_ffn = false;
    bool expert_gate_up = false;
    // qwen35moe, qwen3next: a shared expert (SwiGLU of n_ff_shexp; the file's
    // feed_forward_length where expert_shared_feed_forward_length is 0) beside the routed
    // ones, its output scaled by sigmoid(x . ffn_gate_inp_shexp) per token.
    bool shared_expert = false;

    // qwen35 (llama.cpp's llama_model_qwen35): three of every four layers (full_attention_interval)
    // are linear attention (LayerShape::recurrent) with these shapes, GGUF <arch>.ssm.*: a
    // causal convolution of ssm_conv_kernel over conv_channels() inputs, ssm_n_k_heads key
    // heads and ssm_n_v_heads value heads of ssm_head_dim. The other layers' q projection
    // holds each head's q and then its output gate (attn_gate); their RoPE is llama.cpp's
    // IMROPE, which for text equals NeoX over n_rot dims (checked at load).
    int32_t ssm_conv_kernel = 0, ssm_n_k_heads = 0, ssm_n_v_heads = 0, ssm_head_dim = 0;
    bool attn_gate = false;
    // qwen3next (Qwen3-Next: qwen35moe's layers in the checkpoint's layout): the value heads
    // grouped by key head (value head h reads key head h / (n_v/n_k); qwen35's converter tiles
    // them, h % n_k), and alpha and beta from one projection, ssm_ba, grouped the same way
    // (per key head: the betas of its value heads, then their alphas). Its RoPE is plain NeoX
    // over n_rot dims (no sections).
    bool ssm_grouped_heads = false;
    bool ssm_ba = false;
    // qwen3next's first conversions: q, k, v and z from one projection, blk.N.ssm_in, grouped
    // per key head (its q, its k, its value heads' v, their z), instead of attn_qkv, attn_gate.
    bool ssm_in_fused = false;
    int32_t ssm_key_dim() const { return ssm_n_k_heads * ssm_head_dim; }
    int32_t ssm_value_dim() const { return ssm_n_v_heads * ssm_head_dim; }
    int32_t ssm_conv_channels() const { return 2 * ssm_key_dim() + ssm_value_dim(); }
    int32_t ssm_qkvz_dim() const { return ssm_conv_channels() + ssm_value_dim(); }  // ssm_in's rows
    bool recurrent() const { return ssm_n_v_heads > 0; }

    bool moe() const { return n_expert > 0; }

    // The scalars' widths (every layer's where the layers share one shape).
    int32_t q_dim() const { return n_heads * head_dim; }
    int32_t kv_dim() const { return n_kv_heads * head_dim; }
    // The widest layer's, for buffers every layer uses.
    int32_t max_q_dim() const;
    int32_t max_kv_dim() const;
    int32_t max_ff() const;
    int32_t max_heads() const;
    int32_t max_head_dim() const;
    bool owns_kv(int32_t layer) const {
        const LayerShape& l = layers[static_cast<size_t>(layer)];
        return l.kv_source == layer && !l.recurrent;
    }
};

// Reads and checks the configuration. Throws ember::Error naming the file and the problem
// (an unsupported architecture is named as such).
ModelConfig read_model_config(const GgufFile& f);

// Architectures this engine runs.
const std::vector<std::string>& supported_architectures();

}  // namespace ember
