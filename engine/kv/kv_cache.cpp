#include "engine/kv/kv_cache.h"

#include "kernels/common/error.h"
#include <algorithm>
#include <random>

#include "engine/models/model_info.h"

namespace ember {

int32_t KvCacheConfig::blocks_for(int64_t n_ctx, int32_t n_seqs, int32_t block_tokens) {
    return static_cast<int32_t>((n_ctx + block_tokens - 1) / block_tokens) * n_seqs;
}

uint64_t KvCacheConfig::bytes_per_block() const {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    uint64_t total = 0;
    for (int32_t i = 0; i < n_layers; ++i)
        total += 2ull * static_cast<uint64_t>(block_tokens) * row_bytes(*info, static_cast<uint64_t>(shape(i).cols()));
    return total;
}

uint64_t KvCacheConfig::layer_pool_bytes(int32_t layer) const {
    return Tensor::shaped(type, shape(layer).cols(), int64_t{n_blocks} * block_tokens).bytes();
}

KvCache::KvCache(Backend& backend, const KvCacheConfig& config)
    : KvCache(std::vector<Backend*>(static_cast<size_t>(std::max(config.n_layers, 0)), &backend), config) {}

KvCache::KvCache(const std::vector<Backend*>& layer_backends, const KvCacheConfig& config,
                 const std::vector<Backend*>& recurrent_backends)
    : layer_backend_(layer_backends), config_(config), recurrent_backend_(recurrent_backends) {
    if (layer_backend_.size() != static_cast<size_t>(config.n_layers))
        throw Error("KV cache: one backend per layer needed");
    if (config.type != DType::F16 && config.type != DType::Q8_0)
        throw Error("KV cache type must be F16 or Q8_0, not " + std::string(dtype_name(config.type)));
    if (config.n_blocks <= 0 || config.block_tokens <= 0) throw Error("KV cache needs at least one block");
    if (!config.shapes.empty() && config.shapes.size() != static_cast<size_t>(config.n_layers))
        throw Error("KV cache: one shape per layer needed");
    const int64_t rows = int64_t{config.n_blocks} * config.block_tokens;
    try {
        for (int i = 0; i < config.n_layers; ++i) {
            Backend& backend = *layer_backend_[static_cast<size_t>(i)];
            const KvLayerShape shape = config.shape(i);
            const int64_t cols = shape.cols();
            KvLayer l;
            l.block_tokens = config.block_tokens;
            l.n_kv_heads = shape.n_kv_heads;
            l.head_dim = shape.head_dim;
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
    if (config.n_recurrent_layers > 0) {
        if (recurrent_backend_.empty() && !layer_backend_.empty())
            recurrent_backend_.assign(static_cast<size_t>(config.n_recurrent_layers), layer_backend_.front());
        if (recurrent_backend_.size() != static_cast<size_t>(config.n_recurrent_layers))
            throw Error("KV cache: one backend per recurrent layer needed");
        try {
            alloc_state(std::max(config.state_slots, 1));
        } catch (const Error& e) {
            release_layers();
            throw Error("cannot allocate the recurrent state: " + format_bytes(config.state_bytes()) + " for " +
                        std::to_string(config.state_slots) + " sequences; run fewer sequences at once (" + e.what() +
                        ")");
        }
    }
    refcount_.assign(static_cast<size_t>(config.n_blocks), 0);
    published_.resize(static_cast<size_t>(config.n_blocks));
    for (int32_t b = config.n_blocks - 1; b >= 0; --b) free_.push_back(b);
    std::random_device rd;
    seed_ = (uint64_t{rd()} << 32) ^ rd();
}

KvCache::~KvCache() { release_layers(); }

void KvCache::release_layers() {
    for (size_t i = 0; i < layers_.size(); ++i) {
        layer_backend_[i]->free(layers_[i].k);
        layer_backend_[i]->free(layers_[i].v);
    }
    layers_.clear();
    for (size_t i = 0; i < recurrent_.size(); ++i) {
        recurrent_backend_[i]->free(recurrent_[i].conv);
        recurrent_backend_[i]->free(recurrent_[i].delta);
    }
    recurrent_.clear();
}

// (Re)allocates every recurrent layer with n_slots slots; the existing slots' contents move
// over through the host (between passes only: a sequence is being added).
void KvCache::alloc_state(int32_t n_slots) {
    const RecurrentShape& r = config_.recurrent;
    const int32_t old = recurrent_.empty() ? 0 : recurrent_.front().n_slots;
    for (int32_t i = 0; i < config_.n_recurrent_layers; ++i) {
        Backend& be = *recurrent_backend_[static_cast<size_t>(i)];
        RecurrentLayer l;
        l.n_slots = n_slots, l.conv_kernel = r.conv_kernel, l.conv_channels = r.conv_channels;
        l.n_k_heads = r.n_k_heads, l.n_v_heads = r.n_v_heads, l.head_dim = r.head_dim;
        l.conv = be.alloc(MemoryKind::State, DType::F32, r.conv_channels, int64_t{n_slots} * (r.conv_kernel - 1),
                          "state.conv");
        l.delta = be.alloc(MemoryKind::State, DType::F32, r.head_dim, int64_t{n_slots} * r.n_v_heads * r.head_dim,
                           "state.delta");
        if (static_cast<size_t>(i) < recurrent_.size()) {
            RecurrentLayer& from = recurrent_[static_cast<size_t>(i)];
            for (auto [src, dst] : {std::pair{&from.conv, &l.conv}, std::pair{&from.delta, &l.delta}}) {
                std::vector<uint8_t> host(src->bytes());
                be.download(*src, host.data(), host.size());
                be.upload(*dst, host.data(), host.size());
                be.free(*src);
            }
            from = l;
        } else {
            recurrent_.push_back(l);
        }
    }
    for (int32_t s = n_slots - 1; s >= old; --s) free_slots_.insert(free_slots_.begin(), s);
    config_.state_slots = n_slots;
}

int32_t KvCache::take_state_slot() {
    if (free_slots_.empty()) alloc_state(2 * recurrent_.front().n_slots);
    const int32_t slot = free_slots_.back();
    free_slots_.pop_back();
    zero_state(slot);
    return slot;
}

void KvCache::zero_state(int32_t slot) {
    for (size_t i = 0; i < recurrent_.size(); ++i) {
        RecurrentLayer& l = recurrent_[i];
        const int64_t conv_rows = l.conv_kernel - 1, delta_rows = int64_t{l.n_v_heads} * l.head_dim;
        for (auto [t, rows] : {std::pair{&l.conv, conv_rows}, std::pair{&l.delta, delta_rows}}) {
            Tensor part = t->slice_rows(slot * rows, rows);
            const std::vector<uint8_t> zeros(part.bytes(), 0);
            recurrent_backend_[i]->upload(part, zeros.data(), zeros.size());
        }
    }
}

int32_t KvCache::new_sequence() {
    for (size_t i = 0; i < seqs_.size(); ++i) {
        if (!seqs_[i].live) {
            seqs_[i] = Sequence{true, 0, has_recurrent() ? take_state_slot() : -1, {}, {}, 0, 0, {}};
            return static_cast<int32_t>(i);
        }
    }
    seqs_.push_back(Sequence{true, 0, has_recurrent() ? take_state_slot() : -1, {}, {}, 0, 0, {}});
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
    Sequence& s = seq_ref(seq);
    if (s.state_slot >= 0) free_slots_.push_back(s.state_slot);
    s.state_slot = -1;
    s.live = false;
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
    for (int32_t i = 0; i < need_blocks; ++i) s.blocks.push_back(take_block());
    std::vector<int32_t> slots(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = s.length + i;
        slots[static_cast<size_t>(i)] = s.blocks[static_cast<size_t>(p / B)] * B + p % B;
    }
    s.length += n;
    return slots;
}

int32_t KvCache::blocks_to_grow(int32_t seq, int32_t more) const {
    const Sequence& s = seq_ref(seq);
    const int32_t B = config_.block_tokens;
    return std::max(0, (s.length + more + B - 1) / B - static_cast<int32_t>(s.blocks.size()));
}

std::optional<std::vector<int32_t>> KvCache::allocate_slots(int32_t seq, int32_t n) {
    if (n < 0) throw Error("KV cache: cannot allocate " + std::to_string(n) + " slots");
    if (!can_allocate(seq, n)) return std::nullopt;
    return append(seq, n);
}

int32_t KvCache::room(int32_t seq) const {
    const Sequence& s = seq_ref(seq);
    const int32_t B = config_.block_tokens;
    return static_cast<int32_t>(s.blocks.size()) * B - s.length + free_blocks() * B;
}

bool KvCache::admits(int32_t tokens, std::span<const Growth> growing, std::span<const int32_t> reclaimable) const {
    const int32_t B = config_.block_tokens;
    int32_t available = free_blocks();
    for (const int32_t seq : reclaimable) available += own_blocks(seq);
    for (const Growth& g : growing) available -= blocks_to_grow(g.seq, g.more);
    return (tokens + B - 1) / B <= available;
}

int32_t KvCache::rollback(int32_t seq, int32_t n) {
    const int32_t length = seq_ref(seq).length;
    if (n < 0 || n > length)
        throw Error("KV cache: cannot roll back " + std::to_string(n) + " of " + std::to_string(length) + " tokens");
    return truncate(seq, length - n);
}

int32_t KvCache::fork(int32_t seq) {
    const int32_t child = new_sequence();
    if (has_recurrent()) return child;      // the state slot is the parent's alone
    const Sequence& parent = seq_ref(seq);  // after new_sequence(), which may grow seqs_
    Sequence& s = seqs_[static_cast<size_t>(child)];
    const size_t full = static_cast<size_t>(parent.length / config_.block_tokens);
    s.blocks.assign(parent.blocks.begin(), parent.blocks.begin() + static_cast<std::ptrdiff_t>(full));
    s.chain.assign(parent.chain.begin(),
                   parent.chain.begin() + static_cast<std::ptrdiff_t>(std::min(full, parent.chain.size())));
    for (const int32_t b : s.blocks) ++refcount_[static_cast<size_t>(b)];
    s.length = static_cast<int32_t>(full) * config_.block_tokens;
    return child;
}

// A never-published block if there is one, else the idle published block released longest ago.
int32_t KvCache::take_block() {
    int32_t b = 0;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else {
        b = idle_.front();
        idle_.pop_front();
        spill(b);
        unpublish(b);
    }
    refcount_[static_cast<size_t>(b)] = 1;
    return b;
}

void KvCache::release_block(int32_t b) {
    if (--refcount_[static_cast<size_t>(b)] > 0) return;
    if (auto& p = published_[static_cast<size_t>(b)]) p->idle = idle_.insert(idle_.end(), b);
    else free_.push_back(b);
}

// Only for a block no sequence holds (taken from idle_ already) or that one sequence is
// about to write.
void KvCache::unpublish(int32_t b) {
    auto& p = published_[static_cast<size_t>(b)];
    if (!p) return;
    const auto it = index_.find(p->hash);
    if (it != index_.end() && it->second == b) index_.erase(it);
    p.reset();
}

int32_t KvCache::truncate(int32_t seq, int32_t new_length) {
    Sequence& s = seq_ref(seq);
    if (new_length < 0 || new_length > s.length) throw Error("KV cache: bad truncation length");
    const int32_t B = config_.block_tokens;
    if (has_recurrent() && new_length < s.length) {  // back to the last snapshot, else start over
        size_t k = std::min(s.chain.size(), static_cast<size_t>(new_length / B));
        while (k > 0 && !load_snapshot(s.chain[k - 1], s.state_slot)) --k;
        if (k == 0) zero_state(s.state_slot);
        new_length = static_cast<int32_t>(k) * B;
    }
    if (new_length % B != 0) {  // the block holding the new end will be written
        const int32_t b = s.blocks[static_cast<size_t>(new_length / B)];
        if (refcount_[static_cast<size_t>(b)] > 1) new_length -= new_length % B;
        else unpublish(b);
    }
    keep_blocks(s, static_cast<size_t>((new_length + B - 1) / B));
    s.chain.resize(std::min(s.chain.size(), static_cast<size_t>(new_length / B)));
    s.length = new_length;
    return new_length;
}

void KvCache::keep_blocks(Sequence& s, size_t n_blocks) {
    while (s.blocks.size() > n_blocks) {
        release_block(s.blocks.back());
        s.blocks.pop_back();
    }
    s.chain.resize(std::min(s.chain.size(), n_blocks));
}

int32_t KvCache::own_blocks(int32_t seq) const {
    const Sequence& s = seq_ref(seq);
    return static_cast<int32_t>(std::count_if(s.blocks.begin(), s.blocks.end(),
                                              [&](int32_t b) { return refcount_[static_cast<size_t>(b)] == 1; }));
}

// splitmix64's finalizer over the tokens, starting from the predecessor's hash (the seed for
// the first block).
uint64_t KvCache::chain_hash(uint64_t parent, std::span<const int32_t> block) const {
    uint64_t h = parent;
    for (const int32_t t : block) {
        h ^= static_cast<uint32_t>(t);
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

int32_t KvCache::attach_prefix(int32_t seq, std::span<const int32_t> tokens) {
    Sequence& s = seq_ref(seq);
    if (s.length != 0) throw Error("KV cache: a prefix attaches to an empty sequence only");
    const size_t B = static_cast<size_t>(config_.block_tokens);
    uint64_t parent = seed_;
    for (size_t i = 0; (i + 1) * B <= tokens.size(); ++i) {
        const std::span<const int32_t> block = tokens.subspan(i * B, B);
        const uint64_t h = chain_hash(parent, block);
        const auto it = index_.find(h);
        int32_t b = -1;
        if (it != index_.end()) {
            const Published& p = *published_[static_cast<size_t>(it->second)];
            if (p.parent == parent && std::equal(block.begin(), block.end(), p.tokens.begin())) b = it->second;
        }
        if (b >= 0) {
            if (refcount_[static_cast<size_t>(b)]++ == 0) idle_.erase(published_[static_cast<size_t>(b)]->idle);
        } else if ((b = restore(h, parent, block)) < 0) {
            break;
        }
        s.blocks.push_back(b);
        s.chain.push_back(h);
        parent = h;
    }
    if (has_recurrent()) {  // the state resumes from the last snapshot: blocks after it go back
        size_t k = s.chain.size();
        while (k > 0) {
            const BlockKey key{s.chain[k - 1], k >= 2 ? s.chain[k - 2] : seed_, tokens.subspan((k - 1) * B, B)};
            if (load_snapshot_or_disk(key, s.state_slot)) break;
            --k;
        }
        keep_blocks(s, k);
    }
    s.length = static_cast<int32_t>(s.blocks.size() * B);
    return s.length;
}

void KvCache::publish(int32_t seq, std::span<const int32_t> tokens, Snapshot snapshot) {
    Sequence& s = seq_ref(seq);
    if (tokens.size() != static_cast<size_t>(s.length)) throw Error("KV cache: publish needs the sequence's tokens");
    const size_t B = static_cast<size_t>(config_.block_tokens);
    for (size_t i = s.chain.size(); (i + 1) * B <= tokens.size(); ++i) {
        const uint64_t parent = i == 0 ? seed_ : s.chain[i - 1];
        const std::span<const int32_t> block = tokens.subspan(i * B, B);
        const uint64_t h = chain_hash(parent, block);
        s.chain.push_back(h);
        const int32_t b = s.blocks[i];
        auto& p = published_[static_cast<size_t>(b)];
        if (p || !index_.emplace(h, b).second) continue;  // attached, or the same prefix is published already
        p = Published{h, parent, std::vector<int32_t>(block.begin(), block.end()), {}};
        if (disk_ && !disk_->contains(h)) disk_->put(h, parent, block, copy_out(b));
    }
    // The state now is the state at the end of the last block when the length ends on it.
    const size_t n = s.chain.size();
    if (!has_recurrent() || n == 0 || n * B != tokens.size()) return;
    const BlockKey key{s.chain[n - 1], n >= 2 ? s.chain[n - 2] : seed_, tokens.subspan((n - 1) * B, B)};
    if (snapshot == Snapshot::Keep) return save_snapshot(key, s.state_slot, true);
    if (s.latest != 0 && s.latest != key.hash && !(disk_state_ && disk_state_->contains(s.latest)))
        drop_snapshot(s.latest);  // superseded: a follow-up resumes from the newest
    save_snapshot(key, s.state_slot, false);
    s.latest = key.hash, s.latest_parent = key.parent;
    s.latest_tokens.assign(key.tokens.begin(), key.tokens.end());
}

void KvCache::end_turn(int32_t seq) {
    Sequence& s = seq_ref(seq);
    if (s.latest == 0 || !disk_state_ || disk_state_->contains(s.latest)) return;
    const auto it = snapshots_.find(s.latest);
    if (it != snapshots_.end()) disk_state_->put(s.latest, s.latest_parent, s.latest_tokens, it->second);
}

// Every recurrent layer's rows of one state slot (conv, then delta), in a fixed order.
template <class Copy>
void KvCache::for_each_state_part(int32_t slot, Copy copy) {
    size_t offset = 0;
    for (size_t i = 0; i < recurrent_.size(); ++i) {
        RecurrentLayer& l = recurrent_[i];
        const int64_t conv_rows = l.conv_kernel - 1, delta_rows = int64_t{l.n_v_heads} * l.head_dim;
        for (auto [t, rows] : {std::pair{&l.conv, conv_rows}, std::pair{&l.delta, delta_rows}}) {
            Tensor part = t->slice_rows(slot * rows, rows);
            copy(*recurrent_backend_[i], part, offset);
            offset += part.bytes();
        }
    }
}

void KvCache::save_snapshot(const BlockKey& key, int32_t slot, bool disk) {
    const bool to_disk = disk && disk_state_ && !disk_state_->contains(key.hash);
    if (const auto have = snapshots_.find(key.hash); have != snapshots_.end()) {  // another sequence's Latest
        if (to_disk) disk_state_->put(key.hash, key.parent, key.tokens, have->second);
        return;
    }
    if (state_bytes_per_snapshot() > snapshot_budget_ && !to_disk) return;
    std::vector<uint8_t> copy(state_bytes_per_snapshot());
    for_each_state_part(
        slot, [&](Backend& be, Tensor& part, size_t off) { be.download(part, copy.data() + off, part.bytes()); });
    if (to_disk) disk_state_->put(key.hash, key.parent, key.tokens, copy);
    keep_snapshot(key.hash, std::move(copy));
}

void KvCache::drop_snapshot(uint64_t hash) {
    const auto it = snapshots_.find(hash);
    if (it == snapshots_.end()) return;
    snapshot_bytes_ -= it->second.size();
    snapshots_.erase(it);
    snapshot_order_.remove(hash);
}

void KvCache::keep_snapshot(uint64_t hash, std::vector<uint8_t> bytes) {
    if (bytes.size() > snapshot_budget_) return;
    snapshot_bytes_ += bytes.size();
    snapshots_.emplace(hash, std::move(bytes));
    snapshot_order_.push_back(hash);
    set_state_snapshot_budget(snapshot_budget_);  // the oldest go while over budget
}

bool KvCache::load_snapshot_or_disk(const BlockKey& key, int32_t slot) {
    if (load_snapshot(key.hash, slot)) return true;
    if (!disk_state_) return false;
    auto e = disk_state_->get(key.hash, key.parent, key.tokens);  // its size checked against the store's
    if (!e) return false;
    for_each_state_part(
        slot, [&](Backend& be, Tensor& part, size_t off) { be.upload(part, e->bytes.data() + off, part.bytes()); });
    keep_snapshot(key.hash, std::move(e->bytes));
    return true;
}

bool KvCache::load_snapshot(uint64_t hash, int32_t slot) {
    const auto it = snapshots_.find(hash);
    if (it == snapshots_.end()) return false;
    for_each_state_part(
        slot, [&](Backend& be, Tensor& part, size_t off) { be.upload(part, it->second.data() + off, part.bytes()); });
    return true;
}

void KvCache::set_state_snapshot_budget(uint64_t bytes) {
    snapshot_budget_ = bytes;
    while (snapshot_bytes_ > snapshot_budget_ && !snapshot_order_.empty()) {
        const auto it = snapshots_.find(snapshot_order_.front());
        snapshot_bytes_ -= it->second.size();
        snapshots_.erase(it);
        snapshot_order_.pop_front();
    }
}

// Every layer's K and V rows of block b, in a fixed order: copy(backend, rows, offset), the
// offset counting the bytes of the halves before.
template <class Copy>
void KvCache::for_each_half(int32_t b, Copy copy) {
    const int64_t B = config_.block_tokens;
    size_t offset = 0;
    for (size_t i = 0; i < layers_.size(); ++i) {
        for (Tensor* t : {&layers_[i].k, &layers_[i].v}) {
            Tensor rows = t->slice_rows(b * B, B);
            copy(*layer_backend_[i], rows, offset);
            offset += rows.bytes();
        }
    }
}

void KvCache::set_host_cache(uint64_t budget_bytes) {
    host_ = budget_bytes > 0 ? std::make_unique<HostPrefixStore>(budget_bytes) : nullptr;
}

void KvCache::set_disk_cache(std::unique_ptr<DiskPrefixStore> store) {
    if (!index_.empty()) throw Error("KV cache: the disk tier is set before any block is published");
    disk_ = std::move(store);
    if (disk_) seed_ = disk_->seed();
}

std::vector<uint8_t> KvCache::copy_out(int32_t b) {
    std::vector<uint8_t> bytes(config_.bytes_per_block());
    for_each_half(b,
                  [&](Backend& be, Tensor& rows, size_t off) { be.download(rows, bytes.data() + off, rows.bytes()); });
    return bytes;
}

// An idle published block about to be reused: its bytes go to the host tier, if there is one.
void KvCache::spill(int32_t b) {
    const auto& p = published_[static_cast<size_t>(b)];
    if (!host_ || !p) return;
    host_->put(p->hash, HostPrefixStore::Entry{p->parent, p->tokens, copy_out(b)});
}

// A block of a prefix from the host tier, else from the disk tier, into a pool block,
// published and held (refcount 1) by the caller; -1 when neither has it or the pool has no room.
int32_t KvCache::restore(uint64_t hash, uint64_t parent, std::span<const int32_t> block) {
    if (free_blocks() == 0) return -1;
    std::optional<HostPrefixStore::Entry> e;
    if (host_) e = host_->take(hash, parent, block);
    if (!e && disk_) e = disk_->get(hash, parent, block);
    if (!e) return -1;
    const int32_t b = take_block();
    for_each_half(b,
                  [&](Backend& be, Tensor& rows, size_t off) { be.upload(rows, e->bytes.data() + off, rows.bytes()); });
    index_[hash] = b;
    published_[static_cast<size_t>(b)] = Published{hash, parent, std::move(e->tokens), {}};
    return b;
}

}  // namespace ember
