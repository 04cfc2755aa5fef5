#include "engine/models/model_config.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/error.h"

namespace ember {

const std::vector<std::string>& supported_architectures() {
    static const std::vector<std::string> archs = {"llama", "qwen2", "gemma3"};
    return archs;
}

namespace {

int32_t u32(const GgufFile& f, const std::string& key) { return static_cast<int32_t>(f.get_u64(key)); }

void apply_arch_conventions(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    c.layer_sliding.assign(static_cast<size_t>(c.n_layers), false);
    if (c.arch == "qwen2") {
        c.rope_neox = true;
        c.qkv_bias = true;
    } else if (c.arch == "gemma3") {
        c.rope_neox = true;
        c.qk_norm = true;
        c.post_norms = true;
        c.gelu = true;
        c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
        c.rope_base_local = 10000.0f;
        c.sliding_window = static_cast<int32_t>(f.opt_u64(a + "attention.sliding_window").value_or(0));
        // Five sliding-window layers, then one global layer, repeating.
        for (int32_t i = 0; i < c.n_layers; ++i) c.layer_sliding[static_cast<size_t>(i)] = c.sliding_window > 0 && i % 6 != 5;
    }
}

}  // namespace

ModelConfig read_model_config(const GgufFile& f) {
    ModelConfig c;
    c.arch = f.architecture();
    const auto& archs = supported_architectures();
    if (std::find(archs.begin(), archs.end(), c.arch) == archs.end())
        throw Error(f.path() + ": unsupported architecture '" + c.arch + "' (supported: llama, qwen2, gemma3)");
    const std::string a = c.arch + ".";
    c.n_embd = u32(f, a + "embedding_length");
    c.n_layers = u32(f, a + "block_count");
    c.n_heads = u32(f, a + "attention.head_count");
    c.n_kv_heads = static_cast<int32_t>(f.opt_u64(a + "attention.head_count_kv").value_or(static_cast<uint64_t>(c.n_heads)));
    c.n_ff = u32(f, a + "feed_forward_length");
    c.n_ctx_train = static_cast<int64_t>(f.opt_u64(a + "context_length").value_or(2048));
    if (c.n_heads <= 0 || c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0 || c.n_layers <= 0 || c.n_embd <= 0)
        throw Error(f.path() + ": inconsistent attention shape (heads " + std::to_string(c.n_heads) + ", kv heads " +
                    std::to_string(c.n_kv_heads) + ", layers " + std::to_string(c.n_layers) + ")");
    c.head_dim = static_cast<int32_t>(f.opt_u64(a + "attention.key_length").value_or(static_cast<uint64_t>(c.n_embd / c.n_heads)));
    c.n_rot = static_cast<int32_t>(f.opt_u64(a + "rope.dimension_count").value_or(static_cast<uint64_t>(c.head_dim)));
    if (c.head_dim <= 0 || c.head_dim % 2 || c.n_rot > c.head_dim || c.n_rot % 2)
        throw Error(f.path() + ": unsupported head/rope dimensions " + std::to_string(c.head_dim) + "/" + std::to_string(c.n_rot));
    c.norm_eps = static_cast<float>(f.opt_f64(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    c.rope_base = static_cast<float>(f.opt_f64(a + "rope.freq_base").value_or(10000.0));
    if (auto type = f.opt_string(a + "rope.scaling.type"); type && *type == "linear")
        c.rope_scale = 1.0f / static_cast<float>(f.opt_f64(a + "rope.scaling.factor").value_or(1.0));
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const GgufTensor& embd = f.tensor("token_embd.weight");
    c.n_vocab = static_cast<int32_t>(embd.rows());
    if (embd.dims[0] != static_cast<uint64_t>(c.n_embd))
        throw Error(f.path() + ": token_embd.weight has rows of " + std::to_string(embd.dims[0]) + ", expected " + std::to_string(c.n_embd));
    apply_arch_conventions(f, c);
    return c;
}

}  // namespace ember
