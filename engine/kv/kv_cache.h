// Block-based KV cache. Storage is a pool of fixed-size blocks per layer (allocated once on
// the backend, sized from the context length); each sequence owns a block table. Blocks are
// reference-counted so that later a prefix can be shared between sequences (a system prompt,
// an earlier turn) without copying: a full, shared block is read-only, and a sequence that
// must write into a shared block gets its own copy first (copy-on-write is left to the
// prefix-reuse work; today sharing is only of full blocks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ember {

struct KvCacheConfig {
    int32_t n_layers = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    int32_t block_tokens = 16;
    int32_t n_blocks = 0;     // total blocks in the pool (shared by all sequences)
    DType type = DType::F16;  // F16 by default; Q8_0 halves the memory

    // Blocks needed to hold `n_seqs` sequences of `n_ctx` tokens each.
    static int32_t blocks_for(int64_t n_ctx, int32_t n_seqs, int32_t block_tokens);
    uint64_t bytes_per_block() const;  // K + V over all layers
    // One layer's K (or V) pool as allocated: n_blocks * block_tokens rows (the fit planner
    // pads it with the backend's alignment, engine/fit).
    uint64_t layer_pool_bytes() const;
    uint64_t total_bytes() const { return bytes_per_block() * static_cast<uint64_t>(n_blocks); }
};

class KvCache {
public:
    // Allocates every layer's pool on `backend`. Out of memory -> ember::Error that states
    // the sizes involved and how to shrink them.
    KvCache(Backend& backend, const KvCacheConfig& config);
    // Partial offload: layer i's K/V live on layer_backends[i] (one entry per layer).
    KvCache(const std::vector<Backend*>& layer_backends, const KvCacheConfig& config);
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    const KvCacheConfig& config() const { return config_; }
    KvLayer& layer(int i) { return layers_[static_cast<size_t>(i)]; }
    const KvLayer& layer(int i) const { return layers_[static_cast<size_t>(i)]; }

    // ---- sequences -------------------------------------------------------------------
    int32_t new_sequence();  // returns a sequence id
    void free_sequence(int32_t seq);
    int32_t length(int32_t seq) const;  // tokens stored
    // Reserves room for `n` more tokens (allocating blocks) and returns their cache slots.
    // Throws ember::Error if the pool is exhausted (the sequence is left unchanged).
    std::vector<int32_t> append(int32_t seq, int32_t n);
    // Forgets tokens from `new_length` on (edit, regenerate); frees whole blocks.
    void truncate(int32_t seq, int32_t new_length);
    const std::vector<int32_t>& block_table(int32_t seq) const;
    int32_t free_blocks() const { return static_cast<int32_t>(free_.size()); }
    int32_t max_tokens_per_sequence() const { return config_.n_blocks * config_.block_tokens; }

private:
    struct Sequence {
        bool live = false;
        int32_t length = 0;
        std::vector<int32_t> blocks;
    };
    Sequence& seq_ref(int32_t seq);
    const Sequence& seq_ref(int32_t seq) const;
    void release_block(int32_t b);
    void release_layers();

    std::vector<Backend*> layer_backend_;
    KvCacheConfig config_;
    std::vector<KvLayer> layers_;
    std::vector<int32_t> refcount_;
    std::vector<int32_t> free_;  // stack of free block ids
    std::vector<Sequence> seqs_;
};

}  // namespace ember
