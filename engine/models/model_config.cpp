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
    static const std::vector<std::string> archs = {"llama",  "qwen2",   "qwen3",  "qwen3moe",  "gemma3",
                                                   "gemma4", "gpt-oss", "qwen35", "qwen35moe", "qwen3next"};
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

// A per-layer hyperparameter that a file stores either once or as one entry per layer
// (gemma4: head_count_kv, feed_forward_length).
std::vector<int32_t> dims_per_layer(const GgufFile& f, const std::string& key, int32_t n_layers, uint64_t fallback,
                                    uint64_t lo = 1) {
    const GgufValue* v = f.find(key);
    if (!v || v->type != GgufType::ARRAY)  // fallback 0: the key is required
        return std::vector<int32_t>(static_cast<size_t>(n_layers),
                                    fallback == 0 ? required_dim(f, key, lo) : optional_dim(f, key, fallback, lo));
    const auto& items = v->as_array().items;
    if (items.size() != static_cast<size_t>(n_layers))
        throw Error(f.path() + ": " + key + " has " + std::to_string(items.size()) + " entries for " +
                    std::to_string(n_layers) + " layers");
    std::vector<int32_t> out;
    for (const GgufValue& x : items) out.push_back(in_range(f, key, x.as_u64(), lo));
    return out;
}

// gemma4's layers: sliding-window and global layers with their own head sizes, KV head
// counts, rope dimensions and bases; per-layer FFN widths; the last `shared_kv_layers`
// layers attend over the K/V of the last earlier layer of their kind (llama.cpp's
// llama_model_gemma4 and its KV-cache reuse, read for the keys' meaning).
void read_gemma4(const GgufFile& f, ModelConfig& c) {
    const std::string a = "gemma4.";
    c.rope_neox = true;
    c.qk_norm = true;
    c.post_norms = true;
    c.gelu = true;
    c.v_norm = true;
    c.attn_scale = 1.0f;  // q and k are RMS-normalized: no 1/sqrt(head_dim)
    c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.sliding_window = optional_dim(f, a + "attention.sliding_window", 0, 0);
    c.rope_base_local = positive_float(f, a + "rope.freq_base_swa", 10000.0);
    c.n_embd_per_layer = optional_dim(f, a + "embedding_length_per_layer_input", 0, 0);
    if (auto cap = f.opt_f64(a + "final_logit_softcapping"); cap && *cap != 0.0)
        c.final_softcap = positive_float(f, a + "final_logit_softcapping", 0.0);
    const std::string pattern_key = a + "attention.sliding_window_pattern";
    const GgufValue* pattern = f.find(pattern_key);
    if (!pattern || pattern->type != GgufType::ARRAY || pattern->as_array().items.size() != c.layers.size())
        throw Error(f.path() + ": " + pattern_key + " must be an array of one flag per layer (" +
                    std::to_string(c.layers.size()) + ")");
    const int32_t head_swa = optional_dim(f, a + "attention.key_length_swa", static_cast<uint64_t>(c.head_dim));
    if (optional_dim(f, a + "attention.value_length", static_cast<uint64_t>(c.head_dim)) != c.head_dim ||
        optional_dim(f, a + "attention.value_length_swa", static_cast<uint64_t>(head_swa)) != head_swa)
        throw Error(f.path() + ": gemma4 needs value_length == key_length (and the same for sliding layers)");
    const int32_t rot_swa = optional_dim(f, a + "rope.dimension_count_swa", static_cast<uint64_t>(c.n_rot), 0);
    for (size_t i = 0; i < c.layers.size(); ++i) {
        LayerShape& l = c.layers[i];
        l.sliding = pattern->as_array().items[i].as_bool();
        if (l.sliding) l.head_dim = head_swa, l.n_rot = rot_swa;
    }
    const int32_t shared = optional_dim(f, a + "attention.shared_kv_layers", 0, 0);
    const int32_t first_shared = c.n_layers - shared;
    if (shared > 0 && first_shared < 2)
        throw Error(f.path() + ": " + a + "attention.shared_kv_layers = " + std::to_string(shared) + " leaves " +
                    std::to_string(std::max(first_shared, 0)) + " layers with K/V of their own (need 2)");
    for (int32_t i = first_shared; i < c.n_layers; ++i) {
        LayerShape& l = c.layers[static_cast<size_t>(i)];
        int32_t src = first_shared - 1;
        while (src >= 0 && c.layers[static_cast<size_t>(src)].sliding != l.sliding) --src;
        if (src < 0)
            throw Error(f.path() + ": layer " + std::to_string(i) + " shares the K/V of an earlier " +
                        (l.sliding ? "sliding-window" : "global") + " layer, and there is none");
        l.kv_source = src;
    }
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
    c.expert_gate_up = f.find_tensor("blk.0.ffn_gate_up_exps.weight") != nullptr;
    if (c.expert_gate_up) {
        check_shape(f, "blk.0.ffn_gate_up_exps.weight", c.n_embd, e * 2 * c.n_ff_exp);
    } else {
        check_shape(f, "blk.0.ffn_gate_exps.weight", c.n_embd, e * c.n_ff_exp);
        check_shape(f, "blk.0.ffn_up_exps.weight", c.n_embd, e * c.n_ff_exp);
    }
    check_shape(f, "blk.0.ffn_down_exps.weight", c.n_ff_exp, e * c.n_embd);
    // Scales of the experts' gate or up outputs (llama.cpp's ffn_{gate,up}_exps.scale) are not
    // applied here: refused by name rather than run without them.
    for (const auto& t : f.tensors())
        if (t.name.find("_exps.scale") != std::string::npos && t.name.find("ffn_down_exps.scale") == std::string::npos)
            throw Error(f.path() + ": tensor '" + t.name + "' (a scale of the experts' gate or up) is not supported");
}

// gemma4 with experts (26B-A4B): every layer has a router, experts and the dense FFN beside
// them (llama.cpp's gemma4 graph: a layer is MoE when it has ffn_gate_inp; here all or none).
void read_gemma4_experts(const GgufFile& f, ModelConfig& c) {
    for (int32_t i = 0; i < c.n_layers; ++i)
        if (!f.find_tensor("blk." + std::to_string(i) + ".ffn_gate_inp.weight"))
            throw Error(f.path() + ": layer " + std::to_string(i) +
                        " has no router (blk.N.ffn_gate_inp.weight): gemma4 files with both dense and "
                        "mixture-of-experts layers are not supported");
    read_experts(f, c);
    c.shared_ffn = true;
    c.expert_weights_scale = 1.0f;  // llama.cpp's gemma4 graph passes 1 whatever the file says
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
    c.sliding_window = required_dim(f, a + "attention.sliding_window");
    for (int32_t i = 0; i < c.n_layers; ++i) c.layer_sliding[static_cast<size_t>(i)] = i % 2 == 0;
    c.rope_base_local = positive_float(f, a + "rope.freq_base_swa", c.rope_base);
    c.rope_scale_local = true;
    check_shape(f, "blk.0.attn_sinks.weight", c.n_heads, 1);
}

// gpt-oss's experts past read_experts: softmax over the k chosen logits, not renormalised,
// biases on the router and each expert matrix.
void gpt_oss_experts(const GgufFile& f, ModelConfig& c) {
    c.expert_weights_norm = false;
    c.expert_softmax_top_k = c.expert_biases = true;
    check_shape(f, "blk.0.ffn_gate_inp.bias", c.n_expert, 1);
    check_shape(f, "blk.0.ffn_gate_exps.bias", c.n_ff_exp, c.n_expert);
    check_shape(f, "blk.0.ffn_down_exps.bias", c.n_embd, c.n_expert);
}

// llama.cpp's IMROPE (ggml_mrope_cache_init) gives pair i the position of section
// (i % sum) chosen by i % 3; text positions are the same in the first three sections and 0 in
// the fourth, so the rope is plain NeoX over n_rot dims when no pair falls in the fourth.
void check_text_mrope(const GgufFile& f, const ModelConfig& c) {
    const std::string key = c.arch + ".rope.dimension_sections";
    const GgufValue* v = f.find(key);
    if (!v || v->type != GgufType::ARRAY || v->as_array().items.size() < 3)
        throw Error(f.path() + ": " + key + " must be an array of 4 section sizes");
    int64_t sec[4] = {};
    for (size_t i = 0; i < std::min<size_t>(4, v->as_array().items.size()); ++i)
        sec[i] = static_cast<int64_t>(v->as_array().items[i].as_u64());
    const int64_t total = sec[0] + sec[1] + sec[2] + sec[3];
    for (int64_t i = 0; i < c.n_rot / 2; ++i) {
        const int64_t s = total > 0 ? i % total : 0, which = s % 3;
        if (total == 0 || s >= 3 * sec[which])
            throw Error(f.path() + ": " + key + " gives rope pair " + std::to_string(i) +
                        " a section other than text's (only text positions are supported)");
    }
}

// The first linear-attention layer (n_layers if none).
int32_t first_recurrent(const ModelConfig& c) {
    int32_t i = 0;
    while (i < c.n_layers && !c.layers[static_cast<size_t>(i)].recurrent) ++i;
    return i;
}

// qwen35, qwen35moe, qwen3next: linear-attention layers (ssm.* keys;
// attention.recurrent_layers, else every layer but each full_attention_interval-th) beside
// gated full-attention layers with QK-norm, and the FFN's norm stored as post_attention_norm.
// qwen3next keeps the checkpoint's head order (ModelConfig::ssm_grouped_heads, ssm_ba) and
// rotates with plain NeoX RoPE (llama.cpp's ggml_rope_ext, where qwen35 has IMROPE sections).
void read_qwen35(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    c.rope_neox = c.qk_norm = c.attn_gate = true;
    c.ffn_norm = "post_attention_norm";
    if (c.arch == "qwen3next") c.ssm_grouped_heads = c.ssm_ba = true;
    else check_text_mrope(f, c);
    c.ssm_conv_kernel = in_range(f, a + "ssm.conv_kernel", f.get_u64(a + "ssm.conv_kernel"), 2, 64);
    c.ssm_head_dim = required_dim(f, a + "ssm.state_size");
    c.ssm_n_k_heads = required_dim(f, a + "ssm.group_count");
    c.ssm_n_v_heads = required_dim(f, a + "ssm.time_step_rank");
    const int32_t inner = required_dim(f, a + "ssm.inner_size");
    if (c.ssm_n_v_heads % c.ssm_n_k_heads || int64_t{c.ssm_n_v_heads} * c.ssm_head_dim != inner)
        throw Error(f.path() + ": " + a + "ssm.* describe " + std::to_string(c.ssm_n_k_heads) + " key heads, " +
                    std::to_string(c.ssm_n_v_heads) + " value heads of " + std::to_string(c.ssm_head_dim) +
                    " and inner size " + std::to_string(inner) +
                    " (need value heads a multiple of key heads, inner = value heads x state size)");
    const GgufValue* rec = f.find(a + "attention.recurrent_layers");
    const int32_t interval = optional_dim(f, a + "full_attention_interval", 4);
    for (int32_t i = 0; i < c.n_layers; ++i) {
        const bool r = rec && rec->type == GgufType::ARRAY && static_cast<size_t>(i) < rec->as_array().items.size()
                           ? rec->as_array().items[static_cast<size_t>(i)].as_bool()
                           : (i + 1) % interval != 0;
        c.layers[static_cast<size_t>(i)].recurrent = r;
    }
    const std::string b = "blk." + std::to_string(first_recurrent(c)) + ".";
    c.ssm_in_fused =
        c.arch == "qwen3next" && !f.find_tensor(b + "attn_qkv.weight") && f.find_tensor(b + "ssm_in.weight");
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
    } else if (c.arch == "qwen35" || c.arch == "qwen35moe" || c.arch == "qwen3next") {
        read_qwen35(f, c);
    } else if (c.arch == "gemma4") {
        read_gemma4(f, c);
        for (size_t i = 0; i < c.layers.size(); ++i) c.layer_sliding[i] = c.layers[i].sliding && c.sliding_window > 0;
    }
    for (size_t i = 0; i < c.layers.size(); ++i) c.layers[i].sliding = c.layer_sliding[i];
}

// A file with router tensors or experts of an architecture whose MoE layers do not run here
// yet (all but qwen3moe, gpt-oss and gemma4): refused by name.
void refuse_moe(const GgufFile& f, const std::string& arch) {
    if (arch == "qwen3moe" || arch == "gpt-oss" || arch == "gemma4" || arch == "qwen35moe" || arch == "qwen3next")
        return;
    bool moe = f.opt_u64(arch + ".expert_count").value_or(0) > 0;
    for (const auto& t : f.tensors()) moe = moe || t.name.find(".ffn_gate_inp.") != std::string::npos;
    if (moe) throw Error(f.path() + ": " + arch + " mixture-of-experts layers are not supported yet");
}

// One LayerShape per layer from the scalars, or from per-layer arrays where a file has them.
void init_layers(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    const auto heads = dims_per_layer(f, a + "attention.head_count", c.n_layers, 0);
    const auto kv_heads = dims_per_layer(f, a + "attention.head_count_kv", c.n_layers,
                                         static_cast<uint64_t>(*std::max_element(heads.begin(), heads.end())));
    const auto ff = dims_per_layer(f, a + "feed_forward_length", c.n_layers, 0);
    c.n_heads = *std::max_element(heads.begin(), heads.end());
    c.n_kv_heads = *std::max_element(kv_heads.begin(), kv_heads.end());
    c.n_ff = *std::max_element(ff.begin(), ff.end());
    c.head_dim = optional_dim(f, a + "attention.key_length", static_cast<uint64_t>(c.n_embd / c.n_heads));
    c.n_rot = optional_dim(f, a + "rope.dimension_count", static_cast<uint64_t>(c.head_dim), 0);
    c.layers.resize(static_cast<size_t>(c.n_layers));
    for (size_t i = 0; i < c.layers.size(); ++i) {
        LayerShape& l = c.layers[i];
        l.n_heads = heads[i], l.n_kv_heads = kv_heads[i], l.n_ff = ff[i];
        l.head_dim = c.head_dim, l.n_rot = c.n_rot;
        l.kv_source = static_cast<int32_t>(i);
    }
}

// Every layer's shape: whole heads, a rope that fits them, widths that fit an int32.
void check_layers(const GgufFile& f, const ModelConfig& c) {
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const LayerShape& l = c.layers[i];
        const std::string where = "layer " + std::to_string(i) + ": ";
        if (l.n_heads % l.n_kv_heads != 0)
            throw Error(f.path() + ": " + where + "inconsistent attention shape (heads " + std::to_string(l.n_heads) +
                        ", kv heads " + std::to_string(l.n_kv_heads) + ", layers " + std::to_string(c.n_layers) + ")");
        if (l.head_dim % 2 || l.n_rot > l.head_dim || l.n_rot % 2)
            throw Error(f.path() + ": " + where + "unsupported head/rope dimensions " + std::to_string(l.head_dim) +
                        "/" + std::to_string(l.n_rot));
        if (int64_t{l.n_heads} * l.head_dim > static_cast<int64_t>(kInt32Max))
            throw Error(f.path() + ": " + where + std::to_string(l.n_heads) + " heads of " +
                        std::to_string(l.head_dim) + " do not fit");
    }
}

// The first attention layer's projections (qwen35's q holds each head's gate too); the
// first linear-attention layer's input projection.
void check_attention_shapes(const GgufFile& f, const ModelConfig& c) {
    int32_t i = 0;
    while (i < c.n_layers && c.layers[static_cast<size_t>(i)].recurrent) ++i;
    if (i == c.n_layers) throw Error(f.path() + ": no layer has attention");
    const LayerShape& l = c.layers[static_cast<size_t>(i)];
    const std::string b = "blk." + std::to_string(i) + ".";
    check_shape(f, b + "attn_q.weight", c.n_embd, int64_t{l.q_dim()} * (c.attn_gate ? 2 : 1));
    check_shape(f, b + "attn_k.weight", c.n_embd, l.kv_dim());
    if (!c.recurrent() || first_recurrent(c) == c.n_layers) return;
    const std::string r = "blk." + std::to_string(first_recurrent(c)) + ".";
    if (c.ssm_in_fused) check_shape(f, r + "ssm_in.weight", c.n_embd, c.ssm_qkvz_dim());
    else check_shape(f, r + "attn_qkv.weight", c.n_embd, c.ssm_conv_channels());
    if (c.ssm_ba) check_shape(f, r + "ssm_ba.weight", c.n_embd, 2 * int64_t{c.ssm_n_v_heads});
}

// qwen35moe's and qwen3next's shared expert (llama.cpp requires its tensors): as wide as
// expert_shared_feed_forward_length, else as the FFN (llama.cpp's fallback).
void read_shared_expert(const GgufFile& f, ModelConfig& c) {
    if (c.n_ff_shexp == 0) c.n_ff_shexp = c.n_ff;
    c.shared_expert = true;
    check_shape(f, "blk.0.ffn_up_shexp.weight", c.n_embd, c.n_ff_shexp);
}

template <class F>
int32_t max_over(const std::vector<LayerShape>& layers, F f) {
    int32_t m = 0;
    for (const LayerShape& l : layers) m = std::max(m, f(l));
    return m;
}

}  // namespace

int32_t ModelConfig::max_q_dim() const {
    return std::max(q_dim(), max_over(layers, [](const LayerShape& l) { return l.q_dim(); }));
}
int32_t ModelConfig::max_kv_dim() const {
    return std::max(kv_dim(), max_over(layers, [](const LayerShape& l) { return l.kv_dim(); }));
}
int32_t ModelConfig::max_ff() const {
    return std::max(n_ff, max_over(layers, [](const LayerShape& l) { return l.n_ff; }));
}
int32_t ModelConfig::max_heads() const {
    return std::max(n_heads, max_over(layers, [](const LayerShape& l) { return l.n_heads; }));
}
int32_t ModelConfig::max_head_dim() const {
    return std::max(head_dim, max_over(layers, [](const LayerShape& l) { return l.head_dim; }));
}

ModelConfig read_model_config(const GgufFile& f) {
    ModelConfig c;
    c.arch = f.architecture();
    const auto& archs = supported_architectures();
    if (std::find(archs.begin(), archs.end(), c.arch) == archs.end()) {
        std::string known;
        for (const std::string& a : archs) known += (known.empty() ? "" : ", ") + a;
        throw Error(f.path() + ": unsupported architecture '" + c.arch + "' (supported: " + known + ")");
    }
    const std::string a = c.arch + ".";
    c.n_embd = required_dim(f, a + "embedding_length");
    c.n_layers = required_dim(f, a + "block_count");
    check_layers_against_tensors(f, a + "block_count", c.n_layers);
    refuse_moe(f, c.arch);
    c.n_ctx_train = optional_dim(f, a + "context_length", 2048);
    init_layers(f, c);
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
    apply_arch_conventions(f, c);
    check_layers(f, c);
    const LayerShape& l0 = c.layers.front();
    check_attention_shapes(f, c);
    const bool gemma4_moe = c.arch == "gemma4" && (f.opt_u64("gemma4.expert_count").value_or(0) > 0 ||
                                                   f.find_tensor("blk.0.ffn_gate_inp.weight"));
    const bool qwen_shexp = c.arch == "qwen35moe" || c.arch == "qwen3next";
    if (c.arch == "qwen3moe" || c.arch == "gpt-oss" || qwen_shexp) read_experts(f, c);
    if (qwen_shexp) read_shared_expert(f, c);
    else if (gemma4_moe) read_gemma4_experts(f, c);
    if (!c.moe() || c.shared_ffn) check_shape(f, "blk.0.ffn_down.weight", l0.n_ff, c.n_embd);
    if (c.arch == "gpt-oss") gpt_oss_experts(f, c);
    return c;
}

}  // namespace ember
