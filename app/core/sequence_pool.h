// One KV-cache sequence per conversation, so a chat's next turn only processes its new
// tokens (Sequence::generate keeps the cached common prefix). The cache is sized for
// `capacity` sequences of full context (LoadOptions::n_seqs); beyond that the least
// recently used conversation gives up its cache and will re-process its history next time.
// Engine-thread only.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <utility>

#include "engine/runtime/sequence.h"

namespace ember::app {

class SequencePool {
public:
    SequencePool(ember::Model& model, size_t capacity);

    // The conversation's sequence, created (after evicting the LRU one if full) if needed.
    ember::Sequence& acquire(int64_t conversation_id);
    void drop(int64_t conversation_id);
    void clear();

    bool contains(int64_t conversation_id) const;
    size_t size() const { return seqs_.size(); }
    size_t capacity() const { return capacity_; }
    int64_t evictions() const { return evictions_; }

private:
    ember::Model& model_;
    size_t capacity_;
    int64_t evictions_ = 0;
    std::list<std::pair<int64_t, std::unique_ptr<ember::Sequence>>> seqs_;  // most recent first
};

}  // namespace ember::app
