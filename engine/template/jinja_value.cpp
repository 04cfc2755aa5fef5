#include "engine/template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace ember::jinja {

namespace {

// Printing and comparing nest through lists/dicts; a namespace can contain itself, so
// bound the depth instead of overflowing the stack.
void check_depth(int depth) {
    if (depth > kMaxValueNesting) throw EvalError{"value nested too deeply (a namespace that contains itself?)"};
}

// Adds a child's shape to its container's; `level` counts namespaces being walked.
void add_child(Shape& parent, const Shape& child) {
    parent.depth = std::max(parent.depth, child.depth + 1);
    parent.weight += child.weight;
    check_depth(parent.depth);
    if (parent.weight > kMaxValueWeight)
        throw EvalError{"value too large (over " + std::to_string(kMaxValueWeight) +
                        " elements and bytes when expanded)"};
}

Shape namespace_shape(const Dict& d, int level) {
    check_depth(level);
    Shape s;
    for (const auto& [k, v] : d.items)
        add_child(s, v.is_namespace() ? namespace_shape(*v.ns(), level + 1) : shape_of(v));
    check_depth(level + s.depth);
    return s;
}

Shape items_shape(const std::vector<Value>& items) {
    Shape s;
    s.weight += items.size();
    for (const Value& v : items) add_child(s, shape_of(v));
    return s;
}

bool is_numeric_pair(const Value& a, const Value& b) { return a.is_number() && b.is_number(); }

bool equals_at(const Value& a, const Value& b, int depth);

bool lists_equal(const std::vector<Value>& x, const std::vector<Value>& y, int depth) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
        if (!equals_at(x[i], y[i], depth + 1)) return false;
    return true;
}

bool dicts_equal(const Dict& x, const Dict& y, int depth) {
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equals_at(v, *other, depth + 1)) return false;
    }
    return true;
}

bool equals_at(const Value& a, const Value& b, int depth) {
    check_depth(depth);
    if (is_numeric_pair(a, b)) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None:
            return true;
        case Value::Kind::String:
            return a.str() == b.str();
        case Value::Kind::List:
            return a.is_tuple() == b.is_tuple() && lists_equal(a.list(), b.list(), depth);
        case Value::Kind::Dict:
            return dicts_equal(a.dict(), b.dict(), depth);
        case Value::Kind::Namespace:
            return a.ns() == b.ns();
        case Value::Kind::Function:
            return &a.fn() == &b.fn();
        default:
            return false;  // numbers handled above
    }
}

std::string repr_string(std::string_view s) {
    const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
    const char quote = dq ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        if (c == '\\' || c == static_cast<unsigned char>(quote)) {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else out += static_cast<char>(c);
    }
    out += quote;
    return out;
}

std::string repr_at(const Value& v, int depth);

std::string repr_dict_body(const Dict& d, int depth) {
    std::string out = "{";
    for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        out += repr_string(d.items[i].first) + ": " + repr_at(d.items[i].second, depth + 1);
    }
    return out + "}";
}

std::string repr_at(const Value& v, int depth) {
    check_depth(depth);
    switch (v.kind()) {
        case Value::Kind::String:
            return repr_string(v.str());
        case Value::Kind::Undefined:
            return "Undefined";
        case Value::Kind::List: {
            const bool tuple = v.is_tuple();
            std::string out = tuple ? "(" : "[";
            for (size_t i = 0; i < v.list().size(); ++i) {
                if (i) out += ", ";
                out += repr_at(v.list()[i], depth + 1);
            }
            if (tuple && v.list().size() == 1) out += ",";
            return out + (tuple ? ")" : "]");
        }
        case Value::Kind::Dict:
            return repr_dict_body(v.dict(), depth);
        case Value::Kind::Namespace:
            return "<Namespace " + repr_dict_body(*v.ns(), depth) + ">";
        default:
            return to_output(v);
    }
}

void json_string_bytes(std::string& out, std::string_view s);

void json_escape_u(std::string& out, uint32_t cp) {
    char buf[16];
    if (cp >= 0x10000) {  // UTF-16 surrogate pair, as json.dumps writes it
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    if (ensure_ascii) {
        for (std::string_view ch : utf8_chars(s)) {
            if (static_cast<unsigned char>(ch[0]) < 0x80) json_string_bytes(out, ch);
            else json_escape_u(out, utf8_decode(ch));
        }
    } else {
        json_string_bytes(out, s);
    }
    out += '"';
}

void json_string_bytes(std::string& out, std::string_view s) {
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else out += static_cast<char>(c);
        }
    }
}

struct JsonWriter {
    const JsonOptions& o;
    std::string out;

    void newline(int level) {
        if (o.indent < 0) return;
        out += '\n';
        out.append(static_cast<size_t>(o.indent) * static_cast<size_t>(level), ' ');
    }
    void number(const Value& v) {
        if (!v.is_float()) {
            out += to_output(v.is_bool() ? Value(v.as_int()) : v);
            return;
        }
        const double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += format_float(d);
    }
    template <class Items, class Emit>
    void container(char open, char close, const Items& items, int level, Emit emit) {
        out += open;
        if (items.empty()) {
            out += close;
            return;
        }
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += o.item_sep;
            newline(level + 1);
            emit(items[i]);
        }
        newline(level);
        out += close;
    }
    void write_dict(const Dict& d, int level) {
        auto items = d.items;
        if (o.sort_keys)
            std::stable_sort(items.begin(), items.end(), [](auto& a, auto& b) { return a.first < b.first; });
        container('{', '}', items, level, [&](const auto& kv) {
            json_string(out, kv.first, o.ensure_ascii);
            out += o.key_sep;
            write(kv.second, level + 1);
        });
    }
    void write(const Value& v, int level) {
        check_depth(level);
        switch (v.kind()) {
            case Value::Kind::None:
                out += "null";
                break;
            case Value::Kind::Bool:
                out += v.as_bool() ? "true" : "false";
                break;
            case Value::Kind::Int:
            case Value::Kind::Float:
                number(v);
                break;
            case Value::Kind::String:
                json_string(out, v.str(), o.ensure_ascii);
                break;
            case Value::Kind::List:
                container('[', ']', v.list(), level, [&](const Value& x) { write(x, level + 1); });
                break;
            case Value::Kind::Dict:
                write_dict(v.dict(), level);
                break;
            case Value::Kind::Namespace:
                write_dict(*v.ns(), level);
                break;
            default:
                throw EvalError{"Object of type " + v.type_name() + " is not JSON serializable"};
        }
    }
};

}  // namespace

const Value* Dict::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

void Dict::set(std::string key, Value v) {
    for (auto& [k, old] : items)
        if (k == key) {
            old = std::move(v);
            return;
        }
    items.emplace_back(std::move(key), std::move(v));
}

Value::Value(std::vector<Value> items) {
    const Shape shape = items_shape(items);
    v_ = std::make_shared<const ListObj>(ListObj{std::move(items), shape});
}

Value Value::tuple(std::vector<Value> items) {
    const Shape shape = items_shape(items);
    Value v;
    v.v_ = std::make_shared<const ListObj>(ListObj{std::move(items), shape, true});
    return v;
}

bool Value::is_tuple() const { return is_list() && std::get<ListPtr>(v_)->tuple; }

Value::Value(Dict d) {
    Shape shape;
    for (const auto& [k, v] : d.items) {
        shape.weight += k.size() + 1;
        add_child(shape, shape_of(v));
    }
    d.shape = shape;
    v_ = std::make_shared<const Dict>(std::move(d));
}

Shape shape_of(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::String:
            return {0, 1 + v.str().size()};
        case Value::Kind::List:
            return std::get<ListPtr>(v.v_)->shape;
        case Value::Kind::Dict:
            return v.dict().shape;
        case Value::Kind::Namespace:
            return namespace_shape(*v.ns(), 1);
        default:
            return {};
    }
}

Value Value::undefined(std::string hint) {
    Value v;
    v.v_ = Undef{std::move(hint)};
    return v;
}

Value Value::none() {
    Value v;
    v.v_ = None{};
    return v;
}

int64_t Value::as_int() const {
    if (is_bool()) return as_bool() ? 1 : 0;
    return std::get<int64_t>(v_);
}

double Value::as_float() const {
    if (is_float()) return std::get<double>(v_);
    return static_cast<double>(as_int());
}

const Value& Value::require_defined() const {
    if (is_undefined()) {
        const std::string& h = undefined_hint();
        throw EvalError{h.empty() ? std::string("value is undefined") : h};
    }
    return *this;
}

bool Value::truthy() const {
    switch (kind()) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
            return as_bool();
        case Kind::Int:
            return as_int() != 0;
        case Kind::Float:
            return as_float() != 0.0;
        case Kind::String:
            return !str().empty();
        case Kind::List:
            return !list().empty();
        case Kind::Dict:
            return !dict().items.empty();
        default:
            return true;
    }
}

std::string Value::type_name() const {
    static const char* names[] = {"undefined", "NoneType", "bool", "int",       "float",
                                  "str",       "list",     "dict", "Namespace", "function"};
    return names[static_cast<int>(kind())];
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

bool less_than(const Value& a, const Value& b) {
    a.require_defined();
    b.require_defined();
    if (is_numeric_pair(a, b)) {
        if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order = code point order
    if (a.is_list() && b.is_list()) {
        const auto& x = a.list();
        const auto& y = b.list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i)
            if (!equals(x[i], y[i])) return less_than(x[i], y[i]);
        return x.size() < y.size();
    }
    throw EvalError{"'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'"};
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Value::Kind::Undefined:
            return false;  // jinja2's Undefined iterates as empty
        case Value::Kind::String:
            if (!item.is_string())
                throw EvalError{"'in <string>' requires string as left operand, not " + item.type_name()};
            return container.str().find(item.str()) != std::string::npos;
        case Value::Kind::List:
            return std::any_of(container.list().begin(), container.list().end(),
                               [&](const Value& x) { return equals(x, item); });
        case Value::Kind::Dict:
            return item.is_string() && container.dict().find(item.str()) != nullptr;
        case Value::Kind::Namespace:
            return item.is_string() && container.ns()->find(item.str()) != nullptr;
        default:
            throw EvalError{"argument of type '" + container.type_name() + "' is not iterable"};
    }
}

std::string format_float(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02": shortest round-trip digits
    std::string sign;
    if (sci[0] == '-') {
        sign = "-";
        sci.erase(0, 1);
    }
    const size_t epos = sci.find('e');
    const int exp = std::stoi(sci.substr(epos + 1));
    std::string digits = sci.substr(0, epos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int n = static_cast<int>(digits.size());
    if (exp < -4 || exp >= 16) {  // Python's repr switches to exponent notation here
        std::string out = sign + digits.substr(0, 1);
        if (n > 1) out += "." + digits.substr(1);
        char ebuf[16];
        std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return out + ebuf;
    }
    if (exp >= n - 1) return sign + digits + std::string(static_cast<size_t>(exp - (n - 1)), '0') + ".0";
    if (exp >= 0) return sign + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
}

std::string to_output(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return "";
        case Value::Kind::None:
            return "None";
        case Value::Kind::Bool:
            return v.as_bool() ? "True" : "False";
        case Value::Kind::Int:
            return std::to_string(v.as_int());
        case Value::Kind::Float:
            return format_float(v.as_float());
        case Value::Kind::String:
            return v.str();
        case Value::Kind::Function:
            return "<function " + v.fn().name + ">";
        default:
            return repr_at(v, 0);
    }
}

std::string repr(const Value& v) { return repr_at(v, 0); }

std::string to_json(const Value& v, const JsonOptions& opts) {
    JsonWriter w{opts, {}};
    w.write(v, 0);
    return std::move(w.out);
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
    std::vector<std::string_view> out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
        if (i + len > s.size()) len = 1;  // truncated sequence: one byte per "character"
        for (size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) {
                len = 1;
                break;
            }
        out.push_back(s.substr(i, len));
        i += len;
    }
    return out;
}

uint32_t utf8_decode(std::string_view ch) {
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(ch[i])); };
    switch (ch.size()) {
        case 1:
            return b(0) < 0x80 ? b(0) : 0xFFFD;
        case 2:
            return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
        case 3:
            return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
        case 4:
            return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
        default:
            return 0xFFFD;
    }
}

size_t utf8_length(std::string_view s) {
    for (unsigned char c : s)
        if (c >= 0x80) return utf8_chars(s).size();  // same count as indexing sees
    return s.size();
}

}  // namespace ember::jinja
