// Grammar-constrained generation end to end on SmolLM2 (a real chat model): through
// Sequence (`ember run`'s blocking client) and the Scheduler directly, greedy and sampled, the
// output under a JSON schema parses and has the schema's keys, types and bounds; the
// candidates path (Backend::top_k) and the full-row path give valid output alike.
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "engine/grammar/json_schema.h"
#include "engine/runtime/chat.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/scheduler.h"
#include "test_data.h"

using namespace ember;
using nlohmann::json;

namespace {

const char* kSchema = R"({"type":"object","properties":{
    "city":{"type":"string","maxLength":20},
    "population":{"type":"integer","minimum":0,"maximum":40000000},
    "coastal":{"type":"boolean"},
    "rivers":{"type":"array","items":{"type":"string","maxLength":16},"minItems":1,"maxItems":3},
    "climate":{"enum":["oceanic","continental","arid"]}},
    "required":["city","population","coastal","rivers","climate"]})";

std::unique_ptr<Model> smollm2() {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    LoadOptions o;
    o.path = path;
    o.device = BackendPreference::Cpu;
    o.n_threads = 2;
    o.n_ctx = 512;
    o.n_seqs = 4;
    return Model::load(o);
}

std::shared_ptr<const grammar::Grammar> schema_grammar() {
    return grammar::Grammar::parse(grammar::json_schema_to_gbnf(json::parse(kSchema)));
}

std::vector<int32_t> prompt(const Model& m) {
    return chat_prompt_tokens(m, {{"user", "Describe Paris as JSON with city, population, coastal, rivers, climate."}});
}

void check_valid(const std::string& text) {
    CAPTURE(text);
    const json j = json::parse(text);  // throws (fails the case) unless the whole text is JSON
    REQUIRE(j.is_object());
    CHECK(j.size() == 5);
    CHECK(j["city"].is_string());
    CHECK(j["city"].get<std::string>().size() <= 20 * 6);  // up to 20 characters (escapes count as one)
    CHECK(j["population"].is_number_integer());
    CHECK(j["population"].get<int64_t>() >= 0);
    CHECK(j["population"].get<int64_t>() <= 40000000);
    CHECK(j["coastal"].is_boolean());
    REQUIRE(j["rivers"].is_array());
    CHECK(j["rivers"].size() >= 1);
    CHECK(j["rivers"].size() <= 3);
    const std::string climate = j["climate"];
    CHECK((climate == "oceanic" || climate == "continental" || climate == "arid"));
}

std::string run_sequence(Model& m, const SamplingParams& sp) {
    Sequence seq(m);
    GenerateOptions o;
    o.sampling = sp;
    o.max_tokens = 200;
    o.grammar = schema_grammar();
    std::string out;
    const GenerateStats st = seq.generate(prompt(m), o, [&](std::string_view t) {
        out += t;
        return true;
    });
    CHECK(st.stop_reason == StopReason::EndOfText);  // the grammar completed, not max_tokens
    return out;
}

}  // namespace

TEST_CASE("sequenceGreedyAndSampledOutputFollowsTheSchema") {
    auto m = smollm2();
    check_valid(run_sequence(*m, SamplingParams::greedy()));
    for (uint64_t seed : {1u, 2u, 3u}) {
        SamplingParams sp;  // top_k 40: the candidates path
        sp.seed = seed;
        check_valid(run_sequence(*m, sp));
    }
    SamplingParams full;  // top_k 0: the whole row on the host, masked
    full.top_k = 0;
    full.seed = 7;
    check_valid(run_sequence(*m, full));
}

TEST_CASE("schedulerBatchOfConstrainedAndFreeRequests") {
    auto m = smollm2();
    std::mutex mu;
    std::condition_variable cv;
    std::map<int, std::string> text;
    std::map<int, StopReason> stop;
    std::map<int, std::string> error;
    int ended = 0;
    Scheduler s(*m, {});
    for (int i = 0; i < 4; ++i) {
        EngineRequest r;
        r.messages = {{"user", "Describe Paris as JSON with city, population, coastal, rivers, climate."}};
        r.max_tokens = 200;
        r.sampling = i == 0 ? SamplingParams::greedy() : SamplingParams{};
        r.sampling.seed = static_cast<uint64_t>(i);
        if (i == 3) r.top_logprobs = 2;            // the full-row path
        if (i != 2) r.grammar = schema_grammar();  // request 2 is free text beside them
        s.submit(r, [&, i](EngineEvent&& e) {
            std::lock_guard lock(mu);
            text[i] += e.text;
            if (e.kind == EngineEvent::Kind::Finished) stop[i] = e.stats.stop_reason;
            if (e.kind == EngineEvent::Kind::Failed) error[i] = e.error;
            if (e.kind == EngineEvent::Kind::Finished || e.kind == EngineEvent::Kind::Failed) ++ended, cv.notify_all();
        });
    }
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::minutes(5), [&] { return ended == 4; }));
    for (int i : {0, 1, 3}) {
        CAPTURE(i);
        REQUIRE(error[i].empty());
        CHECK(stop[i] == StopReason::EndOfText);
        check_valid(text[i]);
    }
    CHECK(error[2].empty());
    CHECK_FALSE(text[2].empty());
}
