// RemoteEngine against llama.cpp's llama-server (the peer, built from the llama-cpp-python
// source package by scripts/llama-cpp-tools.sh; a test tool only) serving SmolLM2 on
// 127.0.0.1: its model list (and context length), a streamed chat equal to its non-streamed
// answer, and a cancel that llama-server sees (its metrics show no request in progress long
// before the 2000 tokens asked for could have been written).
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "llama_peer.h"
#include "remote_answer.h"
#include "test_data.h"

using namespace ember;
using namespace ember::test;
using nlohmann::json;

namespace {

struct LlamaServer {
    TempDir dir;
    int port = free_port();
    std::unique_ptr<ChildProcess> proc;
    LlamaServer() {
        const std::string model = test_model(kSmolLM2);
        EMBER_REQUIRE_FILE(model);
        // The portable peer build, beside llama-perplexity (scripts/test.sh builds it).
        const std::string bin = llama_tools_dir({"llama-server"}) + "/llama-server";
        proc = std::make_unique<ChildProcess>(
            std::vector<std::string>{bin, "-m", model, "--host", "127.0.0.1", "--port", std::to_string(port), "-a",
                                     "smollm2", "-c", "2048", "-np", "1", "-t", "2", "--metrics"},
            dir.path() + "/log");
        httplib::Client c("127.0.0.1", port);
        for (int i = 0; i < 1200; ++i) {  // /health is 503 while the model loads
            if (auto r = c.Get("/health"); r && r->status == 200) return;
            REQUIRE_MESSAGE(proc->running(), "llama-server ended:\n", proc->log());
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        FAIL("llama-server did not become ready:\n" << proc->log());
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }
    std::string get(const std::string& path) const {
        httplib::Client c("127.0.0.1", port);
        auto r = c.Get(path);
        REQUIRE(r);
        return r->body;
    }
};

LlamaServer& llama() {
    static LlamaServer s;
    return s;
}

remote::RemoteConfig config() {
    remote::RemoteConfig c;
    c.base_url = llama().url();
    c.model = "smollm2";
    return c;
}

}  // namespace

TEST_CASE("llamaServerListsItsModelWithItsContextLength") {
    remote::RemoteEngine engine(config());
    const auto models = engine.list_models();
    REQUIRE(!models.empty());
    CHECK(models[0].id == "smollm2");
    CHECK(models[0].context_length == 8192);  // SmolLM2's n_ctx_train, from the model's meta
}

TEST_CASE("llamaServerStreamEqualsItsWholeAnswer") {
    remote::RemoteEngine engine(config());
    const std::string question = "Name three colours.";
    const RemoteAnswer a = RemoteCall(engine, chat_request(question, 32)).wait();
    REQUIRE_MESSAGE(a.error == "", a.error);
    httplib::Client c("127.0.0.1", llama().port);
    c.set_read_timeout(120);
    const json body = {{"model", "smollm2"},
                       {"messages", {{{"role", "user"}, {"content", question}}}},
                       {"max_tokens", 32},
                       {"temperature", 0}};
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const json whole = json::parse(res->body);
    CHECK(a.text == whole["choices"][0]["message"]["content"].get<std::string>());
    CHECK(a.text_events > 1);
    CHECK(a.stats.generated_tokens == whole["usage"]["completion_tokens"].get<int>());
    CHECK(a.stats.prompt_tokens == whole["usage"]["prompt_tokens"].get<int>());
}

TEST_CASE("llamaServerSeesTheCancel") {
    remote::RemoteEngine engine(config());
    EngineRequest r = chat_request("Write a very long story about a dragon.", 2000);
    r.ignore_eog = true;  // so that only the cancel can end it early
    int texts = 0;
    RemoteCall call(engine, r, [&](uint64_t id, const EngineEvent&) {
        if (++texts == 3) engine.cancel(id);
    });
    const RemoteAnswer a = call.wait();
    CHECK(a.stats.stop_reason == StopReason::Cancelled);
    CHECK(a.text_events < 200);
    bool idle = false;
    for (int i = 0; i < 100 && !idle; ++i) {  // 5 s, where 2000 tokens take far longer on 2 threads
        idle = llama().get("/metrics").find("llamacpp:requests_processing 0") != std::string::npos;
        if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK_MESSAGE(idle, llama().get("/metrics"));
}
