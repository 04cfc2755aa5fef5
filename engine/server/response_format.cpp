// The JSON shapes of OpenAI's chat.completion(.chunk) and text_completion objects.
#include "engine/server/response_format.h"

namespace ember::server {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& data) { return "data: " + dump(data) + "\n\n"; }

namespace {

json null_or(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json error_object(const ApiError& e) {
    return {
        {"error", {{"message", e.message}, {"type", e.type}, {"param", null_or(e.param)}, {"code", null_or(e.code)}}}};
}

json bytes_of(const std::string& piece) {
    json b = json::array();
    for (unsigned char c : piece) b.push_back(c);
    return b;
}

// Chat: {"content": [{"token","logprob","bytes","top_logprobs":[...]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& tokens) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
        json top = json::array();
        for (const TopLogprob& alt : t.top)
            top.push_back({{"token", alt.piece}, {"logprob", alt.logprob}, {"bytes", bytes_of(alt.piece)}});
        content.push_back(
            {{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_of(t.piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}.
json completion_logprobs(const std::vector<TokenLogprob>& tokens, size_t text_offset) {
    json out = {{"tokens", json::array()},
                {"token_logprobs", json::array()},
                {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const TokenLogprob& t : tokens) {
        out["tokens"].push_back(t.piece);
        out["token_logprobs"].push_back(t.logprob);
        json top = json::object();
        // keyed by text, as OpenAI's: two tokens of the same text (parts of one UTF-8 character)
        // keep the likelier, which comes first
        for (const TopLogprob& alt : t.top) top.emplace(alt.piece, alt.logprob);
        out["top_logprobs"].push_back(top);
        out["text_offset"].push_back(text_offset);
        text_offset += t.piece.size();
    }
    return out;
}

json envelope(const ResponseMeta& meta, bool chunk) {
    const char* object =
        meta.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    json j = {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
    if (chunk && meta.include_usage) j["usage"] = nullptr;
    return j;
}

// One streamed choice: chat puts its text in "delta", completions in "text".
json chunk_choice(const ResponseMeta& meta, const json& delta_or_text, const json& logprobs, const json& finish) {
    json c = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish}};
    c[meta.endpoint == Endpoint::Chat ? "delta" : "text"] = delta_or_text;
    return c;
}

std::string chunk(const ResponseMeta& meta, json choice) {
    json j = envelope(meta, true);
    j["choices"] = json::array({std::move(choice)});
    return sse_event(j);
}

// A whole answer's calls; deltas of one index are joined (the first has id and name).
json tool_calls_json(const std::vector<ToolCallDelta>& calls) {
    json out = json::array();
    for (const ToolCallDelta& c : calls) {
        if (c.index >= out.size())
            out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}});
        if (c.index < out.size()) {
            std::string args = out[c.index]["function"]["arguments"].get<std::string>() + c.arguments;
            out[c.index]["function"]["arguments"] = std::move(args);
        }
    }
    return out;
}

}  // namespace

std::string error_json(const ApiError& e) { return dump(error_object(e)); }

std::string error_event(const ApiError& e) { return sse_event(error_object(e)); }

std::string finish_reason(StopReason r, bool tool_calls) {
    if (r == StopReason::Length || r == StopReason::Context) return "length";
    return tool_calls ? "tool_calls" : "stop";
}

json usage_json(const RequestStats& s) {
    json u = {{"prompt_tokens", s.prompt_tokens},
              {"completion_tokens", s.generated_tokens},
              {"total_tokens", s.prompt_tokens + s.generated_tokens},
              {"prompt_tokens_details", {{"cached_tokens", s.reused_tokens}}}};
    if (s.reasoning_tokens > 0) u["completion_tokens_details"] = {{"reasoning_tokens", s.reasoning_tokens}};
    return u;
}

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& tokens, size_t text_offset) {
    return endpoint == Endpoint::Chat ? chat_logprobs(tokens) : completion_logprobs(tokens, text_offset);
}

std::string response_json(const ResponseMeta& meta, const std::string& text, const std::vector<TokenLogprob>& tokens,
                          const RequestStats& stats, const std::string& reasoning,
                          const std::vector<ToolCallDelta>& calls) {
    json choice = {{"index", 0},
                   {"logprobs", meta.logprobs ? logprobs_json(meta.endpoint, tokens, 0) : json()},
                   {"finish_reason", finish_reason(stats.stop_reason, !calls.empty())}};
    if (meta.endpoint == Endpoint::Chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? json() : json(text)}};
        if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
        if (!calls.empty()) choice["message"]["tool_calls"] = tool_calls_json(calls);
    } else {
        choice["text"] = text;
    }
    json j = envelope(meta, false);
    j["choices"] = json::array({choice});
    j["usage"] = usage_json(stats);
    return dump(j);
}

std::string first_chunk(const ResponseMeta& meta) {
    if (meta.endpoint != Endpoint::Chat) return "";
    return chunk(meta, chunk_choice(meta, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
}

std::string text_chunk(const ResponseMeta& meta, const std::string& text, const std::vector<TokenLogprob>& tokens,
                       size_t text_offset, const std::string& reasoning) {
    json body = meta.endpoint == Endpoint::Chat ? json::object() : json(text);
    if (meta.endpoint == Endpoint::Chat) {
        if (!text.empty() || reasoning.empty()) body["content"] = text;
        if (!reasoning.empty()) body["reasoning_content"] = reasoning;
    }
    const json lp = meta.logprobs ? logprobs_json(meta.endpoint, tokens, text_offset) : json();
    return chunk(meta, chunk_choice(meta, body, lp, nullptr));
}

std::string tool_call_chunks(const ResponseMeta& meta, const std::vector<ToolCallDelta>& calls) {
    std::string out;
    for (const ToolCallDelta& c : calls) {
        if (!c.id.empty()) {
            const json head = {{"index", c.index},
                               {"id", c.id},
                               {"type", "function"},
                               {"function", {{"name", c.name}, {"arguments", ""}}}};
            out += chunk(meta, chunk_choice(meta, {{"tool_calls", json::array({head})}}, nullptr, nullptr));
        }
        if (c.arguments.empty()) continue;
        const json part = {{"index", c.index}, {"function", {{"arguments", c.arguments}}}};
        out += chunk(meta, chunk_choice(meta, {{"tool_calls", json::array({part})}}, nullptr, nullptr));
    }
    return out;
}

std::string finish_chunk(const ResponseMeta& meta, StopReason reason, bool tool_calls) {
    const json body = meta.endpoint == Endpoint::Chat ? json::object() : json("");
    return chunk(meta, chunk_choice(meta, body, nullptr, finish_reason(reason, tool_calls)));
}

std::string usage_chunk(const ResponseMeta& meta, const RequestStats& stats) {
    json j = envelope(meta, true);
    j["choices"] = json::array();
    j["usage"] = usage_json(stats);
    return sse_event(j);
}

// With tools, the text goes through the parser first: what it holds back (a possible call)
// comes later, as content or as tool_calls deltas.
std::string OpenAiAnswer::text(const EngineEvent& e) {
    const ToolCallChunk c = calls_.feed(e.text, false);
    if (c.content.empty() && e.reasoning.empty() && e.tokens.empty()) return tool_call_chunks(meta_, c.calls);
    std::string chunk = text_chunk(meta_, c.content, e.tokens, text_offset_, e.reasoning);
    text_offset_ += e.text.size();
    return chunk + tool_call_chunks(meta_, c.calls);
}

std::string OpenAiAnswer::finished(const RequestStats& stats) {
    std::string out;
    if (calls_.parsing()) {
        const ToolCallChunk c = calls_.feed("", true);
        if (!c.content.empty()) out += text_chunk(meta_, c.content, {}, text_offset_);
        out += tool_call_chunks(meta_, c.calls);
    }
    return out + finish_chunk(meta_, stats.stop_reason, calls_.made_calls()) +
           (meta_.include_usage ? usage_chunk(meta_, stats) : "") + std::string(kSseDone);
}

std::string OpenAiAnswer::whole(const std::string& text, const std::string& reasoning,
                                const std::vector<TokenLogprob>& tokens, const RequestStats& stats) {
    const ToolCallChunk answer = calls_.feed(text, true);
    return response_json(meta_, answer.content, tokens, stats, reasoning, answer.calls);
}

json models_json(const std::string& model, int64_t created, int64_t n_ctx) {
    return {{"object", "list"},
            {"data", json::array({{{"id", model},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "ember"},
                                   {"context_length", n_ctx}}})}};
}

json status_json(const EngineStatus& s) {
    json memory = json::array();
    for (const DeviceMemory& m : s.memory)
        memory.push_back({{"device", m.device},
                          {"layers", m.layers},
                          {"weights", m.weights},
                          {"mapped_weights", m.mapped_weights},
                          {"kv_cache", m.kv_cache},
                          {"state", m.state},
                          {"scratch", m.scratch},
                          {"held", m.held()},
                          {"device_total", m.device_total},
                          {"device_free", m.device_free}});
    json requests = json::array();
    int running = 0, queued = 0;
    for (const RequestStatus& r : s.requests) {
        (r.state == "queued" ? queued : running) += 1;
        requests.push_back({{"id", r.id},
                            {"state", r.state},
                            {"prompt_tokens", r.prompt_tokens},
                            {"generated_tokens", r.generated_tokens},
                            {"age_ms", r.age_ms},
                            {"drafted_tokens", r.drafted_tokens},
                            {"accepted_tokens", r.accepted_tokens},
                            {"passes", r.passes}});
    }
    return {{"model", s.model},
            {"model_path", s.model_path},
            {"device", s.device},
            {"device_reason", s.device_reason},
            {"n_ctx", s.n_ctx},
            {"max_batch", s.max_batch},
            {"kv_blocks", {{"total", s.kv_blocks_total}, {"used", s.kv_blocks_used}, {"cached", s.kv_blocks_cached}}},
            {"kv_host_cache_bytes", s.kv_host_cache_bytes},
            {"kv_disk_cache_bytes", s.kv_disk_cache_bytes},
            {"memory", memory},
            {"running", running},
            {"queued", queued},
            {"requests", requests},
            {"speculation",
             {{"drafted_tokens", s.speculation.drafted},
              {"accepted_tokens", s.speculation.accepted},
              {"passes", s.speculation.passes},
              {"tokens", s.speculation.tokens},
              {"acceptance_rate", s.speculation.acceptance_rate()},
              {"tokens_per_pass", s.speculation.tokens_per_pass()}}}};
}

}  // namespace ember::server
