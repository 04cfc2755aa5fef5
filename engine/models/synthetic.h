// Random-weight GGUF models at real shapes, for benchmarks (speed does not depend on the
// weight values, only on shapes and types) and for tests of the loader. The files carry a
// complete SentencePiece-style vocabulary so that other engines (llama.cpp) load them too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"

namespace ember {

struct SyntheticShape {
    std::string name;  // "llama-3.2-1b"
    int32_t n_embd, n_layers, n_heads, n_kv_heads, n_ff, n_vocab;
    int64_t n_ctx;
    bool tied_embeddings;
    // "llama", "qwen2" (q/k/v biases), "qwen3" (QK-norm), "gemma3" (QK-norm, post-norms),
    // "qwen3moe", "gpt-oss" (biases, sinks, YaRN, experts with biases) or "gemma4" (the fields
    // below)
    std::string arch = "llama";
    int32_t head_dim = 0;        // 0: n_embd / n_heads (gemma4: the global layers')
    int32_t sliding_window = 0;  // gemma3, gemma4, gpt-oss
    // The final norm's weights. Random weights make logits of order 10 (one token takes all
    // the probability); below 1 they soften, so a reference comparison sees every layer.
    float output_norm = 1.0f;
    // Multiplies the q and k weights (and QK-norm weights): random ones attend almost evenly
    // to every position, so positions (RoPE, the sliding window) hardly matter; above 1
    // attention picks positions.
    float qk_gain = 1.0f;
    // Multiplies the attention output weights: at 1 attention adds little to the token's own
    // embedding and FFN, so the next token mostly follows from the current one; above 1 the
    // positions before it decide.
    float attn_gain = 1.0f;
    // Mixture of experts (arch "qwen3moe": every layer's FFN is n_expert experts of n_ff_exp,
    // n_expert_used per token, routed by ffn_gate_inp; n_ff is then only the metadata's
    // feed_forward_length. "gemma4": the experts beside every layer's dense FFN of n_ff, their
    // gate and up one fused ffn_gate_up_exps, a per-expert ffn_down_exps.scale).
    int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
    // gemma4: every `global_period`-th layer is global (head_dim, n_kv_heads_global, the
    // proportional RoPE), the others slide (head_dim_swa, n_kv_heads); the last
    // `shared_kv_layers` attend over an earlier layer's K/V and have FFNs n_ff_shared wide;
    // n_embd_per_layer > 0 adds per-layer token embeddings; k_eq_v: global layers have no V
    // projection (V is K's).
    struct Gemma4 {
        int32_t head_dim_swa = 0, n_kv_heads_global = 0, n_ff_shared = 0;
        int32_t global_period = 6, shared_kv_layers = 0, n_embd_per_layer = 0;
        bool k_eq_v = false;
        float final_softcap = 30.0f;
        bool split_gate_up = false;  // experts: ffn_gate_exps and ffn_up_exps, not one fused tensor
    } gemma4{};
    // qwen35, qwen35moe, qwen3next: every full_attention_interval-th layer is gated full attention (n_heads of
    // head_dim, RoPE on the first n_rot dims), the others linear attention (Gated DeltaNet:
    // n_k_heads key and n_v_heads value heads of ssm_head_dim, a convolution of conv_kernel).
    struct Qwen35 {
        int32_t n_k_heads = 0, n_v_heads = 0, ssm_head_dim = 0, conv_kernel = 4;
        int32_t full_attention_interval = 4, n_rot = 0;
        int32_t n_ff_shexp = 0;   // qwen35moe, qwen3next: the shared expert's width
        bool fused_qkvz = false;  // qwen3next: the first conversions' ssm_in instead of attn_qkv, attn_gate
    } qwen35{};
};

// Named shapes: "tiny", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma3", "tiny-gemma4"
// (tests), "llama-3.2-1b", "llama-3-8b", "llama-3-70b", "qwen3-0.6b", "qwen3-30b-a3b" (48 layers
// of 128 experts, 8 used), "qwen3-30b-a3b-mini" (its layers, 8 of them: 3.5 GB in Q4_K_M),
// "gemma4-e2b", "gemma4-e4b", "gemma4-31b", "tiny-gpt-oss" (tests), "gpt-oss-20b" (24 layers
// of 32 experts, 4 used), "tiny-gemma4moe" (tests), "gemma4-26b-a4b" (30 layers, 128 experts
// of 704, 8 used, beside a dense FFN of 2112), "gemma4-26b-a4b-mini" (its layers, 6 of them:
// one sliding/global period), "tiny-qwen35" (tests: 8 layers, two of them full attention), "tiny-qwen35moe" (its MoE),
// "tiny-qwen3next" (the same as qwen3next), "qwen3-next-80b-a3b" (48 layers of 512 experts, 10
// used, and a shared one), "qwen3-next-80b-a3b-mini" (its first 4 layers),
// "qwen3.5-4b", "qwen3.5-35b-a3b" (256 experts of 512, 8 used, a shared one),
// "qwen3.5-35b-a3b-mini" (its layers, 8 of 40: 4.45 GiB in Q4_K_M), "qwen3-4b" (the
// full-attention model of Qwen3.5-4B's size),
// and the real test models' shapes "smollm2-135m", "gemma3-270m", "qwen2.5-0.5b" (for
// machines the real files cannot be copied to, such as the GPU check's).
SyntheticShape synthetic_shape(const std::string& name);
std::vector<std::string> synthetic_shape_names();

// Writes a model of shape.arch. `scheme` is any name engine/quant/quant_plan.h knows (F32,
// F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q4_K_M, Q5_K_M, MXFP4_MOE); each
// matrix gets the type `ember quantize` would give it (the mixes' per-tensor choices, the
// row-length fallbacks; MXFP4_MOE: MXFP4 experts, Q8_0 elsewhere, as gpt-oss files have
// them). Deterministic for a given seed.
void write_synthetic_model(const std::string& path, const SyntheticShape& shape, const std::string& scheme,
                           uint64_t seed = 42);

// The header such a file would have (metadata and tensor table, no tensor data) and the
// file's size: the tensor table of a 70B model without writing 40 GB (the fit planner's
// tests and its decision table).
struct SyntheticHeader {
    std::vector<uint8_t> bytes;
    uint64_t file_size = 0;
};
SyntheticHeader synthetic_header(const SyntheticShape& shape, const std::string& scheme);

// The same model split into `n_parts` files as llama.cpp's gguf-split writes them
// (engine/gguf/gguf_split.h): part i (1-based) at split_part_name(stem, i, n_parts), or only
// the parts' headers and sizes.
std::vector<std::string> write_synthetic_split_model(const std::string& stem, const SyntheticShape& shape,
                                                     const std::string& scheme, uint32_t n_parts, uint64_t seed = 42);
std::vector<SyntheticHeader> synthetic_split_headers(const SyntheticShape& shape, const std::string& scheme,
                                                     uint32_t n_parts);

}  // namespace ember
