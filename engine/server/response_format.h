// Engine events -> OpenAI-shaped JSON and Server-Sent Events: pure functions, unit-tested
// without a server. Every dump replaces invalid UTF-8 (a token's piece may be half of a
// character) instead of throwing.
//
// A streamed answer is: first_chunk (chat only: the assistant role), one text_chunk per Text
// event (and tool_call_chunks for the calls parsed out of it), finish_chunk, usage_chunk when
// stream_options.include_usage was asked, then kSseDone. Each chunk is one SSE event:
// "data: <json>\n\n".
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "engine/server/answer_format.h"
#include "engine/server/api_types.h"

namespace ember::server {

// What every response of one request repeats.
struct ResponseMeta {
    Endpoint endpoint = Endpoint::Chat;
    std::string id;       // "chatcmpl-…" or "cmpl-…"
    int64_t created = 0;  // Unix seconds
    std::string model;
    bool logprobs = false;       // the request asked for logprobs
    bool include_usage = false;  // streamed: every chunk carries "usage" (null until the last)
};

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

std::string dump(const nlohmann::json& j);  // compact, invalid UTF-8 replaced
std::string sse_event(const nlohmann::json& data);
std::string error_json(const ApiError& e);

// OpenAI's finish_reason: "stop" (end of generation, a stop string, cancelled) or "length"
// (max_tokens or the context); "tool_calls" instead of "stop" when the answer made calls.
std::string finish_reason(StopReason r, bool tool_calls = false);
nlohmann::json usage_json(const RequestStats& stats);

// Logprobs of `tokens` as the endpoint reports them. `text_offset`: where the first token's
// text starts in the whole answer (completions report each token's offset).
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& tokens, size_t text_offset);

// The whole answer of a request that was not streamed. A model's thinking (chat only) is the
// message's "reasoning_content", as llama-server and vLLM write it, never part of "content".
// Calls (chat only) are the message's "tool_calls" ([{"id", "type": "function", "function":
// {"name", "arguments"}}], the deltas of one index joined); with calls and no text, "content"
// is null, as OpenAI writes it.
std::string response_json(const ResponseMeta& meta, const std::string& text, const std::vector<TokenLogprob>& tokens,
                          const RequestStats& stats, const std::string& reasoning = {},
                          const std::vector<ToolCallDelta>& calls = {});

// Streamed chunks (SSE events, ready to write).
std::string first_chunk(const ResponseMeta& meta);  // "" for completions
// A chat delta carries "content", "reasoning_content" (thinking), or both: only what it has.
std::string text_chunk(const ResponseMeta& meta, const std::string& text, const std::vector<TokenLogprob>& tokens,
                       size_t text_offset, const std::string& reasoning = {});
// Calls as OpenAI streams them: a call's first chunk has index, id, type, function.name and
// empty arguments; its arguments follow in chunks that carry the index only.
std::string tool_call_chunks(const ResponseMeta& meta, const std::vector<ToolCallDelta>& calls);
std::string finish_chunk(const ResponseMeta& meta, StopReason reason, bool tool_calls = false);
std::string usage_chunk(const ResponseMeta& meta, const RequestStats& stats);
std::string error_event(const ApiError& e);

// The chunks and objects above as the server writes them for one request.
class OpenAiAnswer : public AnswerFormat {
public:
    explicit OpenAiAnswer(ResponseMeta meta, ToolCallText calls = {})
        : meta_(std::move(meta)), calls_(std::move(calls)) {}
    const char* stream_type() const override { return "text/event-stream"; }
    std::string begin() override { return first_chunk(meta_); }
    std::string text(const EngineEvent& e) override;
    std::string finished(const RequestStats& stats) override;
    std::string failed(const ApiError& e) override { return error_event(e) + std::string(kSseDone); }
    std::string keepalive() const override { return ": waiting\n\n"; }  // an SSE comment
    std::string whole(const std::string& text, const std::string& reasoning, const std::vector<TokenLogprob>& tokens,
                      const RequestStats& stats) override;
    std::string error(const ApiError& e) const override { return error_json(e); }

private:
    ResponseMeta meta_;
    ToolCallText calls_;
    size_t text_offset_ = 0;  // bytes of text so far (completions' logprobs offsets)
};

// GET /v1/models (with the context length a sequence has, as vLLM and SGLang say theirs, so a
// remote client can show it) and the status endpoint (what `ember ps` reads).
nlohmann::json models_json(const std::string& model, int64_t created, int64_t n_ctx);
nlohmann::json status_json(const EngineStatus& status);

}  // namespace ember::server
