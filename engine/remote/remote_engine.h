// RemoteEngine: an InferenceEngine whose model runs on another machine behind an
// OpenAI-compatible API (vLLM, TGI, SGLang, llama-server, Ollama, another Ember's `ember
// serve`). The app's chats, the CLI and anything else written against InferenceEngine drive it
// exactly as they drive the local Scheduler: submit() a request, receive its events.
//
// Each request is one streamed POST to /v1/chat/completions (messages) or /v1/completions
// (a prompt) on a thread of its own; its SSE chunks become Text events (answer, reasoning),
// tool calls the server parsed arrive whole in one Text event, and usage fills the Finished
// event's stats. Timings (TTFT, inter-token latency, decode rate) are measured here, on the
// client side, and recorded in telemetry() as the local engine records its own.
//
// cancel() closes the connection (the server sees the client go and stops generating).
// Connection errors and 429/502/503/504 are tried again (Retry-After honoured) until the
// answer starts, never after. An answer cut off mid-stream ends with a Failed event after the
// Text events already sent (the partial answer stands; the error says it is partial).
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/remote/remote_config.h"
#include "engine/remote/remote_http.h"
#include "engine/remote/remote_wire.h"
#include "engine/scheduler/inference_engine.h"

namespace ember::remote {

class RemoteEngine final : public InferenceEngine {
public:
    // Throws ember::Error for a base URL that is not http(s). Connects to nothing yet.
    explicit RemoteEngine(RemoteConfig config);
    // Cancels every request (each gets its last event) and joins their threads.
    ~RemoteEngine() override;
    RemoteEngine(const RemoteEngine&) = delete;
    RemoteEngine& operator=(const RemoteEngine&) = delete;

    // Checks the request (text or messages, no token ids, no compiled grammar) on the caller's
    // thread and starts it; throws ember::Error for one that can never run.
    uint64_t submit(EngineRequest request, EventSink sink) override;
    void cancel(uint64_t request_id) override;
    void forget(const std::string&) override {}  // the server keeps its own cache
    EngineStatus status() const override;
    const Telemetry& telemetry() const override { return telemetry_; }

    // GET /v1/models on the caller's thread (blocking; retried as requests are). Throws
    // RemoteError.
    std::vector<RemoteModel> list_models() const;
    const RemoteConfig& config() const { return cfg_; }

private:
    struct Job;
    struct Stream;
    void run(Job& job);
    void finish(Job& job, Stream& s, const HttpResult& r);
    void reap();  // joins the threads of ended requests

    RemoteConfig cfg_;
    std::string base_;  // api_base(cfg_.base_url)
    Telemetry telemetry_;
    mutable std::mutex mutex_;
    uint64_t next_id_ = 1;
    std::map<uint64_t, std::shared_ptr<Job>> jobs_;
};

}  // namespace ember::remote
