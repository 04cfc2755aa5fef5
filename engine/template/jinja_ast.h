// Syntax tree of a parsed Jinja template. Nodes are plain structs tagged with a kind; the
// interpreter switches on the kind. Every node keeps its source location for error messages.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/template/jinja_lexer.h"
#include "engine/template/jinja_value.h"

namespace ember::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
    std::string name;  // empty for positional arguments
    ExprPtr value;
};

struct Expr {
    enum class Kind : uint8_t {
        Literal,  // value
        Name,     // name
        List,     // items
        Tuple,    // items
        Dict,     // keys[i]: items[i]
        Attr,     // a.name
        Index,    // a[b]
        Slice,    // a[b:c:d], missing parts are null
        Call,     // a(args)
        Filter,   // a | name(args)
        Test,     // a is [not] name(args)
        Unary,    // op a   ("-", "+", "not")
        Binary,   // a op b (arithmetic, "~", "and", "or")
        Compare,  // a op b op c … (chained like Python)
        Cond,     // b if a else c
    };
    Kind kind;
    SourceLoc loc;
    Value value;                   // Literal
    std::string name;              // Name, Attr, Filter, Test; operator for Unary/Binary
    ExprPtr a, b, c, d;            // operands (see Kind)
    std::vector<ExprPtr> items;    // List, Dict values, Compare operands after `a`
    std::vector<ExprPtr> keys;     // Dict keys
    std::vector<std::string> ops;  // Compare operators ("==", "in", "not in", …)
    std::vector<Arg> args;         // Call, Filter, Test
    bool negated = false;          // Test: `is not`
    int height = 1;                // of this subtree; bounded by the parser

    Expr(Kind k, SourceLoc l) : kind(k), loc(l) {}
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // null: required
};

struct Stmt {
    enum class Kind : uint8_t {
        Text,         // text
        Output,       // {{ expr }}
        If,           // conds[i] -> bodies[i]; else_body
        For,          // for targets in expr [if cond] body [else else_body]
        Set,          // set target = expr; target "ns.attr" sets an attribute (attr)
        SetBlock,     // set target [| filters] %}body{% endset
        Macro,        // macro name(params) body
        FilterBlock,  // filter expr (a Filter chain on a placeholder) body
        Break,
        Continue,
        Scope,  // a transparent body: {% generation %} (HF's assistant-mask marker)
    };
    Kind kind;
    SourceLoc loc;
    std::string text;            // Text
    ExprPtr expr;                // Output, For (iterable), Set (value), FilterBlock
    ExprPtr cond;                // For: loop filter
    std::vector<ExprPtr> conds;  // If
    std::vector<Body> bodies;    // If
    Body body, else_body;
    std::vector<std::string> targets;  // For (unpacking), Set, SetBlock, Macro name
    std::string attr;                  // Set: `ns.attr`
    std::vector<MacroParam> params;    // Macro

    Stmt(Kind k, SourceLoc l) : kind(k), loc(l) {}
};

// A compiled template: the tree and the source it came from.
struct Program {
    Body body;
};

}  // namespace ember::jinja
