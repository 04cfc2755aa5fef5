// Request bodies -> ApiRequest. Inside, a failed check throws Invalid (the ApiError to send);
// parse_request is the one place that turns it into a return value.
#include "engine/server/request_parser.h"

#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/grammar/json_schema.h"
#include "engine/server/request_fields.h"

namespace ember::server {
namespace {

using json = nlohmann::json;

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

// OpenAI's function names: letters, digits, '_' and '-', at most 64 (llama-server and
// Ollama accept the same). Anything else would have to be escaped in every call format.
bool valid_function_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (char c : n)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
    return true;
}

// An assistant turn's tool_calls[i]: {"id", "type": "function", "function": {"name",
// "arguments": JSON text}} (arguments given as an object are taken as their JSON text).
ChatToolCall parse_tool_call(const json& c, const std::string& param) {
    if (!c.is_object()) invalid(param, "a tool call must be an object, not " + type_of(c));
    const Fields f(c);
    ChatToolCall call;
    call.id = f.string("id").value_or("");
    if (auto type = f.string("type"); type && *type != "function")
        unsupported(param + ".type", "a tool call of type '" + *type + "' (only function)");
    const json* fn = f.get("function");
    if (!fn || !fn->is_object()) invalid(param + ".function", "a tool call needs a 'function' object");
    const Fields ff(*fn);
    auto name = ff.string("name");
    if (!name || name->empty()) invalid(param + ".function.name", "a tool call needs a function 'name'");
    call.name = *name;
    if (const json* args = ff.get("arguments")) {
        if (args->is_string()) call.arguments = args->get<std::string>();
        else if (args->is_object()) call.arguments = args->dump();
        else invalid(param + ".function.arguments", "'arguments' must be a JSON string, not " + type_of(*args));
    }
    return call;
}

std::vector<ChatToolCall> parse_tool_calls(const json& calls, const std::string& param) {
    if (calls.is_null()) return {};
    if (!calls.is_array()) invalid(param, "'tool_calls' must be an array, not " + type_of(calls));
    std::vector<ChatToolCall> out;
    for (size_t i = 0; i < calls.size(); ++i)
        out.push_back(parse_tool_call(calls[i], param + "[" + std::to_string(i) + "]"));
    return out;
}

ChatMessage parse_message(const json& m, size_t index, PromptBudget& budget) {
    const std::string param = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) invalid(param, "a message must be an object with 'role' and 'content', not " + type_of(m));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) invalid(param + ".role", "a message needs a 'role' string");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for the system prompt
    if (msg.role == "function") unsupported(param + ".role", "the 'function' role (deprecated: use 'tool')");
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
        invalid(param + ".role", "unknown role " + role->dump() + " (system, developer, user, assistant or tool)");
    const Fields f(m);
    if (const auto calls = m.find("tool_calls"); calls != m.end()) {
        if (msg.role != "assistant" && !calls->is_null())
            invalid(param + ".tool_calls", "only an assistant message has 'tool_calls'");
        msg.tool_calls = parse_tool_calls(*calls, param + ".tool_calls");
    }
    if (msg.role == "tool") {
        msg.tool_call_id = f.string("tool_call_id").value_or("");
        msg.name = f.string("name").value_or("");
    }
    const auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
        if (msg.role != "assistant") invalid(param + ".content", "a " + msg.role + " message needs 'content'");
    } else {
        msg.content = message_content(*content, param + ".content");
    }
    budget.take(param + ".content", msg.content.size() + tool_calls_bytes(msg.tool_calls));
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

// A tool result without its function's name gets it from the call it answers (Gemma 4's
// template and the generic fallback show the name).
void name_tool_results(std::vector<ChatMessage>& msgs) {
    for (size_t i = 0; i < msgs.size(); ++i) {
        if (msgs[i].role != "tool" || !msgs[i].name.empty() || msgs[i].tool_call_id.empty()) continue;
        for (size_t j = i; j-- > 0 && msgs[i].name.empty();)
            for (const ChatToolCall& c : msgs[j].tool_calls)
                if (c.id == msgs[i].tool_call_id) msgs[i].name = c.name;
    }
}

void parse_messages(const Fields& f, EngineRequest& r, PromptBudget& budget) {
    const json* messages = f.get("messages");
    if (!messages) invalid("messages", "'messages' is required");
    if (!messages->is_array()) invalid("messages", "'messages' must be an array, not " + type_of(*messages));
    if (messages->empty()) invalid("messages", "'messages' must not be empty");
    for (size_t i = 0; i < messages->size(); ++i) r.messages.push_back(parse_message((*messages)[i], i, budget));
    name_tool_results(r.messages);
}

// ---- tools -------------------------------------------------------------------------------

// One tools[i]: {"type": "function", "function": {"name", "description"?, "parameters"?,
// "strict"?}}. Returns its JSON text for the template, keys in OpenAI's documented order
// (the schema inside keeps nlohmann's sorted keys).
std::string parse_tool(const json& t, const std::string& param, ToolSpec& spec, const ServerLimits& limits) {
    if (!t.is_object()) invalid(param, "a tool must be an object, not " + type_of(t));
    const Fields f(t);
    const auto type = f.string("type");
    if (!type) invalid(param + ".type", "a tool needs a 'type' (\"function\")");
    if (*type != "function") unsupported(param + ".type", "a tool of type '" + *type + "' (only function)");
    const json* fn = f.get("function");
    if (!fn || !fn->is_object()) invalid(param + ".function", "a function tool needs a 'function' object");
    const Fields ff(*fn);
    const auto name = ff.string("name");
    if (!name) invalid(param + ".function.name", "a function needs a 'name'");
    if (!valid_function_name(*name))
        invalid(param + ".function.name",
                "a function name must be 1 to 64 letters, digits, '_' or '-'; got " + json(*name).dump());
    const auto description = ff.string("description");
    (void)ff.boolean("strict");  // accepted: constrained calls follow the schema anyway
    spec.name = *name;
    spec.parameters = json::object();
    if (const json* p = ff.get("parameters")) {
        if (!p->is_object())
            invalid(param + ".function.parameters", "'parameters' must be a JSON schema object, not " + type_of(*p));
        spec.parameters = *p;
    }
    std::string text = R"({"type": "function", "function": {"name": )" + json(*name).dump();
    if (description) text += R"(, "description": )" + json(*description).dump();
    text += R"(, "parameters": )" + spec.parameters.dump() + "}}";
    if (text.size() > limits.max_tool_bytes)
        invalid(param,
                "a tool definition is larger than this server accepts (" + std::to_string(limits.max_tool_bytes) +
                    " bytes of JSON)",
                "tool_too_large");
    return text;
}

void parse_tool_choice(const json* c, ToolRequest& t) {
    if (!c) return;
    if (c->is_string()) {
        const std::string s = c->get<std::string>();
        if (s == "auto") t.choice = ToolChoice::Auto;
        else if (s == "none") t.choice = ToolChoice::None;
        else if (s == "required") t.choice = ToolChoice::Required;
        else invalid("tool_choice", "'tool_choice' must be none, auto, required or a function; got '" + s + "'");
    } else if (c->is_object()) {
        const Fields f(*c);
        if (auto type = f.string("type"); type != "function")
            invalid("tool_choice",
                    R"('tool_choice' as an object must be {"type": "function", "function": {"name": …}})");
        const json* fn = f.get("function");
        const auto name = fn && fn->is_object() ? Fields(*fn).string("name") : std::nullopt;
        if (!name) invalid("tool_choice.function.name", "'tool_choice' names no function");
        t.choice = ToolChoice::Named;
        t.named = *name;
    } else {
        invalid("tool_choice", "'tool_choice' must be a string or an object, not " + type_of(*c));
    }
    if (t.choice == ToolChoice::Required && t.tools.empty())
        invalid("tool_choice", "'tool_choice' is required but the request has no 'tools'");
    if (t.choice != ToolChoice::Named) return;
    for (const ToolSpec& s : t.tools)
        if (s.name == t.named) return;
    invalid("tool_choice", "'tool_choice' names the function '" + t.named + "', which is not among the request's tools",
            "unknown_tool");
}

void parse_tool_array(const json& tools, ToolRequest& t, EngineRequest& e, PromptBudget& budget,
                      const ServerLimits& limits) {
    if (!tools.is_array()) invalid("tools", "'tools' must be an array, not " + type_of(tools));
    if (tools.size() > limits.max_tools)
        invalid("tools", "at most " + std::to_string(limits.max_tools) + " tools per request; got " +
                             std::to_string(tools.size()));
    std::string text = "[";
    for (size_t i = 0; i < tools.size(); ++i) {
        ToolSpec spec;
        const std::string one = parse_tool(tools[i], "tools[" + std::to_string(i) + "]", spec, limits);
        for (const ToolSpec& s : t.tools)
            if (s.name == spec.name)
                invalid("tools[" + std::to_string(i) + "].function.name", "two tools named '" + spec.name + "'");
        text += (i ? ", " : "") + one;
        t.tools.push_back(std::move(spec));
    }
    budget.take("tools", text.size());
    if (!t.tools.empty()) e.template_options.tools_json = text + "]";
}

void parse_tools(const Fields& f, ApiRequest& a, PromptBudget& budget, const ServerLimits& limits) {
    ToolRequest& t = a.tools;
    if (const json* tools = f.get("tools")) parse_tool_array(*tools, t, a.engine, budget, limits);
    parse_tool_choice(f.get("tool_choice"), t);
    const auto parallel = f.boolean("parallel_tool_calls");
    t.parallel = parallel.value_or(true);
    t.parallel_given = parallel.has_value();
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
// the API's own 'tools').
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
    if (const json* v = f.get("functions"); v && !(v->is_array() && v->empty()))
        unsupported("functions", "'functions' (deprecated: use 'tools')");
    if (f.get("function_call")) unsupported("function_call", "'function_call' (deprecated: use 'tool_choice')");
    if (endpoint == Endpoint::Completion)
        for (const char* key : {"tools", "tool_choice"})
            if (f.get(key)) unsupported(key, "tool calling in /v1/completions (use /v1/chat/completions)");
    if (const json* v = f.get("logit_bias"); v && !(v->is_object() && v->empty()))
        unsupported("logit_bias", "logit_bias (token ids are the local engine's business)");
    if (f.boolean("echo").value_or(false)) unsupported("echo", "echo");
    if (auto s = f.string("suffix"); s && !s->empty()) unsupported("suffix", "suffix (fill in the middle)");
    if (endpoint == Endpoint::Chat)
        if (const json* v = f.get("modalities"); v && !(v->is_array() && v->size() == 1 && (*v)[0] == "text"))
            unsupported("modalities", "output other than text");
}

// OpenAI's response_format ({"type": "text" | "json_object" | "json_schema"}) and
// llama-server's top-level "json_schema" (a schema) and "grammar" (GBNF); at most one.
void parse_response_format(const Fields& f, EngineRequest& r, const ServerLimits& limits) {
    const json* rf = f.get("response_format");
    const json* schema = f.get("json_schema");
    const json* gbnf = f.get("grammar");
    if ((rf != nullptr) + (schema != nullptr) + (gbnf != nullptr) > 1)
        invalid(rf ? "response_format" : "json_schema",
                "give only one of 'response_format', 'json_schema' and 'grammar'");
    if (gbnf) {
        if (!gbnf->is_string()) invalid("grammar", "'grammar' must be a string (GBNF), not " + type_of(*gbnf));
        if (!gbnf->get<std::string>().empty())
            r.grammar = compile_grammar("grammar", limits, [&] { return gbnf->get<std::string>(); });
        return;
    }
    if (schema) {
        if (!schema->is_object() && !schema->is_boolean())
            invalid("json_schema", "'json_schema' must be a JSON schema object, not " + type_of(*schema));
        r.grammar = compile_grammar("json_schema", limits,
                                    [&] { return grammar::json_schema_to_gbnf(*schema, limits.grammar); });
        return;
    }
    if (!rf) return;
    if (!rf->is_object()) invalid("response_format", "'response_format' must be an object, not " + type_of(*rf));
    const Fields format(*rf);
    const std::string type = format.string("type").value_or("");
    if (type == "text") return;
    if (type == "json_object") {
        const json* s = format.get("schema");  // llama-server's extension
        r.grammar = compile_grammar("response_format", limits, [&] {
            return s ? grammar::json_schema_to_gbnf(*s, limits.grammar) : grammar::any_json_object_gbnf();
        });
        return;
    }
    if (type != "json_schema")
        invalid("response_format",
                "'response_format.type' must be 'text', 'json_object' or 'json_schema', not '" + type + "'");
    const json* js = format.get("json_schema");
    if (!js || !js->is_object())
        invalid("response_format", "'response_format.json_schema' must be an object with a 'schema'");
    const Fields spec(*js);
    (void)spec.string("name");
    (void)spec.string("description");
    (void)spec.boolean("strict");  // the output always follows the schema
    const json* s = spec.get("schema");
    if (!s) invalid("response_format", "'response_format.json_schema.schema' is missing");
    r.grammar =
        compile_grammar("response_format", limits, [&] { return grammar::json_schema_to_gbnf(*s, limits.grammar); });
}

ApiRequest parse_object(Endpoint endpoint, const json& body, const ServerLimits& limits) {
    if (!body.is_object()) invalid("", "the request body must be a JSON object, not " + type_of(body));
    const Fields f(body);
    ApiRequest a;
    a.endpoint = endpoint;
    a.engine.model = f.string("model").value_or("");
    refuse_unsupported(f, endpoint);
    if (endpoint == Endpoint::Chat) {
        PromptBudget budget(limits.max_prompt_bytes);
        parse_messages(f, a.engine, budget);
        parse_tools(f, a, budget, limits);
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
    parse_response_format(f, a.engine, limits);
    (void)f.string("user");  // accepted and unused; a wrong type is still an error
    return a;
}

}  // namespace

std::vector<ChatToolCall> parse_message_tool_calls(const json& calls, const std::string& param) {
    return parse_tool_calls(calls, param);
}

size_t tool_calls_bytes(const std::vector<ChatToolCall>& calls) {
    size_t n = 0;
    for (const ChatToolCall& c : calls) n += c.id.size() + c.name.size() + c.arguments.size();
    return n;
}

void name_tool_results_by_call_id(std::vector<ChatMessage>& msgs) { name_tool_results(msgs); }

void parse_tool_choice_field(const json* choice, ToolRequest& t) { parse_tool_choice(choice, t); }

void parse_tools_array(const json& tools, ToolRequest& t, EngineRequest& e, PromptBudget& budget,
                       const ServerLimits& limits) {
    parse_tool_array(tools, t, e, budget, limits);
}

std::variant<ApiRequest, ApiError> parse_request(Endpoint endpoint, std::string_view body, const ServerLimits& limits) {
    try {
        const json parsed = parse_body(body, limits);
        return parse_object(endpoint, parsed, limits);
    } catch (const Invalid& e) {
        return e.error;
    } catch (const json::exception& e) {  // a check above missed a type: still a client error
        return ApiError{400, std::string("invalid request: ") + e.what(), "invalid_request_error", "", ""};
    }
}

}  // namespace ember::server
