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
    // Partial offload: the embedding and layers [0, n_first_layers) run on `first` (the GPU),
    // the remaining layers and the output head on `rest` (the CPU). The activations cross
    // over once per pass (n_tokens x n_embd floats).
    Transformer(std::shared_ptr<const GgufFile> file, Backend& first, Backend& rest, int n_first_layers);
    ~Transformer();
    Transformer(const Transformer&) = delete;
    Transformer& operator=(const Transformer&) = delete;

    const ModelConfig& config() const { return config_; }
    const GgufFile& file() const { return *file_; }
    Backend& backend() { return *devices_.front(); }
    // The backend each layer's weights and KV cache live on (for KvCache).
    std::vector<Backend*> layer_backends() const;

    // The KV cache layout this model needs for `n_ctx` tokens of `n_seqs` sequences.
    KvCacheConfig kv_config(int64_t n_ctx, int32_t n_seqs, DType kv_type = DType::F16) const;

    // One forward pass over `batch` (its kv slots already reserved in `kv`). Writes the
    // logits of batch.output_rows to `logits` (output_rows.size() x n_vocab, row-major).
    void forward(const BatchInfo& batch, KvCache& kv, std::vector<float>& logits);
    // The same pass without the download: the logits rows (output_rows.size() x n_vocab, F32)
    // where they were computed, on output_backend(); valid until the next pass. An empty
    // Tensor when the batch wants no outputs.
    Tensor forward_device(const BatchInfo& batch, KvCache& kv);
    // The backend of the output head (the last layer's).
    Backend& output_backend() { return *devices_[static_cast<size_t>(layer_dev_.back())]; }

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
    void load_weights();
    Tensor weight(int dev, const std::string& name, int64_t cols, int64_t rows, bool required = true);
    void free_weight(int dev, Tensor& t);
    void ensure_scratch(int dev, int64_t n_tokens, int64_t n_outputs);
    void free_scratch(int dev);
    void attention_block(int il, const BatchInfo& batch, KvCache& kv, Scratch& s);
    void ffn_block(int il, Scratch& s);
    void move_activations(int from, int to, int64_t n_tokens);

    std::shared_ptr<const GgufFile> file_;
    std::vector<Backend*> devices_;  // 1, or 2 with partial offload
    std::vector<int> layer_dev_;     // device index of each layer
    ModelConfig config_;
    Tensor tok_embd_, output_norm_, output_, output_embd_;  // output_embd_: tied copy on the last device
    std::vector<float> rope_freq_factors_;
    std::vector<Layer> layers_;
    std::vector<Scratch> scratch_;   // per device
    std::vector<float> crossing_;    // host buffer for activations moving between devices
};

}  // namespace ember
