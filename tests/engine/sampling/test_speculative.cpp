// The rejection rule of speculative sampling (engine/sampling/speculative.h) on hand-made
// distributions: exact outcomes where the rule is certain, and the output distribution over
// many draws where it is not.
//
// Frequency bounds: each check compares n = 200000 draws' frequency of a token with its
// probability p. The count is Binomial(n, p): its standard deviation is at most
// sqrt(n / 4) ≈ 224, so a tolerance of 0.006 n = 1200 is more than 5.3 standard deviations;
// a false failure has probability < 1.2e-7 per check (two-sided normal tail), and the seeds
// are fixed, so the test is deterministic besides.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/sampling/speculative.h"
#include "kernels/common/error.h"

using namespace ember;

namespace {

constexpr int kDraws = 200000;
constexpr double kTolerance = 0.006;

SamplingParams plain(uint64_t seed) {
    SamplingParams s;
    s.temperature = 1.0f;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    s.seed = seed;
    return s;
}

// What comes out of kDraws guesses drawn from q (sorted by id), each judged against p: how
// often each token (below n_tokens) came out, and how many guesses stood.
struct Outcomes {
    std::vector<int> count;
    double accepted = 0;
};
Outcomes judge_draws(const std::vector<TokenProb>& p, const std::vector<TokenProb>& q, size_t n_tokens, uint64_t seed) {
    Sampler proposer(plain(seed));
    Sampler s(plain(seed + 2));
    Outcomes o{std::vector<int>(n_tokens, 0)};
    for (int n = 0; n < kDraws; ++n) {
        const DraftProposal d{{proposer.draw_from(q)}, {q}};
        const DraftJudgement j = judge_draft_token(s, p, d, 0);
        ++o.count[static_cast<size_t>(j.token)];
        o.accepted += j.accepted;
    }
    return o;
}

}  // namespace

TEST_CASE("greedy guesses stand exactly when they are the argmax") {
    Sampler s(SamplingParams::greedy());
    const std::vector<TokenProb> argmax_is_2 = {{2, 1.0f}};
    DraftProposal d{{2, 5, 7}, {}};
    auto target = [&](size_t) { return argmax_is_2; };
    const DraftVerdict v = verify_draft(s, d, target);
    CHECK_EQ(v.accepted, 1);
    CHECK_EQ(v.next, 2);  // the rejected 5 is replaced by the argmax
    DraftProposal all{{2, 2}, {}};
    const DraftVerdict w = verify_draft(s, all, target);
    CHECK_EQ(w.accepted, 2);
    CHECK_EQ(w.next, 2);  // the bonus token
}

TEST_CASE("a point-mass guess keeps the target's distribution") {
    const std::vector<TokenProb> p = {{0, 0.5f}, {1, 0.3f}, {2, 0.2f}};
    Sampler s(plain(11));
    DraftProposal d{{1}, {}};
    std::vector<int> count(3, 0);
    int accepted = 0;
    for (int n = 0; n < kDraws; ++n) {
        const DraftJudgement j = judge_draft_token(s, p, d, 0);
        ++count[static_cast<size_t>(j.token)];
        accepted += j.accepted;
    }
    for (const TokenProb& x : p) CHECK(std::abs(count[static_cast<size_t>(x.id)] - x.p * kDraws) < kTolerance * kDraws);
    CHECK(std::abs(accepted - 0.3 * kDraws) < kTolerance * kDraws);  // acceptance is p(guess)
}

TEST_CASE("a proposer's distribution: accept min(1, p/q), else the residual") {
    // q puts too much on token 1 and too little on 0: the output must still follow p.
    const std::vector<TokenProb> p = {{0, 0.5f}, {1, 0.2f}, {2, 0.3f}};
    const std::vector<TokenProb> q = {{0, 0.1f}, {1, 0.7f}, {2, 0.2f}};
    const Outcomes o = judge_draws(p, q, 3, 5);
    for (const TokenProb& x : p)
        CHECK(std::abs(o.count[static_cast<size_t>(x.id)] - x.p * kDraws) < kTolerance * kDraws);
    // Acceptance is sum_x min(p, q) = 0.1 + 0.2 + 0.2.
    CHECK(std::abs(o.accepted - 0.5 * kDraws) < kTolerance * kDraws);
}

TEST_CASE("sparse supports: the residual over their union, tokens only one side lists") {
    // p (top-k of the target) and q (top-k of the draft) overlap on token 5 only; q's other
    // token 9 is outside p's support, p's 2 and 7 outside q's. Accept 5 with min(1, p/q): the
    // output must still follow p, with the residual norm(max(0, p - q)) = {2: .3, 5: .1, 7: .2}.
    const std::vector<TokenProb> p = {{2, 0.3f}, {5, 0.5f}, {7, 0.2f}};
    const std::vector<TokenProb> q = {{5, 0.4f}, {9, 0.6f}};  // sorted by id
    const Outcomes o = judge_draws(p, q, 10, 21);
    for (const TokenProb& x : p)
        CHECK(std::abs(o.count[static_cast<size_t>(x.id)] - x.p * kDraws) < kTolerance * kDraws);
    CHECK(o.count[9] == 0);  // q's own token, which p cannot produce, never comes out
    // Acceptance is sum_x min(p, q) = min(0.5, 0.4).
    CHECK(std::abs(o.accepted - 0.4 * kDraws) < kTolerance * kDraws);
}

TEST_CASE("a guess the target cannot produce is rejected without a draw of its own") {
    const std::vector<TokenProb> p = {{3, 1.0f}};
    Sampler s(plain(1));
    DraftProposal d{{4}, {}};
    const DraftJudgement j = judge_draft_token(s, p, d, 0);
    CHECK_FALSE(j.accepted);
    CHECK_EQ(j.token, 3);
}

TEST_CASE("verify_draft asks for rows in order and only while guesses stand") {
    Sampler s(SamplingParams::greedy());
    DraftProposal d{{1, 2, 3}, {}};
    std::vector<size_t> asked;
    const DraftVerdict v = verify_draft(s, d, [&](size_t i) {
        asked.push_back(i);
        return std::vector<TokenProb>{{i == 1 ? 9 : static_cast<int32_t>(i + 1), 1.0f}};
    });
    CHECK_EQ(v.accepted, 1);
    CHECK_EQ(v.next, 9);
    CHECK_EQ(asked, std::vector<size_t>{0, 1});
}

TEST_CASE("sampler distribution matches what it samples") {
    SamplingParams sp;
    sp.temperature = 0.7f;
    sp.top_k = 3;
    sp.top_p = 0.9f;
    sp.min_p = 0.0f;
    Sampler s(sp);
    std::vector<float> l = {1.0f, 2.0f, 0.5f, 1.5f, -1.0f};
    const std::vector<TokenProb> d = s.distribution(l, {});
    REQUIRE_FALSE(d.empty());
    double sum = 0;
    for (const TokenProb& x : d) sum += x.p;
    CHECK(std::abs(sum - 1.0) < 1e-6);
    CHECK_EQ(d.front().id, 1);
    for (const TokenProb& x : d) CHECK((x.id == 1 || x.id == 3 || x.id == 0));
    Sampler g(SamplingParams::greedy());
    std::vector<float> l2 = {1.0f, 2.0f, 0.5f};
    const std::vector<TokenProb> gd = g.distribution(l2, {});
    REQUIRE_EQ(gd.size(), 1u);
    CHECK_EQ(gd[0].id, 1);
}

TEST_CASE("a malformed proposal is named") {
    CHECK_THROWS_WITH_AS(check_proposal({{7}, {}}, 5), doctest::Contains("outside the vocabulary"), Error);
    CHECK_THROWS_WITH_AS(check_proposal({{1, 2}, {{{1, 0.5f}, {2, 0.5f}}}}, 5), doctest::Contains("rows for"), Error);
    CHECK_THROWS_WITH_AS(check_proposal({{1}, {{{2, 0.5f}, {1, 0.5f}}}}, 5), doctest::Contains("must rise"), Error);
    CHECK_THROWS_WITH_AS(check_proposal({{1}, {{{1, 0.5f}, {5, 0.5f}}}}, 5), doctest::Contains("must rise"), Error);
    CHECK_THROWS_WITH_AS(check_proposal({{1}, {{{1, 1.5f}, {3, -0.5f}}}}, 5), doctest::Contains("probability -0.5"),
                         Error);
    CHECK_THROWS_WITH_AS(check_proposal({{1}, {{{0, 0.5f}, {3, 0.5f}}}}, 5), doctest::Contains("in its own row"),
                         Error);
    CHECK_NOTHROW(check_proposal({{1}, {}}, 5));
    CHECK_NOTHROW(check_proposal({{1, 3}, {{{1, 1.0f}}, {{0, 0.25f}, {3, 0.75f}}}}, 5));
}
