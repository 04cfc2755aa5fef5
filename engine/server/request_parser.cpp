// Request bodies -> ApiRequest. Inside, a failed check throws Invalid (the ApiError to send);
// parse_request is the one place that turns it into a return value.
#include "engine/server/request_parser.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ember::server {
namespace {

using json = nlohmann::json;

struct Invalid {
    ApiError error;
};

[[noreturn]] void invalid(std::string param, std::string message, std::string code = "", int status = 400) {
    throw Invalid{ApiError{status, std::move(message), "invalid_request_error", std::move(param), std::move(code)}};
}

[[noreturn]] void unsupported(const std::string& param, const std::string& what) {
    invalid(param, what + " is not supported by this server", "unsupported_parameter");
}

std::string type_of(const json& v) {
    switch (v.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::string:
            return "a string";
        case json::value_t::array:
            return "an array";
        case json::value_t::object:
            return "an object";
        default:
            return v.is_number() ? "a number" : "a value of another type";
    }
}

std::string number_text(double v) {
    json j = v;
    return j.dump();
}

// Nesting depth of a JSON text (brackets outside strings), checked before parsing so that a
// body of a million '[' is refused in linear time with no deep recursion anywhere.
size_t json_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

// Typed access to the fields of the request object. A field that is absent or null is "not
// given" (std::nullopt); one of the wrong type or out of range is a 400 naming it.
class Fields {
public:
    explicit Fields(const json& body) : body_(body) {}

    const json* get(const char* key) const {
        const auto it = body_.find(key);
        return it == body_.end() || it->is_null() ? nullptr : &*it;
    }
    std::optional<bool> boolean(const char* key) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) invalid(key, std::string("'") + key + "' must be a boolean, not " + type_of(*v));
        return v->get<bool>();
    }
    std::optional<std::string> string(const char* key) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_string()) invalid(key, std::string("'") + key + "' must be a string, not " + type_of(*v));
        return v->get<std::string>();
    }
    std::optional<double> number(const char* key, double lo, double hi) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_number()) invalid(key, std::string("'") + key + "' must be a number, not " + type_of(*v));
        const double x = v->get<double>();
        if (!(x >= lo && x <= hi))
            invalid(key, std::string("'") + key + "' must be between " + number_text(lo) + " and " + number_text(hi) +
                             "; got " + v->dump());
        return x;
    }
    std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        const auto x = as_integer(*v);
        if (!x) invalid(key, std::string("'") + key + "' must be an integer, not " + type_of(*v));
        if (*x < lo || *x > hi)
            invalid(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                             std::to_string(hi) + "; got " + v->dump());
        return *x;
    }
    // Integers as JSON writes them: 7, -3, also 7.0; out of int64's range: nullopt.
    static std::optional<int64_t> as_integer(const json& v) {
        if (v.is_number_unsigned()) {
            const uint64_t u = v.get<uint64_t>();
            if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
            return static_cast<int64_t>(u);
        }
        if (v.is_number_integer()) return v.get<int64_t>();
        if (v.is_number_float()) {
            const double d = v.get<double>();
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
        }
        return std::nullopt;
    }

private:
    const json& body_;
};

// ---- the prompt --------------------------------------------------------------------------

class PromptBudget {  // message contents / prompt text together, against the limit
public:
    explicit PromptBudget(size_t limit) : left_(limit) {}
    void take(const std::string& param, size_t bytes) {
        if (bytes > left_)
            invalid(param,
                    "the prompt is larger than this server accepts (" + std::to_string(limit_bytes()) +
                        " bytes of text at most)",
                    "prompt_too_long", 413);
        left_ -= bytes;
        used_ += bytes;
    }

private:
    size_t limit_bytes() const { return left_ + used_; }
    size_t left_, used_ = 0;
};

// A message's content: a string, or OpenAI's array of parts of which only text ones are
// supported (joined in order).
std::string message_content(const json& content, const std::string& param) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        invalid(param, "'content' must be a string or an array of text parts, not " + type_of(content));
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
        const json& part = content[i];
        const std::string p = param + "[" + std::to_string(i) + "]";
        if (!part.is_object()) invalid(p, "a content part must be an object, not " + type_of(part));
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string()) invalid(p, "a content part needs a 'type' string");
        if (*type != "text") unsupported(p, "content of type " + type->dump() + " (only text)");
        const auto t = part.find("text");
        if (t == part.end() || !t->is_string()) invalid(p, "a text part needs a 'text' string");
        text += t->get<std::string>();
    }
    return text;
}

ChatMessage parse_message(const json& m, size_t index, PromptBudget& budget) {
    const std::string param = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) invalid(param, "a message must be an object with 'role' and 'content', not " + type_of(m));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) invalid(param + ".role", "a message needs a 'role' string");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for the system prompt
    if (msg.role == "tool" || msg.role == "function") unsupported(param + ".role", "tool calling");
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
        invalid(param + ".role", "unknown role " + role->dump() + " (system, developer, user or assistant)");
    const auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null() && !(calls->is_array() && calls->empty()))
        unsupported(param + ".tool_calls", "tool calling");
    const auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
        if (msg.role != "assistant") invalid(param + ".content", "a " + msg.role + " message needs 'content'");
    } else {
        msg.content = message_content(*content, param + ".content");
    }
    budget.take(param + ".content", msg.content.size());
    // An earlier answer's thinking, as llama-server and vLLM return it (vLLM's newer name too).
    for (const char* key : {"reasoning_content", "reasoning"}) {
        const auto r = m.find(key);
        if (r == m.end() || r->is_null()) continue;
        if (!r->is_string())
            invalid(param + "." + key, std::string("'") + key + "' must be a string, not " + type_of(*r));
        msg.reasoning_content = r->get<std::string>();
        budget.take(param + "." + key, msg.reasoning_content.size());
        break;
    }
    return msg;
}

void parse_messages(const Fields& f, EngineRequest& r, const ServerLimits& limits) {
    const json* messages = f.get("messages");
    if (!messages) invalid("messages", "'messages' is required");
    if (!messages->is_array()) invalid("messages", "'messages' must be an array, not " + type_of(*messages));
    if (messages->empty()) invalid("messages", "'messages' must not be empty");
    PromptBudget budget(limits.max_prompt_bytes);
    for (size_t i = 0; i < messages->size(); ++i) r.messages.push_back(parse_message((*messages)[i], i, budget));
}

std::vector<int32_t> token_ids(const json& a, const std::string& param, const ServerLimits& limits) {
    if (a.size() > limits.max_prompt_ids)
        invalid(
            param,
            "the prompt has more token ids than this server accepts (" + std::to_string(limits.max_prompt_ids) + ")",
            "prompt_too_long", 413);
    std::vector<int32_t> ids;
    ids.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const auto id = Fields::as_integer(a[i]);
        if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max())
            invalid(param, "a token id must be an integer from 0; element " + std::to_string(i) + " is " + a[i].dump());
        ids.push_back(static_cast<int32_t>(*id));
    }
    return ids;
}

// /v1/completions: a string, token ids, or a list of one of either (one prompt per request).
void parse_prompt(const Fields& f, EngineRequest& r, const ServerLimits& limits) {
    const json* p = f.get("prompt");
    if (!p) invalid("prompt", "'prompt' is required");
    const json* one = p;
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) one = &(*p)[0];
    if (one->is_string()) {
        r.prompt = one->get<std::string>();
        PromptBudget(limits.max_prompt_bytes).take("prompt", r.prompt.size());
        if (r.prompt.empty()) invalid("prompt", "'prompt' must not be empty");
        return;
    }
    if (!one->is_array()) invalid("prompt", "'prompt' must be a string or an array of token ids, not " + type_of(*p));
    if (one->empty()) invalid("prompt", "'prompt' must not be empty");
    if ((*one)[0].is_string() || (*one)[0].is_array())
        unsupported("prompt", "more than one prompt per request (" + std::to_string(one->size()) + " given)");
    r.prompt_tokens = token_ids(*one, "prompt", limits);
}

// ---- generation and sampling -------------------------------------------------------------

std::vector<std::string> parse_stop(const Fields& f, const ServerLimits& limits) {
    const json* s = f.get("stop");
    if (!s) return {};
    if (s->is_string()) {
        if (s->get<std::string>().empty()) invalid("stop", "a stop string must not be empty");
        return {s->get<std::string>()};
    }
    if (!s->is_array()) invalid("stop", "'stop' must be a string or an array of strings, not " + type_of(*s));
    if (s->size() > limits.max_stop)
        invalid("stop",
                "at most " + std::to_string(limits.max_stop) + " stop strings; got " + std::to_string(s->size()));
    std::vector<std::string> out;
    for (const json& e : *s) {
        if (!e.is_string() || e.get<std::string>().empty())
            invalid("stop", "every stop string must be a non-empty string; got " + e.dump());
        out.push_back(e.get<std::string>());
    }
    return out;
}

void parse_sampling(const Fields& f, ApiRequest& a) {
    SamplingParams& s = a.engine.sampling;
    if (auto v = f.number("temperature", 0.0, 2.0)) s.temperature = static_cast<float>(*v);
    if (auto v = f.number("top_p", 0.0, 1.0)) {
        if (*v == 0.0) s.temperature = 0.0f;  // only the most likely token survives: greedy
        else s.top_p = static_cast<float>(*v);
    }
    if (auto v = f.integer("top_k", 0, std::numeric_limits<int32_t>::max())) s.top_k = static_cast<int32_t>(*v);
    if (auto v = f.number("min_p", 0.0, 1.0)) s.min_p = static_cast<float>(*v);
    if (auto v = f.number("presence_penalty", -2.0, 2.0)) s.presence_penalty = static_cast<float>(*v);
    if (auto v = f.number("frequency_penalty", -2.0, 2.0)) s.frequency_penalty = static_cast<float>(*v);
    if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
        s.seed = static_cast<uint64_t>(*v);
        a.seed_given = true;
    }
}

void parse_max_tokens(const Fields& f, EngineRequest& r, const ServerLimits& limits) {
    // OpenAI renamed max_tokens to max_completion_tokens for chat; the newer name wins.
    const char* key = f.get("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    const json* v = f.get(key);
    r.max_tokens = limits.max_tokens;
    if (!v) return;
    const auto n = Fields::as_integer(*v);
    if (!n) invalid(key, std::string("'") + key + "' must be an integer, not " + type_of(*v));
    if (*n < 0) invalid(key, std::string("'") + key + "' must not be negative; got " + v->dump());
    if (*n > limits.max_tokens)
        invalid(key, std::string("'") + key + "' is " + v->dump() + "; this server generates at most " +
                         std::to_string(limits.max_tokens) + " tokens per request");
    r.max_tokens = static_cast<int32_t>(*n);
}

void parse_logprobs(const Fields& f, ApiRequest& a) {
    if (a.endpoint == Endpoint::Chat) {
        a.logprobs = f.boolean("logprobs").value_or(false);
        const auto top = f.integer("top_logprobs", 0, 20);
        if (top && !a.logprobs) invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (a.logprobs) a.engine.top_logprobs = static_cast<int32_t>(top.value_or(0));
    } else if (auto n = f.integer("logprobs", 0, 20)) {  // completions: how many alternatives
        a.logprobs = true;
        a.engine.top_logprobs = static_cast<int32_t>(*n);
    }
}

// A chat_template_kwargs value: the template reads JSON scalars (tools come only through
// the API's own 'tools', which this server refuses).
void check_template_arg(const json& v, const std::string& param) {
    if (!v.is_boolean() && !v.is_number() && !v.is_string())
        unsupported(param, "a chat_template_kwargs value that is not a string, number or boolean");
}

// One chat_template_kwargs entry onto the template options: the two variables they name
// take their typed fields; any other (or one of another type) is an extra variable, set after
// those, so what chat_template_kwargs says wins over the request's reasoning_effort.
void add_template_arg(const std::string& name, const json& v, ChatRenderOptions& o) {
    if (name == "enable_thinking" && v.is_boolean()) o.enable_thinking = v.get<bool>();
    else if (name == "reasoning_effort" && v.is_string()) o.reasoning_effort = v.get<std::string>();
    else o.extra_vars.emplace_back(name, v.dump());
}

// Reasoning: the effort gpt-oss reads, the chat template's own switches (enable_thinking),
// and a thinking budget; the names llama-server and vLLM take.
void parse_reasoning(const Fields& f, EngineRequest& r) {
    if (auto effort = f.string("reasoning_effort")) {
        if (*effort != "none" && *effort != "minimal" && *effort != "low" && *effort != "medium" && *effort != "high")
            invalid("reasoning_effort",
                    "'reasoning_effort' must be none, minimal, low, medium or high; got '" + *effort + "'");
        r.template_options.reasoning_effort = *effort;
    }
    if (const json* kw = f.get("chat_template_kwargs"); kw && !kw->is_null()) {
        if (!kw->is_object())
            invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object, not " + type_of(*kw));
        for (const auto& [name, value] : kw->items()) {
            const std::string param = "chat_template_kwargs." + name;
            if (name == "messages") invalid(param, "the messages are the request's own 'messages'");
            check_template_arg(value, param);
            add_template_arg(name, value, r.template_options);
        }
    }
    const char* key = f.get("thinking_budget_tokens") ? "thinking_budget_tokens" : "reasoning_budget_tokens";
    if (auto n = f.integer(key, -1, std::numeric_limits<int32_t>::max())) r.reasoning_budget = static_cast<int32_t>(*n);
}

// Ember's own field: what a conversation longer than the context does (prompt_fit.h).
void parse_context_overflow(const Fields& f, ApiRequest& a) {
    const auto name = f.string("context_overflow");
    if (!name) return;
    a.context_overflow = parse_overflow_policy(*name);
    if (!a.context_overflow)
        invalid("context_overflow", "'context_overflow' must be stop, truncate or roll; got '" + *name + "'");
}

// Fields that would change the answer in ways the engine cannot: refused, never ignored.
void refuse_unsupported(const Fields& f, Endpoint endpoint) {
    if (auto n = f.integer("n", 1, std::numeric_limits<int32_t>::max()); n && *n != 1)
        unsupported("n", "more than one choice per request (n > 1)");
    if (auto n = f.integer("best_of", 1, std::numeric_limits<int32_t>::max()); n && *n != 1)
        unsupported("best_of", "best_of > 1");
    for (const char* key : {"tools", "functions"})
        if (const json* v = f.get(key); v && !(v->is_array() && v->empty())) unsupported(key, "tool calling");
    if (const json* v = f.get("tool_choice"); v && !(v->is_string() && (*v == "none" || *v == "auto")))
        unsupported("tool_choice", "tool calling");
    if (const json* v = f.get("response_format")) {
        const bool text = v->is_object() && v->contains("type") && (*v)["type"] == "text";
        if (!text) unsupported("response_format", "a response format other than text (JSON mode, schemas)");
    }
    if (const json* v = f.get("logit_bias"); v && !(v->is_object() && v->empty()))
        unsupported("logit_bias", "logit_bias (token ids are the local engine's business)");
    if (f.boolean("echo").value_or(false)) unsupported("echo", "echo");
    if (auto s = f.string("suffix"); s && !s->empty()) unsupported("suffix", "suffix (fill in the middle)");
    if (endpoint == Endpoint::Chat)
        if (const json* v = f.get("modalities"); v && !(v->is_array() && v->size() == 1 && (*v)[0] == "text"))
            unsupported("modalities", "output other than text");
}

ApiRequest parse_object(Endpoint endpoint, const json& body, const ServerLimits& limits) {
    if (!body.is_object()) invalid("", "the request body must be a JSON object, not " + type_of(body));
    const Fields f(body);
    ApiRequest a;
    a.endpoint = endpoint;
    a.engine.model = f.string("model").value_or("");
    refuse_unsupported(f, endpoint);
    if (endpoint == Endpoint::Chat) {
        parse_messages(f, a.engine, limits);
        parse_reasoning(f, a.engine);
        parse_context_overflow(f, a);
    } else {
        parse_prompt(f, a.engine, limits);
    }
    a.stream = f.boolean("stream").value_or(false);
    if (const json* o = f.get("stream_options")) {
        if (!o->is_object()) invalid("stream_options", "'stream_options' must be an object, not " + type_of(*o));
        a.include_usage = Fields(*o).boolean("include_usage").value_or(false);
    }
    parse_max_tokens(f, a.engine, limits);
    a.engine.stop = parse_stop(f, limits);
    a.engine.ignore_eog = f.boolean("ignore_eos").value_or(false);
    a.engine.reuse_prefix = f.boolean("cache_prompt").value_or(true);  // llama-server's name
    parse_sampling(f, a);
    parse_logprobs(f, a);
    (void)f.string("user");  // accepted and unused; a wrong type is still an error
    return a;
}

}  // namespace

std::variant<ApiRequest, ApiError> parse_request(Endpoint endpoint, std::string_view body, const ServerLimits& limits) {
    try {
        if (body.size() > limits.max_body_bytes)
            invalid("",
                    "the request body is larger than this server accepts (" + std::to_string(limits.max_body_bytes) +
                        " bytes)",
                    "request_too_large", 413);
        if (json_depth(body) > limits.max_json_depth)
            invalid("", "the request body nests deeper than " + std::to_string(limits.max_json_depth) + " levels");
        json parsed;
        try {
            parsed = json::parse(body);
        } catch (const json::exception& e) {
            invalid("", std::string("the request body is not valid JSON: ") + e.what(), "invalid_json");
        }
        return parse_object(endpoint, parsed, limits);
    } catch (const Invalid& e) {
        return e.error;
    } catch (const json::exception& e) {  // a check above missed a type: still a client error
        return ApiError{400, std::string("invalid request: ") + e.what(), "invalid_request_error", "", ""};
    }
}

}  // namespace ember::server
