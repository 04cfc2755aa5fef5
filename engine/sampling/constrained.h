// Sampling under a grammar (engine/grammar): the same Sampler, its choice limited to the
// tokens the sequence's TokenMatcher allows. The cheap path first, as llama.cpp does: the
// backend's best candidates are checked one by one (most steps find an allowed one there);
// only when none is allowed does the caller fetch the whole row for the full mask (a trie
// walk over the vocabulary).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/grammar/token_matcher.h"
#include "engine/sampling/sampler.h"

namespace ember {

class Tokenizer;

// Candidates the backend is asked for when a grammar constrains a row (more than greedy's
// one, so that a forced structure token is usually among them).
constexpr int32_t kGrammarCandidates = 32;

// The vocabulary as the grammar sees it: each token's exact bytes; control, unknown and
// unused tokens never allowed; end-of-generation tokens only where the grammar can end.
std::shared_ptr<const grammar::TokenVocab> grammar_vocab(const Tokenizer& tok);

// From the backend's candidates (sorted, adjustments applied): the sampler's pick among the
// allowed ones, or nullopt when none is allowed.
std::optional<int32_t> sample_top_allowed(Sampler& sampler, const grammar::TokenMatcher& m,
                                          std::span<const TopKCandidate> top);
// From a whole row with the adjustments already applied (downloaded after Backend::top_k):
// the sampler's pick among all allowed tokens (the full mask). Throws ember::Error when the
// grammar allows no token at all.
int32_t sample_adjusted_allowed(Sampler& sampler, const grammar::TokenMatcher& m, std::span<const float> row);
// From a raw row on the host (Sampler::sample's input): disallowed tokens set to -inf,
// then Sampler::sample.
int32_t sample_row_allowed(Sampler& sampler, const grammar::TokenMatcher& m, std::span<float> logits,
                           std::span<const int32_t> history);

}  // namespace ember
