// The continuous-batching Scheduler on real models (stories260K for speed, SmolLM2 for chat
// messages). Every assertion is on token ids, text, stop reasons and step counts (the
// on_step hook), never on timings; submissions staggered "at step k" are made from on_step,
// on the engine thread, so they land at exactly that step.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/models/synthetic.h"
#include "engine/runtime/chat.h"
#include "engine/runtime/model.h"
#include "engine/runtime/prompt_fit.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/scheduler.h"
#include "cpu_model.h"
#include "kernels/common/error.h"
#include "long_chat.h"
#include "test_data.h"
#include "test_util.h"

using namespace ember;
using ember::test::long_chat;

namespace {

using test::load_cpu_model;
std::unique_ptr<Model> load(const std::string& path, int64_t n_ctx, int32_t n_seqs, int threads = 2) {
    return load_cpu_model(path, n_ctx, n_seqs, threads);
}

std::unique_ptr<Model> stories(int64_t n_ctx = 256, int32_t n_seqs = 16) {
    return load(test::testdata(test::kStories), n_ctx, n_seqs, 1);
}

// What one request received, filled on the engine thread, read by the test's thread.
struct Outcome {
    std::vector<EngineEvent::Kind> kinds;
    std::string text;
    std::string reasoning;
    std::vector<int32_t> ids;  // from the logprobs entries (top_logprobs >= 0)
    std::vector<TokenLogprob> logprobs;
    RequestStats stats;
    std::string error;
    bool ended = false;
};

class Results {
public:
    EventSink sink(int key) {
        return [this, key](EngineEvent&& e) {
            std::lock_guard lock(mutex_);
            Outcome& o = out_[key];
            o.kinds.push_back(e.kind);
            o.text += e.text;
            o.reasoning += e.reasoning;
            for (TokenLogprob& t : e.tokens) {
                o.ids.push_back(t.id);
                o.logprobs.push_back(std::move(t));
            }
            if (e.kind == EngineEvent::Kind::Finished) o.stats = e.stats;
            if (e.kind == EngineEvent::Kind::Failed) o.error = e.error;
            if (e.kind == EngineEvent::Kind::Finished || e.kind == EngineEvent::Kind::Failed) {
                o.ended = true;
                ++ended_;
                cv_.notify_all();
            }
        };
    }
    // Waits (a generous bound; the tests take a second or so) until `n` requests ended.
    void wait(int n) {
        std::unique_lock lock(mutex_);
        REQUIRE_MESSAGE(cv_.wait_for(lock, std::chrono::minutes(2), [&] { return ended_ >= n; }),
                        "requests did not end: ", ended_, " of ", n);
    }
    Outcome get(int key) {
        std::lock_guard lock(mutex_);
        return out_[key];
    }
    int ended() {
        std::lock_guard lock(mutex_);
        return ended_;
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::map<int, Outcome> out_;
    int ended_ = 0;
};

EngineRequest text_request(const std::string& prompt, int32_t max_tokens) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.sampling = SamplingParams::greedy();
    r.top_logprobs = 0;
    return r;
}

const std::vector<std::string> kPrompts = {
    "Once upon a time",   "The little dog",    "Lily wanted to",         "One day, a big", "Tom and Sue went",
    "The sun was",        "Mom said",          "There was a bird",       "The cat sat",    "A boy named Tim",
    "In the park,",       "The tree was very", "Ben had a red ball and", "The girl saw a", "They were happy",
    "At night, the moon",
};

// A greedy request for a prompt of `n` token ids (BOS, then ids from 300 up).
EngineRequest long_request(int n, int32_t max_tokens) {
    EngineRequest r;
    r.prompt_tokens = {1};
    for (int i = 1; i < n; ++i) r.prompt_tokens.push_back(300 + i % 150);
    r.max_tokens = max_tokens;
    r.sampling = SamplingParams::greedy();
    return r;
}

// Each prompt alone: one at a time through a scheduler with a batch of one, every token
// computed (no prefix reuse).
std::vector<Outcome> alone(Model& model, const std::vector<EngineRequest>& reqs) {
    SchedulerOptions o;
    o.max_batch = 1;
    o.prefix_cache = false;
    Scheduler s(model, o);
    Results res;
    std::vector<Outcome> out;
    for (size_t i = 0; i < reqs.size(); ++i) {
        s.submit(reqs[i], res.sink(static_cast<int>(i)));
        res.wait(static_cast<int>(i) + 1);
        out.push_back(res.get(static_cast<int>(i)));
    }
    return out;
}

}  // namespace

TEST_CASE("greedy outputs are the same alone and in a full batch with staggered admission") {
    auto model = stories();
    std::vector<EngineRequest> reqs;
    for (size_t i = 0; i < kPrompts.size(); ++i)
        reqs.push_back(text_request(kPrompts[i], 20 + static_cast<int32_t>(i % 5) * 7));
    const std::vector<Outcome> ref = alone(*model, reqs);

    for (bool logprobs : {true, false}) {
        CAPTURE(logprobs);  // false: the batch samples from Backend::top_k, several rows at once
        Results res;
        SchedulerOptions o;
        o.max_batch = 16;
        o.max_step_tokens = 24;  // prompts arrive mid-decode and are prefilled in chunks
        o.prefix_cache = false;  // every token computed in the batch
        std::vector<EngineRequest> batch = reqs;
        for (auto& r : batch) r.top_logprobs = logprobs ? 0 : -1;
        int32_t widest = 0;
        size_t next = 4;
        Scheduler* self = nullptr;
        o.on_step = [&](const StepInfo& info) {
            widest = std::max(widest, static_cast<int32_t>(info.batch.size()));
            // Two more requests join at every step until all are in.
            for (int k = 0; k < 2 && next < batch.size(); ++k, ++next)
                self->submit(batch[next], res.sink(static_cast<int>(next)));
        };
        Scheduler s(*model, o);
        self = &s;
        for (size_t i = 0; i < 4; ++i) s.submit(batch[i], res.sink(static_cast<int>(i)));
        res.wait(static_cast<int>(batch.size()));
        CHECK(widest == 16);
        for (size_t i = 0; i < batch.size(); ++i) {
            CAPTURE(kPrompts[i]);
            const Outcome got = res.get(static_cast<int>(i));
            REQUIRE(got.error.empty());
            CHECK(got.text == ref[i].text);
            CHECK(got.stats.generated_tokens == ref[i].stats.generated_tokens);
            CHECK(got.stats.stop_reason == ref[i].stats.stop_reason);
            if (logprobs) CHECK(got.ids == ref[i].ids);
        }
    }
}

// The same on a quantized chat model (SmolLM2 Q4_1), 8 chat requests joining one batch a step
// apart: no greedy token may change. This needs batch-invariant kernels (kernels/cpu/README.md):
// with summation orders that depend on the batch, 3 of these 8 answers changed.
TEST_CASE("greedy chat outputs on a quantized model are the same alone and batched") {
    auto model = load(test::test_model(test::kSmolLM2), 512, 8);
    const std::vector<std::string> questions = {
        "What is the capital of France?",
        "Name three colors.",
        "How many legs does a spider have?",
        "Write a haiku about rain.",
        "What is 12 times 12?",
        "Who wrote Hamlet?",
        "Give me a word that rhymes with cat.",
        "What is the boiling point of water?",
    };
    std::vector<EngineRequest> reqs;
    for (const std::string& q : questions) {
        EngineRequest r;
        r.messages = {{"user", q}};
        r.max_tokens = 16;
        r.sampling = SamplingParams::greedy();
        r.top_logprobs = 0;
        reqs.push_back(r);
    }
    const std::vector<Outcome> ref = alone(*model, reqs);
    Results res;
    SchedulerOptions o;
    o.max_batch = 8;
    o.max_step_tokens = 64;
    o.prefix_cache = false;  // every token computed in the batch (the shared system prompt too)
    Scheduler* self = nullptr;
    size_t next = 2;
    o.on_step = [&](const StepInfo&) {
        if (next < reqs.size()) {
            self->submit(reqs[next], res.sink(static_cast<int>(next)));
            ++next;
        }
    };
    Scheduler s(*model, o);
    self = &s;
    for (size_t i = 0; i < 2; ++i) s.submit(reqs[i], res.sink(static_cast<int>(i)));
    res.wait(static_cast<int>(reqs.size()));
    for (size_t i = 0; i < reqs.size(); ++i) {
        CAPTURE(questions[i]);
        const Outcome got = res.get(static_cast<int>(i));
        REQUIRE(got.error.empty());
        CHECK(got.ids == ref[i].ids);
        CHECK(got.text == ref[i].text);
    }
}

// Prefix reuse (kv_cache.h): a request whose leading tokens match published blocks starts
// from them, whether their owner ended (idle blocks) or is still decoding (shared blocks),
// and gets the very same logprobs as when every token is computed (the kernels are
// batch-invariant, so a block's K/V do not depend on the pass that computed them).
TEST_CASE("prefix reuse skips whole blocks and changes no logprob") {
    auto model = load(test::test_model(test::kSmolLM2), 512, 4);
    std::vector<EngineRequest> reqs;
    for (const std::string q : {"What is the capital of France?", "Name three colors.", "Who wrote Hamlet?"}) {
        EngineRequest r;
        r.messages = {{"user", q}};  // SmolLM2's template adds the same system prompt to each
        r.max_tokens = 12;
        r.sampling = SamplingParams::greedy();
        r.top_logprobs = 2;
        reqs.push_back(r);
    }
    const std::vector<Outcome> ref = alone(*model, reqs);
    const auto same_logprobs = [](const Outcome& got, const Outcome& want) {
        REQUIRE(got.error.empty());
        REQUIRE(got.logprobs.size() == want.logprobs.size());
        for (size_t i = 0; i < got.logprobs.size(); ++i) {
            CHECK(got.logprobs[i].id == want.logprobs[i].id);
            CHECK(got.logprobs[i].logprob == want.logprobs[i].logprob);  // bit for bit
            REQUIRE(got.logprobs[i].top.size() == want.logprobs[i].top.size());
            for (size_t j = 0; j < got.logprobs[i].top.size(); ++j)
                CHECK(got.logprobs[i].top[j].logprob == want.logprobs[i].top[j].logprob);
        }
        CHECK(got.text == want.text);
    };

    Results res;
    // Written on the engine thread (on_step), read on this one: under `mutex`.
    std::mutex mutex;
    std::map<uint64_t, int32_t> first_pass_of;  // request id -> tokens in its first pass
    uint64_t last_id = 0;
    Scheduler* self = nullptr;
    uint64_t join_after = 0;  // when this request decodes alone, submit reqs[2] again (its twin)
    SchedulerOptions o;
    o.on_step = [&](const StepInfo& info) {
        std::lock_guard lock(mutex);
        for (const StepEntry& e : info.batch) first_pass_of.emplace(e.request_id, e.tokens);
        if (join_after != 0 && info.batch.size() == 1 && info.batch[0].request_id == join_after &&
            info.batch[0].decode) {
            join_after = 0;
            last_id = self->submit(reqs[2], res.sink(4));
        }
    };
    const auto first_pass = [&](uint64_t id) {
        std::lock_guard lock(mutex);
        return first_pass_of.count(id) ? first_pass_of.at(id) : -1;
    };
    Scheduler s(*model, o);
    self = &s;
    const int32_t p0 = ref[0].stats.prompt_tokens, p1 = ref[1].stats.prompt_tokens;
    // The first request computes everything; the same request again all but the last
    // (partial) block's tokens; another question the system prompt's whole blocks.
    const uint64_t id0 = s.submit(reqs[0], res.sink(0));
    res.wait(1);
    const uint64_t id1 = s.submit(reqs[0], res.sink(1));
    res.wait(2);
    const uint64_t id2 = s.submit(reqs[1], res.sink(2));
    res.wait(3);
    CHECK(res.get(0).stats.reused_tokens == 0);
    CHECK(first_pass(id0) == p0);
    CHECK(res.get(1).stats.reused_tokens == (p0 - 1) / 16 * 16);
    CHECK(first_pass(id1) == p0 - (p0 - 1) / 16 * 16);
    CHECK(res.get(2).stats.reused_tokens >= 16);
    CHECK(first_pass(id2) == p1 - res.get(2).stats.reused_tokens);
    same_logprobs(res.get(0), ref[0]);
    same_logprobs(res.get(1), ref[0]);
    same_logprobs(res.get(2), ref[1]);

    // A twin that joins while the first is decoding shares its blocks, read-only.
    {
        // Under the lock: its first step's on_step waits until join_after names it (an
        // earlier request's last on_step may still be running, and must not trigger the join).
        std::lock_guard lock(mutex);
        join_after = s.submit(reqs[2], res.sink(3));
    }
    res.wait(5);
    uint64_t twin = 0;
    {
        std::lock_guard lock(mutex);
        twin = last_id;
    }
    CHECK(res.get(4).stats.reused_tokens == (ref[2].stats.prompt_tokens - 1) / 16 * 16);
    CHECK(first_pass(twin) == ref[2].stats.prompt_tokens - res.get(4).stats.reused_tokens);
    same_logprobs(res.get(3), ref[2]);
    same_logprobs(res.get(4), ref[2]);

    // Asked not to reuse: everything computed again.
    EngineRequest whole = reqs[0];
    whole.reuse_prefix = false;
    const uint64_t id5 = s.submit(whole, res.sink(5));
    res.wait(6);
    CHECK(res.get(5).stats.reused_tokens == 0);
    CHECK(first_pass(id5) == p0);
    same_logprobs(res.get(5), ref[0]);
    // Everything ended: the published blocks wait, unused, for the next prompt.
    const EngineStatus st = s.status();
    CHECK(st.kv_blocks_used == 0);
    CHECK(st.kv_blocks_cached >= (p0 - 1) / 16);
}

// The host-RAM tier: a pool too small to keep a prompt's blocks while another request runs
// spills them to host RAM, and the prompt sent again gets them back, bit for bit.
TEST_CASE("prefix blocks evicted to the host cache come back with the same logprobs") {
    auto model = load(test::test_model(test::kSmolLM2), 128, 1);  // 8 blocks of 16
    EngineRequest a;
    a.messages = {{"user", "What is the capital of France?"}};
    a.max_tokens = 8;
    a.sampling = SamplingParams::greedy();
    a.top_logprobs = 2;
    EngineRequest b = long_request(120, 4);  // needs the whole pool
    const std::vector<Outcome> ref = alone(*model, {a});
    model->kv().set_host_cache(64ull << 20);  // before the scheduler's thread owns the cache
    Outcome again;
    {
        Scheduler s(*model, {});
        Results res;
        s.submit(a, res.sink(0));
        res.wait(1);
        s.submit(b, res.sink(1));
        res.wait(2);
        REQUIRE(res.get(1).error.empty());
        CHECK(s.status().kv_host_cache_bytes >= 2 * model->kv().config().bytes_per_block());
        s.submit(a, res.sink(2));
        res.wait(3);
        again = res.get(2);
    }
    const int32_t p = ref[0].stats.prompt_tokens;
    CHECK(again.stats.reused_tokens == (p - 1) / 16 * 16);
    REQUIRE(again.logprobs.size() == ref[0].logprobs.size());
    for (size_t i = 0; i < again.logprobs.size(); ++i) {
        CHECK(again.logprobs[i].id == ref[0].logprobs[i].id);
        CHECK(again.logprobs[i].logprob == ref[0].logprobs[i].logprob);
    }
    CHECK(again.text == ref[0].text);
    model->kv().set_host_cache(0);
}

TEST_CASE("prefix blocks written to the disk cache serve the next process with the same logprobs") {
    test::TempDir dir;
    EngineRequest a;
    a.messages = {{"user", "Name three rivers of Europe, and say which sea each one ends in."}};
    a.max_tokens = 8;
    a.sampling = SamplingParams::greedy();
    a.top_logprobs = 2;
    // One process: a model with the disk tier answers `a`; its queued blocks are written when
    // the model (its KV cache) goes.
    const auto run = [&] {
        auto model = load(test::test_model(test::kSmolLM2), 128, 1);
        model->open_disk_prefix_cache(dir.path(), 64ull << 20);
        Scheduler s(*model, {});
        Results res;
        s.submit(a, res.sink(0));
        res.wait(1);
        return res.get(0);
    };
    const Outcome first = run();  // computes the prompt and writes its full blocks
    const Outcome again = run();  // a new model and cache (a restart): the blocks come from disk
    REQUIRE(first.error.empty());
    REQUIRE(again.error.empty());
    const int32_t p = first.stats.prompt_tokens;
    REQUIRE(p > 32);
    CHECK(first.stats.reused_tokens == 0);
    CHECK(again.stats.reused_tokens == (p - 1) / 16 * 16);
    REQUIRE(again.logprobs.size() == first.logprobs.size());
    for (size_t i = 0; i < again.logprobs.size(); ++i) {
        CHECK(again.logprobs[i].id == first.logprobs[i].id);
        CHECK(again.logprobs[i].logprob == first.logprobs[i].logprob);
    }
    CHECK(again.text == first.text);
}

TEST_CASE("chunked prefill keeps every decoding sequence emitting a token each step") {
    auto model = stories(512, 4);
    Results res;
    SchedulerOptions o;
    o.max_batch = 4;
    o.max_step_tokens = 16;
    std::vector<std::vector<StepEntry>> steps;
    Scheduler* self = nullptr;
    // A long prompt (300 tokens) arrives while two requests decode.
    const EngineRequest big = long_request(300, 4);
    uint64_t big_id = 0;
    o.on_step = [&](const StepInfo& info) {
        steps.push_back(info.batch);
        if (info.step == 3) big_id = self->submit(big, res.sink(2));
    };
    Scheduler s(*model, o);
    self = &s;
    s.submit(text_request(kPrompts[0], 60), res.sink(0));
    s.submit(text_request(kPrompts[1], 60), res.sink(1));
    res.wait(3);
    int prefill_steps = 0;
    std::map<uint64_t, bool> decoding;  // decoding after the previous step
    for (const auto& batch : steps) {
        int32_t tokens = 0;
        for (const StepEntry& e : batch) tokens += e.tokens;
        CHECK(tokens <= 16);
        bool big_prefills = false;
        for (const StepEntry& e : batch)
            if (e.request_id == big_id && e.tokens > 1) big_prefills = true;
        prefill_steps += big_prefills;
        for (const auto& [id, dec] : decoding) {
            if (!dec) continue;
            // It was decoding and has not finished: it is in this pass and gets its token.
            const auto it =
                std::find_if(batch.begin(), batch.end(), [&](const StepEntry& e) { return e.request_id == id; });
            REQUIRE(it != batch.end());
            CHECK(it->tokens == 1);
            CHECK(it->sampled);
        }
        for (auto& [id, dec] : decoding) dec = false;
        for (const StepEntry& e : batch) decoding[e.request_id] = e.sampled && !e.ended;
    }
    CHECK(prefill_steps >= 300 / 16);  // the long prompt went in chunks
    CHECK(res.get(0).stats.generated_tokens == 60);
    CHECK(res.get(1).stats.generated_tokens == 60);
    CHECK(res.get(2).stats.generated_tokens == 4);
}

// max_stall_ms: while others stream, a long prompt's chunks are cut to what fits in the stall
// by the measured cost of recent passes (1 ms: less than a SmolLM2 decode pass on any CPU, so
// never more than the floor, one KV block); with 0, or a stall longer than any pass, it goes
// in as one chunk. Its tokens do not change.
TEST_CASE("max_stall_ms cuts prefill chunks while others stream and changes no token") {
    auto model = load(test::test_model(test::kSmolLM2), 512, 4);
    const int32_t block = model->kv().config().block_tokens;
    const EngineRequest big = long_request(300, 8);
    const Outcome ref = alone(*model, {big})[0];
    for (const int32_t stall : {1, 0, 3'600'000}) {
        CAPTURE(stall);
        Results res;
        SchedulerOptions o;
        o.max_batch = 4;
        o.max_stall_ms = stall;
        o.prefix_cache = false;
        std::vector<int32_t> chunks;  // the long prompt's prefill tokens per step
        std::vector<bool> streaming;  // whether some sequence decoded in that step
        uint64_t big_id = 0;
        Scheduler* self = nullptr;
        o.on_step = [&](const StepInfo& info) {
            for (const StepEntry& e : info.batch) {
                if (e.request_id != big_id || e.decode) continue;
                chunks.push_back(e.tokens);
                streaming.push_back(
                    std::any_of(info.batch.begin(), info.batch.end(), [](const StepEntry& x) { return x.decode; }));
            }
            if (info.step == 3) big_id = self->submit(big, res.sink(2));
        };
        Scheduler s(*model, o);
        self = &s;
        // Two streams whose 40-token prompts (one pass) give the scheduler a cost per token.
        s.submit(long_request(40, 40), res.sink(0));
        s.submit(long_request(40, 40), res.sink(1));
        res.wait(3);
        const Outcome got = res.get(2);
        REQUIRE(got.error.empty());
        CHECK(got.text == ref.text);
        CHECK(got.stats.generated_tokens == 8);
        REQUIRE(!chunks.empty());
        if (stall == 1) {
            CHECK(chunks.size() >= 300 / block);
            for (size_t i = 0; i < chunks.size(); ++i)
                if (streaming[i]) CHECK(chunks[i] <= block);
        } else {
            CHECK(chunks == std::vector<int32_t>{300});
        }
    }
}

TEST_CASE("cancel ends a request within a step and frees its KV blocks at once") {
    auto model = stories(256, 4);
    const int32_t total = model->kv().config().n_blocks;
    Results res;
    SchedulerOptions o;
    o.max_batch = 4;
    Scheduler* self = nullptr;
    std::vector<StepInfo> steps;
    EngineRequest other = text_request(kPrompts[1], 40);
    other.ignore_eog = true;
    uint64_t other_id = 0;
    // The victim's id as the engine thread saw it at step 1 (the only request then): that
    // thread can reach step 10 before submit() has returned its id to this one (seen in a
    // clean-clone run while other tests loaded both cores).
    uint64_t victim_seen = 0;
    o.on_step = [&](const StepInfo& info) {
        steps.push_back(info);
        if (info.step == 1) {
            victim_seen = info.batch.at(0).request_id;
            other_id = self->submit(other, res.sink(1));  // admitted at step 2
        }
        if (info.step == 10) self->cancel(victim_seen);
    };
    Scheduler s(*model, o);
    self = &s;
    EngineRequest forever = text_request(kPrompts[0], -1);
    forever.ignore_eog = true;
    const uint64_t victim = s.submit(forever, res.sink(0));
    res.wait(2);
    CHECK(victim_seen == victim);
    const Outcome v = res.get(0);
    CHECK(v.stats.stop_reason == StopReason::Cancelled);
    CHECK(v.stats.generated_tokens == 10);  // one token per step, steps 1..10
    CHECK(v.kinds.front() == EngineEvent::Kind::Started);
    CHECK(v.kinds.back() == EngineEvent::Kind::Finished);
    // Step 11: the victim is gone and only the other request's blocks are in use (its prompt
    // and the 9 tokens fed since step 2).
    REQUIRE(steps.size() > 11);
    CHECK(steps[10].batch.size() == 1);
    CHECK(steps[10].batch[0].request_id == other_id);
    const int32_t other_tokens = static_cast<int32_t>(res.get(1).stats.prompt_tokens) + 9;
    CHECK(steps[10].free_blocks == total - (other_tokens + 15) / 16);
    CHECK(res.get(1).stats.generated_tokens == 40);
    CHECK(s.status().kv_blocks_used == 0);
    s.cancel(victim);  // already ended: ignored
    s.cancel(12345);   // unknown: ignored
}

TEST_CASE("a KV pool too small for everyone preempts, and every request still gets its tokens") {
    // 128 tokens x 2 sequences = 16 blocks for 6 requests that each grow to ~90 tokens.
    auto small = stories(128, 2);
    auto big = stories();
    std::vector<EngineRequest> reqs;
    for (size_t i = 0; i < 6; ++i) {
        EngineRequest r = text_request(kPrompts[i], 80);
        r.ignore_eog = true;
        reqs.push_back(r);
    }
    const std::vector<Outcome> ref = alone(*big, reqs);
    Results res;
    SchedulerOptions o;
    o.max_batch = 6;
    Scheduler s(*small, o);
    for (size_t i = 0; i < reqs.size(); ++i) s.submit(reqs[i], res.sink(static_cast<int>(i)));
    res.wait(6);
    int32_t preempted = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
        CAPTURE(i);
        const Outcome got = res.get(static_cast<int>(i));
        REQUIRE(got.error.empty());
        CHECK(got.ids == ref[i].ids);
        CHECK(got.text == ref[i].text);
        CHECK(got.stats.generated_tokens == 80);
        // Resumed invisibly: one Started, then text, then one Finished.
        CHECK(std::count(got.kinds.begin(), got.kinds.end(), EngineEvent::Kind::Started) == 1);
        preempted += got.stats.preemptions;
    }
    CHECK(s.stats().preemptions > 0);
    CHECK(static_cast<uint64_t>(preempted) == s.stats().preemptions);
}

TEST_CASE("a long prompt is not starved by a stream of short requests") {
    auto model = stories(512, 8);
    Results res;
    SchedulerOptions o;
    o.max_batch = 3;
    o.max_step_tokens = 8;
    Scheduler* self = nullptr;
    std::vector<int> started_order;
    std::mutex order_mutex;
    int next = 2;
    auto sink = [&](int key) {
        EventSink inner = res.sink(key);
        return [&, key, inner](EngineEvent&& e) {
            if (e.kind == EngineEvent::Kind::Started) {
                std::lock_guard lock(order_mutex);
                started_order.push_back(key);
            }
            inner(std::move(e));
        };
    };
    const EngineRequest big = long_request(201, 2);
    o.on_step = [&](const StepInfo& info) {
        if (info.step == 1) self->submit(text_request(kPrompts[1], 30), sink(1));
        if (info.step == 2) self->submit(big, sink(1000));
        if (info.step >= 2 && next < 40) {
            self->submit(text_request(kPrompts[static_cast<size_t>(next % 16)], 3), sink(next));
            ++next;
        }
    };
    Scheduler s(*model, o);
    self = &s;
    s.submit(text_request(kPrompts[0], 30), sink(0));
    res.wait(41);
    const Outcome b = res.get(1000);
    CHECK(b.stats.generated_tokens == 2);
    // FCFS: it started before every request submitted after it.
    std::lock_guard lock(order_mutex);
    const auto at = std::find(started_order.begin(), started_order.end(), 1000);
    REQUIRE(at != started_order.end());
    for (auto it = at + 1; it != started_order.end(); ++it) CHECK(*it >= 2);
    for (auto it = started_order.begin(); it != at; ++it) CHECK(*it < 2);
}

TEST_CASE("a full queue refuses a request and queues nothing") {
    auto model = stories();
    Results res;
    SchedulerOptions o;
    o.max_batch = 1;
    o.max_queue = 2;
    Scheduler* self = nullptr;
    bool refused = false;
    size_t listed = 0;
    o.on_step = [&](const StepInfo& info) {
        if (info.step != 1) return;
        self->submit(text_request(kPrompts[1], 5), res.sink(1));
        self->submit(text_request(kPrompts[2], 5), res.sink(2));
        try {
            self->submit(text_request(kPrompts[3], 5), res.sink(3));
        } catch (const EngineBusy& e) {  // busy, not wrong: the server answers 503
            refused = std::string(e.what()).find("queue is full") != std::string::npos;
        }
        listed = self->status().requests.size();
    };
    Scheduler s(*model, o);
    self = &s;
    s.submit(text_request(kPrompts[0], 5), res.sink(0));
    res.wait(3);
    CHECK(refused);
    CHECK(listed == 3);  // one running, two queued: the refused one is nowhere
    CHECK(res.get(3).kinds.empty());
    CHECK(s.stats().finished == 3);
}

TEST_CASE("requests that can never run are refused on submit") {
    auto model = stories(64, 2);
    Scheduler s(*model, {});
    auto refuses = [&](EngineRequest r, const std::string& why) {
        CAPTURE(why);
        try {
            s.submit(std::move(r), nullptr);
            FAIL("accepted");
        } catch (const Error& e) {
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
    };
    refuses(EngineRequest{}, "exactly one of");
    EngineRequest two = text_request("Once", 4);
    two.prompt_tokens = {1, 2};
    refuses(two, "exactly one of");
    EngineRequest unknown = text_request("Once", 4);
    unknown.model = "no-such-model";
    refuses(unknown, "unknown model");
    EngineRequest token = text_request("", 4);
    token.prompt_tokens = {1, 512};
    refuses(token, "not in the vocabulary");
    EngineRequest too_long = text_request("", 4);
    too_long.prompt_tokens.assign(64, 300);
    refuses(too_long, "does not fit the context of 64");
    EngineRequest lp = text_request("Once", 4);
    lp.top_logprobs = 21;
    refuses(lp, "top_logprobs");
    EngineRequest bad = text_request("Once", 4);
    bad.sampling.temperature = 1;
    bad.sampling.top_p = 0;
    refuses(bad, "top_p");
    EngineRequest tools;  // template_options reach the chat template at submit
    tools.messages = {{"user", "Once"}};
    tools.max_tokens = 4;
    tools.template_options.tools_json = "[oops]";
    refuses(tools, "tools: invalid JSON at byte 1");
    CHECK(s.status().requests.empty());
    EngineRequest named = text_request("Once", 2);
    named.model = "stories260K";
    Results res;
    s.submit(named, res.sink(0));
    res.wait(1);
    CHECK(res.get(0).stats.generated_tokens == 2);
}

TEST_CASE("limits: max_tokens 0, stop strings, end of generation, context full") {
    auto model = stories(64, 4);
    Scheduler s(*model, {});
    Results res;
    // max_tokens 0: the prompt is processed and cached, nothing is generated.
    EngineRequest zero = text_request(kPrompts[0], 0);
    zero.cache_key = "z";
    s.submit(zero, res.sink(0));
    res.wait(1);
    CHECK(res.get(0).stats.generated_tokens == 0);
    CHECK(res.get(0).stats.stop_reason == StopReason::Length);
    CHECK(res.get(0).text.empty());
    // ... and the next turn under the key reuses all of it but the last token.
    EngineRequest again = text_request(kPrompts[0], 3);
    again.cache_key = "z";
    s.submit(again, res.sink(1));
    res.wait(2);
    CHECK(res.get(1).stats.reused_tokens == res.get(0).stats.prompt_tokens - 1);

    // Context: 64 tokens; the last token sampled is the one that would not fit.
    EngineRequest full = text_request(kPrompts[1], -1);
    full.ignore_eog = true;
    s.submit(full, res.sink(2));
    res.wait(3);
    const Outcome f = res.get(2);
    CHECK(f.stats.stop_reason == StopReason::Context);
    CHECK(f.stats.generated_tokens == 64 - f.stats.prompt_tokens + 1);

    // A stop string taken from the middle of the free-running text: the text ends before it.
    const std::string free_text = f.text;
    const size_t cut = free_text.find(' ', free_text.size() / 2);
    REQUIRE(cut != std::string::npos);
    const std::string stop = free_text.substr(cut, 4);
    EngineRequest stopped = full;
    stopped.stop = {"never there", stop};
    s.submit(stopped, res.sink(3));
    res.wait(4);
    CHECK(res.get(3).stats.stop_reason == StopReason::StopString);
    CHECK(res.get(3).text == free_text.substr(0, free_text.find(stop)));

    // End of generation: a logit bias makes EOS the greedy choice; it ends the request, shows
    // nothing and has no logprobs entry.
    EngineRequest eog = text_request(kPrompts[0], 10);
    eog.sampling.logit_bias[model->tokenizer().eos()] = 1000.0f;
    s.submit(eog, res.sink(4));
    res.wait(5);
    const Outcome e = res.get(4);
    CHECK(e.stats.stop_reason == StopReason::EndOfText);
    CHECK(e.stats.generated_tokens == 1);
    CHECK(e.text.empty());
    CHECK(e.ids.empty());
}

TEST_CASE("logprobs are the log-softmax of the model's logits") {
    auto model = stories();
    Scheduler s(*model, {});
    Results res;
    EngineRequest r = text_request(kPrompts[2], 8);
    r.top_logprobs = 3;
    s.submit(r, res.sink(0));
    res.wait(1);
    const Outcome o = res.get(0);
    REQUIRE(o.logprobs.size() == 8);
    for (const TokenLogprob& t : o.logprobs) {
        REQUIRE(t.top.size() == 3);
        CHECK(t.logprob <= 0);
        CHECK(t.top[0].id == t.id);  // greedy picks the most likely token
        CHECK(t.top[0].piece == t.piece);
        CHECK(t.top[0].logprob == t.logprob);
        CHECK(t.top[1].logprob <= t.top[0].logprob);
        CHECK(t.top[2].logprob <= t.top[1].logprob);
        CHECK(t.top[1].piece == model->tokenizer().token_to_piece(t.top[1].id));
        CHECK(!t.piece.empty());
    }
}

// The reference is each conversation computed afresh (a new Sequence, nothing reused) on a
// second copy of the model.
TEST_CASE("a chat's second turn reuses the first turn's tokens under its cache_key") {
    const std::string path = test::test_model(test::kSmolLM2);
    auto model = load(path, 1024, 2);
    auto solo = load(path, 1024, 1);
    auto reference = [&](const std::vector<ChatMessage>& messages) {
        Sequence ref_seq(*solo);
        GenerateOptions g;
        g.sampling = SamplingParams::greedy();
        g.max_tokens = 24;
        std::string text;
        ref_seq.generate(chat_prompt_tokens(*solo, messages), g, [&](std::string_view t) {
            text += t;
            return true;
        });
        return text;
    };
    Scheduler s(*model, {});
    Results res;
    EngineRequest first;
    // "Answer in English.": the bare question starts at a near-tie with a French answer.
    first.messages = {{"user", "What is the capital of France? Answer in English."}};
    first.max_tokens = 24;
    first.sampling = SamplingParams::greedy();
    first.cache_key = "chat-1";
    s.submit(first, res.sink(0));
    res.wait(1);
    const Outcome a = res.get(0);
    REQUIRE(a.error.empty());
    CHECK(a.text.find("Paris") != std::string::npos);
    CHECK(a.text == reference(first.messages));
    CHECK(a.stats.reused_tokens == 0);
    CHECK(a.stats.prompt_tokens == static_cast<int32_t>(chat_prompt_tokens(*model, first.messages).size()));

    EngineRequest second = first;
    second.messages = {first.messages[0], {"assistant", a.text}, {"user", "And of Italy?"}};
    s.submit(second, res.sink(1));
    res.wait(2);
    const Outcome b = res.get(1);
    REQUIRE(b.error.empty());
    CHECK(b.stats.reused_tokens >= a.stats.prompt_tokens);
    CHECK(b.stats.prompt_tokens > a.stats.prompt_tokens);
    CHECK(b.text == reference(second.messages));

    // Forgotten, and no prefix reuse asked for: the same turn starts from nothing.
    s.forget("chat-1");
    EngineRequest fresh = second;
    fresh.reuse_prefix = false;
    s.submit(fresh, res.sink(2));
    res.wait(3);
    CHECK(res.get(2).stats.reused_tokens == 0);
    CHECK(res.get(2).text == b.text);
    // Forgotten again: the prefix cache still holds the turn's whole blocks (the last
    // token is always computed, for logits), and the greedy text is the same.
    s.forget("chat-1");
    s.submit(second, res.sink(3));
    res.wait(4);
    CHECK(res.get(3).stats.reused_tokens == (b.stats.prompt_tokens - 1) / 16 * 16);
    CHECK(res.get(3).text == b.text);
}

TEST_CASE("context overflow truncate leaves out the oldest exchanges and says how many") {
    auto model = load(test::test_model(test::kSmolLM2), 160, 1);
    Scheduler s(*model, {});
    Results res;
    EngineRequest r;
    r.sampling = SamplingParams::greedy();
    r.max_tokens = 8;
    for (int i = 0; i < 6; ++i) {
        r.messages.push_back({"user", "Tell me something about the number " + std::to_string(i) + ", please."});
        r.messages.push_back({"assistant", "The number " + std::to_string(i) + " is a fine number to think about."});
    }
    r.messages.push_back({"user", "Thanks!"});
    CHECK_THROWS_AS(s.submit(r, nullptr), ContextOverflow);  // stop (the default): it does not fit
    r.context_overflow = OverflowPolicy::Truncate;
    s.submit(r, res.sink(0));
    res.wait(1);
    const Outcome o = res.get(0);
    REQUIRE(o.error.empty());
    CHECK(o.stats.dropped_turns > 0);
    CHECK(o.stats.dropped_turns % 2 == 0);  // whole exchanges
    CHECK(o.stats.prompt_tokens <= 160 - 8);
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

TEST_CASE("stop refuses an overlong chat with how far over it is; truncate equals a fresh run on what it kept") {
    auto model = load(test::test_model(test::kSmolLM2), 256, 1);
    const std::vector<ChatMessage> chat = long_chat(8);
    const int64_t full = static_cast<int64_t>(chat_prompt_tokens(*model, chat).size());
    REQUIRE(full > 256);
    EngineRequest r;
    r.messages = chat;
    r.sampling = SamplingParams::greedy();
    r.max_tokens = 12;
    r.top_logprobs = 0;
    r.cache_key = "chat";
    Scheduler s(*model, {});
    try {  // stop, the default: refused at submit, nothing computed
        s.submit(r, nullptr);
        FAIL("no error");
    } catch (const ContextOverflow& e) {
        const std::string what = e.what();
        CHECK(what.find("the conversation is " + std::to_string(full) + " tokens") != std::string::npos);
        CHECK(what.find(std::to_string(full + 1 - 256) + " tokens more than the context of 256") != std::string::npos);
        CHECK(what.find("truncate") != std::string::npos);
    }
    CHECK(s.status().kv_blocks_used == 0);

    // An earlier turn of the same chat that fitted: its KV sequence is kept under the key.
    EngineRequest early = r;
    early.messages = long_chat(2);
    Results res;
    s.submit(early, res.sink(0));
    res.wait(1);
    const Outcome first = res.get(0);
    REQUIRE(first.error.empty());
    std::vector<int32_t> cached = chat_prompt_tokens(*model, early.messages);
    cached.insert(cached.end(), first.ids.begin(), first.ids.end());

    r.context_overflow = OverflowPolicy::Truncate;
    s.submit(r, res.sink(1));
    res.wait(2);
    const Outcome cut = res.get(1);
    REQUIRE(cut.error.empty());
    // The oldest whole exchanges went, as few as leave room for the answer (12 tokens): the
    // system prompt and the newest turns stay.
    const int dropped = cut.stats.dropped_turns;
    REQUIRE(dropped > 0);
    CHECK(dropped % 2 == 0);
    std::vector<ChatMessage> kept{chat[0]};
    kept.insert(kept.end(), chat.begin() + 1 + dropped, chat.end());
    const std::vector<int32_t> kept_tokens = chat_prompt_tokens(*model, kept);
    CHECK(cut.stats.prompt_tokens == static_cast<int32_t>(kept_tokens.size()));
    CHECK(static_cast<int64_t>(kept_tokens.size()) <= 256 - 12);
    std::vector<ChatMessage> one_more{chat[0]};
    one_more.insert(one_more.end(), chat.begin() + 1 + dropped - 2, chat.end());
    CHECK(static_cast<int64_t>(chat_prompt_tokens(*model, one_more).size()) > 256 - 12);
    // The kept prefix (the system prompt and what follows it alike) came from the chat's cache.
    CHECK(cut.stats.reused_tokens == static_cast<int32_t>(common_prefix(cached, kept_tokens)));
    CHECK(cut.stats.reused_tokens > 16);

    // Greedy: the same tokens as a fresh run on the kept history alone.
    EngineRequest fresh = r;
    fresh.messages = kept;
    fresh.cache_key.clear();
    fresh.context_overflow = OverflowPolicy::Stop;
    auto other = load(test::test_model(test::kSmolLM2), 256, 1);
    const Outcome ref = alone(*other, {fresh})[0];
    CHECK(ref.stats.reused_tokens == 0);
    CHECK(cut.ids == ref.ids);
    CHECK(cut.text == ref.text);
}

TEST_CASE("a newest message too long for the context is a ContextOverflow with the numbers") {
    auto model = load(test::test_model(test::kSmolLM2), 160, 1);
    Scheduler s(*model, {});
    EngineRequest r;
    r.max_tokens = 8;
    r.context_overflow = OverflowPolicy::Truncate;
    r.messages.push_back({"user", "Hello there."});
    r.messages.push_back({"assistant", "Hello!"});
    std::string long_text;
    for (int i = 0; i < 80; ++i) long_text += "word" + std::to_string(i) + " ";
    r.messages.push_back({"user", long_text});
    const int64_t alone = static_cast<int64_t>(chat_prompt_tokens(*model, {{"user", long_text}}).size());
    REQUIRE(alone > 160 - 8);
    try {
        s.submit(r, nullptr);
        FAIL("no error");
    } catch (const ContextOverflow& e) {
        CHECK(e.n_ctx == 160);
        CHECK(e.room == 8);
        CHECK(e.prompt_tokens == alone);  // the history went first: the message alone is left
        CHECK(e.needed() == alone + 8);
        CHECK(std::string(e.what()).find("needs a context of " + std::to_string(alone + 8) + " tokens") !=
              std::string::npos);
    }
}

TEST_CASE("destroying the scheduler with requests in flight cancels them all") {
    auto model = stories(256, 4);
    Results res;
    std::mutex m;
    std::condition_variable cv;
    bool busy = false;
    {
        SchedulerOptions o;
        o.max_batch = 2;
        o.on_step = [&](const StepInfo& info) {
            if (info.step != 5) return;
            std::lock_guard lock(m);
            busy = true;
            cv.notify_all();
        };
        Scheduler s(*model, o);
        for (int i = 0; i < 4; ++i) {
            EngineRequest r = text_request(kPrompts[static_cast<size_t>(i)], -1);
            r.ignore_eog = true;
            s.submit(r, res.sink(i));
        }
        std::unique_lock lock(m);
        REQUIRE(cv.wait_for(lock, std::chrono::minutes(1), [&] { return busy; }));
    }
    CHECK(res.ended() == 4);
    for (int i = 0; i < 4; ++i) {
        const Outcome o = res.get(i);
        CHECK(o.stats.stop_reason == StopReason::Cancelled);
        CHECK(o.kinds.back() == EngineEvent::Kind::Finished);
    }
    CHECK(res.get(0).stats.generated_tokens >= 4);  // two ran, two were still queued
    CHECK(res.get(3).stats.generated_tokens == 0);
    CHECK(model->kv().free_blocks() == model->kv().config().n_blocks);
}

TEST_CASE("status and telemetry describe the running batch") {
    auto model = stories(256, 4);
    Results res;
    SchedulerOptions o;
    o.max_batch = 2;
    Scheduler* self = nullptr;
    EngineStatus seen;
    o.on_step = [&](const StepInfo& info) {
        if (info.step == 1)
            for (int i = 1; i < 3; ++i) self->submit(text_request(kPrompts[static_cast<size_t>(i)], 10), res.sink(i));
        if (info.step == 3) seen = self->status();
    };
    Scheduler s(*model, o);
    self = &s;
    s.submit(text_request(kPrompts[0], 10), res.sink(0));
    res.wait(3);
    CHECK(seen.model == "stories260K");
    CHECK(seen.device == "cpu");
    CHECK(seen.max_batch == 2);
    CHECK(seen.n_ctx == 256);
    REQUIRE(seen.requests.size() == 3);
    CHECK(seen.requests[0].state == "decode");
    CHECK(seen.requests[1].state == "decode");
    CHECK(seen.requests[2].state == "queued");
    CHECK(seen.kv_blocks_used > 0);
    CHECK(!seen.memory.empty());
    const TelemetrySnapshot t = s.telemetry().snapshot();
    CHECK(t.requests == 3);
    CHECK(t.generated_tokens == 30);
    CHECK(t.step_sequences.max == 2.0);
    CHECK(t.queue_wait_ms.count == 3);
    CHECK(t.steps == s.stats().steps);
    CHECK(t.running == 0);
    CHECK(t.queued == 0);
}

// A model made to think honestly: SmolLM2 with a ChatML template whose generation prompt opens
// <think> (tests/fixtures/think-chatml.jinja), so what it writes is thinking; after the budget
// the engine writes </think> in its place and the model, reading that, answers.
TEST_CASE("a thinking budget closes the thinking, and the answer comes apart from it") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    LoadOptions lo;
    lo.path = path;
    lo.device = BackendPreference::Cpu;
    lo.n_threads = 2;
    lo.n_ctx = 512;
    lo.chat_template = test::read_file(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/think-chatml.jinja");
    auto model = Model::load(lo);
    CHECK(reasoning_format(*model) == ReasoningFormat::ThinkTags);
    CHECK(reasoning_controls(*model).enable_thinking);
    Scheduler s(*model, {});
    Results res;
    EngineRequest r;
    r.messages = {{"user", "What is the capital of France?"}};
    r.max_tokens = 48;
    r.sampling = SamplingParams::greedy();
    r.top_logprobs = 0;
    r.reasoning_budget = 5;
    s.submit(r, res.sink(0));
    r.template_options.enable_thinking = false;  // the same question, thinking off
    s.submit(r, res.sink(1));
    res.wait(2);

    const Outcome think = res.get(0);
    const std::vector<int32_t> close = model->tokenizer().encode("</think>\n\n", false, true);
    REQUIRE(think.ids.size() > 5 + close.size());
    // The 5 thinking tokens are the model's own; then exactly the forced close.
    CHECK(std::vector<int32_t>(think.ids.begin() + 5, think.ids.begin() + 5 + static_cast<long>(close.size())) ==
          close);
    CHECK(think.stats.reasoning_tokens >= 5);
    CHECK(think.stats.reasoning_tokens < think.stats.generated_tokens);
    const std::string thought =
        model->tokenizer().decode(std::vector<int32_t>(think.ids.begin(), think.ids.begin() + 5));
    CHECK(!think.reasoning.empty());
    CHECK(thought.find(think.reasoning) != std::string::npos);  // its thinking, trimmed
    CHECK(!think.text.empty());
    for (const std::string& t : {think.text, think.reasoning}) {
        CHECK(t.find("<think>") == std::string::npos);
        CHECK(t.find("</think>") == std::string::npos);
    }
    MESSAGE("reasoning: ", think.reasoning, "\nanswer: ", think.text);

    const Outcome off = res.get(1);  // an empty thinking in the prompt: all answer
    CHECK(off.reasoning.empty());
    CHECK(off.stats.reasoning_tokens == 0);
    CHECK(!off.text.empty());
}

namespace {

// The linear-attention families: qwen35, and qwen3next (its MoE, grouped heads, fused ssm_ba).
constexpr const char* kLinearAttentionShapes[] = {"tiny-qwen35", "tiny-qwen3next"};

std::unique_ptr<Model> tiny_qwen35(const test::TempDir& dir, const std::string& shape = "tiny-qwen35") {
    const std::string path = dir.file(shape + ".gguf");
    SyntheticShape sh = synthetic_shape(shape);
    sh.qk_gain = 4.0f, sh.attn_gain = 8.0f;  // test_arch_peer's gains: attention and states decide
    write_synthetic_model(path, sh, "F32");
    return load(path, 256, 8, 1);
}

}  // namespace

// qwen35 (a synthetic tiny-qwen35 file): each sequence's recurrent state (KvCache state slots)
// through the scheduler. 8 requests sharing a 40-token prefix join a batch of 8 two per step
// and are prefilled in chunks of at most 24 tokens beside the others' decodes, cut at block
// ends, where the state is snapshot; later requests resume from the shared prefix's snapshot
// (prefix reuse on): each request's greedy ids equal its ids alone, every token computed.
TEST_CASE("qwen35, qwen3next: greedy outputs are the same alone and batched, resumed from state snapshots") {
    for (const char* shape : kLinearAttentionShapes) SUBCASE(shape) {
            test::TempDir dir;
            auto model = tiny_qwen35(dir, shape);
            std::vector<EngineRequest> reqs;
            for (int i = 0; i < 8; ++i) {
                EngineRequest r = long_request(40, 10 + i);
                r.top_logprobs = 0;  // the ids, from the logprobs entries
                for (int k = 0; k <= i; ++k) r.prompt_tokens.push_back(500 + 37 * i + k);
                reqs.push_back(r);
            }
            const std::vector<Outcome> ref = alone(*model, reqs);
            Results res;
            SchedulerOptions o;
            o.max_batch = 8;
            o.max_step_tokens = 24;
            int32_t widest = 0;
            size_t next = 2;
            Scheduler* self = nullptr;
            o.on_step = [&](const StepInfo& info) {
                widest = std::max(widest, static_cast<int32_t>(info.batch.size()));
                for (int k = 0; k < 2 && next < reqs.size(); ++k, ++next)
                    self->submit(reqs[next], res.sink(static_cast<int>(next)));
            };
            Scheduler s(*model, o);
            self = &s;
            for (size_t i = 0; i < 2; ++i) s.submit(reqs[i], res.sink(static_cast<int>(i)));
            res.wait(static_cast<int>(reqs.size()));
            CHECK(widest >= 4);
            int32_t most_reused = 0;
            for (size_t i = 0; i < reqs.size(); ++i) {
                CAPTURE(i);
                const Outcome got = res.get(static_cast<int>(i));
                REQUIRE(got.error.empty());
                REQUIRE(!ref[i].ids.empty());
                CHECK(got.ids == ref[i].ids);
                CHECK(got.stats.reused_tokens % 16 == 0);  // whole blocks, up to a snapshot
                most_reused = std::max(most_reused, got.stats.reused_tokens);
            }
            CHECK(most_reused == 32);  // the shared 40 tokens' last block end
            CHECK(model->kv().state_snapshots() > 0);
        }
}

// A follow-up turn (the first turn's prompt and answer, then more) resumes from the snapshot
// taken where the first turn's decode crossed a block end, and a cache_key conversation edited
// back into its history from the last snapshot before the edit; the greedy ids equal those of
// the same requests with every token computed.
TEST_CASE("qwen35, qwen3next: a follow-up turn and an edit resume from state snapshots, same greedy ids") {
    for (const char* shape : kLinearAttentionShapes) SUBCASE(shape) {
            test::TempDir dir;
            auto model = tiny_qwen35(dir, shape);
            EngineRequest first = long_request(40, 12);
            first.top_logprobs = 0;
            first.cache_key = "chat";
            Results res;
            Scheduler s(*model, SchedulerOptions{});
            s.submit(first, res.sink(0));
            res.wait(1);
            const Outcome one = res.get(0);
            REQUIRE(one.error.empty());
            REQUIRE(one.ids.size() == 12u);

            EngineRequest follow = first;  // another conversation with the same history: the prefix cache
            follow.cache_key.clear();
            follow.prompt_tokens.insert(follow.prompt_tokens.end(), one.ids.begin(), one.ids.end());
            for (int k = 0; k < 7; ++k) follow.prompt_tokens.push_back(700 + k);
            EngineRequest edit = first;  // the chat itself, its last prompt tokens edited: back to 32
            edit.prompt_tokens.resize(36);
            for (int k = 0; k < 9; ++k) edit.prompt_tokens.push_back(800 + k);
            s.submit(follow, res.sink(1));
            res.wait(2);
            s.submit(edit, res.sink(2));
            res.wait(3);
            const std::vector<Outcome> ref = alone(*model, {follow, edit});
            const Outcome f = res.get(1), e = res.get(2);
            REQUIRE(f.error.empty());
            REQUIRE(e.error.empty());
            CHECK(f.ids == ref[0].ids);
            CHECK(e.ids == ref[1].ids);
            // 40 prompt tokens and 11 decoded ones cached: the snapshot at 48; the edit at 36: at 32.
            CHECK(f.stats.reused_tokens == 48);
            CHECK(e.stats.reused_tokens == 32);
        }
}

// After a restart: a model that ran the first turn with a disk prefix cache is gone; a new one
// on the same folder resumes the follow-up turn from the disk tier's KV blocks and state
// snapshot (Model::open_disk_prefix_cache opens both), with the same greedy ids.
TEST_CASE("qwen35, qwen3next: a follow-up turn after a restart resumes from the disk tier's state snapshot") {
    for (const char* shape : kLinearAttentionShapes) SUBCASE(shape) {
            test::TempDir dir;
            const std::string cache = dir.file("kv");
            EngineRequest first = long_request(40, 12);
            first.top_logprobs = 0;
            Outcome one;
            {
                auto model = tiny_qwen35(dir, shape);
                model->open_disk_prefix_cache(cache, 64ull << 20);
                Results res;
                Scheduler s(*model, SchedulerOptions{});
                s.submit(first, res.sink(0));
                res.wait(1);
                one = res.get(0);
                REQUIRE(one.error.empty());
                REQUIRE(one.ids.size() == 12u);
            }  // the stores write what is queued before they close
            EngineRequest follow = first;
            follow.prompt_tokens.insert(follow.prompt_tokens.end(), one.ids.begin(), one.ids.end());
            for (int k = 0; k < 7; ++k) follow.prompt_tokens.push_back(700 + k);
            auto model = tiny_qwen35(dir, shape);
            const std::vector<Outcome> ref = alone(*model, {follow});
            model->open_disk_prefix_cache(cache, 64ull << 20);
            REQUIRE(model->kv().disk_state_store() != nullptr);
            CHECK(model->kv().disk_state_store()->size() == 2u);  // the snapshots at 32 (prefill) and 48 (decode)
            Results res;
            Scheduler s(*model, SchedulerOptions{});
            s.submit(follow, res.sink(0));
            res.wait(1);
            const Outcome f = res.get(0);
            REQUIRE(f.error.empty());
            CHECK(f.ids == ref[0].ids);
            CHECK(f.stats.reused_tokens == 48);
        }
}
