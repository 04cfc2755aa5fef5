#include "engine/template/reasoning.h"

#include <algorithm>
#include <utility>

#include "engine/template/template_text.h"

namespace ember {
namespace {

using Action = ReasoningSplitter::Action;
using Marker = ReasoningSplitter::Marker;

// Every marker starts with '<': the scan only stops there.
const std::vector<Marker> kThinkMarkers = {{"<think>", Action::Open}, {"</think>", Action::Close}};
// Gemma 4 names its channel after the opener; a channel other than "thought" is not thinking.
const std::vector<Marker> kGemmaMarkers = {
    {"<|channel>thought", Action::Open}, {"<|channel>", Action::Drop}, {"<channel|>", Action::Close}};
// Harmony: <|start|>ROLE<|channel|>NAME[ to=…][<|constrain|>…]<|message|>BODY<|end|>
const std::vector<Marker> kHarmonyMarkers = {{"<|start|>", Action::Start},     {"<|channel|>", Action::Channel},
                                             {"<|message|>", Action::Message}, {"<|end|>", Action::End},
                                             {"<|return|>", Action::End},      {"<|call|>", Action::End},
                                             {"<|constrain|>", Action::Drop}};

const std::vector<Marker>& markers_of(ReasoningFormat f) {
    static const std::vector<Marker> kNone;
    switch (f) {
        case ReasoningFormat::ThinkTags:
            return kThinkMarkers;
        case ReasoningFormat::GemmaChannel:
            return kGemmaMarkers;
        case ReasoningFormat::Harmony:
            return kHarmonyMarkers;
        case ReasoningFormat::None:
            break;
    }
    return kNone;
}

using template_text::is_space;
using template_text::mentions;

// A harmony header's channel: the first word after <|channel|> ("analysis to=…" -> "analysis").
std::string_view channel_name(std::string_view header) {
    size_t b = 0;
    while (b < header.size() && is_space(header[b])) ++b;
    size_t e = b;
    while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
    return header.substr(b, e - b);
}

// A harmony header addressed to a function ("commentary to=functions.get_weather json"): the
// call's head as the tool-call parser reads it ("to=functions.get_weather<|message|>"), else "".
std::string function_call_header(std::string_view header) {
    constexpr std::string_view kTo = "to=functions.";
    const size_t at = header.find(kTo);
    if (at == std::string_view::npos) return {};
    size_t end = at + kTo.size();
    while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
    return std::string(header.substr(at, end - at)) + "<|message|>";
}

// A header longer than this was no header: the model wrote text outside the channel format.
constexpr size_t kMaxHeader = 256;

}  // namespace

std::string_view reasoning_format_name(ReasoningFormat f) {
    switch (f) {
        case ReasoningFormat::ThinkTags:
            return "think";
        case ReasoningFormat::GemmaChannel:
            return "gemma4";
        case ReasoningFormat::Harmony:
            return "harmony";
        case ReasoningFormat::None:
            break;
    }
    return "none";
}

ReasoningFormat detect_reasoning_format(std::string_view source, bool vocab_has_think_tokens) {
    if (source.find("<|channel|>") != std::string_view::npos) return ReasoningFormat::Harmony;
    if (source.find("<|channel>") != std::string_view::npos && source.find("<channel|>") != std::string_view::npos)
        return ReasoningFormat::GemmaChannel;
    if (source.find("<think>") != std::string_view::npos || source.find("</think>") != std::string_view::npos ||
        vocab_has_think_tokens)
        return ReasoningFormat::ThinkTags;
    return ReasoningFormat::None;
}

std::vector<std::string> reasoning_marker_tokens(ReasoningFormat f) {
    switch (f) {
        case ReasoningFormat::ThinkTags:
            return {"<think>", "</think>"};
        case ReasoningFormat::GemmaChannel:
            return {"<|channel>", "<channel|>"};
        case ReasoningFormat::Harmony:
            return {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"};
        case ReasoningFormat::None:
            break;
    }
    return {};
}

std::string_view reasoning_close_text(ReasoningFormat f) {
    switch (f) {
        case ReasoningFormat::ThinkTags:
            return "</think>\n\n";
        case ReasoningFormat::GemmaChannel:
            return "<channel|>";
        case ReasoningFormat::Harmony:
            return "<|end|><|start|>assistant<|channel|>final<|message|>";
        case ReasoningFormat::None:
            break;
    }
    return {};
}

ReasoningControls reasoning_controls(std::string_view source) {
    return {mentions(source, "enable_thinking"), mentions(source, "reasoning_effort")};
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat f) : format_(f), markers_(markers_of(f)) {}

void ReasoningSplitter::prime(std::string_view generation_prompt) {
    SplitText ignored;
    pending_ += generation_prompt;
    drain(ignored, true);
    // The answer starts now: its section has written nothing yet.
    trailing_ws_.clear();
    section_start_ = true;
}

SplitText ReasoningSplitter::feed(std::string_view text) {
    SplitText out;
    pending_ += text;
    drain(out, false);
    return out;
}

SplitText ReasoningSplitter::finish() {
    SplitText out;
    drain(out, true);
    flush_section();
    header_.clear();
    return out;
}

// Emits the text of pending_ up to the first place a marker starts or may start; applies
// whole markers; keeps a possible marker's beginning (unless the output has ended).
void ReasoningSplitter::drain(SplitText& out, bool at_end) {
    size_t from = 0;
    for (size_t p = pending_.find('<'); p != std::string::npos; p = pending_.find('<', p + 1)) {
        const std::string_view rest = std::string_view(pending_).substr(p);
        const Marker* whole = nullptr;
        bool partial = false;
        for (const Marker& m : markers_) {
            if (rest.substr(0, m.text.size()) == m.text) {
                if (!whole || m.text.size() > whole->text.size()) whole = &m;
            } else if (!at_end && rest.size() < m.text.size() && m.text.substr(0, rest.size()) == rest) {
                partial = true;  // a longer marker may still be coming
            }
        }
        if (partial) {
            write_out(std::string_view(pending_).substr(from, p - from), out);
            pending_.erase(0, p);
            return;
        }
        if (!whole) continue;
        write_out(std::string_view(pending_).substr(from, p - from), out);
        apply(whole->action);
        if (!call_header_.empty()) write_out(std::exchange(call_header_, {}), out);
        from = p + whole->text.size();
        p = from - 1;
    }
    write_out(std::string_view(pending_).substr(from), out);
    pending_.clear();
}

void ReasoningSplitter::apply(Action a) {
    switch (a) {
        case Action::Open:
            enter(Section::Reasoning);
            return;
        case Action::Close:
        case Action::End:
            enter(Section::Content);
            return;
        case Action::Drop:
            return;
        case Action::Start:
            enter(Section::Header);
            after_channel_ = false;
            return;
        case Action::Channel:
            enter(Section::Header);
            after_channel_ = true;
            return;
        case Action::Message:
            if (section_ != Section::Header) return;  // a stray one: not part of the answer either
            call_header_ = function_call_header(header_);
            enter(after_channel_ && channel_name(header_) == "analysis" ? Section::Reasoning : Section::Content);
            return;
    }
}

void ReasoningSplitter::enter(Section s) {
    flush_section();
    section_ = s;
    section_start_ = true;
    header_.clear();
}

void ReasoningSplitter::write_out(std::string_view text, SplitText& out) {
    if (text.empty()) return;
    if (format_ == ReasoningFormat::None) {  // no thinking: the text as it is, untrimmed
        out.content += text;
        return;
    }
    if (section_ == Section::Header) {
        header_ += text;
        if (header_.size() <= kMaxHeader) return;
        const std::string written = std::move(header_);
        enter(Section::Content);
        write_out(written, out);
        return;
    }
    if (section_start_) {
        const auto first = std::find_if_not(text.begin(), text.end(), is_space);
        if (first == text.end()) return;
        text.remove_prefix(static_cast<size_t>(first - text.begin()));
        section_start_ = false;
    }
    std::string& to = section_ == Section::Reasoning ? out.reasoning : out.content;
    const auto last = std::find_if_not(text.rbegin(), text.rend(), is_space);
    if (last == text.rend()) {
        trailing_ws_ += text;
        return;
    }
    const size_t body = text.size() - static_cast<size_t>(last - text.rbegin());
    to += trailing_ws_;
    to.append(text.substr(0, body));
    trailing_ws_.assign(text.substr(body));
}

}  // namespace ember
