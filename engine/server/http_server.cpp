// The HTTP side: routes, the API key, and the two ways of answering a generation (whole, or
// streamed as Server-Sent Events). Parsing and JSON shapes live in request_parser and
// response_format; this file only moves events from the engine to the socket.
#include "engine/server/http_server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <variant>

#include "engine/server/connection_guard.h"
#include "engine/server/connection_probe.h"
#include "engine/server/request_parser.h"
#include "engine/server/response_format.h"
#include "engine/server/server_metrics.h"
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

// One generation being answered.
struct Answer {
    ResponseMeta meta;
    uint64_t id = 0;
    std::shared_ptr<EventQueue> events = std::make_shared<EventQueue>();
    bool started = false;    // streamed: the first chunk is written
    bool done = false;       // the final event was answered
    size_t text_offset = 0;  // bytes of text so far (completions' logprobs offsets)
    Clock::time_point last_write = Clock::now();
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
    for (const char* p : {"/health", "/metrics", "/v1/models", "/v1/status", "/v1/chat/completions", "/v1/completions"})
        if (path == p) return p;
    return "other";
}

void send_error(Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(error_json(e), "application/json");
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

    std::mutex mutex;           // guards the two below
    std::set<uint64_t> active;  // requests being answered (cancelled by stop())
    std::mt19937_64 rng{std::random_device{}()};

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
    httplib::Server::HandlerResponse check_key(const Request& req, Response& res) const;
    void generate(Endpoint endpoint, const Request& req, Response& res);
    void answer_whole(Answer& a, const ConnectionProbe& client, Response& res);
    void answer_stream(std::shared_ptr<Answer> a, Response& res);
    bool pump(Answer& a, httplib::DataSink& sink);
    bool write_event(Answer& a, EngineEvent& e, httplib::DataSink& sink);
    EventSink sink_for(std::shared_ptr<EventQueue> events) const;

    std::string new_id(Endpoint endpoint) {
        std::lock_guard lock(mutex);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
        return (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::string(hex);
    }
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

void HttpServer::Impl::generate(Endpoint endpoint, const Request& req, Response& res) {
    auto parsed = parse_request(endpoint, req.body, options.limits);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    ApiRequest& r = std::get<ApiRequest>(parsed);
    const std::string model = engine.status().model;
    if (!r.engine.model.empty() && r.engine.model != model)
        return send_error(res,
                          {404, "the model '" + r.engine.model + "' does not exist; this server has '" + model + "'",
                           "invalid_request_error", "model", "model_not_found"});
    if (!r.seed_given) r.engine.sampling.seed = new_seed();
    r.engine.context_overflow = r.context_overflow.value_or(options.context_overflow);
    auto a = std::make_shared<Answer>();
    a->meta = {endpoint, new_id(endpoint), unix_now(), model, r.logprobs, r.stream && r.include_usage};
    try {
        a->id = engine.submit(std::move(r.engine), sink_for(a->events));
    } catch (const EngineBusy& e) {  // may run later: nothing was queued
        res.set_header("Retry-After", "1");
        return send_error(res, {503, e.what(), "server_error", "", "queue_full"});
    } catch (const Error& e) {  // a request that can never run: nothing was queued
        return send_error(res, {400, e.what(), "invalid_request_error", "", ""});
    }
    track(a->id);
    if (stopping) engine.cancel(a->id);  // stop() ran between submit and track
    if (r.stream) answer_stream(std::move(a), res);
    else answer_whole(*a, ConnectionProbe(req.local_addr, req.local_port, req.remote_addr, req.remote_port), res);
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
                return res.set_content(response_json(a.meta, text, tokens, e.stats, reasoning), "application/json");
            } else if (e.kind == EngineEvent::Kind::Failed) {
                untrack(a.id);
                return send_error(res,
                                  {500, "the engine could not run the request: " + e.error, "server_error", "", ""});
            }
        }
        if (!client_gone && !client.connected()) client_gone = true, engine.cancel(a.id);
        if (!stopping) continue;
        if (stop_seen == Clock::time_point{}) stop_seen = Clock::now(), engine.cancel(a.id);
        if (Clock::now() - stop_seen > kStopGrace) {
            untrack(a.id);
            return send_error(res, {503, "the server is shutting down", "server_error", "", ""});
        }
    }
}

void HttpServer::Impl::answer_stream(std::shared_ptr<Answer> a, Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, a](size_t, httplib::DataSink& sink) { return pump(*a, sink); },
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
        if (!write(sink, first_chunk(a.meta))) return false;
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
        return write(sink, ": waiting\n\n");
    }
    return true;
}

bool HttpServer::Impl::write_event(Answer& a, EngineEvent& e, httplib::DataSink& sink) {
    switch (e.kind) {
        case EngineEvent::Kind::Started:
            return true;
        case EngineEvent::Kind::Text: {
            if (e.text.empty() && e.reasoning.empty() && e.tokens.empty()) return true;
            const std::string chunk = text_chunk(a.meta, e.text, e.tokens, a.text_offset, e.reasoning);
            a.text_offset += e.text.size();
            return write(sink, chunk);
        }
        case EngineEvent::Kind::Finished:
            a.done = true;
            return write(sink, finish_chunk(a.meta, e.stats.stop_reason)) &&
                   (!a.meta.include_usage || write(sink, usage_chunk(a.meta, e.stats))) &&
                   write(sink, std::string(kSseDone));
        case EngineEvent::Kind::Failed:
            a.done = true;
            return write(sink, error_event({500, "the engine could not run the request: " + e.error, "server_error", "",
                                            ""})) &&
                   write(sink, std::string(kSseDone));
    }
    return true;
}

httplib::Server::HandlerResponse HttpServer::Impl::check_key(const Request& req, Response& res) const {
    using HR = httplib::Server::HandlerResponse;
    if (options.api_key.empty() || req.path == "/health") return HR::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (const auto key = bearer_token(auth); key && same_key(*key, options.api_key)) return HR::Unhandled;
    send_error(res,
               {401, auth.empty() ? "no API key: send it as 'Authorization: Bearer KEY'" : "the API key is not valid",
                "invalid_request_error", "", "invalid_api_key"});
    return HR::Handled;
}

void HttpServer::Impl::routes() {
    http.set_pre_routing_handler([this](const Request& req, Response& res) { return check_key(req, res); });
    http.Get("/health",
             [](const Request&, Response& res) { res.set_content(R"({"status":"ok"})", "application/json"); });
    http.Get("/v1/models", [this](const Request&, Response& res) {
        res.set_content(dump(models_json(engine.status().model, created)), "application/json");
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

    // Errors httplib answers itself (no route, a body over the limit, a malformed request)
    // get the same error object as ours; a response that has a body already keeps it.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        // A request that could not be read whole: say why (httplib itself says 400).
        if (const RequestFault f = GuardedServer::current_fault(); f != RequestFault::None) {
            res.status = GuardedServer::fault_status(f);
            res.set_header("Connection", "close");
            send_error(res,
                       {res.status, http.fault_message(f), "invalid_request_error", "", GuardedServer::fault_code(f)});
            return httplib::Server::HandlerResponse::Handled;
        }
        ApiError e{res.status, "HTTP " + std::to_string(res.status), "invalid_request_error", "", ""};
        if (res.status == 404) e.message = "no such endpoint: " + req.method + " " + req.path, e.code = "not_found";
        if (res.status == 413)
            e.message = "the request body is larger than this server accepts (" +
                        std::to_string(options.limits.max_body_bytes) + " bytes)",
            e.code = "request_too_large";
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {}
        send_error(res, {500, "internal error: " + what, "server_error", "", ""});
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
