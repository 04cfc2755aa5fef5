#include "engine/template/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "kernels/common/error.h"
#include "engine/template/jinja_case.h"

namespace ember::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// jinja2 joins all line endings to "\n" and drops one trailing newline before lexing.
std::string normalize(std::string_view in) {
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] == '\r') {
            out += '\n';
            if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
        } else out += in[i];
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

// Reads `n` hex digits at s[i]; false if they are not all hex.
bool read_hex(std::string_view s, size_t i, size_t n, uint32_t& cp) {
    if (i + n > s.size()) return false;
    cp = 0;
    for (size_t k = 0; k < n; ++k) {
        const char c = s[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
        cp = cp * 16 + static_cast<uint32_t>(is_digit(c) ? c - '0' : (std::tolower(c) - 'a' + 10));
    }
    return true;
}

// Python's "unicode-escape" decoding of a string literal body (jinja2 does the same).
// Unknown escapes keep their backslash, as Python does.
std::string unescape(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 >= s.size()) {
            out += s[i];
            continue;
        }
        const char c = s[++i];
        uint32_t cp = 0;
        switch (c) {
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case 'a':
                out += '\a';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'v':
                out += '\v';
                break;
            case '\\':
                out += '\\';
                break;
            case '\'':
                out += '\'';
                break;
            case '"':
                out += '"';
                break;
            case '\n':
                break;  // line continuation
            case 'x':
            case 'u':
            case 'U': {
                const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
                if (read_hex(s, i + 1, n, cp)) {
                    append_utf8(out, cp);
                    i += n;
                } else {
                    out += '\\';
                    out += c;
                }
                break;
            }
            default:
                if (c >= '0' && c <= '7') {  // up to three octal digits
                    size_t k = 0;
                    while (k < 3 && i + k < s.size() && s[i + k] >= '0' && s[i + k] <= '7')
                        cp = cp * 8 + static_cast<uint32_t>(s[i + k++] - '0');
                    append_utf8(out, cp);
                    i += k - 1;
                } else {
                    out += '\\';
                    out += c;
                }
        }
    }
    return out;
}

class Lexer {
public:
    Lexer(std::string_view source, const LexOptions& opts) : src_(normalize(source)), opt_(opts) {
        line_starts_.push_back(0);
        for (size_t i = 0; i < src_.size(); ++i)
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) lex_data();
        push(Tok::End, {}, src_.size());
        return std::move(out_);
    }

private:
    std::string src_;
    LexOptions opt_;
    std::vector<size_t> line_starts_;
    std::vector<Token> out_;
    size_t pos_ = 0;
    bool line_starting_ = true;  // did the previous match end with a newline? (lstrip_blocks)

    SourceLoc loc(size_t off) const {
        auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
        const size_t line = static_cast<size_t>(it - line_starts_.begin());
        return {static_cast<int>(line), static_cast<int>(off - line_starts_[line - 1] + 1)};
    }
    [[noreturn]] void fail(size_t off, const std::string& msg) const { throw_syntax_error(loc(off), msg); }

    Token& push(Tok t, std::string text, size_t off) {
        out_.push_back(Token{t, std::move(text), loc(off), 0, 0.0});
        return out_.back();
    }

    bool at(size_t off, std::string_view s) const { return src_.compare(off, s.size(), s) == 0; }

    // Applies `{%-` / lstrip_blocks to the text in front of a tag, then emits it.
    void emit_text(std::string_view text, size_t off, char sign, bool is_var) {
        if (sign == '-') {
            size_t end = text.size();
            while (end > 0 && is_space(text[end - 1])) --end;
            text = text.substr(0, end);
        } else if (sign != '+' && opt_.lstrip_blocks && !is_var) {
            const size_t nl = text.rfind('\n');
            const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
            const std::string_view tail = text.substr(l_pos);
            const bool only_ws = !tail.empty() && std::all_of(tail.begin(), tail.end(), is_space);
            if ((l_pos > 0 || line_starting_) && only_ws) text = text.substr(0, l_pos);
        }
        if (!text.empty()) push(Tok::Text, std::string(text), off);
    }

    // After a closing delimiter at pos_: `-` strips all following whitespace, trim_blocks
    // one newline (block and comment tags only).
    void after_close(char sign, bool trim_newline) {
        if (sign == '-') {
            while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
        } else if (sign != '+' && trim_newline && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
        }
        line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    }

    void lex_data() {
        size_t start = pos_;
        while ((start = src_.find('{', start)) != std::string::npos) {
            const char k = start + 1 < src_.size() ? src_[start + 1] : '\0';
            if (k == '{' || k == '%' || k == '#') break;
            ++start;
        }
        if (start == std::string::npos) {
            push(Tok::Text, src_.substr(pos_), pos_);
            pos_ = src_.size();
            return;
        }
        const char kind = src_[start + 1];
        const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
        const std::string_view text(src_.data() + pos_, start - pos_);
        if (kind == '%' && lex_raw(start, text, sign)) return;
        emit_text(text, pos_, sign, kind == '{');
        line_starting_ = false;
        pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
        if (kind == '#') lex_comment(start);
        else lex_tag(start, kind == '%');
    }

    void lex_comment(size_t start) {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) fail(start, "unclosed comment (missing '#}')");
        const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
        pos_ = end + 2;
        after_close(sign, true);
    }

    // `{% raw %}`: everything up to `{% endraw %}` is text. Returns false if not a raw tag.
    bool lex_raw(size_t start, std::string_view text, char sign) {
        size_t p = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
        while (p < src_.size() && is_space(src_[p])) ++p;
        if (!at(p, "raw")) return false;
        p += 3;
        while (p < src_.size() && is_space(src_[p])) ++p;
        const char close_sign = at(p, "-%}") ? '-' : '\0';
        if (!close_sign && !at(p, "%}")) return false;
        emit_text(text, pos_, sign, false);
        pos_ = p + (close_sign ? 3 : 2);
        after_close(close_sign, false);  // jinja2 applies no trim_blocks after `raw %}`
        size_t body_start = pos_;
        size_t q = pos_;
        while ((q = src_.find("{%", q)) != std::string::npos) {
            if (lex_endraw(q, body_start)) return true;
            q += 2;
        }
        fail(start, "missing '{% endraw %}'");
    }

    bool lex_endraw(size_t q, size_t body_start) {
        const char sign = q + 2 < src_.size() ? src_[q + 2] : '\0';
        size_t p = q + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
        while (p < src_.size() && is_space(src_[p])) ++p;
        if (!at(p, "endraw")) return false;
        p += 6;
        while (p < src_.size() && is_space(src_[p])) ++p;
        const char close_sign = (at(p, "-%}") || at(p, "+%}")) ? src_[p] : '\0';
        if (!close_sign && !at(p, "%}")) return false;
        emit_text(std::string_view(src_.data() + body_start, q - body_start), body_start, sign, false);
        pos_ = p + (close_sign ? 3 : 2);
        after_close(close_sign, true);
        return true;
    }

    void lex_tag(size_t start, bool is_block) {
        push(is_block ? Tok::BlockBegin : Tok::VarBegin, {}, start);
        int depth = 0;  // brackets open; a closing delimiter inside brackets is not one
        for (;;) {
            while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
            if (pos_ >= src_.size())
                fail(start, is_block ? "unclosed tag (missing '%}')" : "unclosed tag (missing '}}')");
            if (depth == 0 && lex_close(is_block)) return;
            lex_token(depth);
        }
    }

    bool lex_close(bool is_block) {
        const std::string_view close = is_block ? "%}" : "}}";
        char sign = '\0';
        if ((src_[pos_] == '-' || (is_block && src_[pos_] == '+')) && at(pos_ + 1, close)) sign = src_[pos_];
        else if (!at(pos_, close)) return false;
        push(is_block ? Tok::BlockEnd : Tok::VarEnd, {}, pos_);
        pos_ += close.size() + (sign ? 1 : 0);
        after_close(sign, is_block);
        return true;
    }

    void lex_token(int& depth) {
        const char c = src_[pos_];
        if (is_digit(c)) return lex_number();
        if (is_name_start(c)) {
            const size_t b = pos_;
            while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
            push(Tok::Name, src_.substr(b, pos_ - b), b);
            return;
        }
        if (c == '\'' || c == '"') return lex_string();
        lex_operator(depth);
    }

    void lex_string() {
        const size_t b = pos_;
        const char q = src_[pos_++];
        while (pos_ < src_.size() && src_[pos_] != q) pos_ += src_[pos_] == '\\' ? 2 : 1;
        if (pos_ >= src_.size()) fail(b, "unterminated string literal");
        ++pos_;
        push(Tok::String, unescape(std::string_view(src_).substr(b + 1, pos_ - b - 2)), b);
    }

    // Digits with optional single underscores between them, as Python allows.
    size_t scan_digits(size_t p) const {
        if (p >= src_.size() || !is_digit(src_[p])) return p;
        while (p < src_.size() &&
               (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
            ++p;
        return p;
    }

    void lex_number() {
        const size_t b = pos_;
        size_t p = scan_digits(pos_);
        bool is_float = false;
        const bool after_dot = b > 0 && src_[b - 1] == '.';  // `x.0.1` is two lookups, not a float
        if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
            p = scan_digits(p + 1);
            is_float = true;
        }
        if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
            size_t e = p + 1;
            if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
            if (e < src_.size() && is_digit(src_[e])) {
                p = scan_digits(e);
                is_float = true;
            }
        }
        std::string digits = src_.substr(b, p - b);
        digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
        pos_ = p;
        Token& t = push(is_float ? Tok::Float : Tok::Int, digits, b);
        if (is_float) {
            t.fval = std::strtod(digits.c_str(), nullptr);
            return;
        }
        auto res = std::from_chars(digits.data(), digits.data() + digits.size(), t.ival);
        if (res.ec != std::errc()) fail(b, "integer literal too large");
    }

    void lex_operator(int& depth) {
        static const char* const two[] = {"//", "**", "==", "!=", "<=", ">="};
        for (const char* op : two)
            if (at(pos_, op)) {
                push(Tok::Op, op, pos_);
                pos_ += 2;
                return;
            }
        const char c = src_[pos_];
        if (std::string_view("+-*/%~[](){}<>=.:|,;").find(c) == std::string_view::npos)
            fail(pos_, std::string("unexpected character '") + c + "'");
        if (c == '(' || c == '[' || c == '{') ++depth;
        if (c == ')' || c == ']' || c == '}') {
            if (depth == 0) fail(pos_, std::string("unexpected '") + c + "'");
            --depth;
        }
        push(Tok::Op, std::string(1, c), pos_);
        ++pos_;
    }
};

}  // namespace

void throw_syntax_error(SourceLoc loc, const std::string& msg) {
    throw Error("chat template syntax error at line " + std::to_string(loc.line) + ", column " +
                std::to_string(loc.col) + ": " + msg);
}

std::vector<Token> lex(std::string_view source, const LexOptions& opts) { return Lexer(source, opts).run(); }

}  // namespace ember::jinja
