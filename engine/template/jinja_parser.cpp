#include "engine/template/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

namespace ember::jinja {

namespace {

// Bounds the parser's (and so the interpreter's) recursion on hostile input such as
// "((((((…" or thousands of nested ifs.
constexpr int kMaxNesting = 200;

const std::string_view kUnsupportedTags[] = {"include", "import", "from",       "extends", "block",    "call",
                                             "with",    "do",     "autoescape", "trans",   "pluralize"};

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    std::unique_ptr<Program> run() {
        auto prog = std::make_unique<Program>();
        prog->body = parse_body({}, nullptr);
        return prog;
    }

private:
    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;  // break/continue are only valid inside a loop body

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser, SourceLoc loc) : p(parser) {
            if (++p.depth_ > kMaxNesting) throw_syntax_error(loc, "template nested too deeply");
        }
        ~DepthGuard() { --p.depth_; }
    };

    // ---- token helpers ----
    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
    const Token& next() {
        const Token& t = t_[i_];
        if (i_ + 1 < t_.size()) ++i_;
        return t;
    }
    bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
    bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
    bool skip_op(std::string_view op) { return is_op(op) ? (next(), true) : false; }
    bool skip_name(std::string_view n) { return is_name(n) ? (next(), true) : false; }
    [[noreturn]] void fail(const std::string& msg) const { throw_syntax_error(cur().loc, msg); }

    std::string describe(const Token& t) const {
        switch (t.type) {
            case Tok::End:
                return "end of template";
            case Tok::VarEnd:
                return "'}}'";
            case Tok::BlockEnd:
                return "'%}'";
            case Tok::Text:
                return "template text";
            case Tok::String:
                return "string literal";
            case Tok::Int:
            case Tok::Float:
                return "number '" + t.text + "'";
            default:
                return "'" + t.text + "'";
        }
    }
    [[noreturn]] void unexpected(const std::string& wanted) const {
        fail("expected " + wanted + ", got " + describe(cur()));
    }
    void expect_op(std::string_view op) {
        if (!skip_op(op)) unexpected("'" + std::string(op) + "'");
    }
    void expect(Tok type, const char* what) {
        if (cur().type != type) unexpected(what);
        next();
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) unexpected("a name");
        return next().text;
    }

    ExprPtr make(Expr::Kind k, SourceLoc loc) { return std::make_unique<Expr>(k, loc); }

    // Records a finished node's height and rejects trees too deep to evaluate (or even to
    // destroy) by recursion: `1+1+1+…` builds depth without nesting the parser.
    ExprPtr seal(ExprPtr e) {
        int h = 0;
        auto see = [&h](const ExprPtr& c) {
            if (c) h = std::max(h, c->height);
        };
        see(e->a);
        see(e->b);
        see(e->c);
        see(e->d);
        for (const auto& x : e->items) see(x);
        for (const auto& x : e->keys) see(x);
        for (const auto& x : e->args) see(x.value);
        e->height = h + 1;
        if (e->height > kMaxNesting) throw_syntax_error(e->loc, "expression nested too deeply");
        return e;
    }
    StmtPtr make_stmt(Stmt::Kind k, SourceLoc loc) { return std::make_unique<Stmt>(k, loc); }

    // ---- statements ----

    // Parses until `{% <stop> ` (leaves the stop name as the current token) or the end.
    Body parse_body(std::initializer_list<std::string_view> stops, const Token* opener) {
        Body body;
        for (;;) {
            const Token& t = cur();
            if (t.type == Tok::End) {
                if (opener)
                    throw_syntax_error(opener->loc, "'" + opener->text + "' is never closed (end of template reached)");
                return body;
            }
            if (t.type == Tok::Text) {
                auto s = make_stmt(Stmt::Kind::Text, t.loc);
                s->text = next().text;
                body.push_back(std::move(s));
            } else if (t.type == Tok::VarBegin) {
                body.push_back(parse_output());
            } else {
                next();  // BlockBegin
                if (cur().type == Tok::Name && std::find(stops.begin(), stops.end(), cur().text) != stops.end())
                    return body;
                body.push_back(parse_statement());
                expect(Tok::BlockEnd, "'%}'");
            }
        }
    }

    StmtPtr parse_output() {
        auto s = make_stmt(Stmt::Kind::Output, next().loc);
        s->expr = parse_tuple(true);
        expect(Tok::VarEnd, "'}}'");
        return s;
    }

    StmtPtr parse_statement() {
        const Token& t = cur();
        if (t.type != Tok::Name) unexpected("a tag name");
        DepthGuard guard(*this, t.loc);
        const std::string& n = t.text;
        if (n == "if") return parse_if();
        if (n == "for") return parse_for();
        if (n == "set") return parse_set();
        if (n == "macro") return parse_macro();
        if (n == "filter") return parse_filter_block();
        if (n == "generation") return parse_scope("endgeneration");
        if (n == "break" || n == "continue") return parse_loop_control();
        if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), n) != std::end(kUnsupportedTags))
            fail("'{% " + n +
                 " %}' is not supported (chat templates are rendered without file access, "
                 "imports or call blocks)");
        fail("unknown tag '" + n + "'");
    }

    // After the body, the current token is the stop name; consume it (the caller eats '%}').
    Body parse_block_body(std::initializer_list<std::string_view> stops, const Token& opener) {
        expect(Tok::BlockEnd, "'%}'");
        return parse_body(stops, &opener);
    }

    StmtPtr parse_if() {
        const Token& opener = next();
        auto s = make_stmt(Stmt::Kind::If, opener.loc);
        for (;;) {
            s->conds.push_back(parse_tuple(false));
            s->bodies.push_back(parse_block_body({"elif", "else", "endif"}, opener));
            const std::string stop = next().text;
            if (stop == "elif") continue;
            if (stop == "else") {
                s->else_body = parse_block_body({"endif"}, opener);
                next();
            }
            return s;
        }
    }

    StmtPtr parse_for() {
        const Token& opener = next();
        auto s = make_stmt(Stmt::Kind::For, opener.loc);
        s->targets = parse_target_names();
        if (!skip_name("in")) unexpected("'in'");
        s->expr = parse_tuple(false);
        if (skip_name("if")) s->cond = parse_expression(true);
        if (is_name("recursive")) fail("recursive loops are not supported");
        ++loop_depth_;
        s->body = parse_block_body({"endfor", "else"}, opener);
        --loop_depth_;
        if (next().text == "else") {
            s->else_body = parse_block_body({"endfor"}, opener);
            next();
        }
        return s;
    }

    // `a` or `a, b` or `(a, b)`: names bound by for/set.
    std::vector<std::string> parse_target_names() {
        const bool paren = skip_op("(");
        std::vector<std::string> names{expect_name()};
        while (skip_op(",")) {
            if (cur().type != Tok::Name || is_name("in")) break;
            names.push_back(expect_name());
        }
        if (paren) expect_op(")");
        return names;
    }

    StmtPtr parse_set() {
        const Token& opener = next();
        SourceLoc loc = opener.loc;
        std::vector<std::string> targets;
        std::string attr;
        if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
            targets.push_back(next().text);  // `set ns.attr = …`
            next();
            attr = expect_name();
        } else {
            targets = parse_target_names();
        }
        if (skip_op("=")) {
            auto s = make_stmt(Stmt::Kind::Set, loc);
            s->targets = std::move(targets);
            s->attr = std::move(attr);
            s->expr = parse_tuple(true);
            return s;
        }
        if (!attr.empty() || targets.size() != 1) unexpected("'='");
        auto s = make_stmt(Stmt::Kind::SetBlock, loc);
        s->targets = std::move(targets);
        if (skip_op("|")) s->expr = parse_filter_chain(loc);  // {% set x | trim %}…{% endset %}
        s->body = parse_block_body({"endset"}, opener);
        next();
        return s;
    }

    StmtPtr parse_macro() {
        const Token& opener = next();
        auto s = make_stmt(Stmt::Kind::Macro, opener.loc);
        s->targets.push_back(expect_name());
        expect_op("(");
        while (!is_op(")")) {
            if (!s->params.empty()) expect_op(",");
            if (is_op(")")) break;
            MacroParam p{expect_name(), nullptr};
            if (skip_op("=")) p.default_value = parse_expression(true);
            s->params.push_back(std::move(p));
        }
        expect_op(")");
        const int saved_loop_depth = loop_depth_;
        loop_depth_ = 0;  // a macro body is not inside the caller's loop
        s->body = parse_block_body({"endmacro"}, opener);
        loop_depth_ = saved_loop_depth;
        next();
        return s;
    }

    StmtPtr parse_filter_block() {
        const Token& opener = next();
        auto s = make_stmt(Stmt::Kind::FilterBlock, opener.loc);
        s->expr = parse_filter_chain(opener.loc);
        s->body = parse_block_body({"endfilter"}, opener);
        next();
        return s;
    }

    // `f | g(x)` applied to a block's text: the innermost operand is a placeholder literal.
    ExprPtr parse_filter_chain(SourceLoc loc) {
        ExprPtr chain = make(Expr::Kind::Literal, loc);
        do {
            chain = parse_filter(std::move(chain));
        } while (skip_op("|"));
        return chain;
    }

    StmtPtr parse_scope(const char* end_tag) {
        const Token& opener = next();
        auto s = make_stmt(Stmt::Kind::Scope, opener.loc);
        s->body = parse_block_body({end_tag}, opener);
        next();
        return s;
    }

    StmtPtr parse_loop_control() {
        const Token& t = next();
        if (loop_depth_ == 0) throw_syntax_error(t.loc, "'" + t.text + "' outside of a loop");
        return make_stmt(t.text == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, t.loc);
    }

    // ---- expressions ----

    bool at_tuple_end() const {
        return cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")") || cur().type == Tok::End;
    }

    // `a, b, c` makes a tuple; a single expression stays itself.
    ExprPtr parse_tuple(bool with_condexpr) {
        SourceLoc loc = cur().loc;
        std::vector<ExprPtr> items;
        bool saw_comma = false;
        for (;;) {
            if (!items.empty() && !skip_op(",")) break;
            if (!items.empty()) saw_comma = true;
            if (at_tuple_end() || is_name("if") || is_name("recursive")) break;
            items.push_back(parse_expression(with_condexpr));
        }
        if (items.size() == 1 && !saw_comma) return std::move(items[0]);
        if (items.empty()) fail("expected an expression, got " + describe(cur()));
        auto e = make(Expr::Kind::Tuple, loc);
        e->items = std::move(items);
        return seal(std::move(e));
    }

    ExprPtr parse_expression(bool with_condexpr) {
        DepthGuard guard(*this, cur().loc);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprPtr parse_condexpr() {
        ExprPtr e = parse_or();
        while (is_name("if")) {
            auto c = make(Expr::Kind::Cond, next().loc);
            c->a = parse_or();
            c->b = std::move(e);
            if (skip_name("else")) c->c = parse_condexpr();
            e = seal(std::move(c));
        }
        return e;
    }

    ExprPtr binary(std::string op, SourceLoc loc, ExprPtr l, ExprPtr r) {
        auto e = make(Expr::Kind::Binary, loc);
        e->name = std::move(op);
        e->a = std::move(l);
        e->b = std::move(r);
        return seal(std::move(e));
    }

    ExprPtr parse_or() {
        ExprPtr e = parse_and();
        while (is_name("or")) {
            SourceLoc loc = next().loc;
            e = binary("or", loc, std::move(e), parse_and());
        }
        return e;
    }

    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        while (is_name("and")) {
            SourceLoc loc = next().loc;
            e = binary("and", loc, std::move(e), parse_not());
        }
        return e;
    }

    ExprPtr parse_not() {
        if (!is_name("not")) return parse_compare();
        DepthGuard guard(*this, cur().loc);
        auto e = make(Expr::Kind::Unary, next().loc);
        e->name = "not";
        e->a = parse_not();
        return seal(std::move(e));
    }

    ExprPtr parse_compare() {
        SourceLoc loc = cur().loc;
        ExprPtr first = parse_math1();
        std::vector<std::string> ops;
        std::vector<ExprPtr> rest;
        for (;;) {
            static const char* const cmp[] = {"==", "!=", "<", ">", "<=", ">="};
            std::string op;
            if (cur().type == Tok::Op && std::find(std::begin(cmp), std::end(cmp), cur().text) != std::end(cmp))
                op = next().text;
            else if (skip_name("in")) op = "in";
            else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
                next();
                next();
                op = "not in";
            } else break;
            ops.push_back(op);
            rest.push_back(parse_math1());
        }
        if (ops.empty()) return first;
        auto e = make(Expr::Kind::Compare, loc);
        e->a = std::move(first);
        e->ops = std::move(ops);
        e->items = std::move(rest);
        return seal(std::move(e));
    }

    template <class Next>
    ExprPtr left_assoc(std::initializer_list<std::string_view> ops, Next next_level) {
        ExprPtr e = (this->*next_level)();
        while (cur().type == Tok::Op && std::find(ops.begin(), ops.end(), cur().text) != ops.end()) {
            const Token& op = next();
            e = binary(op.text, op.loc, std::move(e), (this->*next_level)());
        }
        return e;
    }
    ExprPtr parse_math1() { return left_assoc({"+", "-"}, &Parser::parse_concat); }
    ExprPtr parse_concat() { return left_assoc({"~"}, &Parser::parse_math2); }
    ExprPtr parse_math2() { return left_assoc({"*", "/", "//", "%"}, &Parser::parse_pow); }
    ExprPtr parse_pow() { return left_assoc({"**"}, &Parser::parse_unary_filtered); }
    ExprPtr parse_unary_filtered() { return parse_unary(true); }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this, cur().loc);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            e = make(Expr::Kind::Unary, cur().loc);
            e->name = next().text;
            e->a = parse_unary(false);
            e = seal(std::move(e));
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
    }

    ExprPtr literal(Value v, SourceLoc loc) {
        auto e = make(Expr::Kind::Literal, loc);
        e->value = std::move(v);
        return e;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        switch (t.type) {
            case Tok::Name: {
                next();
                if (t.text == "true" || t.text == "True") return literal(Value(true), t.loc);
                if (t.text == "false" || t.text == "False") return literal(Value(false), t.loc);
                if (t.text == "none" || t.text == "None") return literal(Value::none(), t.loc);
                auto e = make(Expr::Kind::Name, t.loc);
                e->name = t.text;
                return e;
            }
            case Tok::String: {
                std::string s;
                while (cur().type == Tok::String) s += next().text;  // "a" "b" concatenates
                return literal(Value(std::move(s)), t.loc);
            }
            case Tok::Int:
                next();
                return literal(Value(t.ival), t.loc);
            case Tok::Float:
                next();
                return literal(Value(t.fval), t.loc);
            default:
                break;
        }
        if (skip_op("(")) {
            if (skip_op(")")) return literal(Value::tuple({}), t.loc);  // ()
            ExprPtr e = parse_tuple(true);
            expect_op(")");
            return e;
        }
        if (is_op("[")) return parse_list();
        if (is_op("{")) return parse_dict();
        unexpected("an expression");
    }

    ExprPtr parse_list() {
        auto e = make(Expr::Kind::List, next().loc);
        while (!is_op("]")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("]")) break;
            e->items.push_back(parse_expression(true));
        }
        next();
        return seal(std::move(e));
    }

    ExprPtr parse_dict() {
        auto e = make(Expr::Kind::Dict, next().loc);
        while (!is_op("}")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("}")) break;
            e->keys.push_back(parse_expression(true));
            expect_op(":");
            e->items.push_back(parse_expression(true));
        }
        next();
        return seal(std::move(e));
    }

    ExprPtr parse_postfix(ExprPtr e) {
        for (;;) {
            if (is_op(".")) e = parse_dot(std::move(e));
            else if (is_op("[")) e = parse_subscript(std::move(e));
            else if (is_op("(")) e = parse_call(std::move(e));
            else return e;
        }
    }

    ExprPtr parse_dot(ExprPtr obj) {
        SourceLoc loc = next().loc;
        if (cur().type == Tok::Int) {  // x.0 is x[0]
            auto e = make(Expr::Kind::Index, loc);
            e->a = std::move(obj);
            e->b = literal(Value(next().ival), loc);
            return seal(std::move(e));
        }
        auto e = make(Expr::Kind::Attr, loc);
        e->a = std::move(obj);
        e->name = expect_name();
        return seal(std::move(e));
    }

    ExprPtr parse_subscript(ExprPtr obj) {
        SourceLoc loc = next().loc;
        ExprPtr parts[3];
        int colons = 0;
        for (;;) {
            if (!is_op(":") && !is_op("]")) parts[colons] = parse_expression(true);
            if (colons < 2 && skip_op(":")) {
                ++colons;
                continue;
            }
            break;
        }
        expect_op("]");
        if (colons == 0) {
            if (!parts[0]) fail("empty subscript");
            auto e = make(Expr::Kind::Index, loc);
            e->a = std::move(obj);
            e->b = std::move(parts[0]);
            return seal(std::move(e));
        }
        auto e = make(Expr::Kind::Slice, loc);
        e->a = std::move(obj);
        e->b = std::move(parts[0]);
        e->c = std::move(parts[1]);
        e->d = std::move(parts[2]);
        return seal(std::move(e));
    }

    std::vector<Arg> parse_call_args() {
        expect_op("(");
        std::vector<Arg> args;
        bool seen_kw = false;
        while (!is_op(")")) {
            if (!args.empty()) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
            Arg a;
            if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
                a.name = next().text;
                next();
                seen_kw = true;
            } else if (seen_kw) {
                fail("positional argument after keyword argument");
            }
            a.value = parse_expression(true);
            args.push_back(std::move(a));
        }
        next();
        return args;
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = make(Expr::Kind::Call, callee->loc);  // errors point at what is called
        e->a = std::move(callee);
        e->args = parse_call_args();
        return seal(std::move(e));
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        for (;;) {
            if (skip_op("|")) e = parse_filter(std::move(e));
            else if (is_name("is")) e = parse_test(std::move(e));
            else if (is_op("(")) e = parse_call(std::move(e));
            else return e;
        }
    }

    // After '|': `name` or `name(args)`.
    ExprPtr parse_filter(ExprPtr operand) {
        auto e = make(Expr::Kind::Filter, cur().loc);
        e->name = expect_name();
        e->a = std::move(operand);
        if (is_op("(")) e->args = parse_call_args();
        return seal(std::move(e));
    }

    ExprPtr parse_test(ExprPtr operand) {
        auto e = make(Expr::Kind::Test, next().loc);
        e->negated = skip_name("not");
        e->name = expect_name();
        e->a = std::move(operand);
        if (is_op("(")) {
            e->args = parse_call_args();
        } else if (takes_bare_test_arg()) {
            if (is_name("is")) fail("tests cannot be chained with 'is'");
            Arg a;
            a.value = parse_postfix(parse_primary());
            e->args.push_back(std::move(a));
        }
        return seal(std::move(e));
    }

    // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
    bool takes_bare_test_arg() const {
        const Token& t = cur();
        if (t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float) return true;
        if (t.type == Tok::Op) return t.text == "[" || t.text == "{";
        return t.type == Tok::Name && t.text != "else" && t.text != "or" && t.text != "and";
    }
};

}  // namespace

std::unique_ptr<Program> parse_template(std::string_view source) { return Parser(lex(source)).run(); }

}  // namespace ember::jinja
