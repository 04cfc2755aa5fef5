#include "engine/kv/kv_cache.h"

#include "kernels/common/error.h"
#include <algorithm>

#include "engine/models/model_info.h"

namespace ember {

int32_t KvCacheConfig::blocks_for(int64_t n_ctx, int32_t n_seqs, int32_t block_tokens) {
    return static_cast<int32_t>((n_ctx + block_tokens - 1) / block_tokens) * n_seqs;
}

uint64_t KvCacheConfig::bytes_per_block() const {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    const uint64_t row = row_bytes(*info, static_cast<uint64_t>(n_kv_heads) * head_dim);
    return 2ull * static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(block_tokens) * row;
}

uint64_t KvCacheConfig::layer_pool_bytes() const {
    return Tensor::shaped(type, int64_t{n_kv_heads} * head_dim, int64_t{n_blocks} * block_tokens).bytes();
}

KvCache::KvCache(Backend& backend, const KvCacheConfig& config)
    : KvCache(std::vector<Backend*>(static_cast<size_t>(std::max(config.n_layers, 0)), &backend), config) {}

KvCache::KvCache(const std::vector<Backend*>& layer_backends, const KvCacheConfig& config)
    : layer_backend_(layer_backends), config_(config) {
    if (layer_backend_.size() != static_cast<size_t>(config.n_layers))
        throw Error("KV cache: one backend per layer needed");
    if (config.type != DType::F16 && config.type != DType::Q8_0)
        throw Error("KV cache type must be F16 or Q8_0, not " + std::string(dtype_name(config.type)));
    if (config.n_blocks <= 0 || config.block_tokens <= 0) throw Error("KV cache needs at least one block");
    const int64_t cols = int64_t{config.n_kv_heads} * config.head_dim;
    const int64_t rows = int64_t{config.n_blocks} * config.block_tokens;
    try {
        for (int i = 0; i < config.n_layers; ++i) {
            Backend& backend = *layer_backend_[static_cast<size_t>(i)];
            KvLayer l;
            l.block_tokens = config.block_tokens;
            l.n_kv_heads = config.n_kv_heads;
            l.head_dim = config.head_dim;
            l.k = backend.alloc(MemoryKind::KvCache, config.type, cols, rows, "kv.k");
            layers_.push_back(l);
            layers_.back().v = backend.alloc(MemoryKind::KvCache, config.type, cols, rows, "kv.v");
        }
    } catch (const Error& e) {
        release_layers();
        throw Error("cannot allocate the KV cache: " + format_bytes(config.total_bytes()) + " for " +
                    std::to_string(rows) + " tokens x " + std::to_string(config.n_layers) + " layers (" +
                    std::string(dtype_name(config.type)) + "); reduce the context length or use a Q8_0 cache (" +
                    e.what() + ")");
    }
    refcount_.assign(static_cast<size_t>(config.n_blocks), 0);
    for (int32_t b = config.n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

KvCache::~KvCache() { release_layers(); }

void KvCache::release_layers() {
    for (size_t i = 0; i < layers_.size(); ++i) {
        layer_backend_[i]->free(layers_[i].k);
        layer_backend_[i]->free(layers_[i].v);
    }
    layers_.clear();
}

int32_t KvCache::new_sequence() {
    for (size_t i = 0; i < seqs_.size(); ++i) {
        if (!seqs_[i].live) {
            seqs_[i] = Sequence{true, 0, {}};
            return static_cast<int32_t>(i);
        }
    }
    seqs_.push_back(Sequence{true, 0, {}});
    return static_cast<int32_t>(seqs_.size() - 1);
}

KvCache::Sequence& KvCache::seq_ref(int32_t seq) {
    if (seq < 0 || static_cast<size_t>(seq) >= seqs_.size() || !seqs_[static_cast<size_t>(seq)].live)
        throw Error("KV cache: no sequence " + std::to_string(seq));
    return seqs_[static_cast<size_t>(seq)];
}

const KvCache::Sequence& KvCache::seq_ref(int32_t seq) const { return const_cast<KvCache*>(this)->seq_ref(seq); }

void KvCache::free_sequence(int32_t seq) {
    truncate(seq, 0);
    seq_ref(seq).live = false;
}

int32_t KvCache::length(int32_t seq) const { return seq_ref(seq).length; }

const std::vector<int32_t>& KvCache::block_table(int32_t seq) const { return seq_ref(seq).blocks; }

std::vector<int32_t> KvCache::append(int32_t seq, int32_t n) {
    Sequence& s = seq_ref(seq);
    const int32_t B = config_.block_tokens;
    const int32_t need_blocks = (s.length + n + B - 1) / B - static_cast<int32_t>(s.blocks.size());
    if (need_blocks > free_blocks())
        throw Error("KV cache full: " + std::to_string(n) + " more tokens need " + std::to_string(need_blocks) +
                    " blocks, " + std::to_string(free_blocks()) + " free (" +
                    std::to_string(max_tokens_per_sequence()) + " tokens in all)");
    for (int32_t i = 0; i < need_blocks; ++i) {
        const int32_t b = free_.back();
        free_.pop_back();
        refcount_[static_cast<size_t>(b)] = 1;
        s.blocks.push_back(b);
    }
    std::vector<int32_t> slots(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = s.length + i;
        slots[static_cast<size_t>(i)] = s.blocks[static_cast<size_t>(p / B)] * B + p % B;
    }
    s.length += n;
    return slots;
}

void KvCache::release_block(int32_t b) {
    if (--refcount_[static_cast<size_t>(b)] == 0) free_.push_back(b);
}

void KvCache::truncate(int32_t seq, int32_t new_length) {
    Sequence& s = seq_ref(seq);
    if (new_length < 0 || new_length > s.length) throw Error("KV cache: bad truncation length");
    const int32_t B = config_.block_tokens;
    const size_t keep = static_cast<size_t>((new_length + B - 1) / B);
    while (s.blocks.size() > keep) {
        release_block(s.blocks.back());
        s.blocks.pop_back();
    }
    s.length = new_length;
}

}  // namespace ember
