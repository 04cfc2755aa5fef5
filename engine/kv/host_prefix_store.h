// The prefix cache's second tier, in host RAM. When the KV pool needs the room of an idle
// published block (kv_cache.h), the block's bytes (every layer's K and V) are copied here
// instead of being lost; a later prompt that begins the same way brings them back into a pool
// block instead of computing them again. Bounded by a byte budget: the entry stored longest
// ago goes first. Entries are found by the same chain hash as in the pool and checked the
// same way (parent hash and tokens), so a collision is a miss.
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace ember {

class HostPrefixStore {
public:
    struct Entry {
        uint64_t parent = 0;
        std::vector<int32_t> tokens;  // the block's tokens
        std::vector<uint8_t> bytes;   // its K and V, layer by layer, as the backend holds them
    };

    explicit HostPrefixStore(uint64_t budget_bytes) : budget_(budget_bytes) {}

    // Keeps `e` under `hash` (replacing one there), dropping the oldest entries to stay within
    // the budget; an entry larger than the whole budget is not kept.
    void put(uint64_t hash, Entry e);
    // The entry for this block of this prefix, removed from the store; nothing on a miss.
    std::optional<Entry> take(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);

    uint64_t bytes() const { return bytes_; }  // held now (the blocks' bytes)
    uint64_t budget() const { return budget_; }
    size_t size() const { return entries_.size(); }

private:
    using Item = std::pair<uint64_t, Entry>;
    void erase(std::list<Item>::iterator it);

    uint64_t budget_ = 0, bytes_ = 0;
    std::list<Item> entries_;  // oldest first
    std::unordered_map<uint64_t, std::list<Item>::iterator> by_hash_;
};

}  // namespace ember
