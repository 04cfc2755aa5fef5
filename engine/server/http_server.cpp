// The HTTP side: routes, the API key, and the two ways of answering a generation (whole, or
// streamed as Server-Sent Events). Parsing and JSON shapes live in request_parser and
// response_format; this file only moves events from the engine to the socket.
#include "engine/server/http_server.h"

#include <httplib.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <variant>

#include "engine/server/connection_guard.h"
#include "engine/server/connection_probe.h"
#include "engine/server/ollama_format.h"
#include "engine/server/request_parser.h"
#include "engine/server/response_format.h"
#include "engine/server/server_metrics.h"
#include "engine/server/tool_grammar.h"
#include "engine/core/log.h"
#include "kernels/common/error.h"

namespace ember::server {
namespace {

using Clock = std::chrono::steady_clock;
using httplib::Request;
using httplib::Response;
using nlohmann::json;

// How long an answering thread waits for events before it looks at the server's state again.
constexpr auto kPoll = std::chrono::milliseconds(100);
// A streamed request that is still queued writes an SSE comment this often, so that a client
// gone before its first token is noticed (and its request cancelled) without waiting for it.
constexpr auto kHeartbeat = std::chrono::seconds(1);
// After stop(), how long an unstreamed answer waits for the engine's final (cancelled) event.
constexpr auto kStopGrace = std::chrono::seconds(5);

// The events of one request, from the engine's thread to the HTTP thread answering it.
class EventQueue {
public:
    void push(EngineEvent&& e) {
        {
            std::lock_guard lock(mutex_);
            events_.push_back(std::move(e));
        }
        cv_.notify_one();
    }
    // The events that came within `timeout` (none when it passed first).
    std::deque<EngineEvent> take(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
        return std::exchange(events_, {});
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<EngineEvent> events_;
};

// One generation being answered, in the shape of the API that asked (answer_format.h).
struct Answer {
    explicit Answer(std::unique_ptr<AnswerFormat> f) : format(std::move(f)) {}
    std::unique_ptr<AnswerFormat> format;
    uint64_t id = 0;
    std::shared_ptr<EventQueue> events = std::make_shared<EventQueue>();
    bool started = false;  // streamed: the first chunk is written
    bool done = false;     // the final event was answered
    Clock::time_point last_write = Clock::now();
    std::optional<ConnectionProbe> client;  // streamed in a format with no keepalive: polled instead
};

// Compares every byte whatever the first difference, so the time taken does not tell how much
// of a guessed key was right.
bool same_key(std::string_view given, std::string_view key) {
    if (key.empty()) return given.empty();
    unsigned diff = given.size() == key.size() ? 0u : 1u;
    for (size_t i = 0; i < given.size(); ++i) diff |= unsigned(uint8_t(given[i]) ^ uint8_t(key[i % key.size()]));
    return diff == 0;
}

// The credentials of "Bearer KEY"; the scheme's name is case-insensitive (RFC 9110 11.1), and
// one or more spaces may follow it.
std::optional<std::string_view> bearer_token(std::string_view auth) {
    constexpr std::string_view scheme = "bearer";
    if (auth.size() <= scheme.size() || auth[scheme.size()] != ' ') return std::nullopt;
    for (size_t i = 0; i < scheme.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(auth[i])) != scheme[i]) return std::nullopt;
    auth.remove_prefix(scheme.size());
    while (!auth.empty() && auth.front() == ' ') auth.remove_prefix(1);
    if (auth.empty()) return std::nullopt;
    return auth;
}

// The label /metrics counts a request under (never the raw path: that would let clients make
// unbounded label sets).
std::string endpoint_label(const std::string& path) {
    for (const char* p : {"/health", "/metrics", "/v1/models", "/v1/status", "/v1/chat/completions", "/v1/completions",
                          "/", "/api/chat", "/api/generate", "/api/tags", "/api/show", "/api/ps", "/api/version"})
        if (path == p) return p;
    return "other";
}

bool ollama_path(const std::string& path) { return path.rfind("/api/", 0) == 0; }

// An error as the API of the request's path writes it: Ollama's {"error": "..."} under /api/,
// OpenAI's error object everywhere else.
void send_error(const Request& req, Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(ollama_path(req.path) ? ollama_error_json(e) : error_json(e), "application/json");
}

bool write(httplib::DataSink& sink, const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); }

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

struct HttpServer::Impl {
    InferenceEngine& engine;
    ServerOptions options;
    std::shared_ptr<ServerMetrics> metrics = std::make_shared<ServerMetrics>();
    GuardedServer http;  // after metrics: its connection threads count into them
    std::thread listener;
    int port = 0;
    int listen_socket = -1;  // the last socket httplib made to bind (see start())
    std::atomic<bool> stopping{false};
    std::atomic<bool> listen_ended{false};
    Clock::time_point started = Clock::now();
    int64_t created = unix_now();

    std::mutex mutex;           // guards the three below
    std::set<uint64_t> active;  // requests being answered (cancelled by stop())
    std::mt19937_64 rng{std::random_device{}()};
    std::optional<ServedModel> served;  // the facts of the model last asked about, by its path

    Impl(InferenceEngine& e, ServerOptions o) : engine(e), options(std::move(o)), http(guard_options()) {}

    GuardOptions guard_options() {
        const ServerOptions& o = options;
        GuardOptions g;
        g.on_guard_answer = [this](int status) { metrics->count_request("other", status); };
        g.read_deadline = std::chrono::milliseconds(std::max(1, o.read_deadline_ms));
        g.max_header_bytes = o.max_header_bytes;
        g.max_header_lines = o.max_header_lines;
        g.ready_threads = static_cast<size_t>(std::max(2, o.threads));
        g.max_connections = std::max(g.ready_threads, static_cast<size_t>(std::max(1, o.max_connections)));
        g.max_per_client = static_cast<size_t>(std::max(1, o.max_connections_per_client));
        return g;
    }

    void routes();
    void ollama_routes();
    httplib::Server::HandlerResponse check_key(const Request& req, Response& res) const;
    void generate(Endpoint endpoint, const Request& req, Response& res);
    void ollama_generate(OllamaEndpoint endpoint, const Request& req, Response& res);
    void run(EngineRequest&& r, bool stream, std::unique_ptr<AnswerFormat> format, const Request& req, Response& res);
    std::optional<ServedModel> served_model(const EngineStatus& status);
    void answer_whole(Answer& a, const ConnectionProbe& client, Response& res);
    void answer_stream(std::shared_ptr<Answer> a, Response& res);
    bool pump(Answer& a, httplib::DataSink& sink);
    bool write_event(Answer& a, EngineEvent& e, httplib::DataSink& sink);
    EventSink sink_for(std::shared_ptr<EventQueue> events) const;

    std::string random_hex() {
        std::lock_guard lock(mutex);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
        return hex;
    }
    std::string new_id(Endpoint endpoint) {
        return (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex();
    }
    ToolCallText tool_call_parser(const ToolRequest& t, ToolCallFormat format, std::string tag);
    std::optional<ApiError> force_tool_call(const ToolRequest& t, ToolCallFormat format, EngineRequest& r) const;
    uint64_t new_seed() {
        std::lock_guard lock(mutex);
        return rng();
    }
    void track(uint64_t id) {
        std::lock_guard lock(mutex);
        active.insert(id);
    }
    void untrack(uint64_t id) {
        std::lock_guard lock(mutex);
        active.erase(id);
    }
};

EventSink HttpServer::Impl::sink_for(std::shared_ptr<EventQueue> events) const {
    // Runs on the engine's thread: records, queues and returns. It holds the queue and the
    // metrics by shared_ptr, so a late event after the answer gave up lands somewhere valid.
    return [events, metrics = metrics, last = Clock::time_point{}](EngineEvent&& e) mutable {
        if (e.kind == EngineEvent::Kind::Text) {
            const auto now = Clock::now();
            if (last != Clock::time_point{}) metrics->inter_token(std::chrono::duration<double>(now - last).count());
            last = now;
        } else if (e.kind == EngineEvent::Kind::Finished) {
            metrics->finished(e.stats);
        }
        events->push(std::move(e));
    };
}

// tool_choice "required" or a named function: the request decodes under the call's grammar.
std::optional<ApiError> HttpServer::Impl::force_tool_call(const ToolRequest& t, ToolCallFormat format,
                                                          EngineRequest& r) const {
    auto forced = forced_call_grammar(t, format, options.limits.grammar);
    if (const ApiError* e = std::get_if<ApiError>(&forced)) return *e;
    auto& g = std::get<std::shared_ptr<const grammar::Grammar>>(forced);
    if (!g) return std::nullopt;
    if (r.grammar)
        return ApiError{400, "a forced tool call cannot be combined with response_format or a grammar",
                        "invalid_request_error", "tool_choice", ""};
    r.grammar = std::move(g);
    return std::nullopt;
}

// Tools offered and not refused with tool_choice "none": the output is parsed for calls in
// the model's form (ids "call_<16 hex>N", unique per answer). A template whose form Ember does
// not know shows the tools, and the answer stays text. `tag` names the answer in the log.
ToolCallText HttpServer::Impl::tool_call_parser(const ToolRequest& t, ToolCallFormat format, std::string tag) {
    if (!t.parse()) return {};
    if (format == ToolCallFormat::None) {
        log_warn("tool calls: the model's chat template shows tools in a form Ember does not parse; answering text");
        return {};
    }
    const size_t max_calls = t.parallel ? std::numeric_limits<size_t>::max() : 1;
    return ToolCallText(std::make_unique<ToolCallParser>(format, "call_" + random_hex(), max_calls), std::move(tag));
}

// Gives the allocator's free pages back after a large body: its parse (up to max_body_bytes of
// JSON, tens of MiB of nodes) runs on a connection thread, and glibc keeps what each thread's
// arena held, so concurrent large bodies left hundreds of MiB resident for good (16 clients
// sending 2 MB of tools: 22 -> 620 MiB). One trim runs at a time (it walks every arena); a body
// that finds one running leaves a request for it, which the running one takes up before it ends.
struct TrimAfterLargeBody {
    size_t bytes;
    ~TrimAfterLargeBody() {
        static std::mutex trimming;
        static std::atomic<bool> wanted{false};
        if (bytes < kLargeBody) return;
        wanted = true;
        do {
            if (!trimming.try_lock()) return;
            while (wanted.exchange(false)) malloc_trim(0);
            trimming.unlock();
        } while (wanted.load());
    }
    static constexpr size_t kLargeBody = size_t(256) << 10;
};

void HttpServer::Impl::generate(Endpoint endpoint, const Request& req, Response& res) {
    const TrimAfterLargeBody trim{req.body.size()};
    auto parsed = parse_request(endpoint, req.body, options.limits);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return send_error(req, res, *e);
    ApiRequest& r = std::get<ApiRequest>(parsed);
    const EngineStatus status = engine.status();
    const std::string& model = status.model;
    if (!r.tools.parallel_given) r.tools.parallel = parallel_calls_by_default(status.tool_call_format);
    if (const auto e = force_tool_call(r.tools, status.tool_call_format, r.engine)) return send_error(req, res, *e);
    // "name:latest" too: clients that list models through Ollama's /api/tags send that here
    if (!r.engine.model.empty() && !model_name_matches(r.engine.model, model))
        return send_error(req, res,
                          {404, "the model '" + r.engine.model + "' does not exist; this server has '" + model + "'",
                           "invalid_request_error", "model", "model_not_found"});
    r.engine.model = model;
    if (!r.seed_given) r.engine.sampling.seed = new_seed();
    r.engine.context_overflow = r.context_overflow.value_or(options.context_overflow);
    ResponseMeta meta{endpoint, new_id(endpoint), unix_now(), model, r.logprobs, r.stream && r.include_usage};
    auto calls = tool_call_parser(r.tools, status.tool_call_format, meta.id);
    // A call decoded under its grammar is well-formed: streamed, its arguments go out as they
    // are written (only max_tokens can cut one, as with OpenAI). A whole answer still checks
    // each call, so a cut one comes back as text.
    if (r.stream && r.tools.choice != ToolChoice::Auto) calls.stream_arguments(true);
    run(std::move(r.engine), r.stream, std::make_unique<OpenAiAnswer>(std::move(meta), std::move(calls)), req, res);
}

// Submits a parsed request and answers it in `format`, streamed or whole.
void HttpServer::Impl::run(EngineRequest&& r, bool stream, std::unique_ptr<AnswerFormat> format, const Request& req,
                           Response& res) {
    auto a = std::make_shared<Answer>(std::move(format));
    const auto fail = [&](const ApiError& e) {
        res.status = e.status;
        res.set_content(a->format->error(e), "application/json");
    };
    try {
        a->id = engine.submit(std::move(r), sink_for(a->events));
    } catch (const EngineBusy& e) {  // may run later: nothing was queued
        res.set_header("Retry-After", "1");
        return fail({503, e.what(), "server_error", "", "queue_full"});
    } catch (const Error& e) {  // a request that can never run: nothing was queued
        return fail({400, e.what(), "invalid_request_error", "", ""});
    }
    track(a->id);
    if (stopping) engine.cancel(a->id);  // stop() ran between submit and track
    const auto client = [&req] {
        return ConnectionProbe(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    };
    if (!stream) return answer_whole(*a, client(), res);
    if (a->format->keepalive().empty()) a->client.emplace(client());
    answer_stream(std::move(a), res);
}

void HttpServer::Impl::ollama_generate(OllamaEndpoint endpoint, const Request& req, Response& res) {
    const TrimAfterLargeBody trim{req.body.size()};
    auto parsed = parse_ollama_request(endpoint, req.body, options.limits);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return send_error(req, res, *e);
    OllamaRequest& r = std::get<OllamaRequest>(parsed);
    const EngineStatus status = engine.status();
    const std::string& model = status.model;
    if (!model_name_matches(r.model, model))
        return send_error(req, res,
                          {404, "model '" + r.model + "' not found; this server has '" + model + "'", "not_found_error",
                           "model", "model_not_found"});
    if (!r.ignored.empty()) {  // Ollama ignores them too; Open WebUI sends num_ctx every time
        std::string line = req.path + ": ignored";
        for (const std::string& what : r.ignored) line += " " + what + ";";
        log_info(line);
    }
    OllamaMeta meta{endpoint, r.model, r.logprobs};
    if (r.load_only) return res.set_content(dump(ollama_load_json(meta)), "application/json");
    if (!r.seed_given) r.engine.sampling.seed = new_seed();
    r.tools.parallel = parallel_calls_by_default(status.tool_call_format);
    if (const auto e = force_tool_call(r.tools, status.tool_call_format, r.engine)) return send_error(req, res, *e);
    auto calls = tool_call_parser(r.tools, status.tool_call_format, req.path);  // whole calls: arguments are an object
    r.engine.context_overflow = options.context_overflow;  // the server's policy (--context-overflow)
    run(std::move(r.engine), r.stream, std::make_unique<OllamaAnswer>(std::move(meta), std::move(calls)), req, res);
}

// Read from the file once per model: the app's engine may load another, or none (then nothing).
std::optional<ServedModel> HttpServer::Impl::served_model(const EngineStatus& status) {
    if (status.model_path.empty()) return std::nullopt;
    std::lock_guard lock(mutex);
    if (!served || served->path != status.model_path) served = describe_served_model(status.model, status.model_path);
    return served;
}

// Ollama's API beside OpenAI's (ollama_parser.h, ollama_format.h), so that programs that speak
// only Ollama's (its clients, editors, Open WebUI) can use this server: point them at it with
// OLLAMA_HOST=http://HOST:PORT.
void HttpServer::Impl::ollama_routes() {
    const auto running = [](const Request&, Response& res) { res.set_content("Ollama is running", "text/plain"); };
    http.Get("/", running);
    http.Get("/api/version",
             [](const Request&, Response& res) { res.set_content(dump(ollama_version_json()), "application/json"); });
    http.Get("/api/tags", [this](const Request&, Response& res) {
        res.set_content(dump(ollama_tags_json(served_model(engine.status()))), "application/json");
    });
    http.Get("/api/ps", [this](const Request&, Response& res) {
        const EngineStatus status = engine.status();
        res.set_content(dump(ollama_ps_json(served_model(status), status)), "application/json");
    });
    http.Post("/api/show", [this](const Request& req, Response& res) {
        const auto asked = parse_show_request(req.body, options.limits);
        if (const ApiError* e = std::get_if<ApiError>(&asked)) return send_error(req, res, *e);
        const std::string& name = std::get<std::string>(asked);
        const EngineStatus status = engine.status();
        const auto m = served_model(status);
        if (!m || !model_name_matches(name, status.model))
            return send_error(
                req, res,
                {404, "model '" + name + "' not found; this server has " + (m ? "'" + m->name + "'" : "none"),
                 "not_found_error", "model", "model_not_found"});
        res.set_content(dump(ollama_show_json(*m, status)), "application/json");
    });
    http.Post("/api/chat",
              [this](const Request& req, Response& res) { ollama_generate(OllamaEndpoint::Chat, req, res); });
    http.Post("/api/generate",
              [this](const Request& req, Response& res) { ollama_generate(OllamaEndpoint::Generate, req, res); });
}

// Collects the whole answer, then writes it. A client that hangs up meanwhile gets its request
// cancelled (the engine's Finished event then ends the wait; the write goes nowhere).
void HttpServer::Impl::answer_whole(Answer& a, const ConnectionProbe& client, Response& res) {
    std::string text, reasoning;
    std::vector<TokenLogprob> tokens;
    Clock::time_point stop_seen{};
    bool client_gone = false;
    for (;;) {
        for (EngineEvent& e : a.events->take(kPoll)) {
            if (e.kind == EngineEvent::Kind::Text) {
                text += e.text;
                reasoning += e.reasoning;
                for (auto& t : e.tokens) tokens.push_back(std::move(t));
            } else if (e.kind == EngineEvent::Kind::Finished) {
                untrack(a.id);
                return res.set_content(a.format->whole(text, reasoning, tokens, e.stats), "application/json");
            } else if (e.kind == EngineEvent::Kind::Failed) {
                untrack(a.id);
                res.status = 500;
                return res.set_content(
                    a.format->error({500, "the engine could not run the request: " + e.error, "server_error", "", ""}),
                    "application/json");
            }
        }
        if (!client_gone && !client.connected()) client_gone = true, engine.cancel(a.id);
        if (!stopping) continue;
        if (stop_seen == Clock::time_point{}) stop_seen = Clock::now(), engine.cancel(a.id);
        if (Clock::now() - stop_seen > kStopGrace) {
            untrack(a.id);
            res.status = 503;
            return res.set_content(a.format->error({503, "the server is shutting down", "server_error", "", ""}),
                                   "application/json");
        }
    }
}

void HttpServer::Impl::answer_stream(std::shared_ptr<Answer> a, Response& res) {
    res.set_header("Cache-Control", "no-cache");
    const std::string type = a->format->stream_type();
    res.set_chunked_content_provider(
        type, [this, a](size_t, httplib::DataSink& sink) { return pump(*a, sink); },
        // Runs when the response is over, written or not: a client that went away (or a
        // server that stops) must not leave its request generating.
        [this, a](bool) {
            if (!a->done) engine.cancel(a->id);
            untrack(a->id);
        });
}

// Called by httplib again and again until sink.done(); false ends the response (and the
// connection) at once.
bool HttpServer::Impl::pump(Answer& a, httplib::DataSink& sink) {
    if (!a.started) {
        a.started = true;
        if (!write(sink, a.format->begin())) return false;
    }
    for (EngineEvent& e : a.events->take(kPoll)) {
        if (!write_event(a, e, sink)) return false;
        a.last_write = Clock::now();
        if (a.done) {
            sink.done();
            return true;
        }
    }
    if (stopping) return false;
    if (Clock::now() - a.last_write > kHeartbeat) {
        a.last_write = Clock::now();
        if (a.client) return a.client->connected();
        return write(sink, a.format->keepalive());
    }
    return true;
}

bool HttpServer::Impl::write_event(Answer& a, EngineEvent& e, httplib::DataSink& sink) {
    switch (e.kind) {
        case EngineEvent::Kind::Started:
            return true;
        case EngineEvent::Kind::Text:
            return write(sink, a.format->text(e));
        case EngineEvent::Kind::Finished:
            a.done = true;
            return write(sink, a.format->finished(e.stats));
        case EngineEvent::Kind::Failed:
            a.done = true;
            return write(sink, a.format->failed(
                                   {500, "the engine could not run the request: " + e.error, "server_error", "", ""}));
    }
    return true;
}

httplib::Server::HandlerResponse HttpServer::Impl::check_key(const Request& req, Response& res) const {
    using HR = httplib::Server::HandlerResponse;
    // "/" too: Ollama's clients probe it ("Ollama is running") before they send the key.
    if (options.api_key.empty() || req.path == "/health" || req.path == "/") return HR::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (const auto key = bearer_token(auth); key && same_key(*key, options.api_key)) return HR::Unhandled;
    send_error(req, res,
               {401, auth.empty() ? "no API key: send it as 'Authorization: Bearer KEY'" : "the API key is not valid",
                "invalid_request_error", "", "invalid_api_key"});
    return HR::Handled;
}

void HttpServer::Impl::routes() {
    http.set_pre_routing_handler([this](const Request& req, Response& res) { return check_key(req, res); });
    http.Get("/health",
             [](const Request&, Response& res) { res.set_content(R"({"status":"ok"})", "application/json"); });
    http.Get("/v1/models", [this](const Request&, Response& res) {
        const EngineStatus s = engine.status();
        res.set_content(dump(models_json(s.model, created, s.n_ctx)), "application/json");
    });
    http.Get("/v1/status", [this](const Request&, Response& res) {
        json s = status_json(engine.status());
        s["uptime_s"] = std::chrono::duration<double>(Clock::now() - started).count();
        res.set_content(dump(s), "application/json");
    });
    http.Get("/metrics", [this](const Request&, Response& res) {
        res.set_content(prometheus_text(metrics->snapshot(), engine.status()), "text/plain; version=0.0.4");
    });
    http.Post("/v1/chat/completions",
              [this](const Request& req, Response& res) { generate(Endpoint::Chat, req, res); });
    http.Post("/v1/completions",
              [this](const Request& req, Response& res) { generate(Endpoint::Completion, req, res); });
    ollama_routes();

    // Errors httplib answers itself (no route, a body over the limit, a malformed request)
    // get the same error object as ours; a response that has a body already keeps it.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        // A request that could not be read whole: say why (httplib itself says 400).
        if (const RequestFault f = GuardedServer::current_fault(); f != RequestFault::None) {
            res.status = GuardedServer::fault_status(f);
            res.set_header("Connection", "close");
            send_error(req, res,
                       {res.status, http.fault_message(f), "invalid_request_error", "", GuardedServer::fault_code(f)});
            return httplib::Server::HandlerResponse::Handled;
        }
        ApiError e{res.status, "HTTP " + std::to_string(res.status), "invalid_request_error", "", ""};
        if (res.status == 404) e.message = "no such endpoint: " + req.method + " " + req.path, e.code = "not_found";
        if (res.status == 413)
            e.message = "the request body is larger than this server accepts (" +
                        std::to_string(options.limits.max_body_bytes) + " bytes)",
            e.code = "request_too_large";
        send_error(req, res, e);
        return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {}
        send_error(req, res, {500, "internal error: " + what, "server_error", "", ""});
    });
    http.set_logger([this](const Request& req, const Response& res) {
        metrics->count_request(endpoint_label(req.path), res.status);
    });
}

HttpServer::HttpServer(InferenceEngine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start() {
    Impl& s = *impl_;
    if (s.listener.joinable()) return s.port;
    // A client that closes its connection must not kill the process through a write.
    signal(SIGPIPE, SIG_IGN);
    s.http.set_payload_max_length(s.options.limits.max_body_bytes);
    // An idle keep-alive connection holds its thread until this runs out, and stop() waits for
    // every thread: 2 s instead of httplib's 5 bounds a clean shutdown.
    s.http.set_keep_alive_timeout(2);
    // httplib's default sets SO_REUSEPORT, with which a second server binds the same port and
    // the kernel splits the connections between them. Only SO_REUSEADDR here: a restart may
    // bind at once (TIME_WAIT), a port in use is an error.
    s.http.set_socket_options([&s](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        s.listen_socket = sock;
    });
    s.routes();
    const std::string& host = s.options.host;
    s.port = s.options.port == 0 ? s.http.bind_to_any_port(host)
                                 : (s.http.bind_to_port(host, s.options.port) ? s.options.port : -1);
    if (s.port <= 0)
        throw Error("cannot listen on " + host + ":" + std::to_string(s.options.port) + ": " + std::strerror(errno));
    // Debian's libcpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG is fixed
    // when the library is built). A burst of clients then overflows the accept queue while the
    // engine keeps the cores busy, and some connections were reset (seen with 32 benchmark
    // clients). Listening again on the bound socket raises its backlog (Linux allows this).
    if (::listen(s.listen_socket, SOMAXCONN) != 0)
        throw Error(std::string("cannot raise the listen backlog: ") + std::strerror(errno));
    s.listener = std::thread([&s] {
        s.http.listen_after_bind();
        s.listen_ended = true;
    });
    // stop() only reaches a server that runs: wait for the listening loop to begin.
    while (!s.http.is_running() && !s.listen_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (s.listen_ended) {
        s.listener.join();
        throw Error("cannot serve on " + host + ":" + std::to_string(s.port));
    }
    return s.port;
}

void HttpServer::stop() {
    Impl& s = *impl_;
    if (!s.listener.joinable()) return;
    s.stopping = true;
    {
        std::lock_guard lock(s.mutex);
        for (uint64_t id : s.active) s.engine.cancel(id);
    }
    s.http.stop();
    s.listener.join();
}

int HttpServer::port() const { return impl_->port; }

std::string HttpServer::url() const {
    const std::string& h = impl_->options.host;
    return "http://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port);
}

}  // namespace ember::server
