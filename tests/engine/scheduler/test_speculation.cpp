// Speculative decoding by prompt lookup (EngineRequest::lookup): lookup_draft's guesses on
// token lists, then greedy outputs on real models (stories260K, SmolLM2) token for token the
// same with and without lookup, alone and in a full batch, with the KV cache rolled back past
// rejected guesses so a kept conversation's next turn is unchanged too.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_model.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/draft_pace.h"
#include "engine/scheduler/prompt_lookup.h"
#include "engine/scheduler/scheduler.h"
#include "spec_runs.h"
#include "test_data.h"
#include "test_util.h"

using namespace ember;

TEST_CASE("lookup_draft continues the most recent occurrence of the longest suffix") {
    // Suffix [3 4 5] occurs at 2 (followed by 6 7) and [4 5] later at 8 (followed by 9):
    // the longer match wins.
    const std::vector<int32_t> t{1, 2, 3, 4, 5, 6, 7, 4, 5, 9, 3, 4, 5};
    CHECK(lookup_draft(t, {3, 2, 8}) == std::vector<int32_t>{6, 7, 4, 5, 9, 3, 4, 5});
    CHECK(lookup_draft(t, {3, 2, 2}) == std::vector<int32_t>{6, 7});
    // Only [4 5] allowed: its latest earlier occurrence, at 7, goes on with 9.
    CHECK(lookup_draft(t, {2, 2, 3}) == std::vector<int32_t>{9, 3, 4});
    CHECK(lookup_draft(std::vector<int32_t>{1, 2, 3, 4}, {3, 2, 8}).empty());  // nothing repeats
    CHECK(lookup_draft(std::vector<int32_t>{7, 7}, {3, 2, 8}).empty());        // shorter than min_ngram + 1
    CHECK(lookup_draft(std::vector<int32_t>{7, 7, 7}, {3, 2, 8}) == std::vector<int32_t>{7});
}

TEST_CASE("draft pace: longer while guesses stand, shorter when not, off after misses in a row") {
    const DraftPaceOptions o{8, 16, 4};
    DraftPace p;
    CHECK(p.limit(o) == 8);
    p = next_pace(p, o, 3, 3);  // all stood: twice the longer of cap and draft, at most max_draft
    CHECK(p.cap == 8);
    p = next_pace(p, o, 8, 2);  // two stood: what held plus one
    CHECK(p.cap == 3);
    p = next_pace(p, o, 3, 0);  // several guesses, none stood: half
    CHECK(p.cap == 1);
    // Single guesses that miss: pauses of 16, 32, 64 decodes, then off for good.
    for (int32_t miss = 1; miss <= 4; ++miss) {
        p = next_pace(p, o, 1, 0);
        CHECK(p.misses == miss);
        CHECK(p.off == (miss == 4));
        CHECK(p.pause == 16 << (miss - 1));
        if (miss == 4) break;
        int32_t skipped = 0;  // decodes without a draft before the next one
        while (!p.may_draft()) ++skipped;
        CHECK(skipped == 16 << (miss - 1));
    }
    for (int32_t d = 0; d < 1000; ++d) CHECK_FALSE(p.may_draft());
    // A guess that stands resets the count.
    DraftPace r;
    r = next_pace(r, o, 1, 0);
    r = next_pace(r, o, 1, 0);
    r = next_pace(r, o, 1, 1);
    CHECK(r.misses == 0);
    CHECK_FALSE(r.off);
    CHECK(r.cap == 2);
}

namespace {

using test::load_cpu_model;

using test::Batch;
using test::run_all;

EngineRequest greedy(std::string prompt, int32_t max_tokens) {
    EngineRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.sampling = SamplingParams::greedy();
    r.ignore_eog = true;  // the same length either way: every guess is checked to the end
    return r;
}

// Outputs with lookup equal those without, id for id; returns the drafted and accepted totals.
std::pair<int32_t, int32_t> same_with_lookup(Model& model, const std::vector<EngineRequest>& reqs, int32_t max_batch) {
    const Batch plain = run_all(model, reqs, false, max_batch);
    const Batch spec = run_all(model, reqs, true, max_batch);
    int32_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
        REQUIRE(plain.out[i].error.empty());
        REQUIRE(spec.out[i].error.empty());
        CHECK(plain.out[i].stats.drafted_tokens == 0);
        CHECK(spec.out[i].ids == plain.out[i].ids);
        CHECK(spec.out[i].text == plain.out[i].text);
        CHECK(spec.out[i].stats.generated_tokens == plain.out[i].stats.generated_tokens);
        CHECK(spec.out[i].stats.accepted_tokens <= spec.out[i].stats.drafted_tokens);
        drafted += spec.out[i].stats.drafted_tokens;
        accepted += spec.out[i].stats.accepted_tokens;
    }
    test::info("lookup: %d drafted, %d accepted; %llu passes with lookup, %llu without", drafted, accepted,
               static_cast<unsigned long long>(spec.steps), static_cast<unsigned long long>(plain.steps));
    CHECK(spec.steps <= plain.steps);  // each accepted guess is a pass saved, never one added
    return {drafted, accepted};
}

// A function to rewrite with a rename: the answer repeats most of the prompt.
const char* kCodeEdit =
    "<|im_start|>user\nRename the variable total to sum in this function and show the whole function:\n"
    "def add_all(values):\n    total = 0\n    for v in values:\n        total += v\n    return total\n"
    "<|im_end|>\n<|im_start|>assistant\n";

}  // namespace

TEST_CASE("greedy stories260K: the same ids with lookup, alone and in a full batch of 8") {
    auto model = load_cpu_model(test::testdata(test::kStories), 512, 8, 1);
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog",   "Lily wanted to",
                                              "One day, a big",   "Tom and Sue went", "The sun was",
                                              "Mom said",         "There was a bird"};
    std::vector<EngineRequest> reqs;
    for (const std::string& p : prompts) reqs.push_back(greedy(p, 160));
    const auto [drafted1, accepted1] = same_with_lookup(*model, {reqs[0]}, 1);
    CHECK(drafted1 > 0);
    const auto [drafted, accepted] = same_with_lookup(*model, reqs, 8);
    CHECK(drafted > 0);
    CHECK(accepted > 0);  // tiny stories repeat their phrases
}

TEST_CASE("greedy SmolLM2 code edit: the same ids with lookup, and guesses accepted") {
    auto model = load_cpu_model(test::test_model(test::kSmolLM2), 1024, 4, 2);
    EngineRequest edit = greedy(kCodeEdit, 64);
    edit.prompt_parse_special = true;
    std::vector<EngineRequest> reqs{edit, greedy("The capital of France is", 48), edit,
                                    greedy("def fib(n):\n    if n < 2:\n        return n\n", 48)};
    reqs[2].max_tokens = 40;  // ends earlier than its twin, mid-batch
    const auto [drafted, accepted] = same_with_lookup(*model, reqs, 4);
    CHECK(accepted * 4 > drafted);  // more than a quarter of the guesses hold (the prompt repeats)
}

TEST_CASE("a kept conversation continues the same after lookup rolled its cache back") {
    auto model = load_cpu_model(test::testdata(test::kStories), 512, 2, 1);
    auto turns = [&](bool lookup) {
        std::vector<std::string> texts;
        SchedulerOptions o;
        o.lookup = lookup;
        Scheduler s(*model, o);
        std::string prompt = "Once upon a time";
        for (int turn = 0; turn < 3; ++turn) {
            std::mutex mu;
            std::condition_variable cv;
            bool done = false;
            std::string text;
            EngineRequest r = greedy(prompt, 48);
            r.cache_key = "chat";
            s.submit(std::move(r), [&](EngineEvent&& e) {
                std::lock_guard lock(mu);
                text += e.text;
                if (e.kind == EngineEvent::Kind::Finished || e.kind == EngineEvent::Kind::Failed) done = true;
                cv.notify_all();
            });
            std::unique_lock lock(mu);
            REQUIRE(cv.wait_for(lock, std::chrono::minutes(2), [&] { return done; }));
            texts.push_back(text);
            prompt += text + " And then";
        }
        return texts;
    };
    CHECK(turns(true) == turns(false));
}

TEST_CASE("greedy with penalties, bias and logprobs: the same ids and logprobs with lookup") {
    auto model = load_cpu_model(test::testdata(test::kStories), 512, 4, 1);
    std::vector<EngineRequest> reqs;
    for (const char* p : {"Once upon a time", "The little dog", "Lily wanted to", "Tom and Sue went"}) {
        EngineRequest r = greedy(p, 96);
        r.sampling.repeat_penalty = 1.15f;  // every row sees the draft's tokens before it
        r.sampling.presence_penalty = 0.1f;
        r.sampling.logit_bias[13] = 0.5f;
        r.top_logprobs = 2;  // the target's own rows, as without lookup
        reqs.push_back(r);
    }
    const Batch plain = run_all(*model, reqs, false, 4);
    const Batch spec = run_all(*model, reqs, true, 4);
    int32_t drafted = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
        REQUIRE(spec.out[i].error.empty());
        CHECK(spec.out[i].ids == plain.out[i].ids);
        REQUIRE(spec.out[i].logprobs.size() == plain.out[i].logprobs.size());
        for (size_t t = 0; t < plain.out[i].logprobs.size(); ++t) {
            const TokenLogprob &a = spec.out[i].logprobs[t], &b = plain.out[i].logprobs[t];
            CHECK(a.id == b.id);
            CHECK(a.logprob == b.logprob);
            REQUIRE(a.top.size() == b.top.size());
            for (size_t k = 0; k < a.top.size(); ++k)
                CHECK((a.top[k].id == b.top[k].id && a.top[k].logprob == b.top[k].logprob));
        }
        drafted += spec.out[i].stats.drafted_tokens;
    }
    CHECK(drafted > 0);
}
