// Engine events and the served model -> Ollama's JSON: the /api/chat and /api/generate answers
// (one object, or NDJSON: one object per line, the last with done:true, done_reason and the
// timings in nanoseconds), errors ({"error": "..."}), and /api/tags, /api/show, /api/ps,
// /api/version. Pure functions, unit-tested without a server; dumps replace invalid UTF-8.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/server/answer_format.h"
#include "engine/server/ollama_models.h"
#include "engine/server/ollama_parser.h"

namespace ember::server {

struct OllamaMeta {
    OllamaEndpoint endpoint = OllamaEndpoint::Chat;
    std::string model;  // as the client named it
    bool logprobs = false;
};

// "2026-12-05T15:39:57.123456789Z", as Ollama writes created_at.
std::string ollama_time(std::chrono::system_clock::time_point t);
std::string ndjson(const nlohmann::json& j);  // one line
std::string ollama_error_json(const ApiError& e);

// The answer to a request with nothing to generate (load_only): done, done_reason "load".
nlohmann::json ollama_load_json(const OllamaMeta& meta);
// Calls as Ollama writes them: [{"id", "function": {"index", "name", "arguments": an object}}].
nlohmann::json ollama_tool_calls_json(const std::vector<ToolCallDelta>& calls);
// One streamed piece: message (chat) or response (generate) with the text, its thinking, and
// the calls (chat) that became complete in it.
nlohmann::json ollama_chunk_json(const OllamaMeta& meta, const std::string& text, const std::string& reasoning,
                                 const std::vector<TokenLogprob>& tokens, const std::vector<ToolCallDelta>& calls = {});
// The last object: done, done_reason ("stop" or "length") and the timings (nanoseconds):
// total_duration from `total` (the request's wall time in the server), prompt_eval_duration the
// prefill (first token less the queue wait), eval_duration the decode, load_duration 0 (the
// model is loaded when the server starts). Streamed, text is "" (it went in the chunks).
nlohmann::json ollama_final_json(const OllamaMeta& meta, const std::string& text, const std::string& reasoning,
                                 const std::vector<TokenLogprob>& tokens, const RequestStats& stats,
                                 std::chrono::nanoseconds total, const std::vector<ToolCallDelta>& calls = {});

class OllamaAnswer : public AnswerFormat {
public:
    explicit OllamaAnswer(OllamaMeta meta, ToolCallText calls = {})
        : meta_(std::move(meta)), calls_(std::move(calls)) {}
    const char* stream_type() const override { return "application/x-ndjson"; }
    std::string begin() override { return {}; }
    std::string text(const EngineEvent& e) override;
    std::string finished(const RequestStats& stats) override;
    std::string failed(const ApiError& e) override { return ndjson({{"error", e.message}}); }
    std::string keepalive() const override { return {}; }
    std::string whole(const std::string& text, const std::string& reasoning, const std::vector<TokenLogprob>& tokens,
                      const RequestStats& stats) override;
    std::string error(const ApiError& e) const override { return ollama_error_json(e); }

private:
    std::chrono::nanoseconds elapsed() const { return std::chrono::steady_clock::now() - started_; }
    OllamaMeta meta_;
    ToolCallText calls_;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// The model endpoints. `status` gives what is loaded where (/api/ps) and the context. No model
// (the app's engine between loads): empty lists. /api/show's template is status.chat_template
// (what the engine renders with, a built-in one when the file has none), else the file's.
nlohmann::json ollama_tags_json(const std::optional<ServedModel>& m);
nlohmann::json ollama_show_json(const ServedModel& m, const EngineStatus& status);
nlohmann::json ollama_ps_json(const std::optional<ServedModel>& m, const EngineStatus& status);
nlohmann::json ollama_version_json();

}  // namespace ember::server
