// JSON request body -> ApiRequest (an EngineRequest and how to answer it), with every field
// checked: a pure function, so the unit tests and the fuzzer (tests/fuzz/fuzz_server_request)
// reach all of it without a server.
//
// What it accepts is OpenAI's API for /v1/chat/completions and /v1/completions, plus
// llama-server's `top_k`, `min_p` and `ignore_eos`; chat takes tools (ApiRequest::tools:
// `tools` of type function, `tool_choice`, `parallel_tool_calls`, assistant `tool_calls` and
// `tool` messages). Fields that would change the answer and that the engine cannot honour
// (n > 1, images, JSON mode, echo, logit_bias, the deprecated `functions`) are
// refused with a 400 naming the field, never silently ignored; fields that change nothing
// (user, metadata, store) are ignored, as are unknown ones (clients add their own).
// Sampling fields left out take the engine's defaults (SamplingParams), like llama-server.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>
#include <variant>

#include "engine/server/api_types.h"
#include "engine/server/request_fields.h"

namespace ember::server {

// Never throws: a body that is not a valid request for `endpoint` gives the ApiError to send
// (400 for bad JSON, wrong types and values out of range; 413 for a prompt over the limits).
std::variant<ApiRequest, ApiError> parse_request(Endpoint endpoint, std::string_view body, const ServerLimits& limits);

// What Ollama's parser (ollama_parser.cpp) shares with this one: its tools and an assistant
// turn's calls have OpenAI's shape. Each throws Invalid (request_fields.h) naming the field.
// An assistant turn's tool_calls (arguments as JSON text or an object).
std::vector<ChatToolCall> parse_message_tool_calls(const nlohmann::json& calls, const std::string& param);
// Bytes of an assistant turn's calls, counted against the prompt's limit.
size_t tool_calls_bytes(const std::vector<ChatToolCall>& calls);
// A tool result without its function's name gets it from the call whose id it answers.
void name_tool_results_by_call_id(std::vector<ChatMessage>& msgs);
// OpenAI's tool_choice (none, auto, required, a named function) onto `t`, whose tools are parsed.
void parse_tool_choice_field(const nlohmann::json* choice, ToolRequest& t);
// The `tools` array: ToolRequest::tools, and its JSON text as the template's tools_json.
void parse_tools_array(const nlohmann::json& tools, ToolRequest& t, EngineRequest& e, PromptBudget& budget,
                       const ServerLimits& limits);

}  // namespace ember::server
