// The GBNF parser and the byte-level matcher (engine/grammar/grammar.h): which texts a
// grammar accepts, refuses and may still complete, and the errors bad grammars get.
#include <doctest/doctest.h>

#include "engine/grammar/grammar.h"

using namespace ember::grammar;

namespace {

// Whole-text match: every byte accepted and the root may end there.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    GrammarState s(g);
    return s.accept_bytes(text) && s.can_end();
}

bool prefix_ok(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    GrammarState s(g);
    return s.accept_bytes(text);
}

std::string error_of(std::string_view gbnf) {
    try {
        Grammar::parse(gbnf);
    } catch (const GrammarError& e) {
        CHECK(e.keyword() == "");
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("literalsAlternativesAndGroups") {
    auto g = Grammar::parse(R"(root ::= "yes" | "no" | ("may" "be")  # a comment
)");
    CHECK(matches(g, "yes"));
    CHECK(matches(g, "no"));
    CHECK(matches(g, "maybe"));
    CHECK_FALSE(matches(g, "ye"));
    CHECK(prefix_ok(g, "ye"));
    CHECK_FALSE(prefix_ok(g, "yex"));
    CHECK_FALSE(matches(g, "yess"));
}

TEST_CASE("repetitionsBoundCounts") {
    auto g = Grammar::parse(R"(root ::= [a-c]{2,4} "d"? "e"* "f"+)");
    CHECK(matches(g, "abf"));
    CHECK(matches(g, "abcadeeeff"));
    CHECK_FALSE(matches(g, "af"));
    CHECK_FALSE(matches(g, "abcabf"));
    CHECK_FALSE(matches(g, "abd"));
    auto exact = Grammar::parse(R"(root ::= ("ab"){3} "x"{2,})");
    CHECK(matches(exact, "abababxx"));
    CHECK(matches(exact, "abababxxxxx"));
    CHECK_FALSE(matches(exact, "ababxx"));
    CHECK_FALSE(matches(exact, "abababx"));
}

TEST_CASE("rulesRecurseAndSpanLines") {
    auto g = Grammar::parse(R"(
root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= [0-9]+ |
         list
)");
    CHECK(matches(g, "[]"));
    CHECK(matches(g, "[1,[2,[]],33]"));
    CHECK_FALSE(matches(g, "[1,]"));
    CHECK_FALSE(matches(g, "[[1]"));
}

TEST_CASE("characterClassesNegationEscapesAndUtf8") {
    auto g = Grammar::parse(R"(root ::= [^"\\\x00-\x1F]* "\"" [\u00e9-\u00ff]? .)");
    CHECK(matches(g, "caf\xC3\xA9\"x"));
    CHECK(matches(g, "\"\xC3\xA9\xE2\x82\xAC"));  // é then any character (€, three bytes)
    CHECK_FALSE(matches(g, "a\\\"x"));
    CHECK_FALSE(matches(g, "\n\"x"));
    // A character split across calls: its first byte is held, checked against the ranges.
    GrammarState s(Grammar::parse(R"(root ::= [\u00e9] "!")"));
    CHECK(s.accept_bytes("\xC3"));
    CHECK_FALSE(s.can_end());
    GrammarState wrong = s;
    CHECK_FALSE(wrong.accept_bytes("\xA8"));  // è, not é
    CHECK(s.accept_bytes("\xA9!"));
    CHECK(s.can_end());
    GrammarState ascii(Grammar::parse(R"(root ::= [a-z])"));
    CHECK_FALSE(ascii.accept_bytes("\xC3"));  // no two-byte character can follow
    CHECK_FALSE(ascii.accept_bytes("\xFF"));  // never UTF-8
    CHECK_FALSE(ascii.accept_bytes("\xE0"));  // would be an overlong form of an ASCII letter
    CHECK_FALSE(ascii.accept_bytes("\xC1"));
}

// Multi-byte characters fed a byte at a time decide exactly as whole ones, whether a class
// takes every completion of a prefix (the matcher then forgets the value) or only some.
TEST_CASE("multiByteCharactersByteByByte") {
    auto g = Grammar::parse(R"(root ::= [^a] [\u4e00-\u9fff] [^\u4e00-\u4e01] ([\U0001F600-\U0001F64F] | "\u00e9"))");
    auto by_bytes = [&](std::string_view text) {
        GrammarState s(g);
        for (char c : text)
            if (!s.accept_byte(static_cast<uint8_t>(c))) return false;
        return s.can_end();
    };
    const std::string ok =
        "\xC3\xA9"           // é, any but a
        "\xE4\xB8\x80"       // U+4E00
        "\xE4\xB8\x82"       // U+4E02, not 4E00-4E01
        "\xF0\x9F\x98\x80";  // U+1F600
    CHECK(by_bytes(ok));
    CHECK(matches(g, ok));
    CHECK_FALSE(by_bytes("\xC3\xA9\xE4\xB8\x80\xE4\xB8\x81\xF0\x9F\x98\x80"));  // U+4E01 refused
    CHECK_FALSE(by_bytes("\xC3\xA9\xE3\x80\x80\xE4\xB8\x82\xF0\x9F\x98\x80"));  // U+3000 not CJK
    CHECK_FALSE(by_bytes("\xC3\xA9\xE4\xB8\x80\xE4\xB8\x82\xF0\x9F\x99\x90"));  // U+1F650 past the range
    CHECK(by_bytes("\xC3\xA9\xE4\xB8\x80\xE4\xB8\x82\xC3\xA9"));
    CHECK_FALSE(by_bytes("\xC3\xA9\xE4\xB8\x80\xED\xA0\x80\xC3\xA9"));  // a surrogate is never UTF-8
    CHECK_FALSE(by_bytes("\xC3\xA9\xE4\xB8\x80\xE0\x80\x80\xC3\xA9"));  // nor an overlong form
}

TEST_CASE("refusedTextLeavesTheStateUnchanged") {
    GrammarState s(Grammar::parse(R"(root ::= "abc" | "abd")"));
    CHECK(s.accept_bytes("ab"));
    CHECK_FALSE(s.accept_bytes("cx"));
    CHECK(s.accept_bytes("d"));
    CHECK(s.can_end());
    CHECK(s.dead() == false);
    CHECK_FALSE(s.accept_bytes("d"));
}

TEST_CASE("identicalRedefinitionsAreAcceptedOthersRefused") {
    CHECK(matches(Grammar::parse("root ::= a a\na ::= \"x\"\na ::= \"x\""), "xx"));
    CHECK(error_of("root ::= a\na ::= \"x\"\na ::= \"y\"").find("defined twice") != std::string::npos);
}

TEST_CASE("syntaxErrorsNameLineAndColumn") {
    CHECK(error_of("root ::= \"abc") == "grammar: line 1, column 14: unterminated literal");
    CHECK(error_of("root ::= x\n") == "grammar: line 1, column 10: undefined rule 'x'");
    CHECK(error_of("root ::= \"a\"\nb ::= (\"x\"") == "grammar: line 2, column 11: expected ')'");
    CHECK(error_of("root = \"a\"") == "grammar: line 1, column 6: expected '::=' after the rule name 'root'");
    CHECK(error_of("root ::= [b-a]").find("character range with its end before its start") != std::string::npos);
    CHECK(error_of("root ::= \"\\q\"") == "grammar: line 1, column 11: unknown escape \\q");
    CHECK(error_of("root ::= \"a\"{3,2}").find("n < m") != std::string::npos);
    CHECK(error_of("start ::= \"a\"") == "grammar: no rule named 'root'");
    CHECK(error_of("root ::= \"a\" @").find("unexpected character '@'") != std::string::npos);
}

TEST_CASE("loopsThatCouldNeverEndAreRefused") {
    CHECK(error_of("root ::= root \"a\" | \"b\"").find("left recursion") != std::string::npos);
    CHECK(error_of("root ::= a\na ::= \"\"? a \"x\" | \"y\"").find("left recursion") != std::string::npos);
    CHECK(error_of("root ::= (\"a\"?)*").find("left recursion") != std::string::npos);
    CHECK(error_of("root ::= \"[\" root \"]\"").find("rule 'root' can never finish") != std::string::npos);
}

TEST_CASE("limitsRefuseHugeGrammars") {
    Limits small;
    small.max_rules = 10;
    CHECK_THROWS_AS(Grammar::parse("root ::= \"a\"{0,50}", small), GrammarError);
    small.max_text_bytes = 8;
    CHECK_THROWS_WITH_AS(Grammar::parse("root ::= \"abc\"", small), "grammar: 14 bytes, more than the limit of 8",
                         GrammarError);
    CHECK(error_of("root ::= \"a\"{5000}").find("repetition count above 1000") != std::string::npos);
}

TEST_CASE("ambiguousGrammarsStayBounded") {
    // Every "a" can be read two ways: identical stacks merge, so the count stays small.
    GrammarState s(Grammar::parse(R"(root ::= ("a" | "a" | "aa")* "b")"));
    CHECK(s.accept_bytes(std::string(2000, 'a')));
    CHECK(s.accept_bytes("b"));
    CHECK(s.can_end());
}
