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
#include <string_view>
#include <variant>

#include "engine/server/api_types.h"

namespace ember::server {

// Never throws: a body that is not a valid request for `endpoint` gives the ApiError to send
// (400 for bad JSON, wrong types and values out of range; 413 for a prompt over the limits).
std::variant<ApiRequest, ApiError> parse_request(Endpoint endpoint, std::string_view body, const ServerLimits& limits);

}  // namespace ember::server
