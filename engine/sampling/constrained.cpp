// Sampling under a grammar (engine/sampling/constrained.h).
#include "engine/sampling/constrained.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/tokenizer/tokenizer.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

[[noreturn]] void fail_none_allowed() {
    throw Error(
        "grammar: no token of the vocabulary can continue the output here (the grammar needs text "
        "no token spells)");
}

}  // namespace

std::shared_ptr<const grammar::TokenVocab> grammar_vocab(const Tokenizer& tok) {
    const int32_t n = tok.n_vocab();
    std::vector<std::string> pieces(static_cast<size_t>(n));
    std::vector<bool> usable(static_cast<size_t>(n), false);
    for (int32_t id = 0; id < n; ++id) {
        const TokenType t = tok.token_type(id);
        if (t == TokenType::Control || t == TokenType::Unknown || t == TokenType::Unused) continue;
        pieces[static_cast<size_t>(id)] = tok.token_to_piece(id);
        usable[static_cast<size_t>(id)] = true;
    }
    return grammar::TokenVocab::build(pieces, usable, tok.eog_ids());
}

std::optional<int32_t> sample_top_allowed(Sampler& sampler, const grammar::TokenMatcher& m,
                                          std::span<const TopKCandidate> top) {
    std::vector<TopKCandidate> allowed;
    for (const TopKCandidate& c : top) {
        if (!m.allows(c.id)) continue;
        if (sampler.top_k_candidates() == 1) return c.id;  // greedy: the best allowed one
        allowed.push_back(c);
    }
    if (allowed.empty()) return std::nullopt;
    return sampler.sample_top(allowed);
}

int32_t sample_adjusted_allowed(Sampler& sampler, const grammar::TokenMatcher& m, std::span<const float> row) {
    std::vector<int32_t> ids;
    m.allowed_tokens(ids);
    std::vector<TopKCandidate> cand;
    for (int32_t id : ids)
        if (static_cast<size_t>(id) < row.size() && !std::isnan(row[static_cast<size_t>(id)]))
            cand.push_back({id, row[static_cast<size_t>(id)]});
    if (ids.empty()) fail_none_allowed();
    // Backend::top_k's order: logit descending, then id ascending; at most k (0: all).
    const int32_t k = sampler.top_k_candidates();
    const size_t keep = k > 0 ? std::min(cand.size(), static_cast<size_t>(k)) : cand.size();
    auto better = [](const TopKCandidate& a, const TopKCandidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    std::partial_sort(cand.begin(), cand.begin() + static_cast<ptrdiff_t>(keep), cand.end(), better);
    cand.resize(keep);
    return sampler.sample_top(cand);
}

int32_t sample_row_allowed(Sampler& sampler, const grammar::TokenMatcher& m, std::span<float> logits,
                           std::span<const int32_t> history) {
    std::vector<int32_t> ids;
    m.allowed_tokens(ids);
    if (ids.empty()) fail_none_allowed();
    std::vector<float> kept(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) kept[i] = logits[static_cast<size_t>(ids[i])];
    std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
    for (size_t i = 0; i < ids.size(); ++i) logits[static_cast<size_t>(ids[i])] = kept[i];
    return sampler.sample(logits, history);
}

}  // namespace ember
