// Tool calls: which form a model writes them in, Ember's generic prompt for templates without
// tools, and the incremental parser. JSON goes through the engine's own reader
// (jinja_json.h), so the engine needs no JSON library.
#include "engine/template/tool_calls.h"

#include <algorithm>

#include "engine/template/jinja_json.h"
#include "engine/template/template_text.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

using template_text::is_space;
using template_text::is_word;
using template_text::mentions;

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The markers that open a call, per format (Llama 3 also opens on a bare '{', see find_opener).
std::vector<std::string_view> openers(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
        case ToolCallFormat::Generic:
            return {"<tool_call>"};
        case ToolCallFormat::Llama3:
            return {"<|python_tag|>"};
        case ToolCallFormat::Mistral:
            return {"[TOOL_CALLS]"};
        case ToolCallFormat::Harmony:
            return {"to=functions."};
        case ToolCallFormat::Gemma4:
            return {"<|tool_call>"};
        case ToolCallFormat::None:
            break;
    }
    return {};
}

// The marker that closes a call; empty: the call ends where its JSON ends.
std::string_view closer(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
        case ToolCallFormat::Generic:
            return "</tool_call>";
        case ToolCallFormat::Harmony:
            return "<|call|>";
        case ToolCallFormat::Gemma4:
            return "<tool_call|>";
        default:
            return {};
    }
}

// ---- JSON ----------------------------------------------------------------------------------

constexpr size_t kIncomplete = std::string_view::npos;
constexpr size_t kNotJson = std::string_view::npos - 1;

// Where the JSON object or array that starts at s[from] (after whitespace) ends: the index
// after its last bracket. Brackets inside strings do not count; the text between is checked
// when it is parsed.
size_t json_extent(std::string_view s, size_t from) {
    while (from < s.size() && is_space(s[from])) ++from;
    if (from == s.size()) return kIncomplete;
    if (s[from] != '{' && s[from] != '[') return kNotJson;
    size_t depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = from; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return kIncomplete;
}

struct BadCall {
    std::string why;
};

jinja::Value parse(std::string_view text) {
    try {
        return jinja::parse_json(trim(text), "tool call");
    } catch (const Error& e) {
        throw BadCall{e.what()};
    }
}

std::string compact_json(const jinja::Value& v) {
    jinja::JsonOptions o;
    o.item_sep = ",";
    o.key_sep = ":";
    return jinja::to_json(v, o);
}

std::string quote_json(std::string_view s) { return jinja::to_json(jinja::Value(std::string(s)), {}); }

struct Call {
    std::string name;
    std::string arguments;
};

// A call's arguments as a JSON object's text. Some models write them as a JSON string that
// holds the object; absent arguments are an empty object.
std::string arguments_text(const jinja::Value* args) {
    if (!args || args->is_none() || args->is_undefined()) return "{}";
    if (args->is_dict()) return compact_json(*args);
    if (args->is_string()) {
        const jinja::Value inner = parse(args->str());
        if (inner.is_dict()) return compact_json(inner);
    }
    throw BadCall{"the arguments are not a JSON object"};
}

std::string call_name(const jinja::Value* name) {
    if (!name || !name->is_string() || trim(name->str()).empty()) throw BadCall{"the call has no \"name\" string"};
    return std::string(trim(name->str()));
}

// {"name": N, "arguments": {…}} (Llama 3 says "parameters").
Call call_from_object(const jinja::Value& v) {
    if (!v.is_dict()) throw BadCall{"a call must be a JSON object"};
    const jinja::Dict& d = v.dict();
    const jinja::Value* args = d.find("arguments");
    if (!args) args = d.find("parameters");
    return {call_name(d.find("name")), arguments_text(args)};
}

std::vector<Call> calls_from_json(std::string_view text) {
    const jinja::Value v = parse(text);
    std::vector<Call> calls;
    if (v.is_list()) {
        for (const jinja::Value& item : v.list()) calls.push_back(call_from_object(item));
        if (calls.empty()) throw BadCall{"an empty list of calls"};
    } else {
        calls.push_back(call_from_object(v));
    }
    return calls;
}

// NAME<sep>{json}: Mistral's newer form (sep "[ARGS]") and harmony's (sep "<|message|>").
Call named_call(std::string_view text, std::string_view sep) {
    const size_t at = text.find(sep);
    if (at == std::string_view::npos) throw BadCall{"no '" + std::string(sep) + "' after the function's name"};
    std::string_view name = trim(text.substr(0, at));
    // harmony: "get_weather <|constrain|>json" -> the name is the first word
    name = name.substr(0, std::min(name.find_first_of(" \t\n<"), name.size()));
    if (name.empty()) throw BadCall{"the call has no function name"};
    const jinja::Value args = parse(text.substr(at + sep.size()));
    return {std::string(name), arguments_text(&args)};
}

// Gemma 4 writes arguments in its own notation: {key:<|"|>text<|"|>,n:1,l:[…],o:{k:…}}, keys
// bare, strings between <|"|> quotes. Rewritten as JSON, then parsed like any other.
std::string gemma4_arguments(std::string_view s) {
    constexpr std::string_view kQuote = "<|\"|>";
    std::string out;
    std::vector<bool> in_object;  // the open brackets: object (true) or list
    bool expect_key = false;
    for (size_t i = 0; i < s.size();) {
        if (s.substr(i, kQuote.size()) == kQuote) {
            const size_t end = s.find(kQuote, i + kQuote.size());
            if (end == std::string_view::npos) throw BadCall{"an unterminated <|\"|> string"};
            out += quote_json(s.substr(i + kQuote.size(), end - i - kQuote.size()));
            i = end + kQuote.size();
            expect_key = false;
            continue;
        }
        const char c = s[i];
        if (c == '"') {  // a JSON string (a constrained call writes JSON): copied whole
            size_t end = i + 1;
            while (end < s.size() && s[end] != '"') end += s[end] == '\\' ? 2 : 1;
            if (end >= s.size()) throw BadCall{"an unterminated string"};
            out.append(s.substr(i, end + 1 - i));
            i = end + 1;
            expect_key = false;
            continue;
        }
        if (expect_key && is_word(c)) {  // a bare key, up to its ':'
            const size_t colon = s.find(':', i);
            if (colon == std::string_view::npos) throw BadCall{"a key without ':'"};
            out += quote_json(trim(s.substr(i, colon - i)));
            i = colon;
            expect_key = false;
            continue;
        }
        if (c == '{' || c == '[') in_object.push_back(c == '{');
        if ((c == '}' || c == ']') && !in_object.empty()) in_object.pop_back();
        expect_key = c == '{' || (c == ',' && !in_object.empty() && in_object.back());
        if (c == ':') expect_key = false;
        out += c;
        ++i;
    }
    return out;
}

// call:NAME{args}
Call gemma4_call(std::string_view text) {
    text = trim(text);
    if (text.substr(0, 5) != "call:") throw BadCall{"a Gemma 4 call must start with 'call:'"};
    const size_t brace = text.find('{');
    if (brace == std::string_view::npos) throw BadCall{"no '{' after the function's name"};
    const std::string_view name = trim(text.substr(5, brace - 5));
    if (name.empty()) throw BadCall{"the call has no function name"};
    const jinja::Value args = parse(gemma4_arguments(text.substr(brace)));
    return {std::string(name), arguments_text(&args)};
}

std::vector<Call> decode(ToolCallFormat f, std::string_view payload) {
    switch (f) {
        case ToolCallFormat::Mistral: {
            const std::string_view t = trim(payload);
            if (!t.empty() && t.front() == '[') return calls_from_json(t);
            return {named_call(t, "[ARGS]")};
        }
        case ToolCallFormat::Harmony:
            return {named_call(payload, "<|message|>")};
        case ToolCallFormat::Gemma4:
            return {gemma4_call(payload)};
        default:
            return calls_from_json(payload);
    }
}

// Where a JSON-ended call (Llama 3, Mistral) ends in `body`: kIncomplete, kNotJson, or the end.
size_t json_call_end(ToolCallFormat f, std::string_view body) {
    if (f == ToolCallFormat::Mistral) {
        const std::string_view t = trim(body);
        if (!t.empty() && t.front() != '[') {  // NAME[ARGS]{…}
            const size_t args = body.find("[ARGS]");
            return args == std::string_view::npos ? kIncomplete : json_extent(body, args + 6);
        }
    }
    return json_extent(body, 0);
}

// The head of a call written as a JSON object, up to its arguments' opening brace:
// {"name": "N", "arguments": {   (Llama 3: "parameters"), whitespace anywhere JSON allows it.
struct Head {
    enum State { Incomplete, NoMatch, Match } state = Incomplete;
    std::string name;
    size_t args_at = 0;  // the arguments' '{'
};

Head match_head(std::string_view s) {
    size_t i = 0;
    auto ws = [&] {
        while (i < s.size() && is_space(s[i])) ++i;
    };
    // Each step: Match to go on, Incomplete when s ends inside it, NoMatch otherwise.
    auto lit = [&](std::string_view l) {
        ws();
        const std::string_view have = s.substr(i, l.size());
        if (have != l.substr(0, have.size())) return Head::NoMatch;
        if (have.size() < l.size()) return Head::Incomplete;
        i += l.size();
        return Head::Match;
    };
    Head h;
    for (std::string_view l : {"{", "\"name\"", ":", "\""})
        if (const auto r = lit(l); r != Head::Match) return {r, {}, 0};
    const size_t name_end = s.find('"', i);
    if (name_end == std::string_view::npos) return {Head::Incomplete, {}, 0};
    h.name = std::string(s.substr(i, name_end - i));
    if (h.name.empty() || h.name.find('\\') != std::string::npos) return {Head::NoMatch, {}, 0};
    i = name_end + 1;
    if (const auto r = lit(","); r != Head::Match) return {r, {}, 0};
    ws();
    const bool params = s.substr(i, 3) == "\"pa";
    for (std::string_view l : {params ? "\"parameters\"" : "\"arguments\"", ":", "{"})
        if (const auto r = lit(l); r != Head::Match) return {r, {}, 0};
    h.state = Head::Match;
    h.args_at = i - 1;
    return h;
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
            return "hermes";
        case ToolCallFormat::Llama3:
            return "llama3";
        case ToolCallFormat::Mistral:
            return "mistral";
        case ToolCallFormat::Harmony:
            return "harmony";
        case ToolCallFormat::Gemma4:
            return "gemma4";
        case ToolCallFormat::Generic:
            return "generic";
        case ToolCallFormat::None:
            break;
    }
    return "none";
}

bool parallel_calls_by_default(ToolCallFormat f) {
    return f == ToolCallFormat::Hermes || f == ToolCallFormat::Mistral || f == ToolCallFormat::Gemma4;
}

bool template_reads_tools(std::string_view source) { return mentions(source, "tools"); }

ToolCallFormat detect_tool_call_format(std::string_view s) {
    if (!template_reads_tools(s)) return ToolCallFormat::Generic;
    if (has(s, "<|tool_call>")) return ToolCallFormat::Gemma4;
    if (has(s, "<|channel|>")) return ToolCallFormat::Harmony;
    if (has(s, "[TOOL_CALLS]")) return ToolCallFormat::Mistral;
    if (has(s, "<tool_call>")) return ToolCallFormat::Hermes;
    if (has(s, "<|python_tag|>") || has(s, "<|start_header_id|>")) return ToolCallFormat::Llama3;
    return ToolCallFormat::None;
}

std::vector<std::string> tool_call_marker_tokens(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
            return {"<tool_call>", "</tool_call>"};
        case ToolCallFormat::Llama3:
            return {"<|python_tag|>"};
        case ToolCallFormat::Mistral:
            return {"[TOOL_CALLS]", "[ARGS]"};
        case ToolCallFormat::Harmony:
            return {"<|channel|>", "<|message|>", "<|constrain|>", "<|call|>"};
        case ToolCallFormat::Gemma4:
            return {"<|tool_call>", "<tool_call|>", "<|\"|>"};
        default:
            return {};
    }
}

// ---- the generic fallback ---------------------------------------------------------------

std::string generic_tool_prompt(std::string_view tools_json) {
    const jinja::Value tools = jinja::parse_json(tools_json, "tools");
    if (!tools.is_list()) throw Error("tools: must be a JSON array");
    std::string text =
        "You can call tools. These are the tools, one JSON object each:\n"
        "<tools>\n";
    for (const jinja::Value& t : tools.list()) text += jinja::to_json(t, {}) + "\n";
    text +=
        "</tools>\n"
        "To call a tool, write only this, one block per call:\n"
        "<tool_call>\n"
        "{\"name\": \"the tool's name\", \"arguments\": {the arguments, as a JSON object}}\n"
        "</tool_call>\n"
        "Each result comes back as <tool_response>the result</tool_response>. "
        "When no tool is needed, answer normally.";
    return text;
}

std::string hermes_call_text(const ChatToolCall& call) {
    std::string args = trim(call.arguments).empty() ? "{}" : std::string(trim(call.arguments));
    return "<tool_call>\n{\"name\": " + quote_json(call.name) + ", \"arguments\": " + args + "}\n</tool_call>";
}

std::vector<ChatMessage> with_generic_tools(const std::vector<ChatMessage>& msgs, std::string_view tools_json) {
    std::vector<ChatMessage> out;
    const std::string prompt = tools_json.empty() ? std::string() : generic_tool_prompt(tools_json);
    if (!prompt.empty() && (msgs.empty() || msgs.front().role != "system")) out.push_back({"system", prompt});
    bool last_was_result = false;
    for (size_t i = 0; i < msgs.size(); ++i) {
        ChatMessage m = msgs[i];
        if (i == 0 && m.role == "system" && !prompt.empty())
            m.content = m.content.empty() ? prompt : m.content + "\n\n" + prompt;
        if (m.role == "tool") {
            const std::string result = "<tool_response>\n" + m.content + "\n</tool_response>";
            if (last_was_result) out.back().content += "\n" + result;
            else out.push_back({"user", result});
            last_was_result = true;
            continue;
        }
        for (const ChatToolCall& c : m.tool_calls) {
            if (!m.content.empty()) m.content += '\n';
            m.content += hermes_call_text(c);
        }
        m.tool_calls.clear();
        out.push_back(std::move(m));
        last_was_result = false;
    }
    return out;
}

// ---- forced calls -------------------------------------------------------------------------

namespace {

// A GBNF string literal.
std::string gbnf_literal(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else out += c;
    }
    return out + "\"";
}

bool valid_tool_name(std::string_view n) {
    return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) { return is_word(c) || c == '-'; });
}

// One call to `t` in form f: GBNF sequence.
std::string one_call(ToolCallFormat f, const ToolGrammarTool& t) {
    const std::string json_name = "\"" + t.name + "\"";
    switch (f) {
        case ToolCallFormat::Hermes:
        case ToolCallFormat::Generic:
            return gbnf_literal("<tool_call>\n{\"name\": " + json_name + ", \"arguments\": ") + " " + t.args_rule +
                   " " + gbnf_literal("}\n</tool_call>");
        case ToolCallFormat::Llama3:
            return gbnf_literal("{\"name\": " + json_name + ", \"parameters\": ") + " " + t.args_rule + " " +
                   gbnf_literal("}");
        case ToolCallFormat::Mistral:
            return gbnf_literal("{\"name\": " + json_name + ", \"arguments\": ") + " " + t.args_rule + " " +
                   gbnf_literal("}");
        case ToolCallFormat::Harmony:
            return gbnf_literal("<|channel|>commentary to=functions." + t.name + " <|constrain|>json<|message|>") +
                   " " + t.args_rule;
        case ToolCallFormat::Gemma4:
            return gbnf_literal("<|tool_call>call:" + t.name) + " " + t.args_rule + " " + gbnf_literal("<tool_call|>");
        case ToolCallFormat::None:
            break;
    }
    throw Error("tool calls: this model's call form is not known, so a call cannot be forced");
}

}  // namespace

std::string tool_call_grammar(ToolCallFormat f, const std::vector<ToolGrammarTool>& tools, bool parallel) {
    if (tools.empty()) throw Error("tool calls: a forced call needs at least one tool");
    std::string g = "tool-call ::= ";
    for (size_t i = 0; i < tools.size(); ++i) {
        if (!valid_tool_name(tools[i].name)) throw Error("tool calls: bad function name '" + tools[i].name + "'");
        g += (i ? " | " : "") + std::string("tool-call-") + std::to_string(i);
    }
    g += "\n";
    for (size_t i = 0; i < tools.size(); ++i)
        g += "tool-call-" + std::to_string(i) + " ::= " + one_call(f, tools[i]) + "\n";
    const bool many = parallel && f != ToolCallFormat::Llama3 && f != ToolCallFormat::Harmony;
    if (f == ToolCallFormat::Mistral)
        return g + "root ::= \"[TOOL_CALLS][\" tool-call" + (many ? " (\", \" tool-call)*" : "") + " \"]\"\n";
    if (f == ToolCallFormat::Hermes || f == ToolCallFormat::Generic)
        return g + "root ::= tool-call" + (many ? " (\"\\n\" tool-call)*" : "") + "\n";
    return g + "root ::= tool-call" + (many ? " tool-call*" : "") + "\n";
}

// ---- the parser ---------------------------------------------------------------------------

ToolCallParser::ToolCallParser(ToolCallFormat f, std::string id_prefix, size_t max_calls)
    : format_(f), id_prefix_(std::move(id_prefix)), max_calls_(max_calls) {}

ToolCallChunk ToolCallParser::feed(std::string_view text) {
    ToolCallChunk out;
    pending_ += text;
    for (;;) {
        if (!in_call_) {
            scan_text(out, false);
            if (!in_call_) break;
        } else if (!scan_call(out, false)) {
            break;
        }
    }
    return out;
}

ToolCallChunk ToolCallParser::finish() {
    ToolCallChunk out = feed("");
    for (;;) {
        if (in_call_) {
            scan_call(out, true);
            continue;
        }
        scan_text(out, true);
        if (!in_call_) break;
    }
    if (next_index_ == 0) out.content += held_ws_;  // no call: the text as it was
    held_ws_.clear();
    return out;
}

// The first marker that starts in pending_, whole or (at its end) in part.
ToolCallParser::Opener ToolCallParser::find_opener() const {
    const std::string_view p = pending_;
    if (format_ == ToolCallFormat::Llama3 && !written_text_) {  // a bare JSON answer is a call
        const size_t first = p.find_first_not_of(" \t\r\n");
        if (first == std::string_view::npos) return {0, 0, true};
        if (p[first] == '{') return {first, 0, false};
    }
    const std::vector<std::string_view> markers = openers(format_);
    for (size_t at = 0; at < p.size(); ++at) {
        for (std::string_view m : markers) {
            const std::string_view rest = p.substr(at);
            if (rest.substr(0, m.size()) == m) return {at, m.size(), false};
            if (rest.size() < m.size() && m.substr(0, rest.size()) == rest) return {at, 0, true};
        }
    }
    return {};
}

void ToolCallParser::scan_text(ToolCallChunk& out, bool at_end) {
    const Opener o = find_opener();
    if (o.pos == std::string::npos || (o.partial && at_end)) {
        write_text(pending_, out);
        pending_.clear();
        return;
    }
    write_text(std::string_view(pending_).substr(0, o.pos), out);
    if (o.partial) {
        pending_.erase(0, o.pos);
        return;
    }
    opener_ = pending_.substr(o.pos, o.length);
    pending_.erase(0, o.pos + o.length);
    in_call_ = true;
}

// Reads the call in pending_; true when it ended (released as calls or given back as text).
bool ToolCallParser::scan_call(ToolCallChunk& out, bool at_end) {
    if (streams() && !stream_.active) {
        const Head h = match_head(pending_);
        if (h.state == Head::Incomplete && !at_end && pending_.size() <= kMaxCallBytes) return false;
        if (h.state == Head::Match) {
            held_ws_.clear();
            out.calls.push_back({next_index_, id_prefix_ + std::to_string(next_index_), h.name, ""});
            stream_ = {true, h.args_at};
        }
    }
    if (stream_.active) return stream_call(out, at_end);
    const std::string_view close = closer(format_);
    size_t payload = kIncomplete, consumed = 0;
    if (!close.empty()) {
        const size_t at = pending_.find(close);
        if (at != std::string::npos) payload = at, consumed = at + close.size();
    } else {
        const size_t end = json_call_end(format_, pending_);
        if (end == kNotJson) {
            problems_.push_back("'" + opener_ + "' is not followed by a JSON call");
            write_text(opener_, out);  // the rest is ordinary text
            in_call_ = false;
            return true;
        }
        if (end != kIncomplete) payload = consumed = end;
    }
    if (payload == kIncomplete) {
        if (!at_end && pending_.size() <= kMaxCallBytes) return false;
        if (!at_end) problems_.push_back("a tool call longer than " + std::to_string(kMaxCallBytes) + " bytes");
        payload = consumed = pending_.size();
        // the output ended inside the closing marker (max_tokens): the call before it may be whole
        for (size_t n = std::min(close.size() - (close.empty() ? 0 : 1), payload); n > 0 && at_end; --n)
            if (close.substr(0, n) == std::string_view(pending_).substr(payload - n)) {
                payload -= n;
                break;
            }
    }
    const std::string raw = opener_ + pending_.substr(0, consumed);
    release(std::string_view(pending_).substr(0, payload), raw, out);
    pending_.erase(0, consumed);
    in_call_ = false;
    return true;
}

bool ToolCallParser::streams() const {
    const bool form =
        format_ == ToolCallFormat::Hermes || format_ == ToolCallFormat::Generic || format_ == ToolCallFormat::Llama3;
    return stream_arguments_ && form && next_index_ < max_calls_;
}

// Releases the arguments written so far, then waits for the call's end (its closing marker,
// or for Llama 3 the object's closing brace).
bool ToolCallParser::stream_call(ToolCallChunk& out, bool at_end) {
    Streamed& st = stream_;
    size_t i = st.pos;
    for (; i < pending_.size() && !st.done; ++i) {
        const char c = pending_[i];
        if (st.in_string) {
            if (st.escaped) st.escaped = false;
            else if (c == '\\') st.escaped = true;
            else if (c == '"') st.in_string = false;
        } else if (c == '"') {
            st.in_string = true;
        } else if (c == '{' || c == '[') {
            ++st.depth;
        } else if ((c == '}' || c == ']') && --st.depth == 0) {
            st.done = true;
        }
    }
    if (i > st.pos) out.calls.push_back({next_index_, "", "", pending_.substr(st.pos, i - st.pos)});
    st.pos = i;
    const std::string_view close = format_ == ToolCallFormat::Llama3 ? "}" : closer(format_);
    const size_t end = st.done ? pending_.find(close, st.pos) : std::string::npos;
    if (end != std::string::npos) {
        end_call(end + close.size());
        return true;
    }
    if (!at_end) return false;
    if (!st.done) problems_.push_back("a streamed tool call's arguments were cut short");
    end_call(pending_.size());
    return true;
}

void ToolCallParser::end_call(size_t consumed) {
    pending_.erase(0, consumed);
    stream_ = {};
    in_call_ = false;
    ++next_index_;
    after_call_ = true;
}

void ToolCallParser::release(std::string_view payload, std::string_view raw, ToolCallChunk& out) {
    std::vector<Call> calls;
    try {
        calls = decode(format_, payload);
    } catch (const BadCall& e) {
        problems_.push_back("a malformed tool call was returned as text: " + e.why);
        write_text(raw, out);
        return;
    }
    held_ws_.clear();  // whitespace between text and a call belongs to neither
    after_call_ = true;
    for (Call& c : calls) {
        if (next_index_ >= max_calls_) {
            problems_.push_back("tool call '" + c.name + "' dropped: only " + std::to_string(max_calls_) +
                                " call(s) allowed (parallel_tool_calls)");
            continue;
        }
        out.calls.push_back(
            {next_index_, id_prefix_ + std::to_string(next_index_), std::move(c.name), std::move(c.arguments)});
        ++next_index_;
    }
}

// Content, with the whitespace at its end held back: dropped when a call follows it.
void ToolCallParser::write_text(std::string_view text, ToolCallChunk& out) {
    if (after_call_) {  // nor does whitespace after a call
        const size_t first = text.find_first_not_of(" \t\r\n");
        text.remove_prefix(first == std::string_view::npos ? text.size() : first);
    }
    if (text.empty()) return;
    after_call_ = false;
    const auto last = std::find_if_not(text.rbegin(), text.rend(), is_space);
    if (last == text.rend()) {
        held_ws_ += text;
        return;
    }
    const size_t body = text.size() - static_cast<size_t>(last - text.rbegin());
    out.content += held_ws_;
    out.content.append(text.substr(0, body));
    held_ws_.assign(text.substr(body));
    written_text_ = true;
}

}  // namespace ember
