// The GBNF parser: text -> Grammar (engine/grammar/grammar.h says what is accepted). A
// recursive-descent reader builds rules of items; repetitions and groups become generated
// rules (x* -> r ::= x r | ε), so the compiled grammar has only sequences, alternatives,
// character sets and rule references. Then the checks that keep a model from looping:
// left recursion and rules with no finite expansion.
#include <algorithm>
#include <map>
#include <optional>

#include "engine/grammar/grammar.h"

namespace ember::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 1000;  // {m,n}: bigger counts are refused (they expand to n copies)

struct Item {
    bool is_char;
    uint32_t value;  // char set or rule index
};
using Seq = std::vector<Item>;
using Alts = std::vector<Seq>;

}  // namespace

class GrammarBuilder {
public:
    GrammarBuilder(std::string_view text, const Limits& limits) : s_(text), limits_(limits) {}
    std::shared_ptr<const Grammar> build();

private:
    // ---- reading ----
    [[noreturn]] void fail(const std::string& what, size_t at) const;
    [[noreturn]] void fail(const std::string& what) const { fail(what, pos_); }
    bool eof() const { return pos_ >= s_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
    void skip_space();
    static bool name_char(char c);
    std::string read_name();
    bool at_rule_start();
    uint32_t read_utf8();
    uint32_t read_escape();
    uint32_t read_char_in(char closing);
    // ---- grammar ----
    void read_rule();
    Alts read_alternatives(bool nested);
    Seq read_sequence(bool nested);
    Seq read_primary();
    Seq apply_repeat(Seq unit, int min, int max);
    int read_count();
    uint32_t rule_id(const std::string& name, size_t at);
    uint32_t new_rule(Alts alts);
    uint32_t add_set(CharSet set);
    uint32_t wrap(Seq unit);
    // ---- checks and layout ----
    void check_defined() const;
    void check_left_recursion() const;
    void check_productive() const;
    std::vector<bool> nullable() const;
    std::shared_ptr<Grammar> layout() const;

    std::string_view s_;
    const Limits& limits_;
    size_t pos_ = 0;
    std::vector<std::string> names_;
    std::vector<std::optional<Alts>> rules_;
    std::vector<std::string> bodies_;  // defining text, for "defined twice"
    std::vector<size_t> first_use_;    // where an undefined rule was first named
    std::map<std::string, uint32_t, std::less<>> ids_;
    std::vector<CharSet> sets_;
    int generated_ = 0;
};

void GrammarBuilder::fail(const std::string& what, size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
        if (s_[i] == '\n') ++line, col = 1;
        else ++col;
    }
    throw GrammarError("grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
}

// Spaces, tabs, newlines and # comments.
void GrammarBuilder::skip_space() {
    while (!eof()) {
        const char c = peek();
        if (c == '#') {
            while (!eof() && peek() != '\n') ++pos_;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            ++pos_;
        } else {
            return;
        }
    }
}

bool GrammarBuilder::name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string GrammarBuilder::read_name() {
    const size_t b = pos_;
    while (!eof() && name_char(peek())) ++pos_;
    if (b == pos_) fail("expected a rule name");
    return std::string(s_.substr(b, pos_ - b));
}

// A name followed by ::= starts the next rule (so a rule's sequence may span lines).
bool GrammarBuilder::at_rule_start() {
    const size_t save = pos_;
    while (!eof() && name_char(peek())) ++pos_;
    const bool named = pos_ > save;
    skip_space();
    const bool defines = named && s_.substr(pos_, 3) == "::=";
    pos_ = save;
    return defines;
}

uint32_t GrammarBuilder::read_utf8() {
    const auto b0 = static_cast<uint8_t>(peek());
    const int n = b0 < 0x80 ? 0 : (b0 >> 5) == 6 ? 1 : (b0 >> 4) == 14 ? 2 : (b0 >> 3) == 30 ? 3 : -1;
    if (n < 0) fail("invalid UTF-8");
    uint32_t cp = n == 0 ? b0 : b0 & (0x3F >> n);
    ++pos_;
    for (int i = 0; i < n; ++i) {
        const auto b = static_cast<uint8_t>(peek());
        if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
        cp = (cp << 6) | (b & 0x3F);
        ++pos_;
    }
    return cp;
}

uint32_t GrammarBuilder::read_escape() {
    const size_t at = pos_;
    ++pos_;  // the backslash
    const char c = peek();
    ++pos_;
    int hex = 0;
    switch (c) {
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 't':
            return '\t';
        case '\\':
        case '"':
        case '\'':
        case ']':
        case '[':
        case '-':
        case '^':
            return static_cast<uint8_t>(c);
        case 'x':
            hex = 2;
            break;
        case 'u':
            hex = 4;
            break;
        case 'U':
            hex = 8;
            break;
        default:
            fail(std::string("unknown escape \\") + c, at);
    }
    uint32_t v = 0;
    for (int i = 0; i < hex; ++i, ++pos_) {
        const char h = peek();
        const int d = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (d < 0) fail("expected a hex digit in an escape");
        v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint) fail("escape beyond U+10FFFF", at);
    return v;
}

uint32_t GrammarBuilder::read_char_in(char closing) {
    if (eof()) fail(std::string("unterminated ") + (closing == '"' ? "literal" : "character class"));
    if (peek() == '\\') return read_escape();
    if (peek() == '\n' && closing == '"') fail("newline inside a literal");
    return read_utf8();
}

uint32_t GrammarBuilder::rule_id(const std::string& name, size_t at) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(names_.size());
    names_.push_back(name);
    rules_.emplace_back();
    bodies_.emplace_back();
    first_use_.push_back(at);
    ids_.emplace(name, id);
    return id;
}

uint32_t GrammarBuilder::new_rule(Alts alts) {
    if (names_.size() >= limits_.max_rules)
        throw GrammarError("grammar: more than " + std::to_string(limits_.max_rules) +
                           " rules after expanding repetitions");
    const uint32_t id = rule_id("_gen" + std::to_string(generated_++), pos_);
    rules_[id] = std::move(alts);
    return id;
}

uint32_t GrammarBuilder::add_set(CharSet set) {
    uint64_t bits[2] = {0, 0};  // set.matches() reads set.ascii once it is non-zero: fill it last
    for (uint32_t c = 0; c < 128; ++c)
        if (set.matches(c)) bits[c >> 6] |= uint64_t{1} << (c & 63);
    set.ascii[0] = bits[0];
    set.ascii[1] = bits[1];
    sets_.push_back(std::move(set));
    return static_cast<uint32_t>(sets_.size() - 1);
}

// A unit of several items as one rule reference, so a repetition applies to all of it.
uint32_t GrammarBuilder::wrap(Seq unit) { return new_rule(Alts{std::move(unit)}); }

int GrammarBuilder::read_count() {
    const size_t b = pos_;
    int v = 0;
    while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (peek() - '0');
        if (v > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat), b);
        ++pos_;
    }
    if (b == pos_) fail("expected a number in {m,n}");
    return v;
}

// unit{min,max} (max < 0: unbounded) as min copies, then a chain of optional ones or a loop.
Seq GrammarBuilder::apply_repeat(Seq unit, int min, int max) {
    const Item item = unit.size() == 1 ? unit[0] : Item{false, wrap(std::move(unit))};
    Seq out(static_cast<size_t>(min), item);
    if (max < 0) {
        const uint32_t loop = new_rule({});
        rules_[loop] = Alts{Seq{item, Item{false, loop}}, Seq{}};
        out.push_back({false, loop});
    } else if (max > min) {
        uint32_t tail = new_rule(Alts{Seq{item}, Seq{}});  // x?
        for (int i = min + 1; i < max; ++i) tail = new_rule(Alts{Seq{item, Item{false, tail}}, Seq{}});
        out.push_back({false, tail});
    }
    return out;
}

Seq GrammarBuilder::read_primary() {
    const char c = peek();
    if (c == '"') {
        ++pos_;
        Seq seq;
        while (peek() != '"' || eof()) {
            const uint32_t cp = read_char_in('"');
            CharSet set;
            set.ranges.push_back({cp, cp});
            seq.push_back({true, add_set(std::move(set))});
        }
        ++pos_;
        return seq;
    }
    if (c == '[') {
        ++pos_;
        CharSet set;
        if (peek() == '^') set.negated = true, ++pos_;
        while (peek() != ']' || eof()) {
            const uint32_t lo = read_char_in(']');
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']') {
                ++pos_;
                hi = read_char_in(']');
                if (hi < lo) fail("character range with its end before its start");
            }
            set.ranges.push_back({lo, hi});
        }
        ++pos_;
        return Seq{{true, add_set(std::move(set))}};
    }
    if (c == '.') {
        ++pos_;
        CharSet any;
        any.negated = true;
        return Seq{{true, add_set(std::move(any))}};
    }
    if (c == '(') {
        ++pos_;
        Alts alts = read_alternatives(true);
        skip_space();
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        if (alts.size() == 1) return std::move(alts[0]);
        return Seq{{false, new_rule(std::move(alts))}};
    }
    if (name_char(c)) {
        const size_t at = pos_;
        return Seq{{false, rule_id(read_name(), at)}};
    }
    fail(eof() ? "unexpected end of grammar" : std::string("unexpected character '") + c + "'");
}

Seq GrammarBuilder::read_sequence(bool nested) {
    Seq seq;
    for (;;) {
        skip_space();
        const char c = peek();
        if (eof() || c == '|' || c == ')') return seq;
        if (!nested && at_rule_start()) return seq;
        Seq unit = read_primary();
        for (;;) {  // postfix operators bind to the unit just read
            const char op = peek();
            int min = 0, max = -1;
            if (op == '*') ++pos_;
            else if (op == '+') ++pos_, min = 1;
            else if (op == '?') ++pos_, max = 1;
            else if (op == '{') {
                ++pos_;
                min = max = read_count();
                if (peek() == ',') {
                    ++pos_;
                    max = peek() == '}' ? -1 : read_count();
                }
                if (peek() != '}') fail("expected '}'");
                ++pos_;
                if (max >= 0 && max < min) fail("repetition {m,n} with n < m");
            } else break;
            unit = apply_repeat(std::move(unit), min, max);
        }
        seq.insert(seq.end(), unit.begin(), unit.end());
    }
}

Alts GrammarBuilder::read_alternatives(bool nested) {
    Alts alts;
    alts.push_back(read_sequence(nested));
    while (peek() == '|') {
        ++pos_;
        alts.push_back(read_sequence(nested));
    }
    return alts;
}

void GrammarBuilder::read_rule() {
    const size_t at = pos_;
    const std::string name = read_name();
    skip_space();
    if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    const size_t body_at = pos_;
    Alts alts = read_alternatives(false);
    std::string_view body = s_.substr(body_at, pos_ - body_at);
    while (!body.empty() && (body.back() == ' ' || body.back() == '\n' || body.back() == '\t' || body.back() == '\r'))
        body.remove_suffix(1);
    const uint32_t id = rule_id(name, at);
    if (rules_[id]) {
        if (bodies_[id] != body) fail("rule '" + name + "' is defined twice, differently", at);
        return;
    }
    rules_[id] = std::move(alts);
    bodies_[id] = std::string(body);
}

std::shared_ptr<const Grammar> GrammarBuilder::build() {
    if (s_.size() > limits_.max_text_bytes)
        throw GrammarError("grammar: " + std::to_string(s_.size()) + " bytes, more than the limit of " +
                           std::to_string(limits_.max_text_bytes));
    skip_space();
    while (!eof()) {
        read_rule();
        skip_space();
    }
    if (!ids_.count("root")) throw GrammarError("grammar: no rule named 'root'");
    check_defined();
    if (names_.size() > limits_.max_rules)
        throw GrammarError("grammar: " + std::to_string(names_.size()) +
                           " rules after expanding repetitions, more than the limit of " +
                           std::to_string(limits_.max_rules));
    check_left_recursion();
    check_productive();
    return layout();
}

void GrammarBuilder::check_defined() const {
    for (size_t r = 0; r < rules_.size(); ++r)
        if (!rules_[r]) fail("undefined rule '" + names_[r] + "'", first_use_[r]);
}

// Rules that can match the empty string (fixed point).
std::vector<bool> GrammarBuilder::nullable() const {
    std::vector<bool> n(rules_.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < rules_.size(); ++r) {
            if (n[r]) continue;
            for (const Seq& seq : *rules_[r])
                if (std::all_of(seq.begin(), seq.end(), [&](const Item& i) { return !i.is_char && n[i.value]; })) {
                    n[r] = changed = true;
                    break;
                }
        }
    }
    return n;
}

// A rule that reaches itself before consuming a character would expand forever.
void GrammarBuilder::check_left_recursion() const {
    const std::vector<bool> null = nullable();
    std::vector<std::vector<uint32_t>> left(rules_.size());  // rules each may start with
    for (size_t r = 0; r < rules_.size(); ++r)
        for (const Seq& seq : *rules_[r])
            for (const Item& i : seq) {
                if (i.is_char) break;
                left[r].push_back(i.value);
                if (!null[i.value]) break;
            }
    std::vector<uint8_t> mark(rules_.size(), 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t start = 0; start < rules_.size(); ++start) {
        if (mark[start]) continue;
        path.push_back({start, 0});
        mark[start] = 1;
        while (!path.empty()) {
            auto& [r, next] = path.back();
            if (next == left[r].size()) {
                mark[r] = 2;
                path.pop_back();
                continue;
            }
            const uint32_t to = left[r][next++];
            if (mark[to] == 1)
                throw GrammarError("grammar: left recursion through rule '" + names_[to] +
                                   "' (it can reach itself before matching a character)");
            if (mark[to] == 0) {
                mark[to] = 1;
                path.push_back({to, 0});
            }
        }
    }
}

// Every rule must be able to finish: a rule whose every alternative needs itself again
// (a $ref cycle with no base case) would make the model nest without end.
void GrammarBuilder::check_productive() const {
    std::vector<bool> done(rules_.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < rules_.size(); ++r) {
            if (done[r]) continue;
            for (const Seq& seq : *rules_[r])
                if (std::all_of(seq.begin(), seq.end(), [&](const Item& i) { return i.is_char || done[i.value]; })) {
                    done[r] = changed = true;
                    break;
                }
        }
    }
    for (size_t r = 0; r < rules_.size(); ++r)
        if (!done[r] && names_[r].rfind("_gen", 0) != 0)
            throw GrammarError("grammar: rule '" + names_[r] + "' can never finish (it recurses with no way out)");
    for (size_t r = 0; r < rules_.size(); ++r)
        if (!done[r])
            throw GrammarError("grammar: a group or repetition can never finish (it recurses with no way out)");
}

std::shared_ptr<Grammar> GrammarBuilder::layout() const {
    auto g = std::make_shared<Grammar>();
    for (size_t r = 0; r < rules_.size(); ++r) {
        g->rule_start_.push_back(static_cast<uint32_t>(g->elems_.size()));
        const Alts& alts = *rules_[r];
        for (size_t a = 0; a < alts.size(); ++a) {
            for (const Item& i : alts[a]) g->elems_.push_back({i.is_char ? Elem::Char : Elem::RuleRef, i.value});
            g->elems_.push_back({a + 1 < alts.size() ? Elem::Alt : Elem::End, 0});
        }
    }
    g->sets_ = sets_;
    g->names_ = names_;
    g->root_ = ids_.find("root")->second;
    return g;
}

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, const Limits& limits) {
    return GrammarBuilder(gbnf, limits).build();
}

bool CharSet::matches(uint32_t cp) const {
    if (cp < 128 && (ascii[0] | ascii[1])) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    bool in = false;
    for (const auto& [lo, hi] : ranges)
        if (cp >= lo && cp <= hi) {
            in = true;
            break;
        }
    return in != negated;
}

bool CharSet::covers(uint32_t lo, uint32_t hi) const {
    for (const auto& [a, b] : ranges) {
        if (!negated && a <= lo && b >= hi) return true;
        if (negated && a <= hi && b >= lo) return false;
    }
    return negated;
}

bool CharSet::may_match(uint32_t lo, uint32_t hi) const {
    for (const auto& [a, b] : ranges) {
        if (!negated && a <= hi && b >= lo) return true;
        if (negated && a <= lo && b >= hi) return false;  // the whole span is excluded
    }
    return negated;
}

}  // namespace ember::grammar
