// The HTTP server end to end: a real Scheduler on a real model, the server on 127.0.0.1 (a
// free port), driven with cpp-httplib's client. stories260K for raw completions (fast, and
// its greedy continuation is known from an independent reference), SmolLM2 for chat.
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/chat.h"
#include "engine/scheduler/scheduler.h"
#include "engine/server/http_server.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;
using nlohmann::json;

namespace {

// A model, its scheduler and a server over it. More servers (other options) may share the
// scheduler: add_server().
struct Served {
    std::unique_ptr<Model> model;
    std::unique_ptr<Scheduler> scheduler;
    std::vector<std::unique_ptr<server::HttpServer>> servers;

    Served(const std::string& path, int32_t parallel, int64_t ctx, int32_t max_queue = 256) {
        EMBER_REQUIRE_FILE(path);
        LoadOptions lo;
        lo.path = path;
        lo.device = BackendPreference::Cpu;
        lo.n_ctx = ctx;
        lo.n_seqs = parallel;
        model = Model::load(lo);
        SchedulerOptions so;
        so.max_batch = parallel;
        so.max_queue = max_queue;
        scheduler = std::make_unique<Scheduler>(*model, so);
        add_server({});
    }
    ~Served() {
        for (auto& s : servers) s->stop();  // before the scheduler goes
    }
    httplib::Client& add_server(server::ServerOptions o) {
        servers.push_back(std::make_unique<server::HttpServer>(*scheduler, o));
        const int port = servers.back()->start();
        clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
        clients.back()->set_read_timeout(120);
        return *clients.back();
    }
    httplib::Client& client() { return *clients.front(); }
    int port() const { return servers.front()->port(); }

    std::vector<std::unique_ptr<httplib::Client>> clients;
};

Served& stories() {
    static Served s(test::testdata(test::kStories), 4, 512);
    return s;
}
Served& smollm2() {
    static Served s(test::test_model(test::kSmolLM2), 2, 1024);
    return s;
}

json post_json(httplib::Client& c, const std::string& path, const json& body, int want_status = 200) {
    auto res = c.Post(path, body.dump(), "application/json");
    REQUIRE_MESSAGE(res, "no answer from the server: ", httplib::to_string(res.error()));
    CAPTURE(res->body);
    CHECK(res->status == want_status);
    return json::parse(res->body);
}

// The reference greedy continuation of stories260K from BOS (an independent float32 forward).
std::vector<int32_t> reference_ids(size_t n) {
    std::istringstream in(test::read_file(test::testdata("models/stories260K.greedy256.ids.txt")));
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word && ids.size() < n)
        if (word != "#") ids.push_back(std::stoi(word));
        else std::getline(in, word);  // the comment line
    return ids;
}

std::string reference_text(size_t n) {
    std::string text;
    for (int32_t id : reference_ids(n)) text += stories().model->tokenizer().token_to_piece(id);
    return text;
}

// The events of an SSE body, each checked to be framed as "data: ...\n\n"; [DONE] must be last.
std::vector<json> sse_events(const std::string& body) {
    std::vector<json> events;
    size_t pos = 0;
    bool done = false;
    while (pos < body.size()) {
        const size_t end = body.find("\n\n", pos);
        REQUIRE_MESSAGE(end != std::string::npos, "an SSE event without its blank line: ", body.substr(pos));
        const std::string event = body.substr(pos, end - pos);
        pos = end + 2;
        if (event.rfind(": ", 0) == 0) continue;  // a comment (the server's heartbeat)
        REQUIRE_MESSAGE(event.rfind("data: ", 0) == 0, "not a data event: ", event);
        REQUIRE_FALSE(done);  // nothing after [DONE]
        if (event == "data: [DONE]") done = true;
        else events.push_back(json::parse(event.substr(6)));
    }
    CHECK(done);
    return events;
}

std::string metric_line(httplib::Client& c, const std::string& prefix) {
    auto res = c.Get("/metrics");
    REQUIRE(res);
    std::istringstream in(res->body);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix + " ", 0) == 0) return line.substr(prefix.size() + 1);
    return "";
}

double metric(httplib::Client& c, const std::string& prefix) {
    const std::string v = metric_line(c, prefix);
    return v.empty() ? 0.0 : std::stod(v);
}

bool wait_idle(Served& s, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (s.scheduler->status().requests.empty()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

TEST_CASE("healthModelsAndStatus") {
    auto& c = stories().client();
    auto health = c.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    CHECK(json::parse(health->body) == json{{"status", "ok"}});
    auto models = c.Get("/v1/models");
    REQUIRE(models);
    const json m = json::parse(models->body);
    CHECK(m["object"] == "list");
    REQUIRE(m["data"].size() == 1);
    CHECK(m["data"][0]["id"] == "stories260K");
    CHECK(m["data"][0]["object"] == "model");
    CHECK(m["data"][0]["context_length"] == 512);  // the served context, per sequence
    auto status = c.Get("/v1/status");
    REQUIRE(status);
    const json s = json::parse(status->body);
    CHECK(s["model"] == "stories260K");
    CHECK(s["device"] == "cpu");
    CHECK(s["n_ctx"] == 512);
    CHECK(s["max_batch"] == 4);
    CHECK(s["kv_blocks"]["total"].get<int>() > 0);
    REQUIRE(s["memory"].size() >= 1);
    CHECK(s["memory"][0]["held"].get<uint64_t>() > 0);
    CHECK(s["running"] == 0);
    CHECK(s["queued"] == 0);
    CHECK(s.contains("uptime_s"));
}

TEST_CASE("aPortInUseIsAnError") {
    server::ServerOptions o;
    o.port = stories().port();
    server::HttpServer second(*stories().scheduler, o);
    CHECK_THROWS_WITH_AS(second.start(), doctest::Contains("in use"), ember::Error);
}

TEST_CASE("completionIsTheReferenceGreedyContinuation") {
    const json r = post_json(stories().client(), "/v1/completions",
                             {{"model", "stories260K"}, {"prompt", {1}}, {"max_tokens", 24}, {"temperature", 0}});
    CHECK(r["object"] == "text_completion");
    CHECK(r["id"].get<std::string>().rfind("cmpl-", 0) == 0);
    CHECK(r["choices"][0]["text"] == reference_text(24));
    CHECK(r["choices"][0]["finish_reason"] == "length");
    CHECK(r["usage"]["prompt_tokens"] == 1);
    CHECK(r["usage"]["completion_tokens"] == 24);
    CHECK(r["usage"]["total_tokens"] == 25);
}

TEST_CASE("streamedCompletionIsSseFramedWithUsageAndDone") {
    auto res = stories().client().Post("/v1/completions",
                                       json{{"prompt", {1}},
                                            {"max_tokens", 24},
                                            {"temperature", 0},
                                            {"stream", true},
                                            {"stream_options", {{"include_usage", true}}}}
                                           .dump(),
                                       "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type").rfind("text/event-stream", 0) == 0);
    const std::vector<json> events = sse_events(res->body);
    REQUIRE(events.size() >= 3);
    std::string text;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        CHECK(events[i]["object"] == "text_completion");
        CHECK(events[i]["usage"].is_null());  // include_usage: null until the last chunk
        text += events[i]["choices"][0]["text"].get<std::string>();
    }
    CHECK(text == reference_text(24));
    CHECK(events[events.size() - 2]["choices"][0]["finish_reason"] == "length");
    const json& last = events.back();
    CHECK(last["choices"] == json::array());
    CHECK(last["usage"]["completion_tokens"] == 24);
    CHECK(last["usage"]["prompt_tokens"] == 1);
}

TEST_CASE("stopStringEndsTheTextBeforeIt") {
    const std::string full = reference_text(24);
    const size_t at = full.find("little girl");
    REQUIRE(at != std::string::npos);
    const json r =
        post_json(stories().client(), "/v1/completions",
                  {{"prompt", {1}}, {"max_tokens", 24}, {"temperature", 0}, {"stop", {"zzz", "little girl"}}});
    CHECK(r["choices"][0]["text"] == full.substr(0, at));
    CHECK(r["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("completionLogprobsSpellTheText") {
    const json r = post_json(stories().client(), "/v1/completions",
                             {{"prompt", "Once upon a time"},
                              {"max_tokens", 12},
                              {"temperature", 0},
                              {"logprobs", 2},
                              {"ignore_eos", true}});
    const json& lp = r["choices"][0]["logprobs"];
    REQUIRE(lp["tokens"].size() == 12);
    CHECK(r["usage"]["completion_tokens"] == 12);
    std::string spelled;
    size_t offset = 0;
    for (size_t i = 0; i < 12; ++i) {
        CHECK(lp["text_offset"][i] == offset);
        spelled += lp["tokens"][i].get<std::string>();
        offset += lp["tokens"][i].get<std::string>().size();
        CHECK(lp["token_logprobs"][i].get<double>() <= 0.0);
        CHECK(lp["top_logprobs"][i].size() == 2);
    }
    CHECK(spelled == r["choices"][0]["text"]);
}

TEST_CASE("chatUsesTheModelsTemplateAndCountsExactly") {
    Served& s = smollm2();
    const std::vector<ChatMessage> messages = {{"system", "You are a helpful assistant."},
                                               {"user", "What is the capital of France?"}};
    const size_t prompt_tokens = chat_prompt_tokens(*s.model, messages).size();
    const json body = {{"model", "SmolLM2-135M-Instruct.Q4_1"},
                       {"messages",
                        {{{"role", "system"}, {"content", messages[0].content}},
                         {{"role", "user"}, {"content", messages[1].content}}}},
                       {"max_tokens", 16},
                       {"temperature", 0},
                       {"logprobs", true},
                       {"top_logprobs", 2}};
    const json r = post_json(s.client(), "/v1/chat/completions", body);
    CHECK(r["object"] == "chat.completion");
    CHECK(r["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    const std::string content = r["choices"][0]["message"]["content"];
    CHECK(r["choices"][0]["message"]["role"] == "assistant");
    CHECK_FALSE(content.empty());
    CHECK(content.find("<|im_") == std::string::npos);  // no template tokens leak into the text
    CHECK(r["usage"]["prompt_tokens"] == prompt_tokens);
    const json& lp = r["choices"][0]["logprobs"]["content"];
    // usage counts every token the engine generated, the end-of-generation token included;
    // that one has no text, so no logprobs entry (no stop strings here: "stop" means it came).
    const size_t eog = r["choices"][0]["finish_reason"] == "stop" ? 1 : 0;
    CHECK(r["usage"]["completion_tokens"] == lp.size() + eog);
    for (const json& t : lp) CHECK(t["top_logprobs"].size() == 2);

    // Streamed: the same greedy text, one role delta first, logprobs on every text chunk,
    // and the same usage in the last chunk.
    json sbody = body;
    sbody["stream"] = true;
    sbody["stream_options"] = {{"include_usage", true}};
    auto res = s.client().Post("/v1/chat/completions", sbody.dump(), "application/json");
    REQUIRE(res);
    const std::vector<json> events = sse_events(res->body);
    REQUIRE(events.size() >= 4);
    CHECK(events[0]["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
    std::string streamed;
    size_t streamed_tokens = 0;
    for (size_t i = 1; i + 2 < events.size(); ++i) {
        CHECK(events[i]["object"] == "chat.completion.chunk");
        streamed += events[i]["choices"][0]["delta"]["content"].get<std::string>();
        streamed_tokens += events[i]["choices"][0]["logprobs"]["content"].size();
    }
    CHECK(streamed == content);
    CHECK(events[events.size() - 2]["choices"][0]["finish_reason"] == r["choices"][0]["finish_reason"]);
    // The same usage, but the prompt's whole 16-token blocks came from the prefix cache now.
    json usage = r["usage"];
    CHECK(usage["prompt_tokens_details"]["cached_tokens"] == 0);
    usage["prompt_tokens_details"]["cached_tokens"] = (usage["prompt_tokens"].get<int>() - 1) / 16 * 16;
    CHECK(events.back()["usage"] == usage);
    CHECK(streamed_tokens == lp.size());
}

// A chat longer than the context (1024): stop, the server's default, is a 400 that says how
// far over it is and what to do; the request's own "context_overflow" or the server's
// --context-overflow truncate answer it with the oldest exchanges left out.
TEST_CASE("contextOverflowStopIs400AndTruncateAnswers") {
    Served& s = smollm2();
    json messages = json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}}});
    for (int i = 0; i < 40; ++i) {
        messages.push_back({{"role", "user"}, {"content", "Tell me a fact about the number " + std::to_string(i)}});
        messages.push_back({{"role", "assistant"}, {"content", "The number " + std::to_string(i) + " is a number."}});
    }
    messages.push_back({{"role", "user"}, {"content", "Which number came last?"}});
    json body = {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
    const json refused = post_json(s.client(), "/v1/chat/completions", body, 400);
    const std::string message = refused["error"]["message"];
    CHECK(message.find("tokens more than the context of 1024 holds") != std::string::npos);
    CHECK(message.find("truncate") != std::string::npos);
    CHECK(refused["error"]["type"] == "invalid_request_error");

    body["context_overflow"] = "truncate";
    const json cut = post_json(s.client(), "/v1/chat/completions", body);
    CHECK(cut["usage"]["prompt_tokens"].get<int>() <= 1024 - 8);
    CHECK_FALSE(cut["choices"][0]["message"]["content"].get<std::string>().empty());

    server::ServerOptions o;
    o.context_overflow = OverflowPolicy::Truncate;
    httplib::Client& truncating = s.add_server(o);
    body.erase("context_overflow");
    CHECK(post_json(truncating, "/v1/chat/completions", body)["usage"]["prompt_tokens"] ==
          cut["usage"]["prompt_tokens"]);
    body["context_overflow"] = "stop";  // the request's choice wins over the server's
    post_json(truncating, "/v1/chat/completions", body, 400);
    body["context_overflow"] = "shorten";
    CHECK(post_json(truncating, "/v1/chat/completions", body, 400)["error"]["param"] == "context_overflow");
}

TEST_CASE("badRequestsGetOpenAIErrorObjects") {
    Served& s = stories();
    auto& c = s.client();
    const auto error_of = [&](const std::string& path, const std::string& body, int status) {
        auto res = c.Post(path, body, "application/json");
        REQUIRE(res);
        CAPTURE(body);
        CAPTURE(res->body);
        CHECK(res->status == status);
        const json e = json::parse(res->body);
        REQUIRE(e.contains("error"));
        CHECK(e["error"]["message"].is_string());
        CHECK(e["error"]["type"].is_string());
        CHECK(e["error"].contains("param"));
        CHECK(e["error"].contains("code"));
        return e["error"];
    };
    CHECK(error_of("/v1/completions", "{\"prompt\": ", 400)["code"] == "invalid_json");
    CHECK(error_of("/v1/chat/completions", R"({"messages": "hi"})", 400)["param"] == "messages");
    CHECK(error_of("/v1/completions", R"({"prompt": "x", "temperature": "warm"})", 400)["param"] == "temperature");
    CHECK(error_of("/v1/completions", R"({"prompt": "x", "model": "gpt-9"})", 404)["code"] == "model_not_found");
    CHECK(error_of("/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", 400)["param"] == "max_tokens");
    CHECK(error_of("/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "n": 2})", 400)["param"] ==
          "n");
    // A prompt longer than the context (512) is the engine's refusal: still a 400 with a reason.
    json ids = json::array();
    for (int i = 0; i < 600; ++i) ids.push_back(5);
    CHECK(error_of("/v1/completions", json{{"prompt", ids}}.dump(), 400)["message"].get<std::string>().size() > 0);
    // Routes that do not exist
    CHECK(error_of("/v1/embeddings", "{}", 404)["code"] == "not_found");
    auto get = c.Get("/v1/chat/completions");
    REQUIRE(get);
    CHECK(get->status == 404);
    CHECK(json::parse(get->body)["error"]["code"] == "not_found");

    // A body over the limit: 413, before any parsing.
    server::ServerOptions small;
    small.limits.max_body_bytes = 1024;
    httplib::Client& sc = s.add_server(small);
    auto big = sc.Post("/v1/completions", json{{"prompt", std::string(4000, 'x')}}.dump(), "application/json");
    REQUIRE(big);
    CHECK(big->status == 413);
    CHECK(json::parse(big->body)["error"]["code"] == "request_too_large");
    CHECK(stories().scheduler->status().requests.empty());  // nothing of it reached the engine
}

// A full queue is the server being busy, not the request being wrong: 503 with Retry-After
// and an OpenAI error object, so that clients (the openai package among them) retry.
TEST_CASE("aFullQueueIs503WithRetryAfter") {
    Served busy(test::testdata(test::kStories), 1, 256, 0);  // a queue of 0: every request is refused
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};
    auto r = busy.client().Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(r);
    CHECK(r->status == 503);
    CHECK(r->get_header_value("Retry-After") == "1");
    const json e = json::parse(r->body)["error"];
    CHECK(e["type"] == "server_error");
    CHECK(e["code"] == "queue_full");
    CHECK(std::string(e["message"]).find("queue is full") != std::string::npos);
}

TEST_CASE("apiKeyIsRequiredWhenSet") {
    server::ServerOptions o;
    o.api_key = "sk-test-123";
    httplib::Client& c = stories().add_server(o);
    const std::string body = json{{"prompt", {1}}, {"max_tokens", 2}}.dump();
    auto none = c.Post("/v1/completions", body, "application/json");
    REQUIRE(none);
    CHECK(none->status == 401);
    CHECK(json::parse(none->body)["error"]["code"] == "invalid_api_key");
    for (const char* wrong : {"Bearer sk-test-12", "Bearer sk-test-1234", "Bearer ", "sk-test-123", "Basic sk-test-123",
                              "Bearersk-test-123", "Bearer\tsk-test-123"}) {
        CAPTURE(wrong);
        auto r = c.Post("/v1/completions", {{"Authorization", wrong}}, body, "application/json");
        REQUIRE(r);
        CHECK(r->status == 401);
    }
    auto models = c.Get("/v1/models");
    REQUIRE(models);
    CHECK(models->status == 401);
    // RFC 9110: the scheme's name is case-insensitive, and more than one space may follow it.
    for (const char* right : {"Bearer sk-test-123", "bearer sk-test-123", "BEARER  sk-test-123"}) {
        CAPTURE(right);
        auto ok = c.Post("/v1/completions", {{"Authorization", right}}, body, "application/json");
        REQUIRE(ok);
        CHECK(ok->status == 200);
    }
    auto health = c.Get("/health");  // supervisors need no key
    REQUIRE(health);
    CHECK(health->status == 200);
}

TEST_CASE("clientThatDisconnectsMidStreamIsCancelled") {
    Served& s = smollm2();
    auto& c = s.client();
    const double cancelled_before = metric(c, "ember_generations_total{stop_reason=\"cancelled\"}");
    const double generated_before = metric(c, "ember_generated_tokens_total");
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = json{{"prompt", "Write a very long story."}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}}
                   .dump();
    int data_events = 0;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        data_events += std::string(data, n).find("data: ") != std::string::npos;
        return data_events < 2;  // two chunks, then hang up
    };
    httplib::Client hangup("127.0.0.1", s.port());
    const auto t0 = std::chrono::steady_clock::now();
    auto res = hangup.send(req);
    CHECK_FALSE(res);  // the client itself ended it
    CHECK(data_events == 2);
    REQUIRE(wait_idle(s, std::chrono::seconds(5)));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(metric(c, "ember_generations_total{stop_reason=\"cancelled\"}") == cancelled_before + 1);
    const double generated = metric(c, "ember_generated_tokens_total") - generated_before;
    test::info("disconnect: cancelled after %.0f of 500 tokens, idle %.2f s after the request began", generated,
               seconds);
    CHECK(generated < 500);
}

TEST_CASE("clientThatHangsUpBeforeAnUnstreamedAnswerIsCancelled") {
    Served& s = smollm2();
    auto& c = s.client();
    const double cancelled_before = metric(c, "ember_generations_total{stop_reason=\"cancelled\"}");
    const double generated_before = metric(c, "ember_generated_tokens_total");
    // A raw connection: the request goes out whole, then the socket closes while the server is
    // still generating (800 tokens take SmolLM2 seconds; it is cancelled long before).
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(s.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const std::string body =
        json{{"prompt", "Write a very long story."}, {"max_tokens", 800}, {"ignore_eos", true}}.dump();
    const std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    REQUIRE(send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
    const auto t0 = std::chrono::steady_clock::now();
    while (s.scheduler->status().requests.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE_FALSE(s.scheduler->status().requests.empty());  // it is running
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    close(fd);
    REQUIRE(wait_idle(s, std::chrono::seconds(10)));
    CHECK(metric(c, "ember_generations_total{stop_reason=\"cancelled\"}") == cancelled_before + 1);
    const double generated = metric(c, "ember_generated_tokens_total") - generated_before;
    test::info("unstreamed hang-up: cancelled after %.0f of 800 tokens", generated);
    CHECK(generated < 800);
    // The server goes on answering.
    CHECK(post_json(c, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 4}})["usage"]["completion_tokens"] == 4);
}

TEST_CASE("metricsPageCountsWhatHappened") {
    auto& c = stories().client();
    post_json(c, "/v1/completions", {{"prompt", {1}}, {"max_tokens", 4}, {"temperature", 0}});
    auto res = c.Get("/metrics");
    REQUIRE(res);
    CHECK(res->get_header_value("Content-Type").rfind("text/plain", 0) == 0);
    const std::string& m = res->body;
    for (const char* line :
         {"# TYPE ember_http_requests_total counter", "# TYPE ember_time_to_first_token_seconds histogram",
          "# TYPE ember_inter_token_seconds histogram", "# TYPE ember_kv_blocks_used gauge",
          "# TYPE ember_requests_queued gauge", "# TYPE ember_memory_bytes gauge"}) {
        CAPTURE(line);
        CHECK(m.find(line) != std::string::npos);
    }
    CHECK(metric(c, "ember_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"}") >= 1);
    CHECK(metric(c, "ember_time_to_first_token_seconds_count") >= 1);
    CHECK(metric(c, "ember_inter_token_seconds_count") >= 3);
    CHECK(metric(c, "ember_generated_tokens_total") >= 4);
    CHECK(metric(c, "ember_requests_running") == 0);
    CHECK(metric(c, "ember_kv_blocks_total") > 0);
}
