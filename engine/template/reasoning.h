// Reasoning kept apart from the answer. Models of 2026 think before they answer, in one of a
// few written forms; ReasoningSplitter turns a streamed output into its two parts, the
// thoughts (OpenAI's `reasoning_content`) and the answer (`content`), with no marker left in
// either:
//   - think tags (Qwen3, QwQ, DeepSeek-R1 and its distills): <think>…</think> answer
//   - Gemma 4's thought channel: <|channel>thought\n…<channel|>answer
//   - gpt-oss's harmony channels: <|channel|>analysis<|message|>…<|end|>
//     <|start|>assistant<|channel|>final<|message|>answer
// A harmony message addressed to a function (a tool call, header `… to=functions.NAME …`) is
// answer text, written as `to=functions.NAME<|message|>ARGUMENTS` for the tool-call parser
// (engine/template/tool_calls.h); the one marker kept in the answer, and only for calls.
// The format is told by the model's chat template (and its vocabulary). Like llama-server,
// the splitter is first fed the generation prompt (what the template appends for
// add_generation_prompt), so an output that starts inside the thinking because the prompt
// opened it (`<think>\n`), or after an empty thinking the prompt wrote (enable_thinking=false),
// is split right. Markers may arrive cut across tokens or chunks: a text that may be the
// start of a marker is held back until it is known. Thinking that is never closed (the
// request ended first) stays reasoning.
//
// Whitespace: each part is trimmed at its ends (the "\n" after <think> and before </think>,
// the "\n\n" before the answer), the way llama-server trims reasoning_content.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

enum class ReasoningFormat { None, ThinkTags, GemmaChannel, Harmony };

std::string_view reasoning_format_name(ReasoningFormat f);  // "none", "think", "gemma4", "harmony"

// The format a model's outputs use: from its chat template's source, else from whether its
// vocabulary has <think> and </think> tokens. None: everything is answer.
ReasoningFormat detect_reasoning_format(std::string_view template_source, bool vocab_has_think_tokens);

// The marker texts of a format that are single tokens in its models' vocabularies. Some are
// control tokens, which a detokenizer skips: it must write these out for the splitter.
std::vector<std::string> reasoning_marker_tokens(ReasoningFormat f);
// The text that closes a thinking (what a thinking budget makes the model write).
std::string_view reasoning_close_text(ReasoningFormat f);

// The template variables that switch reasoning on and off or set its effort, when the
// template reads them (a chat shows a control only for a variable its template reads).
struct ReasoningControls {
    bool enable_thinking = false;   // Qwen3, Gemma 4: `enable_thinking` (true / false)
    bool reasoning_effort = false;  // gpt-oss: `reasoning_effort` ("low", "medium", "high")
};
ReasoningControls reasoning_controls(std::string_view template_source);

struct SplitText {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningSplitter {
public:
    explicit ReasoningSplitter(ReasoningFormat f = ReasoningFormat::None);

    // Feeds the generation prompt and drops what it would give: it only sets the state.
    void prime(std::string_view generation_prompt);
    // New output text; returns the parts that are now certain.
    SplitText feed(std::string_view text);
    // The end of the output: what was held back (a partial marker is text after all).
    SplitText finish();
    // Inside a thinking now (the next text would be reasoning).
    bool in_reasoning() const { return section_ == Section::Reasoning; }
    ReasoningFormat format() const { return format_; }

    enum class Action : uint8_t { Open, Close, Drop, Start, Channel, Message, End };
    struct Marker {
        std::string_view text;
        Action action;
    };

private:
    enum class Section : uint8_t { Content, Reasoning, Header };
    void apply(Action a);
    void write_out(std::string_view text, SplitText& out);  // not "emit": Qt defines that macro
    void flush_section() { trailing_ws_.clear(); }          // the section ends: its trailing whitespace goes
    void enter(Section s);
    void drain(SplitText& out, bool at_end);

    ReasoningFormat format_;
    std::vector<Marker> markers_;
    Section section_ = Section::Content;
    std::string pending_;         // not yet known not to start a marker
    std::string trailing_ws_;     // whitespace at the section's end so far (dropped at its end)
    bool section_start_ = true;   // nothing but whitespace in this section yet
    std::string header_;          // harmony: the header being read (channel name)
    bool after_channel_ = false;  // harmony: header_ is what follows <|channel|>
    std::string call_header_;     // harmony: the head of a function call, written next
};

}  // namespace ember
