// The JSON shapes of Ollama's API (ollama_format.h).
#include "engine/server/ollama_format.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "engine/sampling/sampler.h"
#include "engine/server/response_format.h"

#ifndef EMBER_VERSION
#error "EMBER_VERSION must be defined (engine/server/CMakeLists.txt)"
#endif

namespace ember::server {

using json = nlohmann::json;

namespace {

int64_t ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

json logprobs_json(const std::vector<TokenLogprob>& tokens) {
    json out = json::array();
    for (const TokenLogprob& t : tokens) {
        json top = json::array();
        for (const TopLogprob& alt : t.top) top.push_back({{"token", alt.piece}, {"logprob", alt.logprob}});
        out.push_back({{"token", t.piece}, {"logprob", t.logprob}, {"top_logprobs", top}});
    }
    return out;
}

// What every answer object starts with, and its text (and calls) where this endpoint puts it.
json answer_object(const OllamaMeta& meta, const std::string& text, const std::string& reasoning, bool done,
                   const std::vector<ToolCallDelta>& calls = {}) {
    json j = {{"model", meta.model}, {"created_at", ollama_time(std::chrono::system_clock::now())}};
    if (meta.endpoint == OllamaEndpoint::Chat) {
        j["message"] = {{"role", "assistant"}, {"content", text}};
        if (!reasoning.empty()) j["message"]["thinking"] = reasoning;
        if (!calls.empty()) j["message"]["tool_calls"] = ollama_tool_calls_json(calls);
    } else {
        j["response"] = text;
        if (!reasoning.empty()) j["thinking"] = reasoning;
    }
    j["done"] = done;
    return j;
}

// Memory the model holds, in all, and on GPUs.
std::pair<uint64_t, uint64_t> held_bytes(const EngineStatus& s) {
    uint64_t all = 0, gpu = 0;
    for (const DeviceMemory& m : s.memory) {
        all += m.held();
        if (m.device != "cpu") gpu += m.held();
    }
    return {all, gpu};
}

std::string short_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// What Ollama's clients look for before they offer a feature: "tools" where Ember parses the
// model's calls (its template's form, or the generic fallback).
json capabilities(const EngineStatus& status) {
    json c = json::array({"completion"});
    if (status.tool_call_format != ToolCallFormat::None) c.push_back("tools");
    return c;
}

// The engine's sampling defaults, which a request without options gets, as Modelfile lines.
std::string default_parameters() {
    const SamplingParams d;
    return "temperature " + short_number(d.temperature) + "\ntop_k " + std::to_string(d.top_k) + "\ntop_p " +
           short_number(d.top_p) + "\nmin_p " + short_number(d.min_p) + "\nrepeat_penalty " +
           short_number(d.repeat_penalty) + "\nrepeat_last_n " + std::to_string(d.repeat_last_n);
}

}  // namespace

std::string ollama_time(std::chrono::system_clock::time_point t) {
    const auto since = t.time_since_epoch();
    const std::time_t secs = std::chrono::duration_cast<std::chrono::seconds>(since).count();
    const long nanos = static_cast<long>(
        (std::chrono::duration_cast<std::chrono::nanoseconds>(since) % std::chrono::seconds(1)).count());
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char date[32], out[48];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(out, sizeof out, "%s.%09ldZ", date, nanos);
    return out;
}

std::string ndjson(const json& j) { return dump(j) + "\n"; }

std::string ollama_error_json(const ApiError& e) { return dump(json{{"error", e.message}}); }

json ollama_load_json(const OllamaMeta& meta) {
    json j = answer_object(meta, "", "", true);
    j["done_reason"] = "load";
    return j;
}

json ollama_tool_calls_json(const std::vector<ToolCallDelta>& calls) {
    json out = json::array();
    for (const ToolCallDelta& c : calls) {
        // The parser releases a call whole, its arguments valid JSON object text.
        json args = json::parse(c.arguments, nullptr, false);
        if (!args.is_object()) args = json::object();
        out.push_back({{"id", c.id}, {"function", {{"index", c.index}, {"name", c.name}, {"arguments", args}}}});
    }
    return out;
}

json ollama_chunk_json(const OllamaMeta& meta, const std::string& text, const std::string& reasoning,
                       const std::vector<TokenLogprob>& tokens, const std::vector<ToolCallDelta>& calls) {
    json j = answer_object(meta, text, reasoning, false, calls);
    if (meta.logprobs) j["logprobs"] = logprobs_json(tokens);
    return j;
}

json ollama_final_json(const OllamaMeta& meta, const std::string& text, const std::string& reasoning,
                       const std::vector<TokenLogprob>& tokens, const RequestStats& s, std::chrono::nanoseconds total,
                       const std::vector<ToolCallDelta>& calls) {
    json j = answer_object(meta, text, reasoning, true, calls);
    if (meta.logprobs && !tokens.empty()) j["logprobs"] = logprobs_json(tokens);
    j["done_reason"] = finish_reason(s.stop_reason);
    j["total_duration"] = static_cast<int64_t>(total.count());
    j["load_duration"] = 0;
    j["prompt_eval_count"] = s.prompt_tokens;
    j["prompt_eval_duration"] = ns(std::max(0.0, s.ttft_ms - s.queue_wait_ms));
    j["eval_count"] = s.generated_tokens;
    j["eval_duration"] = ns(s.decode_ms);
    return j;
}

// With tools, the text goes through the parser first: a call comes whole, in the chunk where
// it became complete (Ollama streams calls so).
std::string OllamaAnswer::text(const EngineEvent& e) {
    const ToolCallChunk c = calls_.feed(e.text, false);
    if (c.empty() && e.reasoning.empty() && e.tokens.empty()) return {};
    return ndjson(ollama_chunk_json(meta_, c.content, e.reasoning, e.tokens, c.calls));
}

std::string OllamaAnswer::finished(const RequestStats& stats) {
    std::string held;  // what the parser held back until the end
    if (calls_.parsing())
        if (const ToolCallChunk c = calls_.feed("", true); !c.empty())
            held = ndjson(ollama_chunk_json(meta_, c.content, "", {}, c.calls));
    return held + ndjson(ollama_final_json(meta_, "", "", {}, stats, elapsed()));
}

std::string OllamaAnswer::whole(const std::string& text, const std::string& reasoning,
                                const std::vector<TokenLogprob>& tokens, const RequestStats& stats) {
    const ToolCallChunk answer = calls_.feed(text, true);
    return dump(ollama_final_json(meta_, answer.content, reasoning, tokens, stats, elapsed(), answer.calls));
}

json ollama_tags_json(const std::optional<ServedModel>& m) {
    if (!m) return {{"models", json::array()}};
    return {{"models", json::array({{{"name", m->name},
                                     {"model", m->name},
                                     {"modified_at", m->modified_at},
                                     {"size", m->size},
                                     {"digest", m->digest},
                                     {"details", m->details}}})}};
}

json ollama_show_json(const ServedModel& m, const EngineStatus& status) {
    const std::string params = default_parameters();
    std::string modelfile = "# The model `ember serve` runs, and the sampling a request without options gets\nFROM " +
                            status.model_path + "\n";
    for (size_t at = 0; at < params.size();) {
        const size_t end = params.find('\n', at);
        modelfile += "PARAMETER " + params.substr(at, end - at) + "\n";
        at = end == std::string::npos ? params.size() : end + 1;
    }
    // The template Ember really renders with: the file's own, or its built-in fallback.
    const std::string& tmpl = status.chat_template.empty() ? m.chat_template : status.chat_template;
    return {{"modelfile", modelfile},      {"parameters", params},       {"template", tmpl},
            {"details", m.details},        {"model_info", m.model_info}, {"capabilities", capabilities(status)},
            {"modified_at", m.modified_at}};
}

json ollama_ps_json(const std::optional<ServedModel>& m, const EngineStatus& status) {
    if (!m) return {{"models", json::array()}};
    const auto [all, gpu] = held_bytes(status);
    return {{"models", json::array({{{"name", m->name},
                                     {"model", m->name},
                                     {"size", all},
                                     {"size_vram", gpu},
                                     {"digest", m->digest},
                                     {"details", m->details},
                                     // `ember serve` keeps its model until it stops
                                     {"expires_at", "9999-12-31T23:59:59Z"},
                                     {"context_length", status.n_ctx}}})}};
}

json ollama_version_json() { return {{"version", EMBER_VERSION}}; }

}  // namespace ember::server
