// Where a remote OpenAI-compatible engine is (vLLM, TGI, SGLang, llama-server, Ollama, another
// Ember's `ember serve`) and how Ember talks to it: timeouts, retries, TLS, and the bounds that
// keep a hostile or broken server from making Ember wait for ever or fill its memory.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace ember::remote {

// Sampling fields beyond OpenAI's own, each sent only when its caller set it: llama.cpp's
// llama-server, vLLM, SGLang and Ember read top_k, min_p and repeat_penalty; OpenAI itself
// (and a strict proxy) rejects a request that carries them. OpenAI's own fields (temperature,
// top_p, seed, presence/frequency penalty) always travel where set.
struct SentFields {
    bool top_k = false;           // EngineRequest::sampling.top_k, when > 0
    bool min_p = false;           // ... min_p, when > 0
    bool repeat_penalty = false;  // ... repeat_penalty, when not 1
    void set_extras(bool on) { top_k = min_p = repeat_penalty = on; }
};

struct RemoteConfig {
    // The server's OpenAI base URL: "http://host:8000/v1" (or without the "/v1": it is added
    // when the path does not end in it). Paths /models and /chat/completions go below it.
    std::string base_url;
    std::string api_key;  // sent as "Authorization: Bearer KEY"; "" = none. Never logged.
    std::string model;    // the model a request with model "" asks for
    std::string ca_file;  // PEM bundle to verify the server's certificate with; "" = the system's
    std::chrono::milliseconds connect_timeout{10000};
    // No byte from the server for this long ends the request (a model loading on the server
    // can take a while before its first token; a stalled stream should not hang the chat).
    std::chrono::milliseconds read_timeout{120000};
    // Attempts for connection errors and 429/502/503/504 before any answer has started; waits
    // between them double from backoff_initial, or are what the server's Retry-After asks for.
    int max_attempts = 4;
    std::chrono::milliseconds backoff_initial{500};
    std::chrono::milliseconds backoff_max{30000};
    // A Retry-After longer than this is not waited for: the error says when to try again.
    std::chrono::milliseconds max_retry_after{60000};
    // Memory bounds against a hostile server: one SSE line, a whole JSON answer (the model
    // list, a non-streamed reply), and a whole streamed answer.
    size_t max_line_bytes = size_t(1) << 20;
    size_t max_body_bytes = size_t(16) << 20;
    size_t max_stream_bytes = size_t(256) << 20;
    std::string user_agent = "ember/0.1";
    SentFields sent;  // which of llama.cpp's and vLLM's sampling fields travel
};

// base_url with "/v1" added where it lacks it, and no trailing '/'. Throws ember::Error for a
// URL that is not http:// or https://.
std::string api_base(const std::string& base_url);
// A URL as it may appear in messages and logs: no user:password@, no query.
std::string printable_url(const std::string& url);

}  // namespace ember::remote
