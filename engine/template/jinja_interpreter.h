// Tree-walking interpreter for parsed Jinja templates.
//
// Semantics follow jinja2 as Hugging Face configures it for chat templates
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, HF's tojson,
// raise_exception and strftime_now):
//  - Undefined behaves like jinja2's default Undefined: it is falsy, prints as nothing,
//    iterates as empty, has length 0, and `is defined` is false; using it for attribute or
//    item access, arithmetic or ordering is an error ("'x' is undefined"). A missing key or
//    attribute of a defined object is Undefined, not an error. This mirrors what the
//    reference renderer does, so a template that fails there fails here too.
//  - Scoping: a for-loop iteration is its own scope (a `set` inside a loop is forgotten at
//    the end of the iteration — hence namespace()); `if` blocks share their parent's scope;
//    macros get their own scope whose parent is the scope they were defined in.
//  - Lists and dicts are immutable (no append/update), as in HF's sandbox.
//
// Every render has budgets so hostile templates cannot hang or exhaust memory: output size,
// total work (statements, iterations, calls, bytes and elements built), macro recursion and
// evaluation depth. Exceeding one throws ember::Error naming the limit.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/template/jinja_ast.h"
#include "engine/template/jinja_value.h"

namespace ember::jinja {

struct RenderLimits {
    size_t max_output_bytes = size_t{1} << 20;  // also caps any single string value
    uint64_t max_work = 20'000'000;             // ≈ a few hundred ms of interpretation
    int max_call_depth = 32;                    // nested macro calls
    int max_eval_depth = 1500;                  // nested statements + expressions being evaluated
};

class Interpreter {
public:
    // `now` feeds strftime_now(); unset means the current local time.
    Interpreter(const Program& program, RenderLimits limits, std::optional<std::time_t> now = std::nullopt);
    ~Interpreter();
    Interpreter(const Interpreter&) = delete;
    Interpreter& operator=(const Interpreter&) = delete;

    // Renders the program with these top-level variables (plus the builtin globals).
    // Throws ember::Error with the template location on any error.
    std::string render(const Dict& variables);

    // ---- services for builtins ----
    void charge(uint64_t units);          // spend work budget; throws when exhausted
    void check_size(size_t bytes) const;  // a string/list about to be built that large?
    std::string text_of(const Value& v);  // to_output(), refusing values too big to print
    Value call(const Value& callee, CallArgs& args);
    NamespacePtr new_namespace();
    std::time_t now() const;
    Value get_attr(const Value& obj, const std::string& name);       // obj.name (methods, then keys)
    Value get_attr_only(const Value& obj, const std::string& name);  // Python getattr: no keys
    Value get_item(const Value& obj, const Value& key);              // obj[key]

private:
    struct Scope;
    using ScopePtr = std::shared_ptr<Scope>;
    enum class Flow { Normal, Break, Continue };
    class DepthGuard;
    class OutputCapture;

    const Program& prog_;
    RenderLimits limits_;
    std::optional<std::time_t> now_;
    ScopePtr root_;
    ScopePtr scope_;
    std::string* out_ = nullptr;
    uint64_t work_ = 0;
    int call_depth_ = 0;
    int eval_depth_ = 0;
    std::vector<NamespacePtr> namespaces_;  // emptied at the end: breaks reference cycles

    void write_out(std::string_view text);
    Value lookup(const std::string& name) const;

    Flow exec_body(const Body& body);
    Flow exec(const Stmt& s);
    Flow exec_if(const Stmt& s);
    Flow exec_for(const Stmt& s);
    void exec_set(const Stmt& s);
    void exec_set_block(const Stmt& s);
    void exec_macro_def(const Stmt& s);
    void exec_filter_block(const Stmt& s);
    std::vector<Value> loop_items(const Stmt& s);
    void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v);
    Value call_macro(const Stmt& macro, const std::weak_ptr<Scope>& def_scope, CallArgs& args);

    Value eval(const Expr& e);
    Value eval_node(const Expr& e);
    Value eval_list(const Expr& e);
    Value eval_dict(const Expr& e);
    Value eval_slice(const Expr& e);
    Value eval_call(const Expr& e);
    Value eval_filter(const Expr& e, Value input);
    Value apply_filter_chain(const Expr& e, Value input);
    Value eval_test(const Expr& e);
    Value eval_unary(const Expr& e);
    Value eval_binary(const Expr& e);
    Value eval_compare(const Expr& e);
    Value concat(std::string_view a, std::string_view b);
    Value repeat(const Value& seq, int64_t n);
    CallArgs eval_args(const std::vector<Arg>& args);
};

// Checks, after parsing, that every filter and test the template names exists — jinja2
// rejects unknown ones when compiling, before any render. Throws a syntax error.
void check_names(const Program& program);

}  // namespace ember::jinja
