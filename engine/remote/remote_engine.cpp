// RemoteEngine (remote_engine.h): one thread per request, each a streamed exchange read by an
// SseReader whose chunks become the same events the local Scheduler sends.
#include "engine/remote/remote_engine.h"

#include <optional>

#include "engine/core/log.h"
#include "engine/remote/sse_reader.h"

namespace ember::remote {

using Clock = std::chrono::steady_clock;

namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

EngineEvent event(EngineEvent::Kind kind, uint64_t id) {
    EngineEvent e;
    e.kind = kind;
    e.request_id = id;
    return e;
}
}  // namespace

struct RemoteEngine::Job {
    uint64_t id = 0;
    std::string url, body, model;
    EventSink sink;
    Clock::time_point submitted = Clock::now();
    std::atomic<bool> cancel{false};
    std::atomic<bool> ended{false};
    std::atomic<bool> answering{false};  // the server's answer has started
    std::atomic<int32_t> generated{0};   // text pieces so far (usage replaces it at the end)
    std::thread thread;
};

// What one streamed answer has delivered so far.
struct RemoteEngine::Stream {
    explicit Stream(size_t max_line)
        : reader(max_line, [this](const std::string&, const std::string& d) { return on_data(d); }) {}
    RemoteEngine* engine = nullptr;
    Job* job = nullptr;
    SseReader reader;
    bool decided = false, event_stream = true;  // a JSON answer instead of events: read whole
    std::string whole;                          // that JSON answer
    size_t bytes = 0;
    bool done = false;  // [DONE] arrived
    std::string error;  // why the stream itself is unusable (malformed, endless line, ...)
    std::string finish_reason;
    std::vector<ChatToolCall> calls;
    std::optional<int32_t> prompt_tokens, completion_tokens, reasoning_tokens;
    int32_t pieces = 0, reasoning_pieces = 0;
    Clock::time_point first, last;

    bool on_bytes(std::string_view b, const HttpResult& r);
    bool on_data(const std::string& data);
    bool apply(const Chunk& c);
};

bool RemoteEngine::Stream::on_bytes(std::string_view b, const HttpResult& r) {
    if (!decided) {
        decided = true;
        event_stream = r.header("content-type").find("text/event-stream") != std::string::npos;
        job->answering = true;
        engine->telemetry_.request_started(job->id, 0, 0, ms_between(job->submitted, Clock::now()), 1);
        job->sink(event(EngineEvent::Kind::Started, job->id));
    }
    bytes += b.size();
    const RemoteConfig& cfg = engine->cfg_;
    if (!event_stream) {
        if (bytes > cfg.max_body_bytes)
            return error = "the answer is larger than " + std::to_string(cfg.max_body_bytes >> 20) + " MiB", false;
        whole.append(b);
        return true;
    }
    if (bytes > cfg.max_stream_bytes)
        return error = "the streamed answer is larger than " + std::to_string(cfg.max_stream_bytes >> 20) + " MiB",
               false;
    if (reader.feed(b)) return true;
    if (reader.line_too_long() && error.empty())
        error = "the server sent an event line longer than " + std::to_string(cfg.max_line_bytes >> 10) + " KiB";
    return false;
}

bool RemoteEngine::Stream::on_data(const std::string& data) {
    if (data == "[DONE]") return done = true, false;
    try {
        return apply(parse_chunk(data));
    } catch (const Error& e) {
        error = e.what();
        return false;
    }
}

// One chunk: text to the sink now, tool calls and usage kept for the end.
bool RemoteEngine::Stream::apply(const Chunk& c) {
    if (!c.error.empty()) return error = "the server reported an error: " + c.error, false;
    if (c.prompt_tokens) prompt_tokens = c.prompt_tokens;
    if (c.completion_tokens) completion_tokens = c.completion_tokens;
    if (c.reasoning_tokens) reasoning_tokens = c.reasoning_tokens;
    for (const ToolCallPiece& p : c.tool_calls) add_tool_call(calls, p);
    if (!c.finish_reason.empty()) finish_reason = c.finish_reason;
    if (c.text.empty() && c.reasoning.empty()) return true;
    const Clock::time_point now = Clock::now();
    if (pieces == 0) {
        first = now;
        engine->telemetry_.first_token(job->id, ms_between(job->submitted, now), 0);
    } else {
        engine->telemetry_.token(job->id, ms_between(last, now));
    }
    last = now;
    ++pieces;
    if (!c.reasoning.empty()) ++reasoning_pieces;
    job->generated = pieces;
    EngineEvent e = event(EngineEvent::Kind::Text, job->id);
    e.text = c.text, e.reasoning = c.reasoning;
    job->sink(std::move(e));
    return true;
}

RemoteEngine::RemoteEngine(RemoteConfig config) : cfg_(std::move(config)), base_(api_base(cfg_.base_url)) {}

RemoteEngine::~RemoteEngine() {
    std::map<uint64_t, std::shared_ptr<Job>> jobs;
    {
        std::lock_guard lock(mutex_);
        jobs.swap(jobs_);
    }
    for (auto& [id, job] : jobs) job->cancel = true;
    for (auto& [id, job] : jobs)
        if (job->thread.joinable()) job->thread.join();
}

uint64_t RemoteEngine::submit(EngineRequest request, EventSink sink) {
    auto job = std::make_shared<Job>();
    job->model = request.model.empty() ? cfg_.model : request.model;
    if (job->model.empty()) throw Error("no model named for the remote engine at " + printable_url(base_));
    job->body = request_body(request, job->model, cfg_.sent);  // throws for what can never run
    job->url = base_ + request_path(request);
    job->sink = std::move(sink);
    reap();
    std::lock_guard lock(mutex_);
    job->id = next_id_++;
    jobs_[job->id] = job;
    telemetry_.set_load(static_cast<int32_t>(jobs_.size()), 0);
    job->thread = std::thread([this, j = job.get()] { run(*j); });
    return job->id;
}

void RemoteEngine::cancel(uint64_t request_id) {
    std::lock_guard lock(mutex_);
    if (const auto it = jobs_.find(request_id); it != jobs_.end()) it->second->cancel = true;
}

void RemoteEngine::reap() {
    std::vector<std::shared_ptr<Job>> ended;
    {
        std::lock_guard lock(mutex_);
        for (auto it = jobs_.begin(); it != jobs_.end();)
            if (it->second->ended) ended.push_back(it->second), it = jobs_.erase(it);
            else ++it;
    }
    for (auto& j : ended) j->thread.join();
    std::lock_guard lock(mutex_);
    telemetry_.set_load(static_cast<int32_t>(jobs_.size()), 0);
}

void RemoteEngine::run(Job& job) {
    Stream s(cfg_.max_line_bytes);
    s.engine = this, s.job = &job;
    HttpCall call{job.url, job.body, [&s](std::string_view b, const HttpResult& r) { return s.on_bytes(b, r); },
                  &job.cancel};
    try {
        finish(job, s, perform_with_retries(cfg_, call));
    } catch (const Error& e) {  // it never started: no answer to keep
        EngineEvent f = event(EngineEvent::Kind::Failed, job.id);
        f.error = e.what();
        job.sink(std::move(f));
    }
    job.ended = true;
}

// The request's last event, from how its exchange and its stream ended.
void RemoteEngine::finish(Job& job, Stream& s, const HttpResult& r) {
    if (s.event_stream && !r.cancelled && s.error.empty() && !s.done) s.reader.finish();
    if (!s.event_stream && s.error.empty() && !r.cancelled) {
        try {
            s.apply(parse_chunk(s.whole));
            s.done = true;
        } catch (const Error& e) {
            s.error = e.what();
        }
    }
    for (ChatToolCall& c : s.calls)
        if (c.id.empty()) c.id = "call_" + std::to_string(job.id) + "_" + std::to_string(&c - s.calls.data());
    if (!s.calls.empty()) {
        EngineEvent calls = event(EngineEvent::Kind::Text, job.id);
        calls.tool_calls = std::move(s.calls);
        job.sink(std::move(calls));
    }

    RequestStats st;
    st.prompt_tokens = s.prompt_tokens.value_or(0);
    st.generated_tokens = s.completion_tokens.value_or(s.pieces);
    st.reasoning_tokens = s.reasoning_tokens.value_or(s.reasoning_pieces);
    if (s.pieces > 0) st.ttft_ms = ms_between(job.submitted, s.first), st.decode_ms = ms_between(s.first, s.last);
    const double decode_s = st.decode_ms / 1000.0;
    telemetry_.request_finished(job.id, st.generated_tokens,
                                decode_s > 0 && st.generated_tokens > 1 ? (st.generated_tokens - 1) / decode_s : 0);

    std::string error = s.error;
    if (error.empty() && !r.cancelled)
        if (auto e = error_of(cfg_, r, job.url)) error = e->what();
    if (error.empty() && !r.cancelled && !s.done && s.finish_reason.empty())
        error = "the server closed the stream before the answer was complete";
    EngineEvent last = event(error.empty() ? EngineEvent::Kind::Finished : EngineEvent::Kind::Failed, job.id);
    if (!error.empty() && s.pieces > 0) error += " (the answer so far is kept: it is incomplete)";
    st.stop_reason = r.cancelled ? StopReason::Cancelled : stop_reason_of(s.finish_reason);
    last.stats = st, last.error = error;
    job.sink(std::move(last));
}

EngineStatus RemoteEngine::status() const {
    EngineStatus s;
    s.model = cfg_.model;
    s.model_path = printable_url(base_);
    s.device = "remote";
    s.device_reason = "an OpenAI-compatible server at " + printable_url(base_);
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    for (const auto& [id, job] : jobs_) {
        if (job->ended) continue;
        RequestStatus r;
        r.id = id;
        r.state = job->answering ? "decode" : "queued";
        r.generated_tokens = job->generated;
        r.age_ms = ms_between(job->submitted, now);
        s.requests.push_back(r);
    }
    return s;
}

std::vector<RemoteModel> RemoteEngine::list_models() const {
    const HttpResult r = perform_with_retries(cfg_, HttpCall{base_ + "/models", "", nullptr, nullptr});
    if (auto e = error_of(cfg_, r, base_ + "/models")) throw *e;
    return parse_models(r.body);
}

}  // namespace ember::remote
