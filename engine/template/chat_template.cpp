#include "engine/template/chat_template.h"

#include "kernels/common/error.h"
#include "engine/template/jinja_interpreter.h"
#include "engine/template/jinja_json.h"
#include "engine/template/jinja_parser.h"
#include "engine/template/named_templates.h"

namespace ember {

namespace {

// Arguments that are a JSON object become a mapping; anything else (including the malformed
// JSON a model may have produced) stays the text it is, so a past turn never breaks a chat.
jinja::Value arguments_value(const std::string& text, const std::string& where) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || text[first] != '{') return jinja::Value(text);
    try {
        return jinja::parse_json(text, where);
    } catch (const Error&) {
        return jinja::Value(text);
    }
}

jinja::Value tool_calls_value(const std::vector<ChatToolCall>& calls, size_t msg_index) {
    std::vector<jinja::Value> items;
    for (size_t i = 0; i < calls.size(); ++i) {
        const ChatToolCall& c = calls[i];
        const std::string where =
            "messages[" + std::to_string(msg_index) + "].tool_calls[" + std::to_string(i) + "].arguments";
        jinja::Dict fn;
        fn.set("name", jinja::Value(c.name));
        fn.set("arguments", arguments_value(c.arguments, where));
        jinja::Dict d;
        if (!c.id.empty()) d.set("id", jinja::Value(c.id));
        d.set("type", jinja::Value("function"));
        d.set("function", jinja::Value(std::move(fn)));
        items.emplace_back(std::move(d));
    }
    return jinja::Value(std::move(items));
}

jinja::Value message_value(const ChatMessage& m, size_t index) {
    jinja::Dict d;
    d.set("role", jinja::Value(m.role));
    d.set("content", jinja::Value(m.content));
    if (!m.reasoning_content.empty()) {
        d.set("reasoning_content", jinja::Value(m.reasoning_content));
        d.set("thinking", jinja::Value(m.reasoning_content));
    }
    if (!m.tool_calls.empty()) d.set("tool_calls", tool_calls_value(m.tool_calls, index));
    if (!m.tool_call_id.empty()) d.set("tool_call_id", jinja::Value(m.tool_call_id));
    if (!m.name.empty()) d.set("name", jinja::Value(m.name));
    return jinja::Value(std::move(d));
}

jinja::Value messages_value(const std::vector<ChatMessage>& msgs) {
    std::vector<jinja::Value> items;
    items.reserve(msgs.size());
    for (size_t i = 0; i < msgs.size(); ++i) items.push_back(message_value(msgs[i], i));
    return jinja::Value(std::move(items));
}

size_t content_bytes(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opts) {
    size_t n = opts.bos_token.size() + opts.eos_token.size() + opts.tools_json.size();
    for (const ChatMessage& m : msgs) {
        n += m.role.size() + m.content.size() + m.reasoning_content.size();
        for (const ChatToolCall& c : m.tool_calls) n += c.name.size() + c.arguments.size();
    }
    for (const auto& [name, json] : opts.extra_vars) n += json.size();
    return n;
}

// The variables as transformers passes them: tools/documents are None when not used; the
// options only when set (templates test them with `is defined`).
jinja::Dict template_vars(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opts) {
    jinja::Dict vars;
    vars.set("messages", messages_value(msgs));
    vars.set("add_generation_prompt", jinja::Value(opts.add_generation_prompt));
    vars.set("bos_token", jinja::Value(opts.bos_token));
    vars.set("eos_token", jinja::Value(opts.eos_token));
    vars.set("tools", opts.tools_json.empty() ? jinja::Value::none() : jinja::parse_json(opts.tools_json, "tools"));
    vars.set("documents", jinja::Value::none());
    if (opts.enable_thinking) vars.set("enable_thinking", jinja::Value(*opts.enable_thinking));
    if (!opts.reasoning_effort.empty()) vars.set("reasoning_effort", jinja::Value(opts.reasoning_effort));
    for (const auto& [name, json] : opts.extra_vars) vars.set(name, jinja::parse_json(json, name));
    return vars;
}

}  // namespace

ChatTemplate ChatTemplate::compile(std::string source) {
    ChatTemplate t;
    auto program = jinja::parse_template(source);
    jinja::check_names(*program);
    t.program_ = std::move(program);
    t.source_ = std::make_shared<const std::string>(std::move(source));
    return t;
}

ChatTemplate ChatTemplate::named(std::string_view name) {
    const chat_templates::NamedTemplate* t = chat_templates::find(name);
    if (!t) {
        std::string known;
        for (std::string_view n : named_templates()) known += (known.empty() ? "" : ", ") + std::string(n);
        throw Error("unknown chat template '" + std::string(name) + "' (known: " + known + ")");
    }
    return compile(std::string(t->source));
}

std::vector<std::string_view> ChatTemplate::named_templates() {
    std::vector<std::string_view> names;
    for (const auto& t : chat_templates::all()) names.push_back(t.name);
    return names;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token) const {
    ChatRenderOptions o;
    o.add_generation_prompt = add_generation_prompt;
    o.bos_token = bos_token;
    o.eos_token = eos_token;
    return render(msgs, o);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opts) const {
    if (!program_) throw Error("chat template: render() on an empty ChatTemplate");
    const size_t input = content_bytes(msgs, opts);
    jinja::RenderLimits limits;
    limits.max_output_bytes = opts.max_output_bytes ? opts.max_output_bytes : (size_t{1} << 20) + 4 * input;
    limits.max_work += 16 * static_cast<uint64_t>(input);  // long conversations are legitimate work
    const jinja::Dict vars = template_vars(msgs, opts);
    jinja::Interpreter interp(*program_, limits, opts.now);
    return interp.render(vars);
}

std::string ChatTemplate::generation_prompt(const std::vector<ChatMessage>& msgs, ChatRenderOptions opts) const {
    opts.add_generation_prompt = true;
    const std::string with = render(msgs, opts);
    opts.add_generation_prompt = false;
    const std::string without = render(msgs, opts);
    size_t n = 0;
    while (n < with.size() && n < without.size() && with[n] == without[n]) ++n;
    return with.substr(n);
}

namespace {

// The conversation a template must handle before Ember trusts it.
std::vector<ChatMessage> trial_conversation(bool with_system) {
    std::vector<ChatMessage> msgs;
    if (with_system) msgs.push_back({"system", "You are a helpful assistant."});
    msgs.push_back({"user", "Hello!"});
    msgs.push_back({"assistant", "Hi! How can I help?"});
    msgs.push_back({"user", "Tell me a joke."});
    return msgs;
}

// Renders the trial; returns an error description, or nothing when it worked.
std::optional<std::string> trial_render(const ChatTemplate& t, bool with_system) {
    try {
        const std::string out = t.render(trial_conversation(with_system), true, "<s>", "</s>");
        if (out.find("Tell me a joke.") == std::string::npos)
            return std::string("its output does not contain the last user message");
        return std::nullopt;
    } catch (const Error& e) {
        return std::string(e.what());
    }
}

ResolvedTemplate fallback(std::string_view arch, const std::vector<std::string>& tokens, const std::string& why) {
    const chat_templates::Guess g = chat_templates::guess(arch, tokens);
    ResolvedTemplate r{ChatTemplate::named(g.name), "built-in '" + std::string(g.name) + "' template", std::nullopt};
    r.warning = why + "; using Ember's built-in '" + std::string(g.name) + "' chat template because " + g.reason;
    return r;
}

}  // namespace

ResolvedTemplate resolve_chat_template(std::optional<std::string> model_template, std::string_view architecture,
                                       const std::vector<std::string>& special_tokens_present) {
    if (!model_template || model_template->find_first_not_of(" \t\r\n") == std::string::npos)
        return fallback(architecture, special_tokens_present, "the model file has no chat template");
    ChatTemplate t;
    try {
        t = ChatTemplate::compile(*model_template);
    } catch (const Error& e) {
        return fallback(architecture, special_tokens_present,
                        std::string("the model's chat template cannot be used (") + e.what() + ")");
    }
    const auto with_system = trial_render(t, true);
    if (!with_system) return {t, "the model's own chat template (tokenizer.chat_template)", std::nullopt};
    if (const auto without_system = trial_render(t, false))
        return fallback(architecture, special_tokens_present,
                        "the model's chat template fails on a test conversation (" + *without_system + ")");
    // Usable, but not with a system prompt (e.g. Mistral's templates raise on one): say so.
    return {t, "the model's own chat template (tokenizer.chat_template)",
            "the model's chat template rejects conversations with a system message (" + *with_system + ")"};
}

}  // namespace ember
