// The host arrays of one forward pass (kernels/backend.h BatchInfo), built sequence by
// sequence over KV cache sequences: the Scheduler fills one per step, Sequence::prefill (a
// bare forward pass) and the perplexity tool one per chunk.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/kv_cache.h"

namespace ember {

class KvBatch {
public:
    // Adds `tokens` of KV sequence `seq` at positions first_pos, first_pos + 1, ..., written
    // to `slots` (reserved by KvCache::append). outputs: how many of the last tokens' logits
    // are wanted (1: the last one's; a speculative pass wants every drafted position's).
    void add(int32_t seq, std::span<const int32_t> tokens, std::span<const int32_t> slots, int32_t first_pos,
             int32_t outputs);
    // The pass over what was added; its spans point into this object (valid until the next add).
    BatchInfo info(const KvCache& kv);
    int32_t n_seqs() const { return static_cast<int32_t>(seqs_.size()); }

private:
    std::vector<int32_t> tokens_, positions_, seq_of_, slots_, table_, rows_, seqs_, state_slots_;
};

}  // namespace ember
