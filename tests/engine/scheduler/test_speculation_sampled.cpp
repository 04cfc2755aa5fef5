// Sampled speculative decoding keeps the output distribution: on real models (stories260K,
// SmolLM2) and fixed prompts that make prompt lookup guess from the first decode on, the
// first few tokens of many seeded requests are counted with and without lookup, and the two
// frequency tables must agree by a chi-square test of homogeneity (chi_square.h). The same
// with a draft model (stories260K F32 drafted by its own Q8_0 copy, whose proposals carry the
// draft's distribution, DraftProposal::probs).
//
// False-failure probability: each comparison (the tokens at each position, and the whole
// tuple) rejects a true "same distribution" with probability alpha = 1e-4 (asymptotically);
// a test case makes (positions + 1) comparisons per configuration, so it fails by chance
// with probability below 1e-4 * (positions + 1) * configurations (5e-4 .. 1e-3 here). The
// seeds are fixed and the kernels batch-invariant, so every run gives the same counts.
// Power: a rule that accepted every guess makes the drafted continuation far too frequent;
// the last case here checks that such a shift is rejected by the same bound.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "chi_square.h"
#include "cpu_model.h"
#include "engine/quant/quantizer.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/scheduler.h"
#include "spec_runs.h"
#include "test_data.h"
#include "test_util.h"

using namespace ember;

namespace {

constexpr double kAlpha = 1e-4;

struct Counts {
    std::vector<std::map<int32_t, int64_t>> at;  // per position: token -> count
    std::map<std::string, int64_t> tuple;        // the whole first `positions` tokens
    int64_t drafted = 0, accepted = 0;
};

// With `spec`, prompt lookup, or `draft` when given.
Counts count_tokens(Model& model, const EngineRequest& base, int n_seeds, int positions, bool spec,
                    DraftModel* draft = nullptr) {
    std::vector<EngineRequest> reqs;
    for (int s = 0; s < n_seeds; ++s) {
        EngineRequest r = base;
        // Disjoint seeds: the same seed would draw the same first token both ways, and the
        // test needs two independent samples.
        r.sampling.seed = (spec ? 1'000'000 : 1000) + static_cast<uint64_t>(s);
        r.max_tokens = positions;
        r.ignore_eog = true;
        reqs.push_back(r);
    }
    // Every pass may carry drafts: the pass-cost rule would leave a full batch of 16 few of them
    // (360 of 4000 seeds on stories260K), and this tests the rejection rule, not when to draft.
    SchedulerOptions o;
    o.max_batch = 16;
    o.lookup = spec && !draft;
    o.draft = spec ? draft : nullptr;
    o.draft_by_pass_cost = false;
    const test::Batch b = test::run_all(model, reqs, o);
    Counts c;
    c.at.resize(static_cast<size_t>(positions));
    for (const test::Ended& e : b.out) {
        REQUIRE_MESSAGE(e.error.empty(), e.error);
        REQUIRE(e.ids.size() == static_cast<size_t>(positions));
        std::string key;
        for (int t = 0; t < positions; ++t) {
            ++c.at[static_cast<size_t>(t)][e.ids[static_cast<size_t>(t)]];
            key += std::to_string(e.ids[static_cast<size_t>(t)]) + " ";
        }
        ++c.tuple[key];
        c.drafted += e.stats.drafted_tokens;
        c.accepted += e.stats.accepted_tokens;
    }
    return c;
}

// Lookup (or `draft`) guesses in many requests, and some but not all guesses stand: the rule's
// both branches ran. Then every comparison stays within its bound.
void same_distribution(Model& model, const EngineRequest& base, int n_seeds, int positions,
                       DraftModel* draft = nullptr) {
    const Counts plain = count_tokens(model, base, n_seeds, positions, false);
    const Counts spec = count_tokens(model, base, n_seeds, positions, true, draft);
    test::info("%d seeds: %s drafted %lld, accepted %lld", n_seeds, draft ? "the draft" : "lookup",
               static_cast<long long>(spec.drafted), static_cast<long long>(spec.accepted));
    CHECK(plain.drafted == 0);
    CHECK(spec.drafted >= n_seeds / 8);
    CHECK(spec.accepted > 0);
    CHECK(spec.accepted < spec.drafted);
    for (int t = 0; t < positions; ++t) {
        const test::ChiSquare c =
            test::chi_square_same(spec.at[static_cast<size_t>(t)], plain.at[static_cast<size_t>(t)], kAlpha);
        test::info("position %d: X^2 = %.2f, %d dof, bound %.2f", t, c.statistic, c.dof, c.critical);
        CHECK_FALSE(c.rejects());
    }
    const test::ChiSquare c = test::chi_square_same(spec.tuple, plain.tuple, kAlpha);
    test::info("first %d tokens together: X^2 = %.2f, %d dof, bound %.2f", positions, c.statistic, c.dof, c.critical);
    CHECK_FALSE(c.rejects());
}

// Hot enough that the guesses are often wrong: both branches of the rule run.
EngineRequest sampled(std::string prompt) {
    EngineRequest r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 1.5f;
    r.sampling.top_k = 40;  // the backend's candidates
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    return r;
}

// The stories repeat their first sentence: lookup guesses the rest of it. In the first the
// model often goes another way (many guesses rejected), in the second it mostly follows.
const char* kBallRepeat = "Tom had a red ball. He liked to play with it. Tom had a red ball. He";
const char* kStoryRepeat =
    "Once upon a time, there was a little girl named Lily. She liked to play with her ball. "
    "Once upon a time, there was a little";

}  // namespace

TEST_CASE("sampled stories260K: the same token frequencies with lookup (backend candidates)") {
    auto model = test::load_cpu_model(test::testdata(test::kStories), 256, 16, 1);
    same_distribution(*model, sampled(kBallRepeat), 4000, 4);
}

TEST_CASE("sampled stories260K with penalties on whole rows: the same token frequencies with lookup") {
    auto model = test::load_cpu_model(test::testdata(test::kStories), 256, 16, 1);
    EngineRequest r = sampled(kStoryRepeat);
    r.sampling.top_k = 0;  // the whole row on the host
    r.sampling.repeat_penalty = 1.3f;
    r.sampling.presence_penalty = 0.2f;
    same_distribution(*model, r, 4000, 4);
}

TEST_CASE("sampled stories260K with a draft model (its Q8_0 copy): the same token frequencies") {
    auto model = test::load_cpu_model(test::testdata(test::kStories), 256, 16, 1);
    const test::TempDir dir;
    QuantizeOptions q;
    q.input = test::testdata(test::kStories);
    q.output = dir.file("draft-Q8_0.gguf");
    q.type = "Q8_0";
    q.n_threads = 2;
    quantize_model(q);
    auto small = test::load_cpu_model(q.output, 256, 16, 1);
    DraftModel draft(*small, *model, 4);
    REQUIRE(draft.paying_length(0, 0) > 0);  // it drafts from the first decode on
    same_distribution(*model, sampled(kBallRepeat), 4000, 4, &draft);
}

TEST_CASE("sampled SmolLM2: the same token frequencies with lookup") {
    auto model = test::load_cpu_model(test::test_model(test::kSmolLM2), 256, 16, 2);
    EngineRequest r = sampled(
        "<|im_start|>user\nRepeat after me: the quick brown fox jumps over the lazy dog.<|im_end|>\n"
        "<|im_start|>assistant\nThe quick brown");
    r.prompt_parse_special = true;
    same_distribution(*model, r, 800, 3);
}

TEST_CASE("the bound rejects what an accept-always rule would produce") {
    // Plain sampling puts 0.4 on the drafted token; a rule that always accepted the guess
    // (drafted in, say, half of the requests) raises that to 0.4 + 0.5 * 0.6 = 0.7.
    std::map<int32_t, int64_t> plain{{1, 1600}, {2, 1200}, {3, 1200}};
    std::map<int32_t, int64_t> broken{{1, 2800}, {2, 600}, {3, 600}};
    CHECK(test::chi_square_same(broken, plain, kAlpha).rejects());
    // And a difference of one standard deviation per cell passes.
    std::map<int32_t, int64_t> close{{1, 1631}, {2, 1173}, {3, 1196}};
    CHECK_FALSE(test::chi_square_same(close, plain, kAlpha).rejects());
}
