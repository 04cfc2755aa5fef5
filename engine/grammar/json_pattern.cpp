// A JSON schema's `pattern` -> GBNF (engine/grammar/json_pattern.h): a recursive-descent
// reader of the regex over its code points that writes the GBNF as it goes; character sets
// are written as the JSON text of their characters (escapes for `"`, `\` and controls).
#include "engine/grammar/json_pattern.h"

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "engine/core/utf8.h"
#include "engine/grammar/grammar.h"

namespace ember::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

struct CodeSet {
    Ranges ranges;
    bool negated = false;
};

constexpr int kMaxCount = 1000;  // {m,n} bounds, as minItems/maxItems
constexpr int kMaxNesting = 32;  // groups inside groups
constexpr uint32_t kEnd = ~0u;   // peek() past the pattern
const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kLineEnds = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};  // what `.` does not match
// Characters a JSON string writes only escaped.
const Ranges kEscaped = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}};

[[noreturn]] void refuse(const std::string& what) { throw GrammarError("json schema: pattern: " + what, "pattern"); }

std::vector<uint32_t> decode(std::string_view text) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < text.size();) {
        const auto b = static_cast<uint8_t>(text[i]);
        const int n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
        if (n < 0 || i + static_cast<size_t>(n) >= text.size() + (n == 0)) refuse("not valid UTF-8");
        uint32_t cp = n == 0 ? b : b & (0x3Fu >> n);
        for (int k = 1; k <= n; ++k) {
            const auto c = static_cast<uint8_t>(text[i + static_cast<size_t>(k)]);
            if ((c & 0xC0) != 0x80) refuse("not valid UTF-8");
            cp = cp << 6 | (c & 0x3F);
        }
        out.push_back(cp);
        i += static_cast<size_t>(n) + 1;
    }
    return out;
}

// A code point as a GBNF class member.
std::string class_char(uint32_t cp) {
    char buf[16];
    if (cp <= 0xFF) std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
    else if (cp <= 0xFFFF) std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
    else std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(cp));
    return buf;
}

// The JSON text of one string character, as a GBNF literal.
std::string json_char(uint32_t cp) {
    std::string text;
    switch (cp) {
        case '"':
            text = "\\\"";
            break;
        case '\\':
            text = "\\\\";
            break;
        case '\b':
            text = "\\b";
            break;
        case '\f':
            text = "\\f";
            break;
        case '\n':
            text = "\\n";
            break;
        case '\r':
            text = "\\r";
            break;
        case '\t':
            text = "\\t";
            break;
        default:
            if (cp < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
                text = buf;
            } else {
                append_utf8(text, cp);
            }
    }
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// [lo, hi] as GBNF class members (appended: GCC 12 warns falsely on "-" + std::string).
void add_range(std::string& out, uint32_t lo, uint32_t hi) {
    out += class_char(lo);
    if (hi == lo) return;
    out += '-';
    out += class_char(hi);
}

// A set's characters as JSON text: the plain ones as one class, each escaped one alone.
std::string set_rule(const CodeSet& s) {
    std::string members;
    for (const auto& [lo, hi] : s.ranges) add_range(members, lo, hi);
    if (s.negated) return "[^" + members + "\\x00-\\x1F\\\"\\\\]";  // and never what needs escaping
    std::string plain;
    std::vector<std::string> alts;
    for (auto [lo, hi] : s.ranges) {
        for (const auto& [elo, ehi] : kEscaped) {  // split off what JSON escapes (kEscaped is sorted)
            if (ehi < lo || elo > hi) continue;
            for (uint32_t cp = std::max(lo, elo); cp <= std::min(hi, ehi); ++cp) alts.push_back(json_char(cp));
            if (lo < elo) add_range(plain, lo, elo - 1);
            lo = ehi + 1;
            if (lo > hi) break;
        }
        if (lo <= hi) add_range(plain, lo, hi);
    }
    if (!plain.empty()) alts.insert(alts.begin(), "[" + plain + "]");
    if (alts.empty()) refuse("a character class that matches nothing");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
}

class PatternReader {
public:
    PatternReader(std::string_view pattern, std::string_view any_char) : cps_(decode(pattern)), any_(any_char) {}

    std::string translate() {
        std::string body = alternation(true, 0);
        if (pos_ < cps_.size()) refuse("an unmatched ')'");
        return "\"\\\"\" " + body + " \"\\\"\"";
    }

private:
    uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : kEnd; }

    std::string alternation(bool top, int nesting) {
        if (nesting > kMaxNesting) refuse("groups nested deeper than " + std::to_string(kMaxNesting));
        std::vector<std::string> alts{sequence(top, nesting)};
        while (peek() == '|') {
            ++pos_;
            alts.push_back(sequence(top, nesting));
        }
        if (alts.size() == 1) return alts[0];
        std::string out = "(";
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
        return out + " )";
    }

    // One alternative; at the top level with its anchors (an unanchored side: any text).
    std::string sequence(bool top, int nesting) {
        bool start = false, end = false;
        if (peek() == '^') {
            if (!top) refuse("'^' inside a group (anchors only at the start or end of the pattern)");
            start = true;
            ++pos_;
        }
        std::string out;
        for (uint32_t c = peek(); c != kEnd && c != '|' && c != ')'; c = peek()) {
            if (c == '$') {
                ++pos_;
                if (!top || (peek() != kEnd && peek() != '|'))
                    refuse("'$' before the end of the pattern (anchors only at the start or end)");
                end = true;
                break;
            }
            if (c == '^') refuse("'^' after the start of the pattern (anchors only at the start or end)");
            if (!out.empty()) out += ' ';
            out += quantified(nesting);
        }
        if (out.empty()) out = "\"\"";
        if (top && !start) out = "( " + any_ + " )* " + out;
        if (top && !end) out += " ( " + any_ + " )*";
        return out;
    }

    std::string quantified(int nesting) {
        const std::string unit = atom(nesting);
        const uint32_t q = peek();
        std::string suffix;
        if (q == '*' || q == '+' || q == '?') {
            ++pos_;
            suffix = std::string(1, static_cast<char>(q));
        } else if (q == '{') {
            ++pos_;
            const int min = count();
            int max = min;
            if (peek() == ',') {
                ++pos_;
                max = peek() == '}' ? -1 : count();
            }
            if (peek() != '}') refuse("a '{' that is not a {m}, {m,} or {m,n} count");
            ++pos_;
            if (max >= 0 && max < min) refuse("{m,n} with n below m");
            suffix = '{' + std::to_string(min);
            if (max != min) suffix += ',';
            if (max > min) suffix += std::to_string(max);
            suffix += '}';
        } else {
            return unit;
        }
        if (peek() == '?') ++pos_;  // lazy: the same strings
        const uint32_t again = peek();
        if (again == '*' || again == '+' || again == '?' || again == '{') refuse("a quantifier after a quantifier");
        return "( " + unit + " )" + suffix;
    }

    int count() {
        int v = 0, digits = 0;
        for (; peek() >= '0' && peek() <= '9'; ++pos_, ++digits) {
            v = v * 10 + static_cast<int>(peek() - '0');
            if (v > kMaxCount) refuse("a count above " + std::to_string(kMaxCount));
        }
        if (digits == 0) refuse("a '{' that is not a {m}, {m,} or {m,n} count");
        return v;
    }

    std::string atom(int nesting) {
        const uint32_t c = peek();
        ++pos_;
        switch (c) {
            case '(':
                return group(nesting);
            case '[':
                return set_rule(char_class());
            case '.':
                return set_rule({kLineEnds, true});
            case '\\':
                if (const auto set = shorthand(false)) return set_rule(*set);
                return json_char(escaped(false));
            case '*':
            case '+':
            case '?':
            case '{':
                refuse(std::string("'") + static_cast<char>(c) + "' with nothing to repeat");
            case '}':
            case ']':
                refuse(std::string("an unescaped '") + static_cast<char>(c) + "'");
            default:
                return json_char(c);
        }
    }

    std::string group(int nesting) {
        if (peek() == '?') {
            if (peek(1) == ':') {
                pos_ += 2;
            } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {  // (?<name> ...)
                pos_ += 2;
                while (peek() != '>' && peek() != kEnd) ++pos_;
                if (peek() == kEnd) refuse("a group name without its '>'");
                ++pos_;
            } else {
                refuse("lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported");
            }
        }
        std::string inner = alternation(false, nesting + 1);
        if (peek() != ')') refuse("a '(' without its ')'");
        ++pos_;
        return "( " + inner + " )";
    }

    // \d \D \w \W \s \S (the backslash read): their set, or nothing for another escape.
    std::optional<CodeSet> shorthand(bool in_class) {
        const uint32_t c = peek();
        const Ranges* r = c == 'd' || c == 'D'   ? &kDigit
                          : c == 'w' || c == 'W' ? &kWord
                          : c == 's' || c == 'S' ? &kSpace
                                                 : nullptr;
        if (!r) return std::nullopt;
        ++pos_;
        const bool negated = c == 'D' || c == 'W' || c == 'S';
        if (negated && in_class) refuse("\\D, \\W or \\S inside a character class");
        return CodeSet{*r, negated};
    }

    // The character an escape stands for (the backslash read).
    uint32_t escaped(bool in_class) {
        const uint32_t c = peek();
        if (c == kEnd) refuse("a '\\' at the end");
        ++pos_;
        switch (c) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case 'f':
                return '\f';
            case 'v':
                return '\v';
            case '0':
                if (peek() >= '0' && peek() <= '9') refuse("octal escapes are not supported");
                return 0;
            case 'x':
                return hex(2);
            case 'u':
                if (peek() == '{') refuse("\\u{...} escapes are not supported (use \\uHHHH)");
                return hex(4);
            case 'b':
                if (in_class) return '\b';
                refuse("word boundaries (\\b, \\B) are not supported");
            default:
                break;
        }
        if (c >= '1' && c <= '9') refuse("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            refuse(std::string("the escape \\") + static_cast<char>(c) + " is not supported");
        return c;  // an escaped punctuation character stands for itself
    }

    uint32_t hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i, ++pos_) {
            const uint32_t h = peek();
            const int d = h >= '0' && h <= '9'   ? static_cast<int>(h - '0')
                          : h >= 'a' && h <= 'f' ? static_cast<int>(h - 'a' + 10)
                          : h >= 'A' && h <= 'F' ? static_cast<int>(h - 'A' + 10)
                                                 : -1;
            if (d < 0) refuse("a hex escape with fewer than " + std::to_string(digits) + " digits");
            v = v << 4 | static_cast<uint32_t>(d);
        }
        if (v >= 0xD800 && v <= 0xDFFF) refuse("a surrogate code point in an escape");
        return v;
    }

    // [...] (the '[' read).
    CodeSet char_class() {
        CodeSet s;
        if (peek() == '^') s.negated = true, ++pos_;
        if (peek() == ']') refuse("an empty character class");
        while (peek() != ']') {
            if (peek() == kEnd) refuse("a '[' without its ']'");
            const uint32_t lo = class_member(s);
            if (lo == kEnd) continue;  // a shorthand, added
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && peek(1) != kEnd) {
                ++pos_;
                hi = class_member(s);
                if (hi == kEnd) refuse("a range that ends in \\d, \\w or \\s");
                if (hi < lo) refuse("a character range with its end before its start");
            }
            s.ranges.push_back({lo, hi});
        }
        ++pos_;
        return s;
    }

    // One class member: its code point, or kEnd after adding a shorthand's ranges to `s`.
    uint32_t class_member(CodeSet& s) {
        const uint32_t c = peek();
        ++pos_;
        if (c != '\\') return c;
        if (const auto set = shorthand(true)) {
            s.ranges.insert(s.ranges.end(), set->ranges.begin(), set->ranges.end());
            return kEnd;
        }
        return escaped(true);
    }

    std::vector<uint32_t> cps_;
    size_t pos_ = 0;
    std::string any_;
};

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, std::string_view any_char) {
    return PatternReader(pattern, any_char).translate();
}

}  // namespace ember::grammar
