// The OpenAI wire format as a remote engine client writes and reads it: the request body of
// /v1/chat/completions and /v1/completions from an EngineRequest, one streamed chunk's parts,
// a model list, a server's error message. Pure functions over text (no HTTP), so tests and
// the fuzzer reach them directly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/remote/remote_config.h"
#include "engine/scheduler/inference_engine.h"

namespace ember::remote {

// A request body; `model` is the name to ask for. Chat when the request has messages,
// a raw completion when it has a prompt (token ids are a local engine's: an ember::Error).
// `sent`: which sampling fields beyond OpenAI's travel (none unless set). reasoning_effort
// and enable_thinking travel only when the request's template_options set them.
std::string request_body(const EngineRequest& r, const std::string& model, const SentFields& sent = {});
// "/chat/completions" or "/completions", below the API base.
std::string request_path(const EngineRequest& r);

// A piece of a streamed tool call (OpenAI sends a call's id and name first, its arguments in
// pieces after, all under the call's index).
struct ToolCallPiece {
    int index = 0;
    std::string id, name, arguments;
};

// What one chunk (or a whole non-streamed answer) carries.
struct Chunk {
    std::string text;       // choices[0].delta.content (or .text, or message.content)
    std::string reasoning;  // reasoning_content (vLLM, llama-server, Ember) or reasoning (Ollama)
    std::vector<ToolCallPiece> tool_calls;
    std::string finish_reason;                                                  // "" while it goes on
    std::optional<int32_t> prompt_tokens, completion_tokens, reasoning_tokens;  // usage, when sent
    std::string error;  // the server reported an error inside the stream
};
// Throws ember::Error for data that is not a JSON object of this shape (the message quotes
// the start of it).
Chunk parse_chunk(const std::string& data);

// Tool-call pieces put together, by index.
void add_tool_call(std::vector<ChatToolCall>& calls, const ToolCallPiece& piece);

// finish_reason as the engine's StopReason ("stop" -> EndOfText, "length" -> Length, ...).
StopReason stop_reason_of(const std::string& finish_reason);

// One model of /v1/models, with the context length where the server says it: "context_length"
// (Ember, SGLang, OpenRouter), "max_model_len" (vLLM), meta.n_ctx_train (llama-server).
struct RemoteModel {
    std::string id;
    std::string owned_by;
    int64_t context_length = 0;  // 0: not said
};
std::vector<RemoteModel> parse_models(const std::string& body);

// The server's own words from an error body ({"error": {"message"}}, {"error": "..."},
// {"detail": "..."} (FastAPI servers), or short text): at most 300 printable characters.
std::string server_message(const std::string& body);

}  // namespace ember::remote
