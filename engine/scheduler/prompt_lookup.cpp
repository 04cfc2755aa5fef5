#include "engine/scheduler/prompt_lookup.h"

#include <algorithm>

namespace ember {

std::vector<int32_t> lookup_draft(std::span<const int32_t> tokens, const LookupOptions& opts) {
    const auto n_tokens = static_cast<int64_t>(tokens.size());
    for (int64_t n = opts.max_ngram; n >= std::max(1, opts.min_ngram); --n) {
        if (n >= n_tokens) continue;
        const auto suffix = tokens.subspan(static_cast<size_t>(n_tokens - n));
        // Latest start first: the most recent occurrence is the likeliest to go on the same way.
        for (int64_t at = n_tokens - n - 1; at >= 0; --at) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + at)) continue;
            const int64_t from = at + n;
            const int64_t count = std::min<int64_t>(opts.max_draft, n_tokens - from);
            return {tokens.begin() + from, tokens.begin() + from + count};
        }
    }
    return {};
}

}  // namespace ember
