#include "engine/models/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include "kernels/common/error.h"

namespace ember {

const std::vector<std::string>& supported_architectures() {
    static const std::vector<std::string> archs = {"llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss"};
    return archs;
}

namespace {

constexpr uint64_t kInt32Max = static_cast<uint64_t>(std::numeric_limits<int32_t>::max());

// A hyperparameter in [lo, hi]; 64-bit values that do not fit are errors, never narrowed.
int32_t in_range(const GgufFile& f, const std::string& key, uint64_t v, uint64_t lo, uint64_t hi = kInt32Max) {
    if (v < lo || v > hi)
        throw Error(f.path() + ": " + key + " = " + std::to_string(v) + " is out of range (" + std::to_string(lo) +
                    ".." + std::to_string(hi) + ")");
    return static_cast<int32_t>(v);
}
int32_t required_dim(const GgufFile& f, const std::string& key, uint64_t lo = 1) {
    return in_range(f, key, f.get_u64(key), lo);
}
int32_t optional_dim(const GgufFile& f, const std::string& key, uint64_t fallback, uint64_t lo = 1) {
    return in_range(f, key, f.opt_u64(key).value_or(fallback), lo);
}
float positive_float(const GgufFile& f, const std::string& key, double fallback) {
    const double v = f.opt_f64(key).value_or(fallback);
    if (!(v > 0.0) || !std::isfinite(static_cast<float>(v)))
        throw Error(f.path() + ": " + key + " = " + std::to_string(v) + " must be a positive finite number");
    return static_cast<float>(v);
}

// `<arch>.vocab_size`, where a file has it, must agree with the embedding's rows and the token
// list (llama.cpp sizes the vocabulary by it): 10 beside a 49,152-token list is a damaged or
// hand-edited file, refused with the numbers rather than loaded.
void check_vocab_size(const GgufFile& f, const std::string& key, int32_t embedding_rows) {
    const std::optional<uint64_t> declared = f.opt_u64(key);
    if (!declared) return;
    uint64_t tokens = static_cast<uint64_t>(embedding_rows);
    if (const GgufValue* t = f.find("tokenizer.ggml.tokens"); t && t->type == GgufType::ARRAY)
        tokens = t->as_array().items.size();
    if (*declared != static_cast<uint64_t>(embedding_rows) || *declared != tokens)
        throw Error(f.path() + ": " + key + " is " + std::to_string(*declared) + ", but token_embd.weight has " +
                    std::to_string(embedding_rows) + " rows and tokenizer.ggml.tokens " + std::to_string(tokens) +
                    " entries");
}

// The layer index of a "blk.<i>.<name>" tensor, or nullopt for tensors outside the blocks.
std::optional<uint64_t> block_index(std::string_view name) {
    if (name.substr(0, 4) != "blk.") return std::nullopt;
    uint64_t i = 0;
    const char* end = name.data() + name.size();
    auto [p, ec] = std::from_chars(name.data() + 4, end, i);
    if (ec != std::errc() || p == end || *p != '.') return std::nullopt;
    return i;
}

// block_count must name exactly the layers the tensor table holds (blk.0 .. blk.<n-1>):
// checked before anything is sized by it, so a hostile count fails here, not in an
// allocation of billions of layers.
void check_layers_against_tensors(const GgufFile& f, const std::string& key, int32_t n_layers) {
    std::set<uint64_t> present;
    for (const auto& t : f.tensors())
        if (auto i = block_index(t.name)) present.insert(*i);
    const bool exact = present.size() == static_cast<size_t>(n_layers) &&
                       (present.empty() || *present.rbegin() == static_cast<uint64_t>(n_layers) - 1);
    if (!exact)
        throw Error(f.path() + ": " + key + " = " + std::to_string(n_layers) + " but the tensors describe " +
                    (present.empty()
                         ? std::string("no layers")
                         : std::to_string(present.size()) + " layers (blk." + std::to_string(*present.begin()) +
                               " .. blk." + std::to_string(*present.rbegin()) + ")"));
}

// Layer 0's projections must have the widths the hyperparameters imply (the Transformer
// checks every layer's shapes as it loads them; this catches a bad head count or width
// before the KV cache or any weight is sized by it).
void check_shape(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
    const GgufTensor& t = f.tensor(name);
    if (t.dims[0] != static_cast<uint64_t>(cols) || t.rows() != static_cast<uint64_t>(rows))
        throw Error(f.path() + ": tensor '" + name + "' has shape " + std::to_string(t.dims[0]) + " x " +
                    std::to_string(t.rows()) + ", but the metadata implies " + std::to_string(cols) + " x " +
                    std::to_string(rows));
}

// The expert hyperparameters (llama.cpp: qwen3moe's load_arch_hparams; the router picks
// n_expert_used of n_expert, renormalised) and layer 0's expert tensors against them. A
// 3-D tensor [n_expert][rows][cols] is checked as rows() = n_expert * rows.
void read_experts(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    c.n_expert = in_range(f, a + "expert_count", f.get_u64(a + "expert_count"), 1, 4096);
    c.n_expert_used =
        in_range(f, a + "expert_used_count", f.get_u64(a + "expert_used_count"), 1, static_cast<uint64_t>(c.n_expert));
    c.n_ff_exp =
        optional_dim(f, a + "expert_feed_forward_length", static_cast<uint64_t>(std::max(c.n_ff / c.n_expert_used, 1)));
    c.n_ff_shexp = optional_dim(f, a + "expert_shared_feed_forward_length", 0, 0);
    c.expert_weights_norm = true;
    const double scale = f.opt_f64(a + "expert_weights_scale").value_or(0.0);
    c.expert_weights_scale = scale != 0.0 ? static_cast<float>(scale) : 1.0f;  // llama.cpp: 0 means none
    const int64_t e = c.n_expert;
    check_shape(f, "blk.0.ffn_gate_inp.weight", c.n_embd, e);
    check_shape(f, "blk.0.ffn_gate_exps.weight", c.n_embd, e * c.n_ff_exp);
    check_shape(f, "blk.0.ffn_up_exps.weight", c.n_embd, e * c.n_ff_exp);
    check_shape(f, "blk.0.ffn_down_exps.weight", c.n_ff_exp, e * c.n_embd);
}

// YaRN as llama.cpp's context sets it up for a "yarn" file: extrapolation mix 1, the
// original context from rope.scaling.original_context_length (else the trained one), and
// attn_factor = rope.scaling.attn_factor * mscale(factor) / (1 + 0.1 ln factor) with
// mscale(s) = 1 + 0.1 ln s for s > 1, else 1: the file's attn_factor (1 for gpt-oss) when
// factor >= 1. The kernels then multiply cos and sin by attn_factor (1 + 0.1 ln factor)
// (kernels/common/rope_yarn.h).
void read_yarn(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    if (f.find(a + "rope.scaling.yarn_log_multiplier"))
        throw Error(f.path() + ": " + a + "rope.scaling.yarn_log_multiplier is not supported");
    c.rope_ext_factor = 1.0f;
    const float factor = 1.0f / c.rope_scale;
    const float mscale = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
    c.rope_attn_factor =
        mscale * (1.0f / (1.0f + 0.1f * std::log(factor))) * positive_float(f, a + "rope.scaling.attn_factor", 1.0);
    c.n_ctx_orig = optional_dim(f, a + "rope.scaling.original_context_length", static_cast<uint64_t>(c.n_ctx_train));
}

// gpt-oss (llama.cpp's openai-moe): NeoX RoPE with YaRN on every layer, q/k/v/o biases,
// attention sinks, even layers in a sliding window and odd ones global, the FFN's norm stored
// as post_attention_norm, and experts (read_experts) with biases, chosen by the k largest
// router logits and weighted by a softmax over those k (not renormalised), with the
// clamped SwiGLU.
void apply_gpt_oss(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    c.rope_neox = true;
    c.qkv_bias = c.out_bias = c.attn_sinks = true;
    c.ffn_norm = "post_attention_norm";
    c.swiglu_oai = true;
    c.expert_weights_norm = false;
    c.expert_softmax_top_k = c.expert_biases = true;
    c.sliding_window = required_dim(f, a + "attention.sliding_window");
    for (int32_t i = 0; i < c.n_layers; ++i) c.layer_sliding[static_cast<size_t>(i)] = i % 2 == 0;
    c.rope_base_local = positive_float(f, a + "rope.freq_base_swa", c.rope_base);
    c.rope_scale_local = true;
    check_shape(f, "blk.0.attn_sinks.weight", c.n_heads, 1);
    check_shape(f, "blk.0.ffn_gate_inp.bias", c.n_expert, 1);
    check_shape(f, "blk.0.ffn_gate_exps.bias", c.n_ff_exp, c.n_expert);
    check_shape(f, "blk.0.ffn_down_exps.bias", c.n_embd, c.n_expert);
}

void apply_arch_conventions(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    c.layer_sliding.assign(static_cast<size_t>(c.n_layers), false);
    if (c.arch == "qwen2") {
        c.rope_neox = true;
        c.qkv_bias = true;
    } else if (c.arch == "qwen3" || c.arch == "qwen3moe") {
        c.rope_neox = true;
        c.qk_norm = true;  // RMSNorm per head on q and k, before RoPE; no biases
    } else if (c.arch == "gemma3") {
        c.rope_neox = true;
        c.qk_norm = true;
        c.post_norms = true;
        c.gelu = true;
        c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
        c.rope_base_local = 10000.0f;
        c.sliding_window = optional_dim(f, a + "attention.sliding_window", 0, 0);
        // Five sliding-window layers, then one global layer, repeating.
        for (int32_t i = 0; i < c.n_layers; ++i)
            c.layer_sliding[static_cast<size_t>(i)] = c.sliding_window > 0 && i % 6 != 5;
    } else if (c.arch == "gpt-oss") {
        apply_gpt_oss(f, c);
    }
}

}  // namespace

ModelConfig read_model_config(const GgufFile& f) {
    ModelConfig c;
    c.arch = f.architecture();
    const auto& archs = supported_architectures();
    if (std::find(archs.begin(), archs.end(), c.arch) == archs.end())
        throw Error(f.path() + ": unsupported architecture '" + c.arch +
                    "' (supported: llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss)");
    const std::string a = c.arch + ".";
    c.n_embd = required_dim(f, a + "embedding_length");
    c.n_layers = required_dim(f, a + "block_count");
    check_layers_against_tensors(f, a + "block_count", c.n_layers);
    c.n_heads = required_dim(f, a + "attention.head_count");
    c.n_kv_heads = optional_dim(f, a + "attention.head_count_kv", static_cast<uint64_t>(c.n_heads));
    // A mixture of experts may give only the experts' width.
    c.n_ff = f.find(a + "expert_feed_forward_length") && !f.find(a + "feed_forward_length")
                 ? required_dim(f, a + "expert_feed_forward_length")
                 : required_dim(f, a + "feed_forward_length");
    c.n_ctx_train = optional_dim(f, a + "context_length", 2048);
    if (c.n_heads % c.n_kv_heads != 0)
        throw Error(f.path() + ": inconsistent attention shape (heads " + std::to_string(c.n_heads) + ", kv heads " +
                    std::to_string(c.n_kv_heads) + ", layers " + std::to_string(c.n_layers) + ")");
    c.head_dim = optional_dim(f, a + "attention.key_length", static_cast<uint64_t>(c.n_embd / c.n_heads));
    c.n_rot = optional_dim(f, a + "rope.dimension_count", static_cast<uint64_t>(c.head_dim), 0);
    if (c.head_dim % 2 || c.n_rot > c.head_dim || c.n_rot % 2)
        throw Error(f.path() + ": unsupported head/rope dimensions " + std::to_string(c.head_dim) + "/" +
                    std::to_string(c.n_rot));
    const int64_t q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
    if (q_dim > static_cast<int64_t>(kInt32Max))
        throw Error(f.path() + ": " + std::to_string(c.n_heads) + " heads of " + std::to_string(c.head_dim) +
                    " do not fit");
    c.norm_eps = positive_float(f, a + "attention.layer_norm_rms_epsilon", 1e-5);
    c.rope_base = positive_float(f, a + "rope.freq_base", 10000.0);
    const std::optional<std::string> scaling = f.opt_string(a + "rope.scaling.type");
    if (scaling && (*scaling == "linear" || *scaling == "yarn"))
        c.rope_scale = 1.0f / positive_float(f, a + "rope.scaling.factor", 1.0);
    if (scaling && *scaling == "yarn") read_yarn(f, c);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const GgufTensor& embd = f.tensor("token_embd.weight");
    if (embd.rows() > kInt32Max)
        throw Error(f.path() + ": token_embd.weight has " + std::to_string(embd.rows()) +
                    " rows (vocabulary too large)");
    c.n_vocab = static_cast<int32_t>(embd.rows());
    check_vocab_size(f, a + "vocab_size", c.n_vocab);
    if (embd.dims[0] != static_cast<uint64_t>(c.n_embd))
        throw Error(f.path() + ": token_embd.weight has rows of " + std::to_string(embd.dims[0]) + ", expected " +
                    std::to_string(c.n_embd));
    check_shape(f, "blk.0.attn_q.weight", c.n_embd, q_dim);
    check_shape(f, "blk.0.attn_k.weight", c.n_embd, kv_dim);
    if (c.arch == "qwen3moe" || c.arch == "gpt-oss") read_experts(f, c);
    else check_shape(f, "blk.0.ffn_down.weight", c.n_ff, c.n_embd);
    apply_arch_conventions(f, c);
    return c;
}

}  // namespace ember
