// Prompt lookup (n-gram drafting): the cheapest proposer for speculative decoding. Chat is
// full of text the model repeats (code being edited, quoted passages, names); when the last
// few tokens occurred before, in the prompt or the text so far, what followed them then is a
// good guess for what follows now. The scheduler checks the guess in one pass (greedy: exact
// match), so a wrong guess costs compute, never a different output.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ember {

struct LookupOptions {
    int32_t max_ngram = 3;  // the longest suffix matched first
    int32_t min_ngram = 2;  // shorter suffixes are not worth a pass's extra tokens
    int32_t max_draft = 8;  // tokens proposed at most
};

// Up to opts.max_draft tokens that followed the most recent earlier occurrence of the
// longest suffix of `tokens` (max_ngram down to min_ngram tokens) found in `tokens`; empty
// when none is.
std::vector<int32_t> lookup_draft(std::span<const int32_t> tokens, const LookupOptions& opts = {});

}  // namespace ember
