// The decoder-only transformer shared by llama, qwen2 and gemma3: loads the weights onto a
// backend and runs batched forward passes over a block KV cache. Architecture differences
// are the flags in ModelConfig; there is one forward pass, not one per model family.
#pragma once
#include <memory>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/model_config.h"
#include "kernels/backend.h"

namespace ember {

class Transformer {
public:
    // Loads every weight through backend.load_weight (zero-copy on the CPU). Throws
    // ember::Error naming the tensor for a missing tensor, a wrong shape or a type the
    // backend cannot run.
    Transformer(std::shared_ptr<const GgufFile> file, Backend& backend);
    ~Transformer();
    Transformer(const Transformer&) = delete;
    Transformer& operator=(const Transformer&) = delete;

    const ModelConfig& config() const { return config_; }
    const GgufFile& file() const { return *file_; }
    Backend& backend() { return backend_; }

    // The KV cache layout this model needs for `n_ctx` tokens of `n_seqs` sequences.
    KvCacheConfig kv_config(int64_t n_ctx, int32_t n_seqs, DType kv_type = DType::F16) const;

    // One forward pass over `batch` (its kv slots already reserved in `kv`). Writes the
    // logits of batch.output_rows to `logits` (output_rows.size() x n_vocab, row-major).
    void forward(const BatchInfo& batch, KvCache& kv, std::vector<float>& logits);

private:
    struct Layer {
        Tensor attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, post_attn_norm;
        Tensor ffn_norm, w_gate, w_up, w_down, post_ffn_norm;
    };
    struct Scratch {
        int64_t tokens = 0, outputs = 0;  // capacity
        int64_t tokens_in_pass = 0;
        Tensor x, xn, q, k, v, attn, proj, gate, up, out_x, logits;
    };
    Tensor weight(const std::string& name, int64_t cols, int64_t rows, bool required = true);
    void ensure_scratch(int64_t n_tokens, int64_t n_outputs);
    void free_scratch();
    void attention_block(int il, const BatchInfo& batch, KvCache& kv, Scratch& s);
    void ffn_block(int il, Scratch& s);

    std::shared_ptr<const GgufFile> file_;
    Backend& backend_;
    ModelConfig config_;
    Tensor tok_embd_, output_norm_, output_;
    std::vector<float> rope_freq_factors_;
    std::vector<Layer> layers_;
    Scratch scratch_;
};

}  // namespace ember
