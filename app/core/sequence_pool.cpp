#include "app/core/sequence_pool.h"

#include <algorithm>

namespace ember::app {

SequencePool::SequencePool(ember::Model& model, size_t capacity)
    : model_(model), capacity_(std::max<size_t>(1, capacity)) {}

ember::Sequence& SequencePool::acquire(int64_t conversation_id) {
    auto it = std::find_if(seqs_.begin(), seqs_.end(), [&](const auto& p) { return p.first == conversation_id; });
    if (it != seqs_.end()) {
        seqs_.splice(seqs_.begin(), seqs_, it);
        return *seqs_.front().second;
    }
    if (seqs_.size() >= capacity_) {
        seqs_.pop_back();  // frees its KV blocks for the newcomer
        ++evictions_;
    }
    seqs_.emplace_front(conversation_id, std::make_unique<ember::Sequence>(model_));
    return *seqs_.front().second;
}

void SequencePool::drop(int64_t conversation_id) {
    seqs_.remove_if([&](const auto& p) { return p.first == conversation_id; });
}

void SequencePool::clear() { seqs_.clear(); }

bool SequencePool::contains(int64_t conversation_id) const {
    return std::any_of(seqs_.begin(), seqs_.end(), [&](const auto& p) { return p.first == conversation_id; });
}

}  // namespace ember::app
