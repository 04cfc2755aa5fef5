// Drives a RemoteEngine request to its end for the tests: every event kept, the text put
// together, a time limit so that a hung request fails the test instead of hanging it.
#pragma once
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/remote/remote_engine.h"

namespace ember::test {

struct RemoteAnswer {
    std::vector<EngineEvent::Kind> kinds;
    std::string text, reasoning;
    std::vector<ChatToolCall> tool_calls;
    int text_events = 0;
    RequestStats stats;
    std::string error;
    bool ended = false;
    bool failed() const { return !kinds.empty() && kinds.back() == EngineEvent::Kind::Failed; }
};

// Submits `req`; `on_text` (optional) sees each Text event as it comes, on the engine's thread.
class RemoteCall {
public:
    RemoteCall(remote::RemoteEngine& engine, EngineRequest req,
               std::function<void(uint64_t id, const EngineEvent&)> on_text = {}) {
        id_ = engine.submit(std::move(req), [this, on_text](EngineEvent&& e) {
            if (e.kind == EngineEvent::Kind::Text && on_text) on_text(e.request_id, e);
            std::lock_guard lock(m_);
            a_.kinds.push_back(e.kind);
            if (e.kind == EngineEvent::Kind::Text) {
                a_.text += e.text, a_.reasoning += e.reasoning, ++a_.text_events;
                for (auto& c : e.tool_calls) a_.tool_calls.push_back(c);
            }
            if (e.kind == EngineEvent::Kind::Finished || e.kind == EngineEvent::Kind::Failed) {
                a_.stats = e.stats, a_.error = e.error, a_.ended = true;
                cv_.notify_all();
            }
        });
    }
    uint64_t id() const { return id_; }
    RemoteAnswer wait(std::chrono::seconds limit = std::chrono::seconds(120)) {
        std::unique_lock lock(m_);
        REQUIRE_MESSAGE(cv_.wait_for(lock, limit, [this] { return a_.ended; }), "the remote request did not end");
        return a_;
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    RemoteAnswer a_;
    uint64_t id_ = 0;
};

inline EngineRequest chat_request(const std::string& user, int32_t max_tokens, const std::string& model = "") {
    EngineRequest r;
    r.model = model;
    r.messages = {{"user", user}};
    r.max_tokens = max_tokens;
    r.sampling = SamplingParams::greedy();
    return r;
}

}  // namespace ember::test
