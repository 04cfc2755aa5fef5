// Small text tests shared by the readers of model output and template sources (reasoning.cpp,
// tool_calls.cpp): ASCII whitespace, identifier characters, and whether a template names a
// variable.
#pragma once
#include <string_view>

namespace ember::template_text {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
inline bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// `word` occurs in `s` as a whole identifier (not inside a longer name).
inline bool mentions(std::string_view s, std::string_view word) {
    for (size_t at = s.find(word); at != std::string_view::npos; at = s.find(word, at + 1)) {
        const bool before = at > 0 && is_word(s[at - 1]);
        const bool after = at + word.size() < s.size() && is_word(s[at + word.size()]);
        if (!before && !after) return true;
    }
    return false;
}

}  // namespace ember::template_text
