// How one API writes a generation's answer, streamed or whole: OpenAI's chat.completion objects
// and Server-Sent Events (OpenAiAnswer, response_format.h), Ollama's objects and NDJSON lines
// (OllamaAnswer, ollama_format.h). http_server moves engine events to the socket through one of
// these; there is one per request, so a format may keep state (offsets, clocks).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scheduler/inference_engine.h"
#include "engine/server/api_types.h"
#include "engine/template/tool_calls.h"

namespace ember::server {

// The answer's text through a tool-call parser (engine/template/tool_calls.h) when the request
// offered tools; without one, the text as it is. Shared by both APIs' formats.
class ToolCallText {
public:
    ToolCallText() = default;
    ToolCallText(std::unique_ptr<ToolCallParser> parser, std::string tag)
        : parser_(std::move(parser)), tag_(std::move(tag)) {}

    bool parsing() const { return parser_ != nullptr; }
    // ToolCallParser::stream_arguments: a forced call's arguments released as they are written.
    void stream_arguments(bool on) {
        if (parser_) parser_->stream_arguments(on);
    }
    bool made_calls() const { return made_calls_; }  // finish_reason "tool_calls"
    // New text; at_end: the output is over (held text is released, problems are logged).
    ToolCallChunk feed(std::string_view text, bool at_end);

private:
    std::unique_ptr<ToolCallParser> parser_;
    std::string tag_;  // names the answer in the log
    bool made_calls_ = false;
};

class AnswerFormat {
public:
    virtual ~AnswerFormat() = default;

    // Streamed: the content type, what goes before the first event, one Text event, the end.
    virtual const char* stream_type() const = 0;
    virtual std::string begin() = 0;
    virtual std::string text(const EngineEvent& e) = 0;
    virtual std::string finished(const RequestStats& stats) = 0;
    virtual std::string failed(const ApiError& e) = 0;
    // Written while a streamed request waits for its first event, so that a client gone by then
    // is noticed; "" when the format has no such thing (NDJSON): the server probes the socket.
    virtual std::string keepalive() const = 0;

    // The whole answer (JSON) of a request that was not streamed.
    virtual std::string whole(const std::string& text, const std::string& reasoning,
                              const std::vector<TokenLogprob>& tokens, const RequestStats& stats) = 0;
    // An error's JSON body, as this API writes them.
    virtual std::string error(const ApiError& e) const = 0;
};

}  // namespace ember::server
