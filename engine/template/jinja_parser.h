// Jinja parser: tokens -> syntax tree, with jinja2's grammar and operator precedence
// (lowest first): `x if c else y`, or, and, not, comparisons (chained; in, not in),
// + -, ~, * / // %, **, unary - +, then postfix `.attr` `[i]` `[a:b:c]` `(args)`, filters
// `|f(args)` and tests `is [not] t(args)`.
//
// Statements: if/elif/else, for/else (tuple targets, `if` filter), set (name, tuple,
// ns.attr, block form), macro, filter blocks, break/continue, and HF's `generation` block.
// Tags that need files or a different execution model (include, import, from, extends,
// block, call, with, do, recursive loops…) are rejected with an "unsupported" syntax error.
#pragma once
#include <memory>
#include <string_view>

#include "engine/template/jinja_ast.h"

namespace ember::jinja {

// Throws ember::Error("chat template syntax error at line L, column C: …").
std::unique_ptr<Program> parse_template(std::string_view source);

}  // namespace ember::jinja
