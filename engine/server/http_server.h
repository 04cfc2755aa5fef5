// The local HTTP server, OpenAI-compatible (cpp-httplib), over any InferenceEngine: the
// Scheduler in `ember serve` and in the desktop app, or a remote engine later.
//
//   GET  /health                 {"status":"ok"} (no API key needed: for supervisors)
//   GET  /v1/models              the loaded model
//   POST /v1/chat/completions    messages, rendered with the model's chat template; SSE when streamed
//   POST /v1/completions         a raw prompt (text or token ids); SSE when streamed
//   GET  /v1/status              what is loaded, where, memory by kind, KV blocks, requests (`ember ps`)
//   GET  /metrics                Prometheus text (server_metrics.h)
// and Ollama's API beside it (ollama_parser.h, ollama_format.h; clients find it by OLLAMA_HOST):
//   GET  /                       "Ollama is running" (no API key needed: clients probe it)
//   POST /api/chat, /api/generate  NDJSON when streamed (Ollama streams unless told not to)
//   GET  /api/tags, /api/ps, /api/version; POST /api/show
//
// Each HTTP request runs on one of the server's threads, which submits it to the engine and
// waits for its events (the engine's sink only queues them). A streamed answer is written
// event by event; when a write fails (the client went away) the request is cancelled at once.
// An unstreamed answer looks at its connection while it waits (connection_probe.h): a client
// that hung up gets its request cancelled within one poll (100 ms), as does every request when
// the server stops.
//
// Lifetime: stop() (or the destructor) before the engine goes away.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/scheduler/inference_engine.h"
#include "engine/server/api_types.h"

namespace ember::server {

struct ServerOptions {
    std::string host = "127.0.0.1";  // loopback unless asked: nothing else on the network sees it
    int port = 0;                    // 0: a free port chosen by the system (see port())
    std::string api_key;             // "": none; else every endpoint but /health and / needs "Bearer KEY"
    ServerLimits limits;
    // What a chat longer than the context does unless the request says (its "context_overflow"):
    // stop answers 400 with how far over it is and what to do.
    OverflowPolicy context_overflow = OverflowPolicy::Stop;
    // Connections (connection_guard.h): each served one holds a thread (a streamed answer too).
    int threads = 32;                            // threads kept ready
    int max_connections = 512;                   // served at once; more wait for a thread
    int max_connections_per_client = 64;         // served at once from one address; more wait, 503 at the deadline
    int read_deadline_ms = 10000;                // a request's head and body must come within this (408)
    size_t max_header_bytes = size_t(64) << 10;  // request line and headers together (431)
    size_t max_header_lines = 128;               // header lines (431)
};

class HttpServer {
public:
    HttpServer(InferenceEngine& engine, ServerOptions options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts serving on a thread of its own; returns the port. Throws ember::Error
    // when the address cannot be bound.
    int start();
    // Cancels the requests in flight, closes the listening socket and waits for the threads.
    void stop();

    int port() const;
    std::string url() const;  // "http://HOST:PORT"

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ember::server
