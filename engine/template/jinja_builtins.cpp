#include "engine/template/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <cerrno>
#include <limits>
#include <map>
#include <optional>

#include "engine/template/jinja_case.h"
#include "engine/template/jinja_interpreter.h"

namespace ember::jinja {

namespace {

// ------------------------------------------------------------------ argument binding

// Binds call arguments to named parameters the way Python does; missing ones read as
// Undefined.
class Params {
public:
    Params(std::string_view fname, CallArgs& a, std::initializer_list<std::string_view> names)
        : names_(names), vals_(names.size()), given_(names.size(), false) {
        if (a.pos.size() > names_.size())
            throw EvalError{std::string(fname) + "() takes at most " + std::to_string(names_.size()) + " argument(s)"};
        for (size_t i = 0; i < a.pos.size(); ++i) set(fname, i, a.pos[i]);
        for (auto& [k, v] : a.kw) {
            auto it = std::find(names_.begin(), names_.end(), k);
            if (it == names_.end())
                throw EvalError{std::string(fname) + "() got an unexpected keyword argument '" + k + "'"};
            set(fname, static_cast<size_t>(it - names_.begin()), v);
        }
    }
    const Value& operator[](size_t i) const { return vals_[i]; }
    // Given and not None: Python's "if x is not None".
    bool has(size_t i) const { return given_[i] && !vals_[i].is_none(); }
    bool flag(size_t i, bool dflt = false) const { return given_[i] ? vals_[i].truthy() : dflt; }
    int64_t integer(size_t i, int64_t dflt) const {
        if (!has(i)) return dflt;
        if (!vals_[i].is_int() && !vals_[i].is_bool())
            throw EvalError{"'" + std::string(names_[i]) + "' must be an integer"};
        return vals_[i].as_int();
    }

private:
    std::vector<std::string_view> names_;
    std::vector<Value> vals_;
    std::vector<bool> given_;

    void set(std::string_view fname, size_t i, const Value& v) {
        if (given_[i])
            throw EvalError{std::string(fname) + "() got multiple values for '" + std::string(names_[i]) + "'"};
        vals_[i] = v;
        given_[i] = true;
    }
};

void no_args(std::string_view fname, const CallArgs& a) {
    if (!a.pos.empty() || !a.kw.empty()) throw EvalError{std::string(fname) + "() takes no arguments"};
}

// ------------------------------------------------------------------ string helpers

// Python's str() of a value; Undefined is "" (jinja2's soft_str).
std::string str_of(Interpreter& in, const Value& v) { return in.text_of(v); }

const std::string& need_string(const Value& v, std::string_view what) {
    if (!v.is_string()) throw EvalError{std::string(what) + " must be a string, not " + v.type_name()};
    return v.str();
}

bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string upper(const std::string& s) { return utf8_upper(s); }
std::string lower(const std::string& s) { return utf8_lower(s); }

// Python's str.capitalize(): first character upper-cased, the rest lower-cased.
std::string capitalize(const std::string& s) {
    if (s.empty()) return s;
    size_t first = 0;
    next_code_point(s, first);
    return utf8_upper(std::string_view(s).substr(0, first)) + utf8_lower(std::string_view(s).substr(first));
}

// Python's str.title(): a letter is upper-cased when the character before it is not cased.
std::string py_title(const std::string& s) {
    std::string out;
    bool prev_cased = false;
    for (std::string_view ch : utf8_chars(s)) {
        out += prev_cased ? utf8_lower(ch) : utf8_upper(ch);
        prev_cased = is_cased_letter(utf8_decode(ch));
    }
    return out;
}

// jinja2's title filter: words split at whitespace and -({[< get a capital first letter.
std::string jinja_title(const std::string& s) {
    std::string out;
    bool word_start = true;
    for (std::string_view ch : utf8_chars(s)) {
        const bool sep =
            ch.size() == 1 && (py_space(ch[0]) || std::string_view("-({[<").find(ch[0]) != std::string_view::npos);
        out += sep ? std::string(ch) : word_start ? utf8_upper(ch) : utf8_lower(ch);
        word_start = sep;
    }
    return out;
}

// strip/lstrip/rstrip: whitespace, or any of the characters in `chars`.
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
    std::vector<std::string_view> cs = utf8_chars(s);
    std::vector<std::string_view> set;
    const bool ws = chars.is_none() || chars.is_undefined();
    if (!ws) set = utf8_chars(need_string(chars, "strip characters"));
    auto strip_it = [&](std::string_view c) {
        return ws ? (c.size() == 1 && py_space(c[0])) : std::find(set.begin(), set.end(), c) != set.end();
    };
    size_t b = 0, e = cs.size();
    if (left)
        while (b < e && strip_it(cs[b])) ++b;
    if (right)
        while (e > b && strip_it(cs[e - 1])) --e;
    std::string out;
    for (size_t i = b; i < e; ++i) out += cs[i];
    return out;
}

std::string replace_all(Interpreter& in, const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
    std::string out;
    int64_t done = 0;
    if (from.empty()) {  // Python inserts `to` around every character
        for (std::string_view c : utf8_chars(s)) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            out += c;
            in.check_size(out.size());
        }
        if (count < 0 || done < count) out += to;
        return out;
    }
    size_t pos = 0;
    for (size_t hit; (count < 0 || done < count) && (hit = s.find(from, pos)) != std::string::npos; ++done) {
        out.append(s, pos, hit - pos);
        out += to;
        pos = hit + from.size();
        in.check_size(out.size());
    }
    out.append(s, pos);
    in.check_size(out.size());
    in.charge(out.size());
    return out;
}

std::vector<Value> split_whitespace(const std::string& s, int64_t maxsplit) {
    std::vector<Value> out;
    size_t i = 0;
    const size_t n = s.size();
    for (;;) {
        while (i < n && py_space(s[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
            size_t e = n;
            while (e > i && py_space(s[e - 1])) --e;
            out.emplace_back(s.substr(i, e - i));
            break;
        }
        size_t j = i;
        while (j < n && !py_space(s[j])) ++j;
        out.emplace_back(s.substr(i, j - i));
        i = j;
    }
    return out;
}

std::vector<Value> split_on(const std::string& s, const std::string& sep, int64_t maxsplit) {
    if (sep.empty()) throw EvalError{"empty separator"};
    std::vector<Value> out;
    size_t pos = 0;
    for (size_t hit; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) &&
                     (hit = s.find(sep, pos)) != std::string::npos;) {
        out.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep.size();
    }
    out.emplace_back(s.substr(pos));
    return out;
}

std::vector<Value> rsplit_on(const std::string& s, const std::string& sep, int64_t maxsplit) {
    if (sep.empty()) throw EvalError{"empty separator"};
    std::vector<Value> out;
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        if (end < sep.size()) break;
        const size_t hit = s.rfind(sep, end - sep.size());
        if (hit == std::string::npos) break;
        out.emplace_back(s.substr(hit + sep.size(), end - hit - sep.size()));
        end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
}

std::vector<Value> splitlines(const std::string& s) {
    std::vector<Value> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c != '\n' && c != '\r' && c != '\v' && c != '\f' && !(c >= '\x1c' && c <= '\x1e')) continue;
        out.emplace_back(s.substr(start, i - start));
        if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
    }
    if (start < s.size()) out.emplace_back(s.substr(start));
    return out;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// Python int(str, base) with jinja2's fallback through float().
std::optional<int64_t> parse_int(const std::string& text, int base) {
    std::string s = strip(text, Value::none(), true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (s.empty()) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, base);
    if (errno == 0 && end && *end == '\0') return static_cast<int64_t>(v);
    const double d = std::strtod(s.c_str(), &end);
    if (end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
    return std::nullopt;
}

// ------------------------------------------------------------------ collections

// Python's iter(): list items, dict keys, string characters; Undefined is empty.
std::vector<Value> iterate(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return {};
        case Value::Kind::List:
            return v.list();
        case Value::Kind::Dict: {
            std::vector<Value> keys;
            for (const auto& [k, x] : v.dict().items) keys.emplace_back(k);
            return keys;
        }
        case Value::Kind::String: {
            std::vector<Value> chars;
            for (std::string_view c : utf8_chars(v.str())) chars.emplace_back(std::string(c));
            return chars;
        }
        default:
            throw EvalError{"'" + v.type_name() + "' object is not iterable"};
    }
}

// jinja2's attribute getter: "a.b.0" walks items/attributes.
Value get_path(Interpreter& in, const Value& obj, const std::string& path) {
    Value cur = obj;
    size_t start = 0;
    for (;;) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
        });
        cur = digits && part.size() < 18 ? in.get_item(cur, Value(static_cast<int64_t>(std::stoll(part))))
                                         : in.get_item(cur, Value(part));
        if (dot == std::string::npos) return cur;
        start = dot + 1;
    }
}

Value sort_key(Interpreter& in, const Value& v, const Value& attribute, bool case_sensitive) {
    Value k = attribute.is_string() ? get_path(in, v, attribute.str()) : v;
    if (!case_sensitive && k.is_string()) return Value(lower(k.str()));
    return k;
}

Dict as_mapping(const Value& v, std::string_view what) {
    if (v.is_dict()) return v.dict();
    if (v.is_namespace()) return *v.ns();
    throw EvalError{std::string(what) + " needs a mapping, got " + v.type_name()};
}

std::vector<Value> pairs_of(const Dict& d) {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) out.push_back(Value::tuple({Value(k), v}));
    return out;
}

int64_t length_of(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return 0;
        case Value::Kind::String:
            return static_cast<int64_t>(utf8_length(v.str()));
        case Value::Kind::List:
            return static_cast<int64_t>(v.list().size());
        case Value::Kind::Dict:
            return static_cast<int64_t>(v.dict().items.size());
        default:
            throw EvalError{"object of type '" + v.type_name() + "' has no len()"};
    }
}

// Runs the test named by args[first] (with the rest as its arguments) on v.
bool run_test(Interpreter& in, const Value& v, const CallArgs& a, size_t first) {
    if (a.pos.size() <= first) return v.truthy();
    const std::string& name = need_string(a.pos[first], "test name");
    TestFn fn = find_test(name);
    if (!fn) throw EvalError{"no test named '" + name + "'"};
    CallArgs rest{{a.pos.begin() + static_cast<long>(first) + 1, a.pos.end()}, {}};
    for (const Value& x : rest.pos) in.charge(weight_of(x));  // e.g. `in` walks its argument
    return fn(in, v, rest);
}

// ------------------------------------------------------------------ filters

Value f_trim(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("trim", a, {"chars"});
    return Value(strip(str_of(in, v), p[0], true, true));
}
Value f_upper(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("upper", a);
    return Value(upper(str_of(in, v)));
}
Value f_lower(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("lower", a);
    return Value(lower(str_of(in, v)));
}
Value f_title(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("title", a);
    return Value(jinja_title(str_of(in, v)));
}
Value f_capitalize(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("capitalize", a);
    return Value(capitalize(str_of(in, v)));
}
Value f_string(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("string", a);
    return Value(str_of(in, v));
}
Value f_safe(Interpreter&, const Value& v, CallArgs& a) {
    no_args("safe", a);
    return v;
}
Value f_escape(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("escape", a);
    return Value(html_escape(str_of(in, v)));
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
    no_args("length", a);
    return Value(length_of(v));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
    Params p("default", a, {"default_value", "boolean"});
    const bool use_default = p.flag(1) ? !v.truthy() : v.is_undefined();
    if (!use_default) return v;
    return p[0].is_undefined() ? Value(std::string()) : p[0];
}

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions o;
    o.ensure_ascii = p.flag(0);
    o.sort_keys = p.flag(3);
    if (p.has(1)) {
        o.indent = static_cast<int>(std::clamp<int64_t>(p.integer(1, 0), 0, 64));
        o.item_sep = ",";
    }
    if (p.has(2)) {
        if (!p[2].is_list() || p[2].list().size() != 2) throw EvalError{"separators must be a pair of strings"};
        o.item_sep = need_string(p[2].list()[0], "separator");
        o.key_sep = need_string(p[2].list()[1], "separator");
    }
    in.check_size(weight_of(v));  // JSON is at least as long as the value's weight
    std::string s = to_json(v, o);
    in.check_size(s.size());
    in.charge(s.size());
    return Value(std::move(s));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("join", a, {"d", "attribute"});
    const std::string sep = p.has(0) ? str_of(in, p[0]) : std::string();
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += str_of(in, p.has(1) ? get_path(in, item, str_of(in, p[1])) : item);
        in.check_size(out.size());
    }
    in.charge(out.size());
    return Value(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs& a) {
    no_args("first", a);
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& a) {
    no_args("last", a);
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
}

Value f_list(Interpreter&, const Value& v, CallArgs& a) {
    no_args("list", a);
    return Value(iterate(v));
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
    no_args("items", a);
    if (v.is_undefined()) return Value(std::vector<Value>{});
    return Value(pairs_of(as_mapping(v, "items")));
}

Value f_dictsort(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("dictsort", a, {"case_sensitive", "by", "reverse"});
    std::vector<Value> pairs = pairs_of(as_mapping(v, "dictsort"));
    const size_t idx = p.has(1) && str_of(in, p[1]) == "value" ? 1 : 0;
    const bool cs = p.flag(0);
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
        Value kx = x.list()[idx], ky = y.list()[idx];
        if (!cs && kx.is_string()) kx = Value(lower(kx.str()));
        if (!cs && ky.is_string()) ky = Value(lower(ky.str()));
        return less_than(kx, ky);
    });
    if (p.flag(2)) std::reverse(pairs.begin(), pairs.end());
    return Value(std::move(pairs));
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
    Params p("int", a, {"default", "base"});
    const Value dflt = p.has(0) ? p[0] : Value(0);
    v.require_defined();
    if (v.is_bool() || v.is_int()) return Value(v.as_int());
    if (v.is_float()) {
        const double d = v.as_float();
        return std::isfinite(d) && std::fabs(d) < 9.2e18 ? Value(static_cast<int64_t>(d)) : dflt;
    }
    if (v.is_string()) {
        auto r = parse_int(v.str(), static_cast<int>(std::clamp<int64_t>(p.integer(1, 10), 0, 36)));
        return r ? Value(*r) : dflt;
    }
    return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
    Params p("float", a, {"default"});
    const Value dflt = p.has(0) ? p[0] : Value(0.0);
    v.require_defined();
    if (v.is_number()) return Value(v.as_float());
    if (v.is_string()) {
        const std::string s = strip(v.str(), Value::none(), true, true);
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end && *end == '\0') return Value(d);
    }
    return dflt;
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("replace", a, {"old", "new", "count"});
    return Value(replace_all(in, str_of(in, v), str_of(in, p[0]), str_of(in, p[1]), p.integer(2, -1)));
}

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
    no_args("abs", a);
    v.require_defined();
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (!v.is_number()) throw EvalError{"bad operand type for abs(): '" + v.type_name() + "'"};
    if (v.as_int() == std::numeric_limits<int64_t>::min()) throw EvalError{"integer overflow"};
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

Value f_round(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("round", a, {"precision", "method"});
    v.require_defined();
    if (!v.is_number()) throw EvalError{"round needs a number, not " + v.type_name()};
    const int64_t prec = std::clamp<int64_t>(p.integer(0, 0), -20, 20);
    const std::string method = p.has(1) ? str_of(in, p[1]) : "common";
    if (method == "common") {
        if (!v.is_float()) return Value(v.as_int());  // Python: round(int, n) stays an int
        if (prec <= 0) {
            const double scale = std::pow(10.0, double(-prec));
            return Value(std::nearbyint(v.as_float() / scale) * scale);  // half to even, as Python
        }
        char buf[512];
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), v.as_float());  // exact decimal rounding
        return Value(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, double(prec));
    if (method == "ceil") return Value(std::ceil(v.as_float() * scale) / scale);
    if (method == "floor") return Value(std::floor(v.as_float() * scale) / scale);
    throw EvalError{"round method must be 'common', 'ceil' or 'floor'"};
}

Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep_matching) {
    if (!a.kw.empty()) throw EvalError{"select/reject filters take positional arguments only"};
    if (by_attr && a.pos.empty()) throw EvalError{"selectattr/rejectattr need an attribute name"};
    std::vector<Value> out;
    for (const Value& item : iterate(v)) {
        const Value subject = by_attr ? get_path(in, item, str_of(in, a.pos[0])) : item;
        if (run_test(in, subject, a, by_attr ? 1 : 0) == keep_matching) out.push_back(item);
    }
    return Value(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
    std::vector<Value> out;
    if (a.pos.empty()) {  // map(attribute='x', default=…)
        Params p("map", a, {"attribute", "default"});
        if (!p.has(0)) throw EvalError{"map() needs a filter name or attribute="};
        for (const Value& item : iterate(v)) {
            Value x = get_path(in, item, str_of(in, p[0]));
            out.push_back(x.is_undefined() && p.has(1) ? p[1] : x);
        }
        return Value(std::move(out));
    }
    const std::string& name = need_string(a.pos[0], "filter name");
    FilterFn fn = find_filter(name);
    if (!fn) throw EvalError{"no filter named '" + name + "'"};
    for (const Value& item : iterate(v)) {
        CallArgs rest{{a.pos.begin() + 1, a.pos.end()}, a.kw};
        out.push_back(fn(in, item, rest));
    }
    return Value(std::move(out));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("unique", a, {"case_sensitive", "attribute"});
    std::vector<Value> out, seen;
    for (const Value& item : iterate(v)) {
        Value k = sort_key(in, item, p[1], p.flag(0));
        in.charge(seen.size());  // quadratic: keep it on the budget
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
        seen.push_back(std::move(k));
        out.push_back(item);
    }
    return Value(std::move(out));
}

Value f_reverse(Interpreter&, const Value& v, CallArgs& a) {
    no_args("reverse", a);
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    if (!v.is_string()) return Value(std::move(items));
    std::string s;
    for (const Value& c : items) s += c.str();
    return Value(std::move(s));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("sort", a, {"reverse", "case_sensitive", "attribute"});
    std::vector<Value> items = iterate(v);
    const bool cs = p.flag(1);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return less_than(sort_key(in, x, p[2], cs), sort_key(in, y, p[2], cs));
    });
    if (p.flag(0)) std::reverse(items.begin(), items.end());
    return Value(std::move(items));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
    Params p(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("no aggregated item, sequence was empty");
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
        const Value ki = sort_key(in, items[i], p[1], p.flag(0)), kb = sort_key(in, items[best], p[1], p.flag(0));
        if (want_max ? less_than(kb, ki) : less_than(ki, kb)) best = i;
    }
    return items[best];
}
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("sum", a, {"attribute", "start"});
    Value total = p.has(1) ? p[1] : Value(0);
    for (const Value& item : iterate(v)) {
        const Value x = p.has(0) ? get_path(in, item, str_of(in, p[0])) : item;
        if (!x.is_number() || !total.is_number()) throw EvalError{"sum() only adds numbers"};
        if (x.is_float() || total.is_float()) total = Value(total.as_float() + x.as_float());
        else {
            int64_t r = 0;
            if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) throw EvalError{"integer overflow"};
            total = Value(r);
        }
    }
    return total;
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("indent", a, {"width", "first", "blank"});
    const std::string pad = p[0].is_string()
                                ? p[0].str()
                                : std::string(static_cast<size_t>(std::clamp<int64_t>(p.integer(0, 4), 0, 256)), ' ');
    std::vector<Value> lines = splitlines(str_of(in, v) + "\n");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& line = lines[i].str();
        if (i > 0) out += "\n";
        if ((i > 0 || p.flag(1)) && (p.flag(2) || !line.empty())) out += pad;
        out += line;
        in.check_size(out.size());
    }
    return Value(std::move(out));
}

Value f_wordcount(Interpreter& in, const Value& v, CallArgs& a) {
    no_args("wordcount", a);
    return Value(static_cast<int64_t>(split_whitespace(str_of(in, v), -1).size()));
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
    Params p("attr", a, {"name"});
    return in.get_attr_only(v, need_string(p[0], "attribute name"));
}

const std::map<std::string_view, FilterFn>& filters() {
    static const std::map<std::string_view, FilterFn> table = {
        {"abs", f_abs},
        {"attr", f_attr},
        {"capitalize", f_capitalize},
        {"count", f_length},
        {"d", f_default},
        {"default", f_default},
        {"dictsort", f_dictsort},
        {"e", f_escape},
        {"escape", f_escape},
        {"first", f_first},
        {"float", f_float},
        {"forceescape", f_escape},
        {"indent", f_indent},
        {"int", f_int},
        {"items", f_items},
        {"join", f_join},
        {"last", f_last},
        {"length", f_length},
        {"list", f_list},
        {"lower", f_lower},
        {"map", f_map},
        {"max", f_max},
        {"min", f_min},
        {"reject", f_reject},
        {"rejectattr", f_rejectattr},
        {"replace", f_replace},
        {"reverse", f_reverse},
        {"round", f_round},
        {"safe", f_safe},
        {"select", f_select},
        {"selectattr", f_selectattr},
        {"sort", f_sort},
        {"string", f_string},
        {"sum", f_sum},
        {"title", f_title},
        {"tojson", f_tojson},
        {"trim", f_trim},
        {"unique", f_unique},
        {"upper", f_upper},
        {"wordcount", f_wordcount},
    };
    return table;
}

// ------------------------------------------------------------------ tests

const Value& test_arg(const CallArgs& a, std::string_view test) {
    if (a.pos.size() != 1 || !a.kw.empty()) throw EvalError{"test '" + std::string(test) + "' takes one argument"};
    return a.pos[0];
}

// Python's islower()/isupper(): at least one cased character, and all of them in that case.
bool is_cased(const std::string& s, bool want_lower) {
    bool any = false;
    for (std::string_view ch : utf8_chars(s)) {
        const uint32_t cp = utf8_decode(ch);
        if (!is_cased_letter(cp)) continue;
        any = true;
        if (want_lower ? !is_lower_letter(cp) : !is_upper_letter(cp)) return false;
    }
    return any;
}

// odd/even/divisibleby: Python's % on ints, or on floats (2.5 is not odd).
double number_operand(const Value& v, std::string_view test) {
    v.require_defined();
    if (!v.is_number()) throw EvalError{"test '" + std::string(test) + "' needs a number, not " + v.type_name()};
    return v.as_float();
}

bool py_mod_is(const Value& v, const Value& d, double want, std::string_view test) {
    const double x = number_operand(v, test), y = number_operand(d, test);
    if (y == 0) throw EvalError{"integer modulo by zero"};
    if (!v.is_float() && !d.is_float()) {  // exact for 64-bit ints
        const int64_t a = v.as_int(), b = d.as_int();
        const int64_t m = b == -1 ? 0 : a % b;
        return static_cast<double>((m != 0 && ((m < 0) != (b < 0))) ? m + b : m) == want;
    }
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return m == want;
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_function(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
// Undefined is iterable (empty) and a sequence (length 0) in jinja2.
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
    return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
}
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return py_mod_is(v, Value(2), 1, "odd"); }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return py_mod_is(v, Value(2), 0, "even"); }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
    return py_mod_is(v, test_arg(a, "divisibleby"), 0, "divisibleby");
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, test_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, test_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return less_than(v, test_arg(a, "lt")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return less_than(test_arg(a, "gt"), v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
    const Value& x = test_arg(a, "le");
    return less_than(v, x) || equals(v, x);
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
    const Value& x = test_arg(a, "ge");
    return less_than(x, v) || equals(v, x);
}
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(test_arg(a, "in"), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
    const Value& x = test_arg(a, "sameas");
    return v.kind() == x.kind() && equals(v, x);
}
bool t_lower(Interpreter& in, const Value& v, CallArgs&) { return is_cased(str_of(in, v), true); }
bool t_upper(Interpreter& in, const Value& v, CallArgs&) { return is_cased(str_of(in, v), false); }

const std::map<std::string_view, TestFn>& tests() {
    static const std::map<std::string_view, TestFn> table = {
        {"!=", t_ne},
        {"<", t_lt},
        {"<=", t_le},
        {"==", t_eq},
        {">", t_gt},
        {">=", t_ge},
        {"boolean", t_boolean},
        {"callable", t_callable},
        {"defined", t_defined},
        {"divisibleby", t_divisibleby},
        {"eq", t_eq},
        {"equalto", t_eq},
        {"escaped", t_escaped},
        {"even", t_even},
        {"false", t_false},
        {"float", t_float},
        {"ge", t_ge},
        {"greaterthan", t_gt},
        {"gt", t_gt},
        {"in", t_in},
        {"integer", t_integer},
        {"iterable", t_iterable},
        {"le", t_le},
        {"lessthan", t_lt},
        {"lower", t_lower},
        {"lt", t_lt},
        {"mapping", t_mapping},
        {"ne", t_ne},
        {"none", t_none},
        {"number", t_number},
        {"odd", t_odd},
        {"sameas", t_sameas},
        {"sequence", t_iterable},
        {"string", t_string},
        {"true", t_true},
        {"undefined", t_undefined},
        {"upper", t_upper},
    };
    return table;
}

// ------------------------------------------------------------------ methods

using MethodFn = Value (*)(Interpreter&, const Value& self, CallArgs& args);

Value m_strip(Interpreter&, const Value& s, CallArgs& a) {
    Params p("strip", a, {"chars"});
    return Value(strip(s.str(), p[0], true, true));
}
Value m_lstrip(Interpreter&, const Value& s, CallArgs& a) {
    Params p("lstrip", a, {"chars"});
    return Value(strip(s.str(), p[0], true, false));
}
Value m_rstrip(Interpreter&, const Value& s, CallArgs& a) {
    Params p("rstrip", a, {"chars"});
    return Value(strip(s.str(), p[0], false, true));
}
Value m_upper(Interpreter&, const Value& s, CallArgs& a) {
    no_args("upper", a);
    return Value(upper(s.str()));
}
Value m_lower(Interpreter&, const Value& s, CallArgs& a) {
    no_args("lower", a);
    return Value(lower(s.str()));
}
Value m_title(Interpreter&, const Value& s, CallArgs& a) {
    no_args("title", a);
    return Value(py_title(s.str()));
}
Value m_capitalize(Interpreter&, const Value& s, CallArgs& a) {
    no_args("capitalize", a);
    return Value(capitalize(s.str()));
}
Value m_splitlines(Interpreter&, const Value& s, CallArgs& a) {
    no_args("splitlines", a);
    return Value(splitlines(s.str()));
}

Value m_split(Interpreter& in, const Value& s, CallArgs& a) {
    Params p("split", a, {"sep", "maxsplit"});
    in.charge(s.str().size());
    const int64_t maxsplit = p.integer(1, -1);
    return Value(p.has(0) ? split_on(s.str(), need_string(p[0], "separator"), maxsplit)
                          : split_whitespace(s.str(), maxsplit));
}

Value m_rsplit(Interpreter& in, const Value& s, CallArgs& a) {
    Params p("rsplit", a, {"sep", "maxsplit"});
    in.charge(s.str().size());
    const int64_t maxsplit = p.integer(1, -1);
    if (!p.has(0)) {
        if (maxsplit >= 0) throw EvalError{"rsplit() without a separator and with maxsplit is not supported"};
        return Value(split_whitespace(s.str(), -1));
    }
    return Value(rsplit_on(s.str(), need_string(p[0], "separator"), maxsplit));
}

// startswith/endswith: a string or a tuple of strings, optionally within [start:end].
bool affix_match(const Value& s, CallArgs& a, bool prefix) {
    Params p(prefix ? "startswith" : "endswith", a, {"affix", "start", "end"});
    std::string text = s.str();
    if (p.has(1) || p.has(2)) {
        const std::vector<std::string_view> cs = utf8_chars(text);
        const int64_t n = static_cast<int64_t>(cs.size());
        auto from_end = [n](int64_t x) { return x < 0 ? std::max<int64_t>(x + n, 0) : x; };
        const int64_t b = from_end(p.integer(1, 0)), e = std::min(from_end(p.integer(2, n)), n);
        if (b > n || e < b) return false;  // Python: an empty range past the end matches nothing
        // cs views the old text, so the slice is built in a new string.
        std::string slice;
        for (int64_t i = b; i < e; ++i) slice += cs[static_cast<size_t>(i)];
        text = std::move(slice);
    }
    std::vector<Value> options = p[0].is_list() ? p[0].list() : std::vector<Value>{p[0]};
    for (const Value& o : options) {
        const std::string& x = need_string(o, prefix ? "startswith argument" : "endswith argument");
        const bool hit = x.size() <= text.size() && (prefix ? text.compare(0, x.size(), x) == 0
                                                            : text.compare(text.size() - x.size(), x.size(), x) == 0);
        if (hit) return true;
    }
    return false;
}
Value m_startswith(Interpreter&, const Value& s, CallArgs& a) { return Value(affix_match(s, a, true)); }
Value m_endswith(Interpreter&, const Value& s, CallArgs& a) { return Value(affix_match(s, a, false)); }

Value m_replace(Interpreter& in, const Value& s, CallArgs& a) {
    Params p("replace", a, {"old", "new", "count"});
    return Value(replace_all(in, s.str(), need_string(p[0], "old"), need_string(p[1], "new"), p.integer(2, -1)));
}

// find/rfind/count report code-point positions, like Python.
Value m_find(Interpreter&, const Value& s, CallArgs& a) {
    Params p("find", a, {"sub"});
    const size_t hit = s.str().find(need_string(p[0], "substring"));
    return Value(hit == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.str().substr(0, hit))));
}
Value m_rfind(Interpreter&, const Value& s, CallArgs& a) {
    Params p("rfind", a, {"sub"});
    const size_t hit = s.str().rfind(need_string(p[0], "substring"));
    return Value(hit == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.str().substr(0, hit))));
}
Value m_count(Interpreter&, const Value& s, CallArgs& a) {
    Params p("count", a, {"sub"});
    const std::string& sub = need_string(p[0], "substring");
    if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s.str()) + 1));
    int64_t n = 0;
    for (size_t pos = 0; (pos = s.str().find(sub, pos)) != std::string::npos; pos += sub.size()) ++n;
    return Value(n);
}

Value m_join(Interpreter& in, const Value& s, CallArgs& a) {
    Params p("join", a, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& item : iterate(p[0])) {
        if (!first) out += s.str();
        first = false;
        out += need_string(item, "join item");
        in.check_size(out.size());
    }
    return Value(std::move(out));
}

template <int (*Pred)(int)>
Value char_class(Interpreter&, const Value& s, CallArgs& a) {
    no_args("is…", a);
    const std::string& x = s.str();
    return Value(!x.empty() &&
                 std::all_of(x.begin(), x.end(), [](char c) { return Pred(static_cast<unsigned char>(c)) != 0; }));
}
int is_py_space(int c) { return py_space(static_cast<char>(c)); }

Value m_islower(Interpreter&, const Value& s, CallArgs& a) {
    no_args("islower", a);
    return Value(is_cased(s.str(), true));
}
Value m_isupper(Interpreter&, const Value& s, CallArgs& a) {
    no_args("isupper", a);
    return Value(is_cased(s.str(), false));
}

Value m_removeprefix(Interpreter&, const Value& s, CallArgs& a) {
    Params p("removeprefix", a, {"prefix"});
    const std::string& x = need_string(p[0], "prefix");
    return s.str().compare(0, x.size(), x) == 0 ? Value(s.str().substr(x.size())) : s;
}
Value m_removesuffix(Interpreter&, const Value& s, CallArgs& a) {
    Params p("removesuffix", a, {"suffix"});
    const std::string& x = need_string(p[0], "suffix");
    const std::string& t = s.str();
    return !x.empty() && x.size() <= t.size() && t.compare(t.size() - x.size(), x.size(), x) == 0
               ? Value(t.substr(0, t.size() - x.size()))
               : s;
}

Value m_items(Interpreter&, const Value& d, CallArgs& a) {
    no_args("items", a);
    return Value(pairs_of(d.dict()));
}
Value m_keys(Interpreter&, const Value& d, CallArgs& a) {
    no_args("keys", a);
    return Value(iterate(d));
}
Value m_values(Interpreter&, const Value& d, CallArgs& a) {
    no_args("values", a);
    std::vector<Value> out;
    for (const auto& [k, v] : d.dict().items) out.push_back(v);
    return Value(std::move(out));
}
Value m_get(Interpreter&, const Value& d, CallArgs& a) {
    Params p("get", a, {"key", "default"});
    if (p[0].is_string())
        if (const Value* v = d.dict().find(p[0].str())) return *v;
    return p[1].is_undefined() ? Value::none() : p[1];
}

// Read-only list methods (the sandbox forbids append/pop/…).
Value m_list_count(Interpreter&, const Value& l, CallArgs& a) {
    Params p("count", a, {"value"});
    return Value(static_cast<int64_t>(
        std::count_if(l.list().begin(), l.list().end(), [&](const Value& x) { return equals(x, p[0]); })));
}
Value m_list_index(Interpreter&, const Value& l, CallArgs& a) {
    Params p("index", a, {"value"});
    const auto& items = l.list();
    auto it = std::find_if(items.begin(), items.end(), [&](const Value& x) { return equals(x, p[0]); });
    if (it == items.end()) throw EvalError{repr(p[0]) + " is not in list"};
    return Value(static_cast<int64_t>(it - items.begin()));
}

const std::map<std::string_view, MethodFn>& list_methods() {
    static const std::map<std::string_view, MethodFn> table = {{"count", m_list_count}, {"index", m_list_index}};
    return table;
}

const std::map<std::string_view, MethodFn>& string_methods() {
    static const std::map<std::string_view, MethodFn> table = {
        {"capitalize", m_capitalize},
        {"count", m_count},
        {"endswith", m_endswith},
        {"find", m_find},
        {"isalnum", char_class<std::isalnum>},
        {"isalpha", char_class<std::isalpha>},
        {"isdigit", char_class<std::isdigit>},
        {"islower", m_islower},
        {"isspace", char_class<is_py_space>},
        {"isupper", m_isupper},
        {"join", m_join},
        {"lower", m_lower},
        {"lstrip", m_lstrip},
        {"removeprefix", m_removeprefix},
        {"removesuffix", m_removesuffix},
        {"replace", m_replace},
        {"rfind", m_rfind},
        {"rsplit", m_rsplit},
        {"rstrip", m_rstrip},
        {"split", m_split},
        {"splitlines", m_splitlines},
        {"startswith", m_startswith},
        {"strip", m_strip},
        {"title", m_title},
        {"upper", m_upper},
    };
    return table;
}

const std::map<std::string_view, MethodFn>& dict_methods() {
    static const std::map<std::string_view, MethodFn> table = {
        {"get", m_get},
        {"items", m_items},
        {"keys", m_keys},
        {"values", m_values},
    };
    return table;
}

// ------------------------------------------------------------------ globals

Value g_range(Interpreter& in, CallArgs& a) {
    if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) throw EvalError{"range() takes 1 to 3 integer arguments"};
    for (const Value& v : a.pos)
        if (!v.is_int() && !v.is_bool()) throw EvalError{"range() arguments must be integers"};
    const int64_t start = a.pos.size() > 1 ? a.pos[0].as_int() : 0;
    const int64_t stop = a.pos.size() > 1 ? a.pos[1].as_int() : a.pos[0].as_int();
    const int64_t step = a.pos.size() > 2 ? a.pos[2].as_int() : 1;
    if (step == 0) throw EvalError{"range() arg 3 must not be zero"};
    const double count = std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)));
    in.check_size(static_cast<size_t>(std::min(count, 1e18)));
    in.charge(static_cast<uint64_t>(count));
    std::vector<Value> out;
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) out.emplace_back(start + i * step);
    return Value(std::move(out));
}

Value g_namespace(Interpreter& in, CallArgs& a) {
    NamespacePtr ns = in.new_namespace();
    if (a.pos.size() > 1) throw EvalError{"namespace() takes at most one positional argument"};
    if (!a.pos.empty()) *ns = as_mapping(a.pos[0], "namespace");
    for (auto& [k, v] : a.kw) ns->set(k, v);
    const Value result(ns);
    shape_of(result);  // rejects a namespace nested or sized beyond the limits
    return result;
}

Value g_dict(Interpreter&, CallArgs& a) {
    if (a.pos.size() > 1) throw EvalError{"dict() takes at most one positional argument"};
    Dict d = a.pos.empty() ? Dict{} : as_mapping(a.pos[0], "dict");
    for (auto& [k, v] : a.kw) d.set(k, v);
    return Value(std::move(d));
}

Value g_raise_exception(Interpreter& in, CallArgs& a) {
    throw EvalError{a.pos.empty() ? std::string("raise_exception() called") : str_of(in, a.pos[0]), true};
}

Value g_strftime_now(Interpreter& in, CallArgs& a) {
    Params p("strftime_now", a, {"format"});
    const std::string& fmt = need_string(p[0], "format");
    if (fmt.size() > 4096) throw EvalError{"strftime_now() format is too long"};
    const std::time_t t = in.now();
    std::tm tm{};
    localtime_r(&t, &tm);
    // strftime() reports 0 both for "too small" and for an empty result: grow a few times.
    for (size_t cap = 64 + fmt.size() * 16; cap < (size_t{8} << 20); cap *= 8) {
        std::string buf(cap, '\0');
        const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
        if (n > 0 || fmt.empty()) {
            buf.resize(n);
            return Value(std::move(buf));
        }
    }
    return Value(std::string());
}

Value make_function(std::string name, Value (*fn)(Interpreter&, CallArgs&)) {
    return Value(std::make_shared<const Function>(Function{std::move(name), fn}));
}

}  // namespace

FilterFn find_filter(std::string_view name) {
    auto it = filters().find(name);
    return it == filters().end() ? nullptr : it->second;
}

TestFn find_test(std::string_view name) {
    auto it = tests().find(name);
    return it == tests().end() ? nullptr : it->second;
}

Value find_method(const Value& obj, const std::string& name) {
    const auto* table = obj.is_string() ? &string_methods()
                        : obj.is_dict() ? &dict_methods()
                        : obj.is_list() ? &list_methods()
                                        : nullptr;
    if (!table) return Value::undefined();
    auto it = table->find(name);
    if (it == table->end()) return Value::undefined();
    MethodFn fn = it->second;
    return Value(std::make_shared<const Function>(Function{name, [obj, fn](Interpreter& in, CallArgs& a) {
                                                               uint64_t w = weight_of(
                                                                   obj);  // methods walk their object and arguments
                                                               for (const Value& v : a.pos) w += weight_of(v);
                                                               in.charge(w);
                                                               return fn(in, obj, a);
                                                           }}));
}

void add_globals(Dict& globals) {
    globals.set("range", make_function("range", g_range));
    globals.set("namespace", make_function("namespace", g_namespace));
    globals.set("dict", make_function("dict", g_dict));
    globals.set("raise_exception", make_function("raise_exception", g_raise_exception));
    globals.set("strftime_now", make_function("strftime_now", g_strftime_now));
}

}  // namespace ember::jinja
