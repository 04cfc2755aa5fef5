// A strict RFC 8259 reader producing jinja::Value (see jinja_json.h).
#include "engine/template/jinja_json.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "engine/template/jinja_case.h"
#include "kernels/common/error.h"

namespace ember::jinja {

namespace {

class Reader {
public:
    Reader(std::string_view text, std::string_view what) : s_(text), what_(what) {}

    Value document() {
        Value v = value(0);
        skip_ws();
        if (pos_ != s_.size()) fail("unexpected text after the value");
        return v;
    }

private:
    std::string_view s_;
    std::string_view what_;
    size_t pos_ = 0;

    [[noreturn]] void fail(const std::string& why) const {
        throw Error(std::string(what_) + ": invalid JSON at byte " + std::to_string(pos_) + ": " + why);
    }
    void skip_ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }
    bool eat(char c) {
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }
    bool literal(std::string_view word) {
        if (s_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    Value value(int depth) {
        if (depth > kMaxValueNesting) fail("nested deeper than " + std::to_string(kMaxValueNesting) + " levels");
        skip_ws();
        if (pos_ >= s_.size()) fail("unexpected end of text");
        const char c = s_[pos_];
        if (c == '{') return object(depth);
        if (c == '[') return array(depth);
        if (c == '"') return Value(string());
        if (literal("true")) return Value(true);
        if (literal("false")) return Value(false);
        if (literal("null")) return Value::none();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail(std::string("unexpected character '") + c + "'");
    }

    Value object(int depth) {
        ++pos_;
        Dict d;
        if (eat('}')) return Value(std::move(d));
        do {
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
            std::string key = string();
            expect(':');
            d.set(std::move(key), value(depth + 1));  // a repeated key keeps its place, takes the last value
        } while (eat(','));
        expect('}');
        return Value(std::move(d));
    }

    Value array(int depth) {
        ++pos_;
        std::vector<Value> items;
        if (eat(']')) return Value(std::move(items));
        do items.push_back(value(depth + 1));
        while (eat(','));
        expect(']');
        return Value(std::move(items));
    }

    uint32_t hex4() {
        if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = s_[pos_++];
            v <<= 4;
            if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
            else fail("bad hex digit in \\u escape");
        }
        return v;
    }

    // \uD83D\uDE00 pairs join into one code point; a lone surrogate becomes U+FFFD (Python
    // keeps it, but it cannot be UTF-8).
    uint32_t unicode_escape() {
        const uint32_t hi = hex4();
        if (hi < 0xD800 || hi > 0xDFFF) return hi;
        if (hi <= 0xDBFF && s_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
            pos_ = save;
        }
        return 0xFFFD;
    }

    std::string string() {
        ++pos_;  // opening quote
        std::string out;
        while (true) {
            if (pos_ >= s_.size()) fail("unterminated string");
            const char c = s_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) fail("unterminated escape");
            switch (const char e = s_[pos_++]) {
                case '"':
                case '\\':
                case '/':
                    out += e;
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'u':
                    append_utf8(out, unicode_escape());
                    break;
                default:
                    fail(std::string("unknown escape '\\") + e + "'");
            }
        }
    }

    Value number() {
        const size_t start = pos_;
        bool integral = true;
        if (s_[pos_] == '-') ++pos_;
        auto digits = [&] {
            const size_t from = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
            if (pos_ == from) fail("expected a digit");
        };
        if (pos_ < s_.size() && s_[pos_] == '0') ++pos_;
        else digits();
        if (pos_ < s_.size() && s_[pos_] == '.') {
            ++pos_, integral = false;
            digits();
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            ++pos_, integral = false;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
            digits();
        }
        const std::string text(s_.substr(start, pos_ - start));
        errno = 0;
        if (integral) {
            const long long v = std::strtoll(text.c_str(), nullptr, 10);
            if (errno == ERANGE) fail("integer " + text + " does not fit in 64 bits");
            return Value(static_cast<int64_t>(v));
        }
        return Value(std::strtod(text.c_str(), nullptr));  // overflow gives inf, as Python's float()
    }
};

}  // namespace

Value parse_json(std::string_view text, std::string_view what) {
    try {
        return Reader(text, what).document();
    } catch (const EvalError& e) {  // a value past the weight limit
        throw Error(std::string(what) + ": " + e.msg);
    }
}

}  // namespace ember::jinja
