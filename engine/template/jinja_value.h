// Runtime values of the Jinja interpreter, modelled on the Python objects that jinja2 (as used
// by Hugging Face's chat templating) hands around: Undefined, None, bool, int, float, str,
// list/tuple, dict, namespace and callables.
//
// Lists and dicts are immutable once built (HF renders in an ImmutableSandboxedEnvironment,
// so templates cannot mutate them either) and are shared by pointer; only a namespace is
// mutable, through `{% set ns.attr = ... %}`. Strings are UTF-8; length, indexing and
// slicing count code points, as Python does.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ember::jinja {

class Value;
class Interpreter;

// How deep a value nests and how much work walking all of it costs (string bytes plus
// elements, counting shared sub-values each time they appear). Lists and dicts record it
// when built, so a template cannot build a small value that is huge when printed
// ("billion laughs": [a, a] of [b, b] of …).
struct Shape {
    int depth = 0;
    uint64_t weight = 1;
};
Shape shape_of(const Value& v);  // throws EvalError past kMaxValueNesting / kMaxValueWeight

// Insertion-ordered string-keyed map (Python dicts keep insertion order). Linear lookup:
// chat-template dicts have a handful of keys.
struct Dict {
    std::vector<std::pair<std::string, Value>> items;
    Shape shape;  // set when wrapped in a Value; not maintained for namespaces

    const Value* find(std::string_view key) const;
    void set(std::string key, Value v);
};

// Arguments of a call: positional, then keyword (in source order).
struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
};

// A callable: a global (range, namespace, raise_exception…), a bound method ('a'.strip),
// the loop.cycle helper, or a template macro.
struct Function {
    std::string name;
    std::function<Value(Interpreter&, CallArgs&)> call;
};

struct ListObj {
    std::vector<Value> items;
    Shape shape;
    bool tuple = false;  // prints as (a, b) and differs from a list in ==, as in Python
};
using ListPtr = std::shared_ptr<const ListObj>;
using DictPtr = std::shared_ptr<const Dict>;
using NamespacePtr = std::shared_ptr<Dict>;
using FunctionPtr = std::shared_ptr<const Function>;

// Thrown by value operations and builtins; the interpreter adds the template location and
// turns it into ember::Error.
struct EvalError {
    std::string msg;
    bool raised = false;  // from raise_exception(): the template's own message
};

class Value {
public:
    enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

    Value() : v_(Undef{}) {}
    Value(bool b) : v_(b) {}
    Value(int64_t i) : v_(i) {}
    Value(int i) : v_(int64_t{i}) {}
    Value(double d) : v_(d) {}
    Value(std::string s) : v_(std::move(s)) {}
    Value(const char* s) : v_(std::string(s)) {}
    Value(std::vector<Value> items);
    static Value tuple(std::vector<Value> items);
    Value(Dict d);
    Value(NamespacePtr ns) : v_(std::move(ns)) {}
    Value(FunctionPtr fn) : v_(std::move(fn)) {}

    // `hint` names what was missing ("'x' is undefined"), for the error raised when an
    // undefined value is used in a way jinja2 rejects (attribute access, arithmetic).
    static Value undefined(std::string hint = {});
    static Value none();

    Kind kind() const { return static_cast<Kind>(v_.index()); }
    bool is_undefined() const { return kind() == Kind::Undefined; }
    bool is_none() const { return kind() == Kind::None; }
    bool is_bool() const { return kind() == Kind::Bool; }
    bool is_int() const { return kind() == Kind::Int; }
    bool is_float() const { return kind() == Kind::Float; }
    bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is an int
    bool is_string() const { return kind() == Kind::String; }
    bool is_list() const { return kind() == Kind::List; }  // lists and tuples
    bool is_tuple() const;
    bool is_dict() const { return kind() == Kind::Dict; }
    bool is_namespace() const { return kind() == Kind::Namespace; }
    bool is_function() const { return kind() == Kind::Function; }

    bool as_bool() const { return std::get<bool>(v_); }
    int64_t as_int() const;   // int or bool
    double as_float() const;  // any number
    const std::string& str() const { return std::get<std::string>(v_); }
    const std::vector<Value>& list() const { return std::get<ListPtr>(v_)->items; }
    const Dict& dict() const { return *std::get<DictPtr>(v_); }
    const NamespacePtr& ns() const { return std::get<NamespacePtr>(v_); }
    const Function& fn() const { return *std::get<FunctionPtr>(v_); }
    const std::string& undefined_hint() const { return std::get<Undef>(v_).hint; }

    // Throws EvalError naming the missing thing when this value is undefined.
    const Value& require_defined() const;

    bool truthy() const;
    std::string type_name() const;  // Python's name: 'str', 'int', 'list', 'dict', 'NoneType'…

private:
    friend Shape shape_of(const Value& v);
    struct Undef {
        std::string hint;
    };
    struct None {};
    std::variant<Undef, None, bool, int64_t, double, std::string, ListPtr, DictPtr, NamespacePtr, FunctionPtr> v_;
};

// Limits checked whenever a list, dict or namespace entry is built, so that printing,
// comparing and destroying a value never recurses or expands without bound.
constexpr int kMaxValueNesting = 100;
constexpr uint64_t kMaxValueWeight = uint64_t{1} << 26;
inline uint64_t weight_of(const Value& v) { return shape_of(v).weight; }

// Python semantics of the operators. All throw EvalError on type errors.
bool equals(const Value& a, const Value& b);
bool less_than(const Value& a, const Value& b);            // a < b; numbers, strings, lists
bool contains(const Value& container, const Value& item);  // item in container

// Python str() of a value as {{ }} prints it (Undefined prints as nothing).
std::string to_output(const Value& v);
// Python repr(), used inside printed lists/dicts.
std::string repr(const Value& v);
// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string format_float(double d);

struct JsonOptions {
    bool ensure_ascii = false;  // escape non-ASCII as \uXXXX
    int indent = -1;            // <0: single line
    bool sort_keys = false;
    std::string item_sep = ", ";  // json.dumps defaults; "," when indenting
    std::string key_sep = ": ";
};
// json.dumps(v, ensure_ascii=False, ...), the way HF's tojson filter calls it.
std::string to_json(const Value& v, const JsonOptions& opts);

// UTF-8 helpers: strings are indexed by code point.
std::vector<std::string_view> utf8_chars(std::string_view s);
uint32_t utf8_decode(std::string_view ch);  // one character from utf8_chars(); U+FFFD if invalid
size_t utf8_length(std::string_view s);

}  // namespace ember::jinja
