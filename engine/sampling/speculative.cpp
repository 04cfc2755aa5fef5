// The rejection rule of speculative sampling (speculative.h).
#include "engine/sampling/speculative.h"

#include <algorithm>

#include "kernels/common/error.h"

namespace ember {
namespace {

float prob_of(std::span<const TokenProb> d, int32_t token) {
    for (const TokenProb& x : d)
        if (x.id == token) return x.p;
    return 0.0f;
}

// q(token) at position i; a point-mass proposer puts all of it on its guess. A row is sorted
// by id (check_proposal): a binary search, so a full-vocabulary support costs log n a lookup.
float proposer_prob(const DraftProposal& proposal, size_t i, int32_t token) {
    if (proposal.probs.empty()) return token == proposal.tokens[i] ? 1.0f : 0.0f;
    const std::vector<TokenProb>& q = proposal.probs[i];
    const auto it =
        std::lower_bound(q.begin(), q.end(), token, [](const TokenProb& x, int32_t id) { return x.id < id; });
    return it != q.end() && it->id == token ? it->p : 0.0f;
}

// norm(max(0, p - q)) as weights (draw_from normalizes), over p's support: off it p - q <= 0.
// p - q is positive somewhere after a rejection unless p == q up to rounding; then p itself (a
// rejection is then a null event).
std::vector<TokenProb> residual(std::span<const TokenProb> p, const DraftProposal& proposal, size_t i) {
    std::vector<TokenProb> r;
    for (const TokenProb& x : p) {
        const float w = x.p - proposer_prob(proposal, i, x.id);
        if (w > 0) r.push_back({x.id, w});
    }
    if (r.empty()) r.assign(p.begin(), p.end());
    return r;
}

}  // namespace

DraftJudgement judge_draft_token(Sampler& sampler, std::span<const TokenProb> p, const DraftProposal& proposal,
                                 size_t i) {
    const int32_t guess = proposal.tokens[i];
    const float pp = prob_of(p, guess);
    const float qq = proposer_prob(proposal, i, guess);
    // Certain outcomes draw nothing: greedy stays deterministic and a lookup guess the target
    // cannot produce costs no randomness.
    bool accepted = pp >= qq && pp > 0;
    if (!accepted && pp > 0) accepted = sampler.uniform() * qq < pp;
    if (accepted) return {true, guess};
    return {false, sampler.draw_from(residual(p, proposal, i))};
}

DraftVerdict verify_draft(Sampler& sampler, const DraftProposal& proposal,
                          const std::function<std::vector<TokenProb>(size_t)>& target) {
    DraftVerdict v;
    for (size_t i = 0; i < proposal.tokens.size(); ++i) {
        const DraftJudgement j = judge_draft_token(sampler, target(i), proposal, i);
        if (!j.accepted) {
            v.next = j.token;
            return v;
        }
        ++v.accepted;
    }
    v.next = sampler.draw_from(target(proposal.tokens.size()));
    return v;
}

namespace {

void check_proposal_row(std::span<const TokenProb> row, int32_t token, int32_t n_vocab) {
    int32_t last = -1;
    float mass = 0;
    for (const TokenProb& x : row) {
        if (x.id <= last || x.id >= n_vocab)
            throw Error("draft proposal: a probability row's token ids must rise within the vocabulary of " +
                        std::to_string(n_vocab) + " (token " + std::to_string(x.id) + " after " + std::to_string(last) +
                        ")");
        if (!(x.p >= 0))
            throw Error("draft proposal: token " + std::to_string(x.id) + " has probability " + std::to_string(x.p));
        if (x.id == token) mass = x.p;
        last = x.id;
    }
    if (!(mass > 0))
        throw Error("draft proposal: token " + std::to_string(token) +
                    " has probability 0 in its own row (a proposal is drawn from its row)");
}

}  // namespace

void check_proposal(const DraftProposal& proposal, int32_t n_vocab) {
    for (int32_t t : proposal.tokens)
        if (t < 0 || t >= n_vocab)
            throw Error("draft proposal: token " + std::to_string(t) + " is outside the vocabulary of " +
                        std::to_string(n_vocab));
    if (proposal.probs.empty()) return;
    if (proposal.probs.size() != proposal.tokens.size())
        throw Error("draft proposal: " + std::to_string(proposal.probs.size()) + " probability rows for " +
                    std::to_string(proposal.tokens.size()) + " tokens");
    for (size_t i = 0; i < proposal.tokens.size(); ++i)
        check_proposal_row(proposal.probs[i], proposal.tokens[i], n_vocab);
}

}  // namespace ember
