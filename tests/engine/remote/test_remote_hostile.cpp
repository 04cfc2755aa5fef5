// RemoteEngine against servers that misbehave, scripted byte by byte on a real socket
// (scripted_server.h): rate limits with Retry-After, servers that fail, die mid-answer, send
// malformed or endless event streams or a 2 GB body, or go silent. Each must end in a clear
// error within the configured bounds, keep what was answered, and never leak the API key.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "engine/core/log.h"
#include "remote_answer.h"
#include "scripted_server.h"
#include "test_util.h"

using namespace ember;
using namespace ember::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kKey = "sk-test-7f3a9c1e-never-print-me";

remote::RemoteConfig config_for(const ScriptedServer& s) {
    remote::RemoteConfig c;
    c.base_url = s.url();
    c.model = "scripted";
    c.api_key = kKey;
    c.backoff_initial = std::chrono::milliseconds(20);
    c.read_timeout = std::chrono::seconds(2);
    return c;
}

std::string done_stream(const std::string& text) {
    return sse_head() + sse_chunk(text) +
           "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
           "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
}

// Captures every engine log line at every level while it lives.
struct LogCapture {
    std::string lines;
    std::mutex m;
    LogCapture() {
        set_log_level(LogLevel::Trace);
        set_log_sink([this](LogLevel, std::string_view s) {
            std::lock_guard lock(m);
            lines.append(s).append("\n");
        });
    }
    ~LogCapture() {
        set_log_sink({});
        set_log_level(LogLevel::Warn);
    }
};

}  // namespace

TEST_CASE("rateLimitedRequestWaitsRetryAfterThenSucceeds") {
    LogCapture logs;
    ScriptedServer server([](int fd, const std::string&, int n) {
        if (n == 0)
            send_all(fd, json_answer(429, "Too Many Requests", R"({"error":{"message":"slow down"}})",
                                     "Retry-After: 1\r\n"));
        else send_all(fd, done_stream("hello"));
    });
    remote::RemoteEngine engine(config_for(server));
    const auto t0 = Clock::now();
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 8)).wait();
    const double waited_s = std::chrono::duration<double>(Clock::now() - t0).count();
    CHECK(a.error == "");
    CHECK(a.text == "hello");
    CHECK(a.stats.prompt_tokens == 7);
    CHECK(a.stats.stop_reason == StopReason::EndOfText);
    CHECK(server.requests() == 2);
    CHECK(waited_s >= 0.95);  // the server's Retry-After, not the 20 ms backoff
    // The key went to the server, in the Authorization header, and nowhere else.
    CHECK(server.seen().at(0).find(std::string("Authorization: Bearer ") + kKey) != std::string::npos);
    CHECK(logs.lines.find("429") != std::string::npos);  // the retry was logged ...
    CHECK(logs.lines.find(kKey) == std::string::npos);   // ... without the key
}

TEST_CASE("serverUnavailableGivesUpAfterMaxAttempts") {
    ScriptedServer server([](int fd, const std::string&, int) {
        send_all(fd, json_answer(503, "Service Unavailable", R"({"error":{"message":"model is loading"}})"));
    });
    auto cfg = config_for(server);
    cfg.max_attempts = 3;
    remote::RemoteEngine engine(cfg);
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 8)).wait();
    REQUIRE(a.failed());
    CHECK(server.requests() == 3);
    CHECK(a.error.find("HTTP 503") != std::string::npos);
    CHECK(a.error.find("model is loading") != std::string::npos);
    CHECK(a.error.find("after 3 attempts") != std::string::npos);
    CHECK(a.error.find(kKey) == std::string::npos);
    CHECK(a.kinds == std::vector{EngineEvent::Kind::Failed});  // never started
}

TEST_CASE("retryAfterBeyondTheLimitFailsAtOnceSayingHowLong") {
    ScriptedServer server([](int fd, const std::string&, int) {
        send_all(fd, json_answer(429, "Too Many Requests", "{}", "Retry-After: 3600\r\n"));
    });
    remote::RemoteEngine engine(config_for(server));
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 8)).wait(std::chrono::seconds(20));
    REQUIRE(a.failed());
    CHECK(server.requests() == 1);
    CHECK(a.error.find("too many requests (HTTP 429); the server asks to wait 3600 s") != std::string::npos);
}

TEST_CASE("serverKilledMidStreamKeepsThePartialAnswerAndIsNotRetried") {
    ScriptedServer server([](int fd, const std::string&, int) {
        send_all(fd, sse_head() + sse_chunk("Once") + sse_chunk(" upon"));  // then the connection drops
    });
    remote::RemoteEngine engine(config_for(server));
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 64)).wait();
    REQUIRE(a.failed());
    CHECK(a.text == "Once upon");
    CHECK(a.stats.generated_tokens == 2);
    CHECK(a.error.find("closed the stream before the answer was complete") != std::string::npos);
    CHECK(a.error.find("the answer so far is kept") != std::string::npos);
    CHECK(server.requests() == 1);  // a started answer is never sent again
    CHECK(a.kinds.front() == EngineEvent::Kind::Started);
}

TEST_CASE("malformedEventIsAClearError") {
    ScriptedServer server([](int fd, const std::string&, int) {
        send_all(fd, sse_head() + sse_chunk("ok") + "data: {\"choices\": [ {\"delta\": nonsense\n\n");
    });
    remote::RemoteEngine engine(config_for(server));
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 64)).wait();
    REQUIRE(a.failed());
    CHECK(a.text == "ok");
    CHECK(a.error.find("not valid JSON") != std::string::npos);
    CHECK(a.error.find("nonsense") != std::string::npos);  // quotes what it got
}

TEST_CASE("endlessEventLineIsCutAtTheLineBound") {
    std::atomic<size_t> sent{0};
    ScriptedServer server([&](int fd, const std::string&, int) {
        send_all(fd, sse_head() + "data: ");
        const std::string block(64 << 10, 'x');
        // Bounded here too, so a client that never stops reading fails the test, not the machine.
        while (sent < (size_t(512) << 20) && send_all(fd, block)) sent += block.size();
    });
    auto cfg = config_for(server);
    cfg.max_line_bytes = 256 << 10;
    remote::RemoteEngine engine(cfg);
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 64)).wait();
    REQUIRE(a.failed());
    CHECK(a.error.find("event line longer than 256 KiB") != std::string::npos);
    CHECK(sent < (size_t(64) << 20));  // the client hung up long before the test's bound
}

TEST_CASE("twoGigabyteModelListIsRefusedAtTheBodyBound") {
    std::atomic<size_t> sent{0};
    ScriptedServer server([&](int fd, const std::string&, int) {
        send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n");
        const std::string block(1 << 20, ' ');
        while (sent < (size_t(2) << 30) && send_all(fd, block)) sent += block.size();
    });
    auto cfg = config_for(server);
    cfg.max_body_bytes = 8 << 20;
    const remote::RemoteEngine engine(cfg);
    try {
        engine.list_models();
        FAIL("a 2 GB model list was accepted");
    } catch (const remote::RemoteError& e) {
        CHECK(std::string(e.what()).find("larger than 8 MiB") != std::string::npos);
    }
    CHECK(sent < (size_t(64) << 20));
}

TEST_CASE("silentServerTimesOut") {
    ScriptedServer server([](int fd, const std::string&, int) {
        send_all(fd, sse_head());
        std::this_thread::sleep_for(std::chrono::seconds(4));  // nothing more
    });
    auto cfg = config_for(server);
    cfg.read_timeout = std::chrono::seconds(1);
    remote::RemoteEngine engine(cfg);
    const auto t0 = Clock::now();
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 64)).wait();
    REQUIRE(a.failed());
    CHECK(a.error.find("no data from the server for 1000 ms") != std::string::npos);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(3500));
}

TEST_CASE("connectionRefusedIsRetriedThenExplained") {
    int port = 0;
    {
        ScriptedServer gone([](int, const std::string&, int) {});
        port = gone.port();
    }  // closed: nothing listens there now
    remote::RemoteConfig cfg;
    cfg.base_url = "http://127.0.0.1:" + std::to_string(port);
    cfg.model = "m";
    cfg.max_attempts = 2;
    cfg.backoff_initial = std::chrono::milliseconds(10);
    remote::RemoteEngine engine(cfg);
    const RemoteAnswer a = RemoteCall(engine, chat_request("hi", 8)).wait();
    REQUIRE(a.failed());
    CHECK(a.error.find("http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions") != std::string::npos);
    CHECK(a.error.find("after 2 attempts") != std::string::npos);
}

TEST_CASE("toolCallsAndReasoningPassThrough") {
    ScriptedServer server([](int fd, const std::string&, int) {
        send_all(
            fd,
            sse_head() +
                R"(data: {"choices":[{"delta":{"reasoning_content":"think "}}]})"
                "\n\n"
                R"(data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]})"
                "\n\n"
                R"(data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]})"
                "\n\n"
                R"(data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}}]})"
                "\n\n"
                R"(data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]})"
                "\n\ndata: [DONE]\n\n");
    });
    remote::RemoteEngine engine(config_for(server));
    EngineRequest req = chat_request("weather in Oslo?", 64);
    req.template_options.tools_json =
        R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])";
    const RemoteAnswer a = RemoteCall(engine, req).wait();
    CHECK(a.error == "");
    CHECK(a.reasoning == "think ");
    REQUIRE(a.tool_calls.size() == 1);
    CHECK(a.tool_calls[0].id == "call_a");
    CHECK(a.tool_calls[0].name == "get_weather");
    CHECK(a.tool_calls[0].arguments == R"({"city":"Oslo"})");
    // The tools went to the server as the API carries them.
    CHECK(server.seen().at(0).find(R"("tools":[{"function":{"name":"get_weather")") != std::string::npos);
}

TEST_CASE("proxyComesFromTheEnvironment") {
    ScriptedServer proxy([](int fd, const std::string&, int) {
        send_all(fd, json_answer(200, "OK", R"({"object":"list","data":[{"id":"via-proxy"}]})"));
    });
    setenv("http_proxy", ("http://127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
    remote::RemoteConfig cfg;
    cfg.base_url = "http://gpu-box.invalid:8000";  // resolvable only by the proxy
    const auto models = remote::RemoteEngine(cfg).list_models();
    unsetenv("http_proxy");
    REQUIRE(models.size() == 1);
    CHECK(models[0].id == "via-proxy");
    CHECK(proxy.seen().at(0).rfind("GET http://gpu-box.invalid:8000/v1/models HTTP/1.1", 0) == 0);
}

TEST_CASE("tlsIsVerifiedAndAPrivateCaCanBeGiven") {
    TempDir dir;
    const std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
    const ProcessResult made =
        run_process({EMBER_OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                     "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"});
    REQUIRE_MESSAGE(made.ok(), made.err);
    ChildProcess server({EMBER_PYTHON3, std::string(EMBER_REMOTE_TEST_DIR) + "/tls_server.py", cert, key},
                        dir.path() + "/log");
    std::string port;
    for (int i = 0; i < 400 && port.empty(); ++i) {
        const std::string log = server.log();
        if (const size_t at = log.find("port "); at != std::string::npos && log.find('\n', at) != std::string::npos)
            port = log.substr(at + 5, log.find('\n', at) - at - 5);
        else std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    REQUIRE_MESSAGE(!port.empty(), server.log());
    remote::RemoteConfig cfg;
    cfg.base_url = "https://127.0.0.1:" + port;
    cfg.max_attempts = 1;
    try {  // a self-signed certificate: refused, and the error says what to do
        remote::RemoteEngine(cfg).list_models();
        FAIL("an unverified certificate was accepted");
    } catch (const remote::RemoteError& e) {
        CHECK(e.kind() == remote::RemoteErrorKind::Tls);
        CHECK(std::string(e.what()).find("give its CA certificate with --ca-file") != std::string::npos);
    }
    cfg.ca_file = cert;
    const auto models = remote::RemoteEngine(cfg).list_models();
    REQUIRE(models.size() == 1);
    CHECK(models[0].id == "tls-model");
    CHECK(models[0].context_length == 4096);
}
