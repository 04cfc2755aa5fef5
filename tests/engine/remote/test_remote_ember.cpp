// RemoteEngine against Ember's own OpenAI-compatible server: the HttpServer of `ember serve`
// over a real Scheduler on 127.0.0.1 (SmolLM2 for chat, stories260K for raw completions and a
// long stream to cancel). Streamed answers equal the server's non-streamed ones; a cancel
// closes the connection and the server counts the generation as cancelled; a wrong key is a
// 401 and an unknown model a 404, each a clear error.
#include <doctest/doctest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "engine/scheduler/scheduler.h"
#include "engine/server/http_server.h"
#include "remote_answer.h"
#include "test_data.h"

using namespace ember;
using namespace ember::test;
using nlohmann::json;

namespace {

// A model, its scheduler and `ember serve`'s HTTP server over it.
struct Served {
    std::unique_ptr<Model> model;
    std::unique_ptr<Scheduler> scheduler;
    std::unique_ptr<server::HttpServer> server;
    int port = 0;

    Served(const std::string& path, server::ServerOptions so = {}, std::function<void(const StepInfo&)> on_step = {},
           const std::string& chat_template = "") {
        EMBER_REQUIRE_FILE(path);
        LoadOptions lo;
        if (!chat_template.empty()) lo.chat_template = chat_template;
        lo.path = path;
        lo.device = BackendPreference::Cpu;
        lo.n_ctx = 1024;
        lo.n_seqs = 2;
        model = Model::load(lo);
        SchedulerOptions o;
        o.max_batch = 2;
        o.on_step = std::move(on_step);
        scheduler = std::make_unique<Scheduler>(*model, o);
        server = std::make_unique<server::HttpServer>(*scheduler, so);
        port = server->start();
    }
    ~Served() { server->stop(); }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }
    std::string name() const { return scheduler->status().model; }
    json post(const std::string& path, const json& body, const std::string& key = "") const {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120);
        httplib::Headers h;
        if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
        auto res = c.Post(path, h, body.dump(), "application/json");
        REQUIRE(res);
        REQUIRE_MESSAGE(res->status == 200, res->body);
        return json::parse(res->body);
    }
    std::string metrics() const {
        httplib::Client c("127.0.0.1", port);
        auto res = c.Get("/metrics");
        REQUIRE(res);
        return res->body;
    }
};

Served& smollm2() {
    static Served s(test_model(kSmolLM2));
    return s;
}

remote::RemoteConfig config_for(const Served& s) {
    remote::RemoteConfig c;
    c.base_url = s.url();
    c.model = s.name();
    return c;
}

}  // namespace

TEST_CASE("listsTheServersModel") {
    remote::RemoteEngine engine(config_for(smollm2()));
    const auto models = engine.list_models();
    REQUIRE(models.size() == 1);
    CHECK(models[0].id == "SmolLM2-135M-Instruct.Q4_1");
    CHECK(models[0].owned_by == "ember");
    CHECK(models[0].context_length == 1024);
}

TEST_CASE("streamedChatEqualsTheNonStreamedAnswer") {
    Served& s = smollm2();
    remote::RemoteEngine engine(config_for(s));
    const std::string question = "What is the capital of France? Answer in one sentence.";
    const RemoteAnswer a = RemoteCall(engine, chat_request(question, 40)).wait();
    REQUIRE_MESSAGE(a.error == "", a.error);
    const json whole = s.post("/v1/chat/completions", {{"model", s.name()},
                                                       {"messages", {{{"role", "user"}, {"content", question}}}},
                                                       {"max_tokens", 40},
                                                       {"temperature", 0}});
    const std::string expected = whole["choices"][0]["message"]["content"];
    CHECK(!expected.empty());
    CHECK(a.text == expected);
    CHECK(a.text_events > 1);  // it really streamed
    CHECK(a.kinds.front() == EngineEvent::Kind::Started);
    CHECK(a.kinds.back() == EngineEvent::Kind::Finished);
    CHECK(a.stats.prompt_tokens == whole["usage"]["prompt_tokens"].get<int>());
    CHECK(a.stats.generated_tokens == whole["usage"]["completion_tokens"].get<int>());
    CHECK(a.stats.ttft_ms > 0);
    CHECK(a.stats.stop_reason ==
          (whole["choices"][0]["finish_reason"] == "length" ? StopReason::Length : StopReason::EndOfText));
    // The client-side timings reach the engine's telemetry, as the local engine's do.
    const TelemetrySnapshot t = engine.telemetry().snapshot();
    CHECK(t.requests == 1);
    CHECK(t.ttft_ms.count == 1);
    CHECK(t.inter_token_ms.count > 0);
}

TEST_CASE("rawPromptGoesToCompletions") {
    Served stories(testdata(kStories));
    remote::RemoteEngine engine(config_for(stories));
    EngineRequest r;
    r.prompt = "Once upon a time";
    r.max_tokens = 32;
    r.sampling = SamplingParams::greedy();
    const RemoteAnswer a = RemoteCall(engine, r).wait();
    REQUIRE_MESSAGE(a.error == "", a.error);
    const json whole = stories.post("/v1/completions", {{"prompt", r.prompt}, {"max_tokens", 32}, {"temperature", 0}});
    CHECK(a.text == whole["choices"][0]["text"].get<std::string>());
    CHECK(a.stats.generated_tokens == 32);
    CHECK(a.stats.stop_reason == StopReason::Length);
}

TEST_CASE("cancelClosesTheStreamAndTheServerSeesIt") {
    // Steps slowed to ~200 a second so the answer is still running when the cancel comes.
    Served stories(testdata(kStories), {},
                   [](const StepInfo&) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
    remote::RemoteEngine engine(config_for(stories));
    EngineRequest r;
    r.prompt = "Once upon a time";
    r.max_tokens = 900;
    r.sampling = SamplingParams::greedy();
    RemoteCall call(engine, r, [&engine](uint64_t id, const EngineEvent&) { engine.cancel(id); });
    const RemoteAnswer a = call.wait();
    CHECK(a.error == "");
    CHECK(a.kinds.back() == EngineEvent::Kind::Finished);
    CHECK(a.stats.stop_reason == StopReason::Cancelled);
    CHECK(a.text_events < 100);
    // The server noticed the client leave and cancelled its generation.
    bool seen = false;
    for (int i = 0; i < 200 && !seen; ++i) {
        seen = stories.metrics().find("ember_generations_total{stop_reason=\"cancelled\"} 1") != std::string::npos;
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK_MESSAGE(seen, stories.metrics());
}

TEST_CASE("wrongKeyIs401AndTheKeyIsNeverShown") {
    server::ServerOptions so;
    so.api_key = "right-key-1234";
    Served s(testdata(kStories), so);
    auto cfg = config_for(s);
    cfg.model = "stories260K";
    cfg.api_key = "wrong-key-5678";
    remote::RemoteEngine engine(cfg);
    try {
        engine.list_models();
        FAIL("a wrong key was accepted");
    } catch (const remote::RemoteError& e) {
        CHECK(e.kind() == remote::RemoteErrorKind::Unauthorized);
        CHECK(e.http_status() == 401);
        CHECK(std::string(e.what()).find("the API key was not accepted") != std::string::npos);
        CHECK(std::string(e.what()).find("wrong-key-5678") == std::string::npos);
    }
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 4)).wait();
    REQUIRE(a.failed());
    CHECK(a.error.find("HTTP 401") != std::string::npos);
    CHECK(a.error.find("wrong-key-5678") == std::string::npos);

    cfg.api_key = "right-key-1234";
    remote::RemoteEngine right(cfg);
    CHECK(right.list_models().at(0).id == "stories260K");
}

TEST_CASE("unknownModelIs404") {
    auto cfg = config_for(smollm2());
    cfg.model = "no-such-model";
    remote::RemoteEngine engine(cfg);
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 4)).wait();
    REQUIRE(a.failed());
    CHECK(a.error.find("not found (HTTP 404") != std::string::npos);
    CHECK(a.error.find("no-such-model") != std::string::npos);  // the server's own words
}

TEST_CASE("requestsARemoteEngineCannotRunAreRefusedAtSubmit") {
    remote::RemoteEngine engine(config_for(smollm2()));
    EngineRequest ids;
    ids.prompt_tokens = {1, 2, 3};
    CHECK_THROWS_WITH_AS(engine.submit(ids, [](EngineEvent&&) {}),
                         "a remote engine takes text or messages, not token ids", Error);
    remote::RemoteConfig ftp;
    ftp.base_url = "ftp://x";
    CHECK_THROWS_WITH_AS(remote::RemoteEngine{ftp}, doctest::Contains("must start with http:// or https://"), Error);
}

TEST_CASE("reasoningComesApartFromTheAnswerAsTheServerSplitsIt") {
    // SmolLM2 made to think by a template whose generation prompt opens <think> (as Qwen3.5's
    // does); the thinking budget closes it after 5 tokens and the model answers.
    const std::string tmpl = std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/think-chatml.jinja";
    EMBER_REQUIRE_FILE(tmpl);
    Served s(test_model(kSmolLM2), {}, {}, read_file(tmpl));
    remote::RemoteEngine engine(config_for(s));
    EngineRequest r = chat_request("What is the capital of France?", 48);
    r.reasoning_budget = 5;
    const RemoteAnswer a = RemoteCall(engine, r).wait();
    REQUIRE_MESSAGE(a.error == "", a.error);
    const json whole =
        s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", r.messages[0].content}}}},
                                        {"max_tokens", 48},
                                        {"temperature", 0},
                                        {"reasoning_budget_tokens", 5}});
    const json& msg = whole["choices"][0]["message"];
    CHECK(!a.reasoning.empty());
    CHECK(a.reasoning == msg["reasoning_content"].get<std::string>());
    CHECK(a.text == msg["content"].get<std::string>());
    CHECK(a.text.find("<think>") == std::string::npos);
    CHECK(a.stats.reasoning_tokens == whole["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>());
}
