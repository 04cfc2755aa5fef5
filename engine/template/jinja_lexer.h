// Jinja lexer: splits a template into text and the tokens inside {{ }} and {% %} tags.
//
// Whitespace handling follows jinja2 exactly, with the settings Hugging Face renders chat
// templates with (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//  - `{%-` / `{{-` / `{#-` strip all whitespace before the tag; `-%}` / `-}}` / `-#}` strip
//    all whitespace after it;
//  - trim_blocks: the first newline after `%}` or `#}` is dropped (not after `}}`);
//  - lstrip_blocks: spaces and tabs before `{%` / `{#` at the start of a line are dropped;
//  - `{%+` and `+%}` turn lstrip_blocks / trim_blocks off for that tag;
//  - one trailing newline at the end of the template is dropped; \r\n and \r become \n.
// Comments vanish here; `{% raw %}…{% endraw %}` becomes plain text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja {

struct SourceLoc {
    int line = 1;
    int col = 1;
};

enum class Tok : uint8_t { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
    Tok type = Tok::End;
    std::string text;  // text, name, decoded string literal or operator
    SourceLoc loc;
    int64_t ival = 0;
    double fval = 0.0;
};

struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// Throws ember::Error("chat template syntax error at line L, column C: …").
std::vector<Token> lex(std::string_view source, const LexOptions& opts = {});

[[noreturn]] void throw_syntax_error(SourceLoc loc, const std::string& msg);

}  // namespace ember::jinja
