// The OpenAI wire format for the remote engine client (remote_wire.h). OpenAI's own request
// fields are written (temperature, top_p, seed, penalties, stop, tools); llama.cpp's and
// vLLM's (top_k, min_p, repeat_penalty) only where the caller set them (SentFields): a server
// that knows no more, OpenAI itself included, rejects fields it does not know.
#include "engine/remote/remote_wire.h"

#include <nlohmann/json.hpp>

#include "kernels/common/error.h"

namespace ember::remote {

using nlohmann::json;

namespace {

json message_json(const ChatMessage& m) {
    json j = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
        json calls = json::array();
        for (const ChatToolCall& c : m.tool_calls)
            calls.push_back(
                {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) j["name"] = m.name;
    return j;
}

void add_sampling(json& body, const SamplingParams& s, const SentFields& sent) {
    body["temperature"] = std::max(0.0f, s.temperature);
    if (s.top_p < 1.0f) body["top_p"] = s.top_p;
    // OpenAI's seed is a signed 64-bit integer (servers refuse more): the top bit is dropped.
    body["seed"] = static_cast<int64_t>(s.seed & uint64_t{INT64_MAX});
    if (s.presence_penalty != 0.0f) body["presence_penalty"] = s.presence_penalty;
    if (s.frequency_penalty != 0.0f) body["frequency_penalty"] = s.frequency_penalty;
    // llama.cpp's and vLLM's own, where the caller set them (neutral values are left out).
    if (sent.top_k && s.top_k > 0) body["top_k"] = s.top_k;
    if (sent.min_p && s.min_p > 0.0f) body["min_p"] = s.min_p;
    if (sent.repeat_penalty && s.repeat_penalty != 1.0f) body["repeat_penalty"] = s.repeat_penalty;
}

void add_chat_options(json& body, const EngineRequest& r) {
    json messages = json::array();
    for (const ChatMessage& m : r.messages) messages.push_back(message_json(m));
    body["messages"] = std::move(messages);
    const ChatRenderOptions& o = r.template_options;
    if (!o.tools_json.empty()) {
        try {
            body["tools"] = json::parse(o.tools_json);
        } catch (const json::exception& e) {
            throw Error(std::string("the request's tools are not valid JSON: ") + e.what());
        }
    }
    if (!o.reasoning_effort.empty()) body["reasoning_effort"] = o.reasoning_effort;
    // vLLM, SGLang, llama-server and Ember pass these to the chat template.
    if (o.enable_thinking) body["chat_template_kwargs"] = {{"enable_thinking", *o.enable_thinking}};
}

std::string start_of(const std::string& s) {
    std::string out = s.substr(0, 120);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return s.size() > 120 ? out + "..." : out;
}

// A JSON string field, or "" when it is absent or null; anything else is a malformed chunk.
std::string text_field(const json& obj, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return "";
    if (!it->is_string()) throw Error(std::string("'") + key + "' is not a string");
    return it->get<std::string>();
}

std::optional<int32_t> count_field(const json& obj, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
    const int64_t v = it->get<int64_t>();
    if (v < 0 || v > INT32_MAX) return std::nullopt;
    return static_cast<int32_t>(v);
}

void read_tool_calls(const json& delta, Chunk& c) {
    const auto it = delta.find("tool_calls");
    if (it == delta.end() || it->is_null()) return;
    if (!it->is_array()) throw Error("'tool_calls' is not an array");
    for (size_t i = 0; i < it->size(); ++i) {
        const json& call = (*it)[i];
        if (!call.is_object()) throw Error("a tool call is not an object");
        ToolCallPiece p;
        const auto index = count_field(call, "index");
        p.index = index ? *index : static_cast<int>(i);
        if (p.index > 1024) throw Error("a tool call's index is over 1024");
        p.id = text_field(call, "id");
        if (const auto f = call.find("function"); f != call.end() && f->is_object()) {
            p.name = text_field(*f, "name");
            // Whole answers from some servers carry arguments as an object, not as JSON text.
            const auto a = f->find("arguments");
            if (a != f->end() && !a->is_null()) p.arguments = a->is_string() ? a->get<std::string>() : a->dump();
        }
        c.tool_calls.push_back(std::move(p));
    }
}

void read_usage(const json& j, Chunk& c) {
    const auto u = j.find("usage");
    if (u == j.end() || !u->is_object()) return;
    c.prompt_tokens = count_field(*u, "prompt_tokens");
    c.completion_tokens = count_field(*u, "completion_tokens");
    if (const auto d = u->find("completion_tokens_details"); d != u->end() && d->is_object())
        c.reasoning_tokens = count_field(*d, "reasoning_tokens");
}

void read_choice(const json& choice, Chunk& c) {
    if (!choice.is_object()) throw Error("a choice is not an object");
    c.finish_reason = text_field(choice, "finish_reason");
    c.text = text_field(choice, "text");  // completions
    for (const char* part : {"delta", "message"}) {
        const auto d = choice.find(part);
        if (d == choice.end() || d->is_null()) continue;
        if (!d->is_object()) throw Error(std::string("'") + part + "' is not an object");
        c.text += text_field(*d, "content");
        c.reasoning = text_field(*d, "reasoning_content");
        if (c.reasoning.empty()) c.reasoning = text_field(*d, "reasoning");
        read_tool_calls(*d, c);
    }
}

}  // namespace

std::string request_path(const EngineRequest& r) { return r.messages.empty() ? "/completions" : "/chat/completions"; }

std::string request_body(const EngineRequest& r, const std::string& model, const SentFields& sent) {
    if (!r.prompt_tokens.empty()) throw Error("a remote engine takes text or messages, not token ids");
    if (r.messages.empty() && r.prompt.empty()) throw Error("the request has no prompt and no messages");
    if (r.grammar) throw Error("grammar-constrained output is not available on a remote engine");
    json body = {{"model", model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    if (r.messages.empty()) body["prompt"] = r.prompt;
    else add_chat_options(body, r);
    if (r.max_tokens > 0) body["max_tokens"] = r.max_tokens;
    add_sampling(body, r.sampling, sent);
    if (!r.stop.empty()) body["stop"] = r.stop;
    // Extensions, sent only when asked for: vLLM, llama-server and Ember know ignore_eos;
    // llama-server and Ember the thinking budget.
    if (r.ignore_eog) body["ignore_eos"] = true;
    if (r.reasoning_budget >= 0) body["reasoning_budget_tokens"] = r.reasoning_budget;
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

Chunk parse_chunk(const std::string& data) {
    try {
        const json j = json::parse(data);
        if (!j.is_object()) throw Error("not a JSON object");
        Chunk c;
        if (const auto e = j.find("error"); e != j.end() && !e->is_null()) {
            c.error = server_message(data);
            return c;
        }
        read_usage(j, c);
        const auto choices = j.find("choices");
        if (choices == j.end() || choices->is_null()) return c;  // a usage-only chunk
        if (!choices->is_array()) throw Error("'choices' is not an array");
        if (!choices->empty()) read_choice(choices->front(), c);
        return c;
    } catch (const json::exception& e) {
        throw Error("the server sent an event that is not valid JSON (" + std::string(e.what()) + "): '" +
                    start_of(data) + "'");
    } catch (const Error& e) {
        throw Error("the server sent an event Ember cannot read (" + std::string(e.what()) + "): '" + start_of(data) +
                    "'");
    }
}

void add_tool_call(std::vector<ChatToolCall>& calls, const ToolCallPiece& piece) {
    if (calls.size() <= static_cast<size_t>(piece.index)) calls.resize(piece.index + 1);
    ChatToolCall& c = calls[piece.index];
    if (!piece.id.empty()) c.id = piece.id;
    c.name += piece.name;
    c.arguments += piece.arguments;
}

StopReason stop_reason_of(const std::string& finish_reason) {
    if (finish_reason == "length") return StopReason::Length;
    if (finish_reason == "stop" || finish_reason == "tool_calls" || finish_reason == "eos")
        return StopReason::EndOfText;
    return finish_reason.empty() ? StopReason::None : StopReason::EndOfText;
}

std::vector<RemoteModel> parse_models(const std::string& body) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        throw Error("the model list is not valid JSON (" + std::string(e.what()) + "): '" + start_of(body) + "'");
    }
    const auto data = j.is_object() ? j.find("data") : j.end();
    if (!j.is_object() || data == j.end() || !data->is_array())
        throw Error("the model list has no 'data' array: '" + start_of(body) + "'");
    std::vector<RemoteModel> out;
    for (const json& m : *data) {
        if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
        RemoteModel r;
        r.id = m["id"].get<std::string>();
        if (m.contains("owned_by") && m["owned_by"].is_string()) r.owned_by = m["owned_by"].get<std::string>();
        for (const char* key : {"context_length", "max_model_len"})
            if (m.contains(key) && m[key].is_number_integer()) r.context_length = m[key].get<int64_t>();
        if (const auto meta = m.find("meta"); meta != m.end() && meta->is_object())
            if (meta->contains("n_ctx_train") && (*meta)["n_ctx_train"].is_number_integer())
                r.context_length = (*meta)["n_ctx_train"].get<int64_t>();
        out.push_back(std::move(r));
    }
    return out;
}

std::string server_message(const std::string& body) {
    std::string said;
    try {
        const json j = json::parse(body);
        if (j.is_object()) {
            const auto e = j.find("error");
            if (e != j.end() && e->is_object() && e->contains("message") && (*e)["message"].is_string())
                said = (*e)["message"].get<std::string>();
            else if (e != j.end() && e->is_string()) said = e->get<std::string>();
            else if (j.contains("detail") && j["detail"].is_string()) said = j["detail"].get<std::string>();
            else if (j.contains("message") && j["message"].is_string()) said = j["message"].get<std::string>();
        }
    } catch (const json::exception&) {
        said = body;
    }
    said = said.substr(0, 300);
    for (char& c : said)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return said;
}

}  // namespace ember::remote
