// The OpenAI-compatible API's own types, between the HTTP layer (http_server) and the pure
// parser / formatter (request_parser, response_format): what a parsed request asks for, the
// server's limits, and the error object every failure becomes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/scheduler/inference_engine.h"

namespace ember::server {

enum class Endpoint { Chat, Completion };  // /v1/chat/completions, /v1/completions

// An OpenAI-style error: the HTTP status and {"error":{"message","type","param","code"}}.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // the request field at fault; "" is sent as null
    std::string code;   // a machine-readable reason; "" is sent as null
};

// What one request may ask of the server. Above a limit: 413 (size) or 400 (max_tokens).
struct ServerLimits {
    size_t max_body_bytes = size_t(4) << 20;    // the request body
    size_t max_prompt_bytes = size_t(1) << 20;  // message contents (or prompt text) together
    size_t max_prompt_ids = size_t(1) << 17;    // a prompt given as token ids
    int32_t max_tokens = 4096;                  // per request; also the default when none is asked
    size_t max_stop = 16;                       // stop strings per request
    size_t max_json_depth = 64;                 // nesting of the body (real requests need ~5)
    size_t max_tools = 128;                     // tool definitions per request
    size_t max_tool_bytes = size_t(64) << 10;   // one tool definition, as JSON text
    grammar::Limits grammar;                    // response_format / json_schema / grammar / forced calls
};

// OpenAI's tool_choice. None: the tools are still shown to the model (as OpenAI and
// llama-server do) but its output is not parsed for calls.
enum class ToolChoice { Auto, None, Required, Named };

// The tools a chat request offers (ApiRequest::tools); their JSON text for the template is
// EngineRequest::template_options.tools_json.
struct ToolSpec {
    std::string name;
    nlohmann::json parameters;  // the JSON schema of its arguments ({} when none was given)
};
struct ToolRequest {
    std::vector<ToolSpec> tools;  // empty: no tools
    ToolChoice choice = ToolChoice::Auto;
    std::string named;  // choice Named: the function that must be called
    // parallel_tool_calls: false allows one call. Not given: what the model's form allows
    // (parallel_calls_by_default; llama-server likewise follows its template's capability).
    bool parallel = true;
    bool parallel_given = false;
    bool parse() const { return !tools.empty() && choice != ToolChoice::None; }
};

// A request as the parser understood it: the engine's part and how to answer.
struct ApiRequest {
    Endpoint endpoint = Endpoint::Chat;
    EngineRequest engine;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
    bool logprobs = false;       // report logprobs (then engine.top_logprobs >= 0)
    bool seed_given = false;     // else the server draws a fresh seed (OpenAI: not reproducible)
    ToolRequest tools;           // chat: tools, tool_choice, parallel_tool_calls
    // Chat: the request's "context_overflow" ("stop" | "truncate" | "roll"); absent: the server's
    // default (ServerOptions::context_overflow).
    std::optional<OverflowPolicy> context_overflow;
};

}  // namespace ember::server
