#include "engine/kv/host_prefix_store.h"

#include <algorithm>

namespace ember {

void HostPrefixStore::erase(std::list<Item>::iterator it) {
    bytes_ -= it->second.bytes.size();
    by_hash_.erase(it->first);
    entries_.erase(it);
}

void HostPrefixStore::put(uint64_t hash, Entry e) {
    if (const auto old = by_hash_.find(hash); old != by_hash_.end()) erase(old->second);
    if (e.bytes.size() > budget_) return;
    while (bytes_ + e.bytes.size() > budget_) erase(entries_.begin());
    bytes_ += e.bytes.size();
    by_hash_[hash] = entries_.insert(entries_.end(), {hash, std::move(e)});
}

std::optional<HostPrefixStore::Entry> HostPrefixStore::take(uint64_t hash, uint64_t parent,
                                                            std::span<const int32_t> tokens) {
    const auto found = by_hash_.find(hash);
    if (found == by_hash_.end()) return std::nullopt;
    const auto it = found->second;
    const Entry& e = it->second;
    if (e.parent != parent || !std::equal(tokens.begin(), tokens.end(), e.tokens.begin(), e.tokens.end()))
        return std::nullopt;
    std::optional<Entry> out(std::move(it->second));
    bytes_ -= out->bytes.size();
    by_hash_.erase(found);
    entries_.erase(it);
    return out;
}

}  // namespace ember
