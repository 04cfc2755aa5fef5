// The scheduler's estimate of what prefilling a run of prompt tokens costs, in multiply-adds
// from the model's shape, so that --max-stall-ms can cut a chunk to what fits next to the
// running decodes (the scheduler learns the seconds per unit from its passes).
#pragma once
#include <cstdint>

#include "engine/models/model_config.h"

namespace ember {

struct PrefillCost {
    double weights = 0;      // per token: the layers' weight multiply-adds
    double attn_global = 0;  // per key each token attends to, over the global layers
    double attn_window = 0;  // the same over the sliding-window layers
    int64_t window = 0;      // their window in tokens (0: none)

    // An attention multiply-add counts 4: float FMAs against the weights' 8-bit dot products
    // (4 per lane); with equal weights the estimate fell behind as a long prompt's chunks moved
    // on (SmolLM2: pauses of ~0.3 s for a 250 ms target; with 4, 0.25 s).
    static PrefillCost of(const ModelConfig& c);

    // Tokens [start, start + n): each the weights once, and its attention to the keys it sees
    // (position p: p + 1 keys on a global layer, min(p + 1, window) on a sliding one).
    double work(int64_t start, int64_t n) const;
    // The most tokens from `start` whose work stays within `budget` (at most `limit`).
    int32_t fit(int64_t start, double budget, int32_t limit) const;
};

}  // namespace ember
