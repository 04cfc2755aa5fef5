// Speculative decoding's acceptance rule: a proposer (prompt lookup, a draft model) guesses a
// continuation, the target model scores every guessed position in one pass, and this decides
// how much of the guess stands and which token follows, so that the tokens come out with
// exactly the distribution plain sampling has (Leviathan et al. 2023, Chen et al. 2023):
//   accept x_i with probability min(1, p(x_i) / q(x_i)); at the first rejection draw from
//   norm(max(0, p - q)); when every guess stands, draw the bonus token from the last row.
// p is the target's distribution at the position after the request's sampling transforms
// (Sampler::distribution), q the proposer's. A point-mass proposer (prompt lookup) has
// q(x_i) = 1: x_i stands with probability p(x_i), and a rejection draws from p without x_i.
// Both are sparse (supports). max(0, p - q) is zero wherever p is, so the residual over the
// union of the two supports is the residual over p's alone: q is only looked up there.
// Greedy is the special case where p is a point mass: a guess stands when it is the argmax.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampling/sampler.h"

namespace ember {

struct DraftProposal {
    std::vector<int32_t> tokens;  // proposed continuation
    // probs[i]: the proposer's distribution at position i after the request's sampling
    // transforms, as its support (Sampler::distribution: the top-k / top-p / min-p survivors),
    // sorted by token id; a token not listed has q = 0. Empty for a point-mass proposer (prompt
    // lookup). Sparse: a dense row would be n_vocab floats per drafted token (4.8 MB for 8
    // tokens at a 150k vocabulary), the support is what the request may sample (40 by default).
    std::vector<std::vector<TokenProb>> probs;
};

// One position's verdict: whether the guess stands, and the token the sequence gets there
// (the guess, or the draw from the residual).
struct DraftJudgement {
    bool accepted = false;
    int32_t token = -1;
};

// The rule at position i of `proposal` (i < tokens.size()), given the target's distribution
// `p` there. Draws from `sampler`'s RNG only when the outcome is uncertain (never when greedy).
DraftJudgement judge_draft_token(Sampler& sampler, std::span<const TokenProb> p, const DraftProposal& proposal,
                                 size_t i);

struct DraftVerdict {
    int32_t accepted = 0;  // leading proposal tokens that stand
    int32_t next = -1;     // the token after them: a residual draw, or the bonus token
};

// The whole draft: target(i) gives the target's distribution at position i (i = 0 ..
// tokens.size(); row tokens.size() is the bonus row). It is called in order and only while
// every earlier guess stood, so a caller may advance per-position state (penalty history, a
// grammar) inside it.
DraftVerdict verify_draft(Sampler& sampler, const DraftProposal& proposal,
                          const std::function<std::vector<TokenProb>(size_t)>& target);

// Checks a proposal's shape against the vocabulary: tokens in range; probs empty or one row per
// token, each with ids in range and strictly increasing, no negative probability, and its own
// token in its support (a token drawn from q has q > 0). Throws ember::Error naming what is wrong.
void check_proposal(const DraftProposal& proposal, int32_t n_vocab);

}  // namespace ember
