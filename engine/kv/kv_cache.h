// Block-based KV cache. Storage is a pool of fixed-size blocks per layer (allocated once on
// the backend, sized from the context length); each sequence owns a block table. Blocks are
// reference-counted so that a prefix is shared between sequences (a system prompt, an earlier
// turn, the same document sent again) without copying: only full blocks are shared, and a
// shared block is never written (a sequence truncated into one lets go of that block instead).
//
// Prefix reuse: a full block can be published under the hash of every token from its
// sequence's start to its own end (a chain: the block's tokens and its predecessor's hash).
// A new sequence whose tokens begin the same way attaches those blocks instead of computing
// them again. A published block that no sequence holds any more stays in the pool, idle,
// until its room is needed (least recently released first; a sequence releases its last
// block first, so a prefix outlives its continuations); free_blocks() counts it as free.
// With a host cache (set_host_cache), a published block whose room is taken is copied to host
// RAM first, and comes back from there when a prompt needs it (host_prefix_store.h). With a
// disk cache (set_disk_cache), every published block is also written to disk as it is
// published, and read back when neither the pool nor host RAM has it: after a restart too
// (disk_prefix_store.h).
//
// Recurrent state (models with linear-attention layers: qwen35): beside the blocks, each
// live sequence owns a state slot, one RecurrentLayer slot per such layer (a fixed size per
// sequence, whatever its length), zeroed when the sequence starts. A state cannot be rolled
// back by itself, so publish() keeps state snapshots: when a sequence's length ends exactly
// on a block it publishes, a copy of its state (every recurrent layer's slot, in host RAM)
// is kept under that block's chain hash (after decode steps only the sequence's newest one,
// stored on disk when its turn ends: Snapshot::Latest, end_turn). attach_prefix() then attaches blocks only up to the
// last one with a snapshot and loads that snapshot into the sequence's slot; truncate() to a
// shorter length goes back to the last snapshot at or before it (0 and a zeroed state when
// there is none). Snapshots are bounded by set_state_snapshot_budget() (bytes; the oldest go
// first). With a disk state store (set_disk_state_store: a DiskPrefixStore of its own whose
// "blocks" are snapshots) every snapshot is also written to disk and attach_prefix() reads
// one back when RAM has none: a restarted process resumes a prefix from the disk tier's KV
// blocks and that snapshot. The host tier carries KV blocks only.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv/disk_prefix_store.h"
#include "engine/kv/host_prefix_store.h"
#include "kernels/backend.h"

namespace ember {

// One cache layer's rows: n_kv_heads x head_dim keys (and as many values) per token.
struct KvLayerShape {
    int32_t n_kv_heads = 0, head_dim = 0;
    int64_t cols() const { return int64_t{n_kv_heads} * head_dim; }
};

// The recurrent state of one linear-attention layer per sequence (RecurrentLayer's fields).
struct RecurrentShape {
    int32_t conv_kernel = 0, conv_channels = 0, n_k_heads = 0, n_v_heads = 0, head_dim = 0;
    // One layer's two tensors for `slots` sequences (RecurrentLayer::conv, ::delta), F32:
    // the convolution's last conv_kernel - 1 inputs and n_v_heads head_dim^2 matrices each.
    uint64_t conv_bytes(int32_t slots) const {
        return 4ull * uint64_t(slots) * uint64_t(conv_kernel - 1) * uint64_t(conv_channels);
    }
    uint64_t delta_bytes(int32_t slots) const {
        return 4ull * uint64_t(slots) * uint64_t(n_v_heads) * uint64_t(head_dim) * uint64_t(head_dim);
    }
    uint64_t bytes_per_slot() const { return conv_bytes(1) + delta_bytes(1); }
};

struct KvCacheConfig {
    int32_t n_layers = 0;  // cache layers: the model's layers that keep K/V of their own
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    // Per cache layer, where layers differ (gemma4's sliding and global layers); empty: every
    // layer is n_kv_heads x head_dim.
    std::vector<KvLayerShape> shapes;
    int32_t block_tokens = 16;
    int32_t n_blocks = 0;     // total blocks in the pool (shared by all sequences)
    DType type = DType::F16;  // F16 by default; Q8_0 halves the memory

    // Blocks needed to hold `n_seqs` sequences of `n_ctx` tokens each.
    static int32_t blocks_for(int64_t n_ctx, int32_t n_seqs, int32_t block_tokens);
    KvLayerShape shape(int32_t layer) const {
        return shapes.empty() ? KvLayerShape{n_kv_heads, head_dim} : shapes[static_cast<size_t>(layer)];
    }
    uint64_t bytes_per_block() const;  // K + V over all layers
    // One layer's K (or V) pool as allocated: n_blocks * block_tokens rows (the fit planner
    // pads it with the backend's alignment, engine/fit).
    uint64_t layer_pool_bytes(int32_t layer = 0) const;
    uint64_t total_bytes() const { return bytes_per_block() * static_cast<uint64_t>(n_blocks); }

    // Linear-attention layers (0: none) and the sequences whose state is allocated up front;
    // more are added (doubling) when more sequences live at once.
    int32_t n_recurrent_layers = 0;
    RecurrentShape recurrent;
    int32_t state_slots = 0;
    // The recurrent state's bytes, all layers and slots: what the fit planner adds to the KV
    // cache's total_bytes() (each layer's two tensors are allocations of their own).
    uint64_t state_bytes() const {
        return uint64_t(n_recurrent_layers) * uint64_t(state_slots) * recurrent.bytes_per_slot();
    }
};

class KvCache {
public:
    // Allocates every layer's pool on `backend`. Out of memory -> ember::Error that states
    // the sizes involved and how to shrink them.
    KvCache(Backend& backend, const KvCacheConfig& config);
    // Partial offload: cache layer i's K/V live on layer_backends[i] (one entry per cache layer),
    // recurrent layer i's state on recurrent_backends[i] (one per recurrent layer; none: all on
    // layer_backends[0]).
    KvCache(const std::vector<Backend*>& layer_backends, const KvCacheConfig& config,
            const std::vector<Backend*>& recurrent_backends = {});
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    const KvCacheConfig& config() const { return config_; }
    KvLayer& layer(int i) { return layers_[static_cast<size_t>(i)]; }
    const KvLayer& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
    // Recurrent layer i's state (every sequence's slot), and whether there are any.
    RecurrentLayer& recurrent(int i) { return recurrent_[static_cast<size_t>(i)]; }
    bool has_recurrent() const { return !recurrent_.empty(); }
    // The state slot of a sequence (BatchInfo::state_slot); -1 without recurrent layers.
    int32_t state_slot(int32_t seq) const { return seq_ref(seq).state_slot; }

    // ---- sequences -------------------------------------------------------------------
    int32_t new_sequence();  // returns a sequence id
    void free_sequence(int32_t seq);
    int32_t length(int32_t seq) const;  // tokens stored
    // Reserves room for `n` more tokens (allocating blocks) and returns their cache slots.
    // Throws ember::Error if the pool is exhausted (the sequence is left unchanged).
    std::vector<int32_t> append(int32_t seq, int32_t n);
    // Forgets tokens from `new_length` on (edit, regenerate); frees whole blocks. Returns the
    // length kept: `new_length`, or less when it falls inside a block that another sequence
    // shares (that block is let go too, down to its first token, since it must not be written),
    // or with recurrent layers when new_length < length the last state snapshot's position at
    // or before it (0 when there is none: the state starts over).
    int32_t truncate(int32_t seq, int32_t new_length);
    const std::vector<int32_t>& block_table(int32_t seq) const;
    // Blocks an append can take: never used, or idle published ones.
    int32_t free_blocks() const { return static_cast<int32_t>(free_.size() + idle_.size()); }
    // Blocks that freeing the sequence would return (those no other sequence shares).
    int32_t own_blocks(int32_t seq) const;
    int32_t max_tokens_per_sequence() const { return config_.n_blocks * config_.block_tokens; }
    int32_t used_blocks() const { return config_.n_blocks - free_blocks(); }

    // ---- slots: the scheduler's seam (vLLM's allocate_slots) -------------------------
    // The scheduler decides who runs and who yields; what a sequence's growth takes from the
    // pool is asked here, never computed there, so block arithmetic lives in one place.
    // Blocks `seq` must still take to grow by `more` tokens (0 while its last block has room).
    int32_t blocks_to_grow(int32_t seq, int32_t more) const;
    bool can_allocate(int32_t seq, int32_t n) const { return blocks_to_grow(seq, n) <= free_blocks(); }
    // Reserves room for `n` more tokens of `seq` and returns their cache slots; nullopt (and
    // nothing taken) when the pool cannot hold them: the caller evicts or preempts and asks again.
    std::optional<std::vector<int32_t>> allocate_slots(int32_t seq, int32_t n);
    // Tokens `seq` can take now: what its last block has left plus every free block's.
    int32_t room(int32_t seq) const;
    // Admission: whether a new sequence of `tokens` fits once each of `growing` has grown by its
    // `more`, counting the blocks that freeing `reclaimable` sequences would return as free.
    struct Growth {
        int32_t seq = -1, more = 0;
    };
    bool admits(int32_t tokens, std::span<const Growth> growing, std::span<const int32_t> reclaimable) const;
    // Forgets the last `n` tokens of `seq` (rejected draft tokens); returns the length kept,
    // as truncate does (less inside a shared block; 0 with recurrent layers).
    int32_t rollback(int32_t seq, int32_t n);
    // A new sequence sharing `seq`'s full blocks (read-only, reference-counted, nothing copied);
    // its length is those blocks' tokens (0 with recurrent layers: a state is not shared).
    int32_t fork(int32_t seq);

    // ---- prefix reuse ----------------------------------------------------------------
    // For an empty sequence: attaches the longest run of published blocks holding the first
    // tokens of `tokens` (whole blocks only) and returns how many tokens that is.
    int32_t attach_prefix(int32_t seq, std::span<const int32_t> tokens);
    // Publishes the sequence's full blocks not published yet; `tokens` are its tokens (all
    // length(seq) of them). A block whose chain is already published elsewhere stays private.
    // With recurrent layers and the length on a block end, a state snapshot is taken: Keep
    // (a prompt's chunks) keeps it in RAM and writes it to the disk tier; Latest (decode steps)
    // keeps only the sequence's newest one in RAM (it replaces the last Latest one) and writes
    // nothing until end_turn(). A turn then costs its prompt's snapshots plus one on disk,
    // not one per 16 generated tokens.
    enum class Snapshot { Keep, Latest };
    void publish(int32_t seq, std::span<const int32_t> tokens, Snapshot snapshot = Snapshot::Keep);
    // A request on `seq` ended: its Latest snapshot (the state at its last block end, where a
    // follow-up turn resumes) goes to the disk tier too.
    void end_turn(int32_t seq);
    int32_t published_blocks() const { return static_cast<int32_t>(index_.size()); }
    int32_t idle_blocks() const { return static_cast<int32_t>(idle_.size()); }
    // The host-RAM tier, at most `budget_bytes` of evicted blocks (0: none; what it held goes).
    void set_host_cache(uint64_t budget_bytes);
    const HostPrefixStore* host_cache() const { return host_.get(); }
    // The disk tier (null: none). Only before any block is published: the chain hashes take
    // the store's seed, so that they name the same blocks in every process.
    void set_disk_cache(std::unique_ptr<DiskPrefixStore> store);
    DiskPrefixStore* disk_cache() { return disk_.get(); }
    const DiskPrefixStore* disk_cache() const { return disk_.get(); }
    // Recurrent state snapshots (see the header): at most `bytes` of them in host RAM (0: none).
    void set_state_snapshot_budget(uint64_t bytes);
    // The snapshots' disk tier (null: none); its blocks are state_bytes_per_snapshot() long.
    void set_disk_state_store(std::unique_ptr<DiskPrefixStore> store) { disk_state_ = std::move(store); }
    DiskPrefixStore* disk_state_store() { return disk_state_.get(); }
    const DiskPrefixStore* disk_state_store() const { return disk_state_.get(); }
    uint64_t state_bytes_per_snapshot() const {
        return uint64_t(config_.n_recurrent_layers) * config_.recurrent.bytes_per_slot();
    }
    int32_t state_snapshots() const { return static_cast<int32_t>(snapshots_.size()); }
    uint64_t state_snapshot_bytes() const { return snapshot_bytes_; }

private:
    struct Sequence {
        bool live = false;
        int32_t length = 0;
        int32_t state_slot = -1;
        std::vector<int32_t> blocks;
        std::vector<uint64_t> chain;  // hash of each block from the first, as far as known
        // Its Latest snapshot (publish): the block it ends, for end_turn's disk write.
        uint64_t latest = 0, latest_parent = 0;
        std::vector<int32_t> latest_tokens;
    };
    struct Published {  // a block findable by its chain hash
        uint64_t hash = 0, parent = 0;
        std::vector<int32_t> tokens;        // checked on a hit: a hash collision is never reused
        std::list<int32_t>::iterator idle;  // its place in idle_ while no sequence holds it
    };
    Sequence& seq_ref(int32_t seq);
    const Sequence& seq_ref(int32_t seq) const;
    int32_t take_block();
    void release_block(int32_t b);
    void spill(int32_t b);
    std::vector<uint8_t> copy_out(int32_t b);  // the block's bytes, as for_each_half orders them
    int32_t restore(uint64_t hash, uint64_t parent, std::span<const int32_t> block);
    template <class Copy>
    void for_each_half(int32_t b, Copy copy);  // copy(backend, K or V rows of block b, byte offset)
    void unpublish(int32_t b);
    uint64_t chain_hash(uint64_t parent, std::span<const int32_t> block) const;
    void release_layers();
    // ---- recurrent state
    void alloc_state(int32_t n_slots);  // every recurrent layer at n_slots, contents kept
    int32_t take_state_slot();
    void zero_state(int32_t slot);
    // The block ending the snapshot: its chain hash, its predecessor's, its tokens.
    struct BlockKey {
        uint64_t hash = 0, parent = 0;
        std::span<const int32_t> tokens;
    };
    void save_snapshot(const BlockKey& key, int32_t slot, bool to_disk);
    void drop_snapshot(uint64_t hash);                              // from RAM
    bool load_snapshot(uint64_t hash, int32_t slot);                // from RAM
    bool load_snapshot_or_disk(const BlockKey& key, int32_t slot);  // RAM, else the disk tier
    void keep_snapshot(uint64_t hash, std::vector<uint8_t> bytes);
    // The sequence cut to its first n_blocks whole blocks (blocks and chain let go).
    void keep_blocks(Sequence& s, size_t n_blocks);
    template <class Copy>
    void for_each_state_part(int32_t slot, Copy copy);  // copy(backend, slot's rows, byte offset)

    std::vector<Backend*> layer_backend_;
    KvCacheConfig config_;
    std::vector<KvLayer> layers_;
    std::vector<Backend*> recurrent_backend_;
    std::vector<RecurrentLayer> recurrent_;
    std::vector<int32_t> free_slots_;  // state slots no sequence holds
    std::vector<int32_t> refcount_;
    std::vector<int32_t> free_;  // stack of never-published free block ids
    std::vector<Sequence> seqs_;
    // Prefix reuse. The hashes are keyed with a random seed per cache, so a client cannot
    // craft prompts that collide on purpose (a collision would only cost a miss anyway).
    uint64_t seed_ = 0;
    std::unordered_map<uint64_t, int32_t> index_;      // chain hash -> block
    std::vector<std::optional<Published>> published_;  // per block
    std::list<int32_t> idle_;                          // published blocks nobody holds, least recently released first
    std::unique_ptr<HostPrefixStore> host_;            // evicted published blocks, in host RAM (optional)
    std::unique_ptr<DiskPrefixStore> disk_;            // every published block, on disk (optional)
    // Recurrent state snapshots by the chain hash of the block they end, oldest first in order.
    std::unordered_map<uint64_t, std::vector<uint8_t>> snapshots_;
    std::list<uint64_t> snapshot_order_;
    uint64_t snapshot_bytes_ = 0, snapshot_budget_ = 256ull << 20;
    std::unique_ptr<DiskPrefixStore> disk_state_;  // every snapshot, on disk (optional)
};

}  // namespace ember
