// Grammar-constrained decoding, the byte level: a GBNF grammar (llama.cpp's notation) parsed
// into an immutable Grammar, and GrammarState, one sequence's position in it. The token
// level (which vocabulary entries may come next) is engine/grammar/token_matcher.h; JSON
// schemas compile to GBNF in engine/grammar/json_schema.h.
//
// GBNF accepted: `name ::= alternatives`, rule names [a-zA-Z0-9_-]+, "literals" and
// [character classes] with \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH escapes, [^...]
// negation, `.` (any character), ( groups ), postfix * + ? {m} {m,} {m,n}, # comments. A
// rule may be defined twice only with the same text (so embedded JSON schemas can each
// bring the shared primitives). Refused, with line and column: syntax errors, undefined
// rules, a missing `root`, left recursion, and rules that can never finish (recursion with
// no way out), which would let a model loop forever.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/error.h"

namespace ember::grammar {

struct Limits {                       // what one request may ask; above: GrammarError -> the API's 400
    size_t max_rules = 4096;          // rules after compilation
    size_t max_depth = 32;            // schema nesting
    size_t max_enum = 4096;           // enum / const alternatives
    size_t max_text_bytes = 1 << 20;  // grammar or schema text
};

// An unsupported or too-large schema / grammar. keyword(): the schema keyword at fault
// ("$ref", "patternProperties", ...) or "" for grammar syntax errors; what() a clear message.
class GrammarError : public ember::Error {
public:
    GrammarError(const std::string& msg, std::string keyword = "") : Error(msg), keyword_(std::move(keyword)) {}
    std::string keyword() const { return keyword_; }

private:
    std::string keyword_;
};

// One element of a compiled rule. A rule is its alternatives laid out one after another in
// Grammar::elems(), each ended by Alt (another follows) or End (the last).
struct Elem {
    enum Kind : uint8_t { End, Alt, RuleRef, Char };
    Kind kind;
    uint32_t value;  // RuleRef: the rule's index; Char: the character set's index
};

// A set of Unicode code points: ranges (inclusive), possibly negated; ASCII as a bitmap.
struct CharSet {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool negated = false;
    uint64_t ascii[2] = {0, 0};  // bit c: c matches (c < 128), negation applied
    bool matches(uint32_t cp) const;
    bool may_match(uint32_t lo, uint32_t hi) const;  // some code point in [lo, hi] may match
    bool covers(uint32_t lo, uint32_t hi) const;     // every code point in [lo, hi] matches (when sure)
};

// A compiled grammar: immutable, shared by requests (std::shared_ptr<const Grammar>).
class Grammar {
public:
    // Root rule "root". Throws GrammarError (keyword "") with line:column for bad text.
    static std::shared_ptr<const Grammar> parse(std::string_view gbnf, const Limits& = {});

    const std::vector<Elem>& elems() const { return elems_; }
    const std::vector<CharSet>& char_sets() const { return sets_; }
    uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
    size_t n_rules() const { return rule_start_.size(); }
    uint32_t root() const { return root_; }
    const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

private:
    friend class GrammarBuilder;
    std::vector<Elem> elems_;
    std::vector<CharSet> sets_;
    std::vector<uint32_t> rule_start_;
    std::vector<std::string> names_;
    uint32_t root_ = 0;
};

// One sequence's position in a grammar (cheap to copy: two flat vectors). Bytes in, never
// tokens: the token level lives in TokenMatcher. Text is UTF-8; a code point split across
// calls is held until complete (and refused early when no allowed character starts so).
class GrammarState {
public:
    explicit GrammarState(std::shared_ptr<const Grammar>);

    bool accept_bytes(std::string_view);         // false (state unchanged) when not allowed
    bool accept_byte(uint8_t);                   // the same for one byte
    bool can_end() const;                        // the root rule may finish here
    bool dead() const { return ends_.empty(); }  // nothing more can be accepted, not even the end
    bool must_end() const;                       // the root has finished and nothing may follow
    const Grammar& grammar() const { return *g_; }
    // Equal for equal positions (the stacks and a partly read character): a cache key.
    std::string key() const;

    // Above this many parallel parses (a hostile, highly ambiguous grammar) text is refused.
    static constexpr size_t kMaxStacks = 1024;

private:
    bool accept_code_point(uint32_t cp, bool any = false);
    void settle_partial(uint32_t lo, uint32_t hi, int length);
    bool partial_possible(uint32_t lo, uint32_t hi, int length) const;
    void expand(std::vector<uint32_t>& stack);  // pushes the stacks `stack` expands to
    void add_stack(const uint32_t* b, const uint32_t* e);

    std::shared_ptr<const Grammar> g_;
    // The parse stacks, flattened: stack i is data_[ends_[i-1] .. ends_[i]); each holds
    // positions in Grammar::elems(), the next element to match on top (a Char), or nothing
    // (the root rule has finished).
    std::vector<uint32_t> data_;
    std::vector<uint32_t> ends_;
    uint32_t cp_ = 0;    // the code point being read
    uint8_t need_ = 0;   // its continuation bytes still to come
    uint8_t bytes_ = 0;  // its bytes so far
    bool any_ = false;   // every stack takes it whatever its last bytes (cp_ forgotten)
    std::vector<uint32_t> scratch_data_, scratch_ends_, scratch_stack_;  // reused by accept_code_point
};

}  // namespace ember::grammar
