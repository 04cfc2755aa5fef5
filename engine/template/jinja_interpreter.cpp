#include "engine/template/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/error.h"
#include "engine/template/jinja_builtins.h"

namespace ember::jinja {

namespace {

// An EvalError that has been given the location of the innermost node it came from.
struct LocatedError {
    std::string msg;
    SourceLoc loc;
    bool raised;
};

// Work units roughly track time: a loop iteration or a call allocates a scope and a loop
// object, about ten times the cost of evaluating a node.
constexpr uint64_t kIterationCost = 10;
constexpr uint64_t kCallCost = 10;

std::string where(SourceLoc loc) { return "line " + std::to_string(loc.line) + ", column " + std::to_string(loc.col); }

// A short description of a key for error messages (never the repr of a huge value).
std::string describe(const Value& key) {
    if (key.is_string()) return key.str().substr(0, 64);
    if (key.is_list() || key.is_dict() || key.is_namespace()) return key.type_name();
    return to_output(key);
}

[[noreturn]] void type_error(const char* op, const Value& a, const Value& b) {
    throw EvalError{std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                    b.type_name() + "'"};
}

[[noreturn]] void overflow() { throw EvalError{"integer overflow (values beyond 64 bits are not supported)"}; }

int64_t add(int64_t x, int64_t y) {
    int64_t r;
    if (__builtin_add_overflow(x, y, &r)) overflow();
    return r;
}
int64_t sub(int64_t x, int64_t y) {
    int64_t r;
    if (__builtin_sub_overflow(x, y, &r)) overflow();
    return r;
}
int64_t mul(int64_t x, int64_t y) {
    int64_t r;
    if (__builtin_mul_overflow(x, y, &r)) overflow();
    return r;
}

int64_t int_pow(int64_t base, int64_t exp) {
    int64_t r = 1;
    while (exp > 0) {
        if (exp & 1) r = mul(r, base);
        exp >>= 1;
        if (exp) base = mul(base, base);
    }
    return r;
}

bool both_ints(const Value& a, const Value& b) { return !a.is_float() && !b.is_float(); }

Value arith_numbers(const std::string& op, const Value& a, const Value& b) {
    if (op == "/") {
        if (b.as_float() == 0.0) throw EvalError{"division by zero"};
        return Value(a.as_float() / b.as_float());
    }
    if (both_ints(a, b)) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (op == "+") return Value(add(x, y));
        if (op == "-") return Value(sub(x, y));
        if (op == "*") return Value(mul(x, y));
        if (op == "**") return y >= 0 ? Value(int_pow(x, y)) : Value(std::pow(double(x), double(y)));
        if (y == 0) throw EvalError{"integer division or modulo by zero"};
        if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
        const int64_t q = x / y, m = x % y;
        const bool adjust = m != 0 && ((m < 0) != (y < 0));  // Python floors toward -inf
        return op == "//" ? Value(adjust ? q - 1 : q) : Value(adjust ? m + y : m);
    }
    const double x = a.as_float(), y = b.as_float();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") return Value(std::pow(x, y));
    if (y == 0.0) throw EvalError{"float division or modulo by zero"};
    if (op == "//") return Value(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
}

}  // namespace

struct Interpreter::Scope {
    ScopePtr parent;
    Dict vars;
};

// Bounds the C++ recursion of exec/eval, whatever nests: statements, expressions, macros.
class Interpreter::DepthGuard {
public:
    explicit DepthGuard(Interpreter& in) : in_(in) {
        if (++in_.eval_depth_ > in_.limits_.max_eval_depth) {
            --in_.eval_depth_;
            throw EvalError{"template evaluation nested too deeply"};
        }
    }
    ~DepthGuard() { --in_.eval_depth_; }

private:
    Interpreter& in_;
};

// Redirects output into a local buffer (set blocks, filter blocks, macro bodies).
class Interpreter::OutputCapture {
public:
    explicit OutputCapture(Interpreter& in) : in_(in), saved_(in.out_) { in_.out_ = &buf; }
    ~OutputCapture() { in_.out_ = saved_; }
    std::string buf;

private:
    Interpreter& in_;
    std::string* saved_;
};

Interpreter::Interpreter(const Program& program, RenderLimits limits, std::optional<std::time_t> now)
    : prog_(program), limits_(limits), now_(now) {}

Interpreter::~Interpreter() {
    for (auto& ns : namespaces_) ns->items.clear();
}

std::string Interpreter::render(const Dict& variables) {
    root_ = std::make_shared<Scope>();
    add_globals(root_->vars);
    for (const auto& [k, v] : variables.items) root_->vars.set(k, v);
    scope_ = root_;
    std::string out;
    out_ = &out;
    try {
        exec_body(prog_.body);
    } catch (const LocatedError& e) {
        if (e.raised) throw Error("chat template raised an error at " + where(e.loc) + ": " + e.msg);
        throw Error("chat template error at " + where(e.loc) + ": " + e.msg);
    } catch (const EvalError& e) {  // not expected: every statement and expression locates its errors
        throw Error("chat template error: " + e.msg);
    }
    out_ = nullptr;
    return out;
}

void Interpreter::charge(uint64_t units) {
    work_ += units;
    if (work_ > limits_.max_work)
        throw EvalError{"rendering exceeded the work budget of " + std::to_string(limits_.max_work) +
                        " steps (endless loop or huge output?)"};
}

void Interpreter::check_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
        throw EvalError{"value of " + std::to_string(bytes) + " bytes exceeds the " +
                        std::to_string(limits_.max_output_bytes) + "-byte limit"};
}

std::string Interpreter::text_of(const Value& v) {
    // A container prints to at least its weight in bytes: refuse before building it.
    if (v.is_list() || v.is_dict() || v.is_namespace()) check_size(weight_of(v));
    return to_output(v);
}

NamespacePtr Interpreter::new_namespace() {
    namespaces_.push_back(std::make_shared<Dict>());
    return namespaces_.back();
}

std::time_t Interpreter::now() const { return now_ ? *now_ : std::time(nullptr); }

void Interpreter::write_out(std::string_view text) {
    charge(text.size());
    if (out_->size() + text.size() > limits_.max_output_bytes)
        throw EvalError{"output exceeds the " + std::to_string(limits_.max_output_bytes) + "-byte limit"};
    out_->append(text);
}

Value Interpreter::lookup(const std::string& name) const {
    for (const Scope* s = scope_.get(); s; s = s->parent.get())
        if (const Value* v = s->vars.find(name)) return *v;
    return Value::undefined("'" + name + "' is undefined");
}

// ---------------------------------------------------------------- statements

Interpreter::Flow Interpreter::exec_body(const Body& body) {
    for (const StmtPtr& s : body) {
        const Flow f = exec(*s);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
    try {
        DepthGuard guard(*this);
        charge(1);
        switch (s.kind) {
            case Stmt::Kind::Text:
                write_out(s.text);
                break;
            case Stmt::Kind::Output:
                write_out(text_of(eval(*s.expr)));
                break;
            case Stmt::Kind::If:
                return exec_if(s);
            case Stmt::Kind::For:
                return exec_for(s);
            case Stmt::Kind::Set:
                exec_set(s);
                break;
            case Stmt::Kind::SetBlock:
                exec_set_block(s);
                break;
            case Stmt::Kind::Macro:
                exec_macro_def(s);
                break;
            case Stmt::Kind::FilterBlock:
                exec_filter_block(s);
                break;
            case Stmt::Kind::Break:
                return Flow::Break;
            case Stmt::Kind::Continue:
                return Flow::Continue;
            case Stmt::Kind::Scope:
                return exec_body(s.body);
        }
    } catch (const EvalError& e) {
        throw LocatedError{e.msg, s.loc, e.raised};
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_if(const Stmt& s) {
    for (size_t i = 0; i < s.conds.size(); ++i)
        if (eval(*s.conds[i]).truthy()) return exec_body(s.bodies[i]);
    return exec_body(s.else_body);
}

std::vector<Value> Interpreter::loop_items(const Stmt& s) {
    const Value seq = eval(*s.expr);
    std::vector<Value> items;
    switch (seq.kind()) {
        case Value::Kind::Undefined:
            break;  // jinja2: iterating Undefined yields nothing
        case Value::Kind::List:
            items = seq.list();
            break;
        case Value::Kind::Dict:
            for (const auto& [k, v] : seq.dict().items) items.emplace_back(k);
            break;
        case Value::Kind::String:
            for (std::string_view c : utf8_chars(seq.str())) items.emplace_back(std::string(c));
            break;
        default:
            throw EvalError{"'" + seq.type_name() + "' object is not iterable"};
    }
    charge(items.size());
    if (!s.cond) return items;
    std::vector<Value> kept;
    for (Value& item : items) {
        auto filter_scope = std::make_shared<Scope>(Scope{scope_, {}});
        bind_targets(*filter_scope, s.targets, item);
        ScopePtr saved = scope_;
        scope_ = filter_scope;
        const bool keep = eval(*s.cond).truthy();
        scope_ = saved;
        if (keep) kept.push_back(std::move(item));
    }
    return kept;
}

namespace {

Dict loop_info(const std::vector<Value>& items, size_t i) {
    const int64_t n = static_cast<int64_t>(items.size()), k = static_cast<int64_t>(i);
    Dict loop;
    loop.items.reserve(12);
    loop.set("index", Value(k + 1));
    loop.set("index0", Value(k));
    loop.set("revindex", Value(n - k));
    loop.set("revindex0", Value(n - k - 1));
    loop.set("first", Value(k == 0));
    loop.set("last", Value(k == n - 1));
    loop.set("length", Value(n));
    loop.set("depth", Value(1));
    loop.set("depth0", Value(0));
    if (k > 0) loop.set("previtem", items[i - 1]);
    if (k + 1 < n) loop.set("nextitem", items[i + 1]);
    loop.set("cycle", Value(std::make_shared<const Function>(
                          Function{"cycle", [k](Interpreter&, CallArgs& a) {
                                       if (a.pos.empty()) throw EvalError{"loop.cycle() needs at least one argument"};
                                       return a.pos[static_cast<size_t>(k) % a.pos.size()];
                                   }})));
    return loop;
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
    const std::vector<Value> items = loop_items(s);
    if (items.empty()) return exec_body(s.else_body);
    ScopePtr outer = scope_;
    for (size_t i = 0; i < items.size(); ++i) {
        charge(kIterationCost);
        auto iter = std::make_shared<Scope>(Scope{outer, {}});
        bind_targets(*iter, s.targets, items[i]);
        iter->vars.set("loop", Value(loop_info(items, i)));
        scope_ = iter;
        Flow f;
        try {
            f = exec_body(s.body);
        } catch (...) {
            scope_ = outer;
            throw;
        }
        scope_ = outer;
        if (f == Flow::Break) break;
    }
    return Flow::Normal;
}

void Interpreter::bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
        scope.vars.set(targets[0], v);
        return;
    }
    if (!v.is_list() || v.list().size() != targets.size())
        throw EvalError{"cannot unpack " + v.type_name() + " into " + std::to_string(targets.size()) + " names"};
    for (size_t i = 0; i < targets.size(); ++i) scope.vars.set(targets[i], v.list()[i]);
}

void Interpreter::exec_set(const Stmt& s) {
    Value v = eval(*s.expr);
    if (s.attr.empty()) {
        bind_targets(*scope_, s.targets, v);
        return;
    }
    const Value target = lookup(s.targets[0]);
    if (!target.is_namespace())
        throw EvalError{"cannot set attribute '" + s.attr + "' on " +
                        (target.is_undefined() ? "undefined '" + s.targets[0] + "'" : "a " + target.type_name()) +
                        " (only namespace() objects can be assigned to)"};
    target.ns()->set(s.attr, std::move(v));
    shape_of(target);  // rejects a namespace that now nests (or contains itself) too deeply
}

void Interpreter::exec_set_block(const Stmt& s) {
    std::string text;
    {
        OutputCapture cap(*this);
        exec_body(s.body);
        text = std::move(cap.buf);
    }
    Value v(std::move(text));
    scope_->vars.set(s.targets[0], s.expr ? apply_filter_chain(*s.expr, std::move(v)) : std::move(v));
}

void Interpreter::exec_filter_block(const Stmt& s) {
    std::string text;
    {
        OutputCapture cap(*this);
        exec_body(s.body);
        text = std::move(cap.buf);
    }
    write_out(text_of(apply_filter_chain(*s.expr, Value(std::move(text)))));
}

void Interpreter::exec_macro_def(const Stmt& s) {
    std::weak_ptr<Scope> def_scope = scope_;  // weak: the macro is stored in that very scope
    const Stmt* macro = &s;
    auto fn = std::make_shared<const Function>(Function{s.targets[0], [macro, def_scope](Interpreter& in, CallArgs& a) {
                                                            return in.call_macro(*macro, def_scope, a);
                                                        }});
    scope_->vars.set(s.targets[0], Value(std::move(fn)));
}

Value Interpreter::call_macro(const Stmt& m, const std::weak_ptr<Scope>& def_scope, CallArgs& args) {
    const std::string& name = m.targets[0];
    if (args.pos.size() > m.params.size())
        throw EvalError{"macro '" + name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)"};
    ScopePtr parent = def_scope.lock();
    auto scope = std::make_shared<Scope>(Scope{parent ? parent : root_, {}});
    for (size_t i = 0; i < args.pos.size(); ++i) scope->vars.set(m.params[i].name, args.pos[i]);
    for (const auto& kw : args.kw) {
        auto it =
            std::find_if(m.params.begin(), m.params.end(), [&](const MacroParam& p) { return p.name == kw.first; });
        if (it == m.params.end()) throw EvalError{"macro '" + name + "' takes no keyword argument '" + kw.first + "'"};
        scope->vars.set(kw.first, kw.second);
    }
    if (++call_depth_ > limits_.max_call_depth) {
        --call_depth_;
        throw EvalError{"macro calls nested too deeply (recursion limit " + std::to_string(limits_.max_call_depth) +
                        ")"};
    }
    ScopePtr saved = scope_;
    scope_ = scope;
    std::string text;
    try {
        for (const MacroParam& p : m.params)  // unset parameters: default, else Undefined
            if (!scope->vars.find(p.name))
                scope->vars.set(p.name, p.default_value ? eval(*p.default_value)
                                                        : Value::undefined("'" + p.name + "' is undefined"));
        OutputCapture cap(*this);
        exec_body(m.body);
        text = std::move(cap.buf);
    } catch (...) {
        scope_ = saved;
        --call_depth_;
        throw;
    }
    scope_ = saved;
    --call_depth_;
    return Value(std::move(text));
}

// ---------------------------------------------------------------- expressions

Value Interpreter::eval(const Expr& e) {
    try {
        DepthGuard guard(*this);
        charge(1);
        return eval_node(e);
    } catch (const EvalError& err) {
        throw LocatedError{err.msg, e.loc, err.raised};
    }
}

Value Interpreter::eval_node(const Expr& e) {
    switch (e.kind) {
        case Expr::Kind::Literal:
            return e.value;
        case Expr::Kind::Name:
            return lookup(e.name);
        case Expr::Kind::List:
        case Expr::Kind::Tuple:
            return eval_list(e);
        case Expr::Kind::Dict:
            return eval_dict(e);
        case Expr::Kind::Attr:
            return get_attr(eval(*e.a), e.name);
        case Expr::Kind::Index: {
            Value obj = eval(*e.a);
            return get_item(obj, eval(*e.b));
        }
        case Expr::Kind::Slice:
            return eval_slice(e);
        case Expr::Kind::Call:
            return eval_call(e);
        case Expr::Kind::Filter:
            return eval_filter(e, eval(*e.a));
        case Expr::Kind::Test:
            return eval_test(e);
        case Expr::Kind::Unary:
            return eval_unary(e);
        case Expr::Kind::Binary:
            return eval_binary(e);
        case Expr::Kind::Compare:
            return eval_compare(e);
        case Expr::Kind::Cond:
            if (eval(*e.a).truthy()) return eval(*e.b);
            return e.c ? eval(*e.c) : Value::undefined("the condition of an inline if was false and there is no else");
    }
    throw EvalError{"unknown expression"};
}

Value Interpreter::eval_list(const Expr& e) {
    std::vector<Value> items;
    items.reserve(e.items.size());
    for (const ExprPtr& x : e.items) items.push_back(eval(*x));
    return e.kind == Expr::Kind::Tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
}

Value Interpreter::eval_dict(const Expr& e) {
    Dict d;
    for (size_t i = 0; i < e.keys.size(); ++i) {
        Value k = eval(*e.keys[i]);
        if (!k.is_string()) throw EvalError{"dict keys must be strings (got " + k.type_name() + ")"};
        d.set(k.str(), eval(*e.items[i]));
    }
    return Value(std::move(d));
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
    switch (obj.kind()) {
        case Value::Kind::Undefined:
            obj.require_defined();
            break;
        case Value::Kind::Namespace:
            if (const Value* v = obj.ns()->find(name)) return *v;
            break;
        case Value::Kind::Dict: {
            Value method = find_method(obj, name);  // jinja2 tries the attribute before the key
            if (!method.is_undefined()) return method;
            if (const Value* v = obj.dict().find(name)) return *v;
            break;
        }
        default: {
            Value method = find_method(obj, name);
            if (!method.is_undefined()) return method;
        }
    }
    return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value Interpreter::get_attr_only(const Value& obj, const std::string& name) {
    obj.require_defined();
    if (obj.is_namespace()) return get_attr(obj, name);  // namespace entries are attributes
    Value method = find_method(obj, name);
    if (!method.is_undefined()) return method;
    return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
    obj.require_defined();
    if (obj.is_dict() || obj.is_namespace()) {
        const Dict& d = obj.is_dict() ? obj.dict() : *obj.ns();
        if (key.is_string())
            if (const Value* v = d.find(key.str())) return *v;
        return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + describe(key) + "'");
    }
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        std::vector<std::string_view> chars;
        if (obj.is_string()) {
            charge(obj.str().size());  // indexing by code point walks the string
            chars = utf8_chars(obj.str());
        }
        const int64_t n = static_cast<int64_t>(obj.is_list() ? obj.list().size() : chars.size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(obj.type_name() + " index out of range");
        if (obj.is_list()) return obj.list()[static_cast<size_t>(i)];
        return Value(std::string(chars[static_cast<size_t>(i)]));
    }
    if (key.is_string()) return get_attr(obj, key.str());  // jinja2 falls back to getattr
    return Value::undefined("'" + obj.type_name() + " object' has no item " + repr(key));
}

namespace {

// Python's slice.indices(): resolves start/stop/step against a length.
struct SliceRange {
    int64_t start, stop, step;
};

int64_t slice_bound(const Value& v, int64_t n, int64_t lo, int64_t hi, int64_t dflt) {
    if (v.is_none() || v.is_undefined()) return dflt;
    if (!v.is_int() && !v.is_bool()) throw EvalError{"slice indices must be integers or None"};
    int64_t x = v.as_int();
    if (x < 0) x += n;
    return std::clamp(x, lo, hi);
}

SliceRange slice_range(const Value& start, const Value& stop, const Value& step, int64_t n) {
    int64_t st = 1;
    if (!step.is_none() && !step.is_undefined()) {
        if (!step.is_int() && !step.is_bool()) throw EvalError{"slice indices must be integers or None"};
        st = step.as_int();
        if (st == 0) throw EvalError{"slice step cannot be zero"};
    }
    if (st > 0) return {slice_bound(start, n, 0, n, 0), slice_bound(stop, n, 0, n, n), st};
    return {slice_bound(start, n, -1, n - 1, n - 1), slice_bound(stop, n, -1, n - 1, -1), st};
}

}  // namespace

Value Interpreter::eval_slice(const Expr& e) {
    const Value obj = eval(*e.a);
    obj.require_defined();
    const Value start = e.b ? eval(*e.b) : Value::none();
    const Value stop = e.c ? eval(*e.c) : Value::none();
    const Value step = e.d ? eval(*e.d) : Value::none();
    // jinja2 slices with Python's own [] (not its lenient getitem), so this is a TypeError.
    if (!obj.is_list() && !obj.is_string()) throw EvalError{"'" + obj.type_name() + "' object is not subscriptable"};
    charge(weight_of(obj));
    std::vector<std::string_view> chars;
    if (obj.is_string()) chars = utf8_chars(obj.str());
    const int64_t n = static_cast<int64_t>(obj.is_list() ? obj.list().size() : chars.size());
    const SliceRange r = slice_range(start, stop, step, n);
    std::vector<Value> items;
    std::string s;
    for (int64_t i = r.start; r.step > 0 ? i < r.stop : i > r.stop; i += r.step) {
        if (obj.is_list()) items.push_back(obj.list()[static_cast<size_t>(i)]);
        else s += chars[static_cast<size_t>(i)];
    }
    charge(items.size() + s.size());
    if (obj.is_tuple()) return Value::tuple(std::move(items));
    return obj.is_list() ? Value(std::move(items)) : Value(std::move(s));
}

CallArgs Interpreter::eval_args(const std::vector<Arg>& args) {
    CallArgs out;
    for (const Arg& a : args) {
        if (a.name.empty()) out.pos.push_back(eval(*a.value));
        else out.kw.emplace_back(a.name, eval(*a.value));
    }
    return out;
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
    callee.require_defined();
    if (!callee.is_function()) throw EvalError{"'" + callee.type_name() + "' object is not callable"};
    charge(kCallCost);
    return callee.fn().call(*this, args);
}

Value Interpreter::eval_call(const Expr& e) {
    const Value callee = eval(*e.a);
    CallArgs args = eval_args(e.args);
    return call(callee, args);
}

// `{% filter a | b %}`: the chain is b(a(placeholder)); apply the innermost first.
Value Interpreter::apply_filter_chain(const Expr& e, Value input) {
    if (e.kind != Expr::Kind::Filter) return input;  // the placeholder
    Value inner = apply_filter_chain(*e.a, std::move(input));
    return eval_filter(e, std::move(inner));
}

Value Interpreter::eval_filter(const Expr& e, Value input) {
    FilterFn fn = find_filter(e.name);
    if (!fn) throw EvalError{"no filter named '" + e.name + "'"};
    charge(weight_of(input));  // filters walk their input
    CallArgs args = eval_args(e.args);
    return fn(*this, input, args);
}

Value Interpreter::eval_test(const Expr& e) {
    TestFn fn = find_test(e.name);
    if (!fn) throw EvalError{"no test named '" + e.name + "'"};
    const Value v = eval(*e.a);
    charge(weight_of(v));
    CallArgs args = eval_args(e.args);
    return Value(fn(*this, v, args) != e.negated);
}

Value Interpreter::eval_unary(const Expr& e) {
    const Value v = eval(*e.a);
    if (e.name == "not") return Value(!v.truthy());
    v.require_defined();
    if (!v.is_number()) throw EvalError{"bad operand type for unary " + e.name + ": '" + v.type_name() + "'"};
    if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
    if (v.is_float()) return Value(-v.as_float());
    return Value(sub(0, v.as_int()));
}

Value Interpreter::eval_binary(const Expr& e) {
    const std::string& op = e.name;
    Value a = eval(*e.a);
    if (op == "and") return a.truthy() ? eval(*e.b) : a;  // Python returns the deciding operand
    if (op == "or") return a.truthy() ? a : eval(*e.b);
    const Value b = eval(*e.b);
    if (op == "~") return concat(text_of(a), text_of(b));  // Undefined is "" here
    a.require_defined();
    b.require_defined();
    if (a.is_number() && b.is_number()) return arith_numbers(op, a, b);
    if (op == "+" && a.is_string() && b.is_string()) return concat(a.str(), b.str());
    if (op == "+" && a.is_list() && b.is_list()) {
        check_size(a.list().size() + b.list().size());
        charge(a.list().size() + b.list().size());
        std::vector<Value> items = a.list();
        items.insert(items.end(), b.list().begin(), b.list().end());
        return a.is_tuple() ? Value::tuple(std::move(items)) : Value(std::move(items));
    }
    const bool a_int = a.is_int() || a.is_bool(), b_int = b.is_int() || b.is_bool();
    const auto is_seq = [](const Value& v) { return v.is_string() || v.is_list(); };
    if (op == "*" && a_int && is_seq(b)) return repeat(b, a.as_int());
    if (op == "*" && b_int && is_seq(a)) return repeat(a, b.as_int());
    if (op == "%" && a.is_string()) throw EvalError{"printf-style '%' string formatting is not supported"};
    type_error(op.c_str(), a, b);
}

Value Interpreter::concat(std::string_view a, std::string_view b) {
    check_size(a.size() + b.size());
    charge(a.size() + b.size());
    std::string s;
    s.reserve(a.size() + b.size());
    s.append(a).append(b);
    return Value(std::move(s));
}

// 'ab' * 3, [x] * 3: size-checked before anything is built.
Value Interpreter::repeat(const Value& seq, int64_t n) {
    const size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
    if (n <= 0 || unit == 0) return seq.is_string() ? Value(std::string()) : Value(std::vector<Value>{});
    if (static_cast<uint64_t>(n) > limits_.max_output_bytes / unit) check_size(limits_.max_output_bytes + 1);
    const size_t total = unit * static_cast<size_t>(n);
    charge(total);
    if (seq.is_string()) {
        std::string s;
        s.reserve(total);
        for (int64_t i = 0; i < n; ++i) s += seq.str();
        return Value(std::move(s));
    }
    std::vector<Value> items;
    items.reserve(total);
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.list().begin(), seq.list().end());
    return seq.is_tuple() ? Value::tuple(std::move(items)) : Value(std::move(items));
}

Value Interpreter::eval_compare(const Expr& e) {
    Value left = eval(*e.a);
    for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i]);
        charge(weight_of(left) + weight_of(right));  // == and `in` may walk both sides
        const std::string& op = e.ops[i];
        bool r;
        if (op == "==") r = equals(left, right);
        else if (op == "!=") r = !equals(left, right);
        else if (op == "<") r = less_than(left, right);
        else if (op == ">") r = less_than(right, left);
        else if (op == "<=") r = less_than(left, right) || equals(left, right);
        else if (op == ">=") r = less_than(right, left) || equals(left, right);
        else if (op == "in") r = contains(right, left);
        else r = !contains(right, left);  // "not in"
        if (!r) return Value(false);
        left = std::move(right);
    }
    return Value(true);
}

// ---------------------------------------------------------------- compile-time checks

namespace {

void check_expr(const Expr* e) {
    if (!e) return;
    if (e->kind == Expr::Kind::Filter && !find_filter(e->name))
        throw_syntax_error(e->loc, "no filter named '" + e->name + "'");
    if (e->kind == Expr::Kind::Test && !find_test(e->name))
        throw_syntax_error(e->loc, "no test named '" + e->name + "'");
    for (const Expr* c : {e->a.get(), e->b.get(), e->c.get(), e->d.get()}) check_expr(c);
    for (const auto& x : e->items) check_expr(x.get());
    for (const auto& x : e->keys) check_expr(x.get());
    for (const auto& x : e->args) check_expr(x.value.get());
}

void check_body(const Body& body) {
    for (const StmtPtr& s : body) {
        check_expr(s->expr.get());
        check_expr(s->cond.get());
        for (const auto& c : s->conds) check_expr(c.get());
        for (const auto& b : s->bodies) check_body(b);
        for (const auto& p : s->params) check_expr(p.default_value.get());
        check_body(s->body);
        check_body(s->else_body);
    }
}

}  // namespace

void check_names(const Program& program) { check_body(program.body); }

}  // namespace ember::jinja
