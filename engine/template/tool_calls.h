// Tool calls in a model's output. A model asked to use tools writes its calls as text in its
// family's own form; ToolCallParser turns a streamed output into the answer's text and the
// calls (name + JSON arguments), with no marker left in either:
//   - Hermes (Qwen2.5/3, SmolLM3, Hermes): <tool_call>{"name": N, "arguments": {…}}</tool_call>
//   - Llama 3.x: {"name": N, "parameters": {…}} as the whole answer, or after <|python_tag|>
//   - Mistral: [TOOL_CALLS][{"name": N, "arguments": {…}}, …] or [TOOL_CALLS]N[ARGS]{…}
//   - gpt-oss harmony: …commentary to=functions.N <|constrain|>json<|message|>{…}<|call|>
//   - Gemma 4: <|tool_call>call:N{key:<|"|>text<|"|>,n:1}<tool_call|>
//   - Generic: Ember's fallback for templates that cannot show tools (SmolLM2's ChatML,
//     Gemma 3): the definitions and the Hermes form go into the system message (see
//     generic_tool_prompt) and the model answers in the Hermes form.
// The format is told by the chat template (detect_tool_call_format).
//
// Streaming: text that may be the start of a call marker is held back until it is known; a
// call is released when it is complete and its JSON is valid (or, for calls decoded under
// their grammar, piece by piece: stream_arguments). A call whose JSON is malformed (or never
// ends) comes back as content, whole, with the reason in problems(): a model's mistake never
// breaks a response. Whitespace between text and calls belongs to neither.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "engine/template/chat_template.h"

namespace ember {

enum class ToolCallFormat : uint8_t { None, Hermes, Llama3, Mistral, Harmony, Gemma4, Generic };

// "none", "hermes", "llama3", "mistral", "harmony", "gemma4", "generic"
std::string_view tool_call_format_name(ToolCallFormat f);

// The template reads the `tools` variable (it can show tool definitions to the model).
bool template_reads_tools(std::string_view template_source);
// How a model with this chat template writes its calls. Generic: the template cannot show
// tools, so Ember's fallback prompt does (with_generic_tools). None: the template shows tools
// in a form Ember does not know: tools are rendered, calls are not parsed.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// Whether answers in this form make several calls unless told otherwise: the forms whose
// templates render several calls in one turn (Hermes, Mistral, Gemma 4). Llama 3 and harmony
// make one call per turn; the generic fallback serves small models without tool training, for
// which one forced call is what an agent loop needs (a second would loop on the same call).
bool parallel_calls_by_default(ToolCallFormat f);

// The markers of a format that are single (often control) tokens in its models'
// vocabularies: the detokenizer must write them out for the parser (cf.
// reasoning_marker_tokens).
std::vector<std::string> tool_call_marker_tokens(ToolCallFormat f);

// ---- the generic fallback ---------------------------------------------------------------
// The system text that shows `tools_json` (the API's tools array) and the call form. Throws
// ember::Error when tools_json is not a JSON array.
std::string generic_tool_prompt(std::string_view tools_json);
// A conversation rewritten for a template without tool support: the tool prompt joins the
// system message (or becomes one), an assistant turn's calls become its text in the call
// form, and tool results become user turns (<tool_response>…</tool_response>; consecutive
// results share one turn, so templates that insist on alternating roles accept it).
std::vector<ChatMessage> with_generic_tools(const std::vector<ChatMessage>& msgs, std::string_view tools_json);
// A call as the generic (and Hermes) form writes it: <tool_call>\n{"name":…}\n</tool_call>.
std::string hermes_call_text(const ChatToolCall& call);

// ---- forced calls -------------------------------------------------------------------------
// A tool a forced call may name, and the GBNF rule its arguments must match (defined by the
// caller, e.g. grammar::json_schema_rules(parameters, "args-0")).
struct ToolGrammarTool {
    std::string name;  // [A-Za-z0-9_-]+ (the API's rule for function names)
    std::string args_rule;
};
// GBNF (llama.cpp's notation) for what the model writes when it must call: `root` is one call
// in form `f` to one of `tools` or, with `parallel`, one or more calls (Llama 3 and harmony
// write one call per turn). Arguments are JSON in every form (Gemma 4's parser takes JSON
// besides its own notation). Defines root and rules named tool-call…; throws ember::Error
// for ToolCallFormat::None, no tools, or a name outside [A-Za-z0-9_-].
std::string tool_call_grammar(ToolCallFormat f, const std::vector<ToolGrammarTool>& tools, bool parallel);

// ---- parsing ------------------------------------------------------------------------------

// Part of a call. The first delta of a call carries its id and name (and may carry all of its
// arguments); later ones carry argument text only. Arguments are JSON object text.
struct ToolCallDelta {
    size_t index = 0;  // the call's position in this answer, from 0
    std::string id;    // first delta only: id_prefix + index
    std::string name;  // first delta only
    std::string arguments;
};

struct ToolCallChunk {
    std::string content;
    std::vector<ToolCallDelta> calls;
    bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
public:
    // Calls past max_calls are parsed and dropped (OpenAI's parallel_tool_calls: false keeps
    // one); each drop is recorded in problems().
    explicit ToolCallParser(ToolCallFormat f, std::string id_prefix = "call_",
                            size_t max_calls = std::numeric_limits<size_t>::max());

    // New output text; returns what is now certain.
    ToolCallChunk feed(std::string_view text);
    // The end of the output: held text is text after all; an unfinished call is tried as it
    // is (a model may stop before its closing marker), else returned as content.
    ToolCallChunk finish();

    // For calls known to be well-formed (decoded under tool_call_grammar's grammar): in the
    // Hermes, generic and Llama 3 forms a call's head (id, name) is released as soon as its name
    // is read and its arguments as they are written (the model's own JSON text, not
    // re-serialised). Off: a call is released whole once its JSON has been checked.
    void stream_arguments(bool on) { stream_arguments_ = on; }

    size_t calls() const { return next_index_; }  // calls released so far
    ToolCallFormat format() const { return format_; }
    // Why text that looked like a call came back as content (or a call was dropped): one line
    // each, for the log.
    const std::vector<std::string>& problems() const { return problems_; }

    // A call body larger than this is not a call (the text comes back as content).
    static constexpr size_t kMaxCallBytes = size_t(1) << 20;

private:
    struct Opener {
        size_t pos = std::string::npos;
        size_t length = 0;
        bool partial = false;  // pending_ ends with the start of a marker
    };
    Opener find_opener() const;
    void scan_text(ToolCallChunk& out, bool at_end);
    bool scan_call(ToolCallChunk& out, bool at_end);
    void write_text(std::string_view text, ToolCallChunk& out);
    void release(std::string_view payload, std::string_view raw, ToolCallChunk& out);
    bool streams() const;
    bool stream_call(ToolCallChunk& out, bool at_end);
    void end_call(size_t consumed);

    // The call whose arguments are being streamed (stream_arguments).
    struct Streamed {
        bool active = false;
        size_t pos = 0;  // in pending_: the next byte of the arguments not yet released
        int depth = 0;
        bool in_string = false, escaped = false, done = false;
    };

    ToolCallFormat format_;
    std::string id_prefix_;
    size_t max_calls_;
    bool in_call_ = false;
    std::string pending_;        // not yet known: a possible marker, or the call being read
    std::string opener_;         // the marker that opened the call being read
    std::string held_ws_;        // whitespace after the last text (dropped before a call)
    bool after_call_ = false;    // nothing but whitespace since the last call
    bool written_text_ = false;  // some non-whitespace content was written
    size_t next_index_ = 0;      // calls released
    bool stream_arguments_ = false;
    Streamed stream_;
    std::vector<std::string> problems_;
};

}  // namespace ember
