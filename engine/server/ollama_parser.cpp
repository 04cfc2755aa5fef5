// Ollama's /api/chat and /api/generate bodies -> OllamaRequest (see ollama_parser.h for what is
// honoured and what refused). Failed checks throw Invalid (request_fields.h).
#include "engine/server/ollama_parser.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/grammar/json_schema.h"
#include "engine/server/request_fields.h"
#include "engine/server/request_parser.h"

namespace ember::server {
namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& param, std::string message) {
    invalid(param, std::move(message), "unsupported_parameter");
}

bool absent_or_empty(const json* v) {
    return !v || (v->is_string() && v->get<std::string>().empty()) || (v->is_array() && v->empty());
}

// ---- messages and prompt -----------------------------------------------------------------

// One message: role system, user, assistant (with an earlier answer's thinking and tool_calls,
// arguments as an object) or tool (a result; tool_name names its function).
ChatMessage parse_message(const json& m, size_t index, PromptBudget& budget) {
    const std::string param = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) invalid(param, "a message must be an object with 'role' and 'content', not " + type_of(m));
    const Fields f(m);
    ChatMessage msg;
    msg.role = f.string("role").value_or("");
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
        invalid(param + ".role", "a message needs a 'role': system, user, assistant or tool");
    if (!absent_or_empty(f.get("images")))
        refuse(param + ".images", "images are not supported: the models this server runs read text only");
    if (const json* calls = f.get("tool_calls")) {
        if (msg.role != "assistant") invalid(param + ".tool_calls", "only an assistant message has 'tool_calls'");
        msg.tool_calls = parse_message_tool_calls(*calls, param + ".tool_calls");
    }
    if (msg.role == "tool") {
        msg.name = f.string("tool_name").value_or("");
        msg.tool_call_id = f.string("tool_call_id").value_or("");
    }
    msg.content = f.string("content").value_or("");
    msg.reasoning_content = f.string("thinking").value_or("");
    budget.take(param + ".content",
                msg.content.size() + msg.reasoning_content.size() + tool_calls_bytes(msg.tool_calls));
    return msg;
}

// Ollama's tool results often carry neither tool_name nor an id: the k-th result after an
// assistant turn answers its k-th call, so it gets that call's name (and id) for the template.
void name_tool_results(std::vector<ChatMessage>& msgs) {
    name_tool_results_by_call_id(msgs);
    const ChatMessage* caller = nullptr;
    size_t k = 0;
    for (ChatMessage& m : msgs) {
        if (m.role == "assistant") caller = &m, k = 0;
        if (m.role != "tool") continue;
        if (caller && k < caller->tool_calls.size()) {
            const ChatToolCall& c = caller->tool_calls[k];
            if (m.name.empty()) m.name = c.name;
            if (m.tool_call_id.empty()) m.tool_call_id = c.id;
        }
        ++k;
    }
}

void parse_chat(const Fields& f, OllamaRequest& r, PromptBudget& budget, const ServerLimits& limits) {
    const json* messages = f.get("messages");
    if (messages) {
        if (!messages->is_array()) invalid("messages", "'messages' must be an array, not " + type_of(*messages));
        for (size_t i = 0; i < messages->size(); ++i)
            r.engine.messages.push_back(parse_message((*messages)[i], i, budget));
        name_tool_results(r.engine.messages);
    }
    if (const json* tools = f.get("tools")) parse_tools_array(*tools, r.tools, r.engine, budget, limits);
    // Ollama has no tool_choice (offered tools may be called: OpenAI's "auto"); Ember takes
    // OpenAI's here too, so that a client can force a call (decoded under its grammar).
    parse_tool_choice_field(f.get("tool_choice"), r.tools);
}

void parse_generate(const Fields& f, OllamaRequest& r, PromptBudget& budget) {
    if (!absent_or_empty(f.get("template")))
        refuse("template", "'template' is not supported: Ember renders the model's own chat template");
    if (!absent_or_empty(f.get("context")))
        refuse("context", "'context' is not supported: send the conversation as /api/chat messages instead");
    if (!absent_or_empty(f.get("suffix"))) unsupported("suffix", "'suffix' (fill in the middle)");
    if (!absent_or_empty(f.get("tools"))) invalid("tools", "/api/generate takes no 'tools': use /api/chat");
    if (!absent_or_empty(f.get("images")))
        refuse("images", "images are not supported: the models this server runs read text only");
    for (const char* key : {"width", "height", "steps"})
        if (f.get(key)) unsupported(key, "image generation");
    const std::string prompt = f.string("prompt").value_or("");
    const std::string system = f.string("system").value_or("");
    budget.take("prompt", prompt.size() + system.size());
    if (f.boolean("raw").value_or(false)) {
        if (!system.empty()) invalid("system", "'system' has no effect with raw: true (put it in the prompt)");
        r.engine.prompt = prompt;
        r.engine.prompt_parse_special = true;  // a templated prompt: its markers are special tokens
        return;
    }
    if (prompt.empty()) return;
    if (!system.empty()) r.engine.messages.push_back({"system", system});
    r.engine.messages.push_back({"user", prompt});
}

// ---- options -----------------------------------------------------------------------------

// Options the engine cannot honour at request time: set once by `ember serve`.
constexpr const char* kLoadTimeOptions[] = {
    "numa",       "num_batch",  "num_gpu",          "main_gpu",     "low_vram",    "f16_kv",
    "logits_all", "vocab_only", "use_mmap",         "use_mlock",    "num_thread",  "embedding_only",
    "num_keep",   "tfs_z",      "penalize_newline", "mirostat_tau", "mirostat_eta"};
constexpr const char* kSamplingOptions[] = {
    "temperature",       "top_k", "top_p",       "min_p", "repeat_penalty", "repeat_last_n", "presence_penalty",
    "frequency_penalty", "seed",  "num_predict", "stop",  "num_ctx",        "mirostat",      "typical_p"};

constexpr size_t kMaxIgnoredListed = 16;

template <size_t N>
bool listed(const std::string& key, const char* const (&names)[N]) {
    for (const char* n : names)
        if (key == n) return true;
    return false;
}

void parse_num_predict(const Fields& o, EngineRequest& e, const ServerLimits& limits) {
    e.max_tokens = limits.max_tokens;
    const auto n = o.integer("num_predict", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    if (!n || *n < 0) return;  // -1 (no limit) and -2 (fill the context): the server's limit
    if (*n > limits.max_tokens)
        invalid("num_predict", "'num_predict' is " + std::to_string(*n) + "; this server generates at most " +
                                   std::to_string(limits.max_tokens) + " tokens per request");
    e.max_tokens = static_cast<int32_t>(*n);
}

void parse_sampling(const Fields& o, OllamaRequest& r) {
    SamplingParams& s = r.engine.sampling;
    if (auto v = o.number("temperature", 0.0, 100.0)) s.temperature = static_cast<float>(*v);
    if (auto v = o.integer("top_k", 0, std::numeric_limits<int32_t>::max())) s.top_k = static_cast<int32_t>(*v);
    if (auto v = o.number("top_p", 0.0, 1.0)) {
        if (*v == 0.0) s.temperature = 0.0f;  // only the most likely token survives: greedy
        else s.top_p = static_cast<float>(*v);
    }
    if (auto v = o.number("min_p", 0.0, 1.0)) s.min_p = static_cast<float>(*v);
    if (auto v = o.number("repeat_penalty", 0.0, 10.0)) {
        if (*v == 0.0) invalid("repeat_penalty", "'repeat_penalty' must be above 0 (1 turns it off)");
        s.repeat_penalty = static_cast<float>(*v);
    }
    if (auto v = o.integer("repeat_last_n", -1, std::numeric_limits<int32_t>::max()))
        s.repeat_last_n = static_cast<int32_t>(*v);
    if (auto v = o.number("presence_penalty", -2.0, 2.0)) s.presence_penalty = static_cast<float>(*v);
    if (auto v = o.number("frequency_penalty", -2.0, 2.0)) s.frequency_penalty = static_cast<float>(*v);
    if (auto v = o.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
        v && *v >= 0) {
        s.seed = static_cast<uint64_t>(*v);
        r.seed_given = true;
    }
    if (auto v = o.integer("mirostat", 0, 2); v && *v != 0) unsupported("options.mirostat", "mirostat sampling");
    if (auto v = o.number("typical_p", 0.0, 1.0); v && *v != 1.0)
        unsupported("options.typical_p", "typical sampling (typical_p other than 1)");
}

void parse_options(const Fields& f, OllamaRequest& r, const ServerLimits& limits) {
    static const json kNone = json::object();
    const json* options = f.get("options");
    if (options && !options->is_object()) invalid("options", "'options' must be an object, not " + type_of(*options));
    const Fields o(options ? *options : kNone);
    parse_num_predict(o, r.engine, limits);
    parse_sampling(o, r);
    r.engine.stop = parse_stop(o, limits);
    if (auto n = o.integer("num_ctx", 1, std::numeric_limits<int32_t>::max()))
        r.ignored.push_back("options.num_ctx=" + std::to_string(*n) + " (the context is set by `ember serve --ctx`)");
    if (!options) return;
    size_t unlisted = 0;  // a body of 100,000 made-up keys must not make a log line of them all
    for (const auto& [key, value] : options->items()) {
        if (listed(key, kSamplingOptions)) continue;
        if (++unlisted > kMaxIgnoredListed) continue;
        r.ignored.push_back("options." + key.substr(0, 64) +
                            (listed(key, kLoadTimeOptions) ? " (a load-time option)" : " (unknown)"));
    }
    if (unlisted > kMaxIgnoredListed)
        r.ignored.push_back("and " + std::to_string(unlisted - kMaxIgnoredListed) + " more options");
}

// ---- the rest ----------------------------------------------------------------------------

void parse_think(const Fields& f, EngineRequest& e) {
    const json* t = f.get("think");
    if (!t) return;
    if (t->is_boolean()) {
        e.template_options.enable_thinking = t->get<bool>();
        return;
    }
    const std::string level = t->is_string() ? t->get<std::string>() : "";
    if (level != "low" && level != "medium" && level != "high")
        invalid("think", "'think' must be true, false, \"low\", \"medium\" or \"high\"; got " + t->dump());
    e.template_options.enable_thinking = true;
    e.template_options.reasoning_effort = level;
}

void parse_keep_alive_field(const Fields& f, OllamaRequest& r) {
    const json* k = f.get("keep_alive");
    if (!k) return;
    if (k->is_number() && std::isfinite(k->get<double>())) r.keep_alive_s = k->get<double>();
    else if (k->is_string()) r.keep_alive_s = parse_keep_alive(k->get<std::string>());
    if (!r.keep_alive_s)
        invalid("keep_alive", "'keep_alive' must be a duration (\"5m\", \"1h30m\") or seconds; got " + k->dump());
}

void parse_logprobs(const Fields& f, OllamaRequest& r) {
    r.logprobs = f.boolean("logprobs").value_or(false);
    const auto top = f.integer("top_logprobs", 0, 20);
    if (r.logprobs) r.engine.top_logprobs = static_cast<int32_t>(top.value_or(0));
}

// "format": "json" (any JSON object, as Ollama's json grammar) or a JSON schema, compiled to the
// grammar that constrains sampling (engine/grammar); "" or absent: free text.
void parse_format(const Fields& f, EngineRequest& e, const ServerLimits& limits) {
    const json* v = f.get("format");
    if (absent_or_empty(v)) return;
    if (v->is_string() && *v == "json") {
        e.grammar = compile_grammar("format", limits, [] { return grammar::any_json_object_gbnf(); });
        return;
    }
    if (!v->is_object()) invalid("format", "'format' must be \"json\" or a JSON schema object; got " + v->dump());
    e.grammar = compile_grammar("format", limits, [&] { return grammar::json_schema_to_gbnf(*v, limits.grammar); });
}

OllamaRequest parse_object(OllamaEndpoint endpoint, const json& body, const ServerLimits& limits) {
    if (!body.is_object()) invalid("", "the request body must be a JSON object, not " + type_of(body));
    const Fields f(body);
    OllamaRequest r;
    r.endpoint = endpoint;
    r.model = f.string("model").value_or("");
    if (r.model.empty()) invalid("model", "model is required");
    PromptBudget budget(limits.max_prompt_bytes);
    if (endpoint == OllamaEndpoint::Chat) parse_chat(f, r, budget, limits);
    else parse_generate(f, r, budget);
    r.load_only = r.engine.messages.empty() && r.engine.prompt.empty();
    r.stream = f.boolean("stream").value_or(true);
    parse_think(f, r.engine);
    parse_options(f, r, limits);
    parse_keep_alive_field(f, r);
    parse_logprobs(f, r);
    parse_format(f, r.engine, limits);
    return r;
}

// One "<number><unit>" of a Go duration; advances `s`. Seconds, or nullopt.
std::optional<double> duration_part(std::string_view& s) {
    size_t n = 0;
    while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
    if (n == 0 || n > 32) return std::nullopt;
    const std::string number(s.substr(0, n));
    if (number.find('.') != number.rfind('.') || number == ".") return std::nullopt;
    s.remove_prefix(n);
    static const std::pair<std::string_view, double> kUnits[] = {
        {"ns", 1e-9}, {"us", 1e-6}, {"\xC2\xB5s", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};
    for (const auto& [unit, seconds] : kUnits) {
        if (s.substr(0, unit.size()) != unit) continue;
        // "m" must not take the "m" of "ms"
        if (unit == "m" && s.size() > 1 && s[1] == 's') continue;
        s.remove_prefix(unit.size());
        return std::stod(number) * seconds;
    }
    return std::nullopt;
}

}  // namespace

std::optional<double> parse_keep_alive(const std::string& text) {
    std::string_view s = text;
    const bool negative = !s.empty() && s.front() == '-';
    if (negative || (!s.empty() && s.front() == '+')) s.remove_prefix(1);
    if (s.empty()) return std::nullopt;
    // A bare number: seconds (Ollama takes "300" as it takes 300).
    if (s.find_first_not_of("0123456789.") == std::string_view::npos) {
        const std::string with_unit = std::string(s) + "s";
        std::string_view w = with_unit;
        const auto v = duration_part(w);
        if (!v || !w.empty()) return std::nullopt;
        return negative ? -*v : *v;
    }
    double total = 0;
    while (!s.empty()) {
        const auto v = duration_part(s);
        if (!v) return std::nullopt;
        total += *v;
    }
    return negative ? -total : total;
}

std::variant<OllamaRequest, ApiError> parse_ollama_request(OllamaEndpoint endpoint, std::string_view body,
                                                           const ServerLimits& limits) {
    try {
        return parse_object(endpoint, parse_body(body, limits), limits);
    } catch (const Invalid& e) {
        return e.error;
    } catch (const json::exception& e) {  // a check above missed a type: still a client error
        return ApiError{400, std::string("invalid request: ") + e.what(), "invalid_request_error", "", ""};
    }
}

std::variant<std::string, ApiError> parse_show_request(std::string_view body, const ServerLimits& limits) {
    try {
        const json parsed = parse_body(body, limits);
        if (!parsed.is_object()) invalid("", "the request body must be a JSON object, not " + type_of(parsed));
        const Fields f(parsed);
        std::string model = f.string("model").value_or("");
        if (model.empty()) model = f.string("name").value_or("");
        if (model.empty()) invalid("model", "model is required");
        return model;
    } catch (const Invalid& e) {
        return e.error;
    }
}

}  // namespace ember::server
