// JSON schema -> GBNF (engine/grammar/json_schema.h): per keyword, the texts the compiled
// grammar accepts and refuses; the keywords it refuses with their names; the limits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "engine/grammar/json_schema.h"

using namespace ember::grammar;
using nlohmann::json;

namespace {

std::shared_ptr<const Grammar> compile(const std::string& schema, const Limits& limits = {}) {
    return Grammar::parse(json_schema_to_gbnf(json::parse(schema), limits), limits);
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    GrammarState s(g);
    return s.accept_bytes(text) && s.can_end();
}

std::string refused_keyword(const json& schema, const Limits& limits = {}) {
    try {
        json_schema_to_gbnf(schema, limits);
    } catch (const GrammarError& e) {
        return e.keyword().empty() ? std::string("<none>: ") + e.what() : e.keyword();
    }
    return "<accepted>";
}

}  // namespace

TEST_CASE("objectsRequiredFirstOptionalInKeyOrder") {
    auto g = compile(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                         "tags":{"type":"array","items":{"type":"string"}}},"required":["name"]})");
    CHECK(matches(g, R"({"name":"Ann"})"));
    CHECK(matches(g, R"({ "name": "Ann", "age": 41, "tags": ["a", "b"] })"));
    CHECK(matches(g, "{\n  \"name\": \"x\",\n  \"tags\": []\n}"));
    CHECK_FALSE(matches(g, R"({"age":41})"));                // name is required
    CHECK_FALSE(matches(g, R"({"name":"Ann","extra":1})"));  // no additional properties
    CHECK_FALSE(matches(g, R"({"name":"Ann","age":4.5})"));
    CHECK_FALSE(matches(g, R"({"name":"Ann",})"));
    auto none_required = compile(R"({"properties":{"a":{"type":"boolean"},"b":{"type":"null"}}})");
    CHECK(matches(none_required, "{}"));
    CHECK(matches(none_required, R"({"b":null})"));
    CHECK(matches(none_required, R"({"a":true,"b":null})"));
    CHECK_FALSE(matches(none_required, R"({,"b":null})"));
}

TEST_CASE("additionalPropertiesTrueOrSchema") {
    auto any = compile(
        R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":true})");
    CHECK(matches(any, R"({"a":1,"b":[null]})"));
    auto ints = compile(R"({"type":"object","additionalProperties":{"type":"integer"}})");
    CHECK(matches(ints, R"({"x":1,"y":-2})"));
    CHECK(matches(ints, "{}"));
    CHECK_FALSE(matches(ints, R"({"x":"1"})"));
}

TEST_CASE("stringLengthsAndFormats") {
    auto g = compile(R"({"type":"string","minLength":2,"maxLength":4})");
    CHECK(matches(g, R"("ab")"));
    CHECK(matches(g, R"("a\nb")"));  // an escape is one character
    CHECK(matches(g, R"("abcd")"));
    CHECK_FALSE(matches(g, R"("a")"));
    CHECK_FALSE(matches(g, R"("abcde")"));
    CHECK(matches(compile(R"({"type":"string","format":"date"})"), R"("2024-02-28")"));
    CHECK_FALSE(matches(compile(R"({"type":"string","format":"date"})"), R"("2024-13-01")"));
    CHECK(matches(compile(R"({"type":"string","format":"date-time"})"), R"("2024-02-28T13:05:59Z")"));
    CHECK(matches(compile(R"({"type":"string","format":"time"})"), R"("23:59:00+02:00")"));
    CHECK(matches(compile(R"({"type":"string","format":"uuid"})"), R"("123e4567-e89b-12d3-a456-426614174000")"));
    CHECK(matches(compile(R"({"type":"string","format":"email"})"), R"("ann.lee@example.org")"));
    CHECK_FALSE(matches(compile(R"({"type":"string","format":"email"})"), R"("ann")"));
}

TEST_CASE("integerBoundsAreExact") {
    auto g = compile(R"({"type":"integer","minimum":-15,"exclusiveMaximum":120})");
    for (int v = -40; v <= 200; ++v) {
        CAPTURE(v);
        CHECK(matches(g, std::to_string(v)) == (v >= -15 && v < 120));
    }
    CHECK_FALSE(matches(g, "007"));
    CHECK_FALSE(matches(g, "-0"));
    auto big = compile(R"({"type":"integer","exclusiveMinimum":999,"maximum":100000})");
    for (int v : {999, 1000, 1001, 9999, 10000, 99999, 100000, 100001})
        CHECK(matches(big, std::to_string(v)) == (v > 999 && v <= 100000));
    auto low = compile(R"({"type":"integer","minimum":3})");
    CHECK(matches(low, "3"));
    CHECK(matches(low, "123456789"));
    CHECK_FALSE(matches(low, "2"));
    CHECK_FALSE(matches(low, "-5"));
    CHECK(matches(compile(R"({"type":"number"})"), "-12.5e-3"));
}

TEST_CASE("numberBoundsAreExactInFixedPoint") {
    auto g = compile(R"({"type":"number","minimum":0.5,"exclusiveMaximum":10.25})");
    for (const char* yes : {"0.5", "0.50", "0.500001", "1", "3.14159", "9.999999", "10", "10.2", "10.249999"})
        CHECK_MESSAGE(matches(g, yes), yes);
    for (const char* no : {"0.499999", "0.4", "0", "10.25", "10.250000", "10.3", "11", "-1", "1e1", "1.0000001", "01"})
        CHECK_MESSAGE(!matches(g, no), no);
    auto neg = compile(R"({"type":"number","exclusiveMinimum":-2.5,"maximum":-0.125})");
    for (const char* yes : {"-2.499999", "-2", "-1.5", "-0.125", "-0.2"}) CHECK_MESSAGE(matches(neg, yes), yes);
    for (const char* no : {"-2.5", "-3", "-0.124", "0", "-0", "0.5"}) CHECK_MESSAGE(!matches(neg, no), no);
    auto tiny = compile(R"({"type":"number","minimum":0.1,"maximum":0.2})");  // no integer inside
    CHECK(matches(tiny, "0.15"));
    CHECK(matches(tiny, "0.2"));
    CHECK_FALSE(matches(tiny, "0.2000001"));
    // A half-line open on one side of 0: exponents too.
    auto non_negative = compile(R"({"type":"number","minimum":0})");
    CHECK(matches(non_negative, "2.5e+30"));
    CHECK(matches(non_negative, "0"));
    CHECK_FALSE(matches(non_negative, "-1e-3"));
    auto at_most = compile(R"({"type":"number","maximum":7.5})");
    CHECK(matches(at_most, "-4e9"));
    CHECK(matches(at_most, "7.5"));
    CHECK_FALSE(matches(at_most, "7.6"));
    CHECK_FALSE(matches(at_most, "1e1"));
    CHECK(matches(compile(R"({"type":"number","minimum":-1e-7,"maximum":1e-7})"), "0"));
    CHECK(refused_keyword(json::parse(R"({"type":"number","minimum":0.1000001,"maximum":0.1000009})")) == "minimum");
    CHECK(refused_keyword(json::parse(R"({"type":"number","minimum":1e15})")) == "minimum");
}

// Random texts of random bounded-number schemas, drawn byte by byte from what the grammar
// allows, then parsed as doubles and checked against the bounds parsed as doubles (what a
// validator such as Python's jsonschema does).
TEST_CASE("numberBoundsHoldForRandomTextsOnManySeeds") {
    std::mt19937 rng(37);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    auto bound = [&] {  // e.g. -812.25, 3, 0.001, 45.5
        const double mantissa = pick(20001) - 10000;
        return json(mantissa / std::pow(10.0, pick(5)));
    };
    int texts = 0, fractional = 0;
    for (int seed = 0; seed < 300; ++seed) {
        json schema = {{"type", "number"}};
        const char* lower = pick(2) ? "minimum" : "exclusiveMinimum";
        const char* upper = pick(2) ? "maximum" : "exclusiveMaximum";
        json a = bound(), b = bound();
        if (a.get<double>() > b.get<double>()) std::swap(a, b);
        const int sides = 1 + pick(3);  // 1: lower only, 2: upper only, 3: both
        if (sides & 1) schema[lower] = a;
        if (sides & 2) schema[upper] = b;
        std::shared_ptr<const Grammar> g;
        try {
            g = compile(schema.dump());
        } catch (const GrammarError& e) {  // only when no 6-digit number fits
            CHECK_MESSAGE(a.get<double>() + 1e-6 > b.get<double>(), schema.dump(), " ", e.what());
            continue;
        }
        for (int t = 0; t < 20; ++t) {
            GrammarState s(g);
            std::string text;
            while (text.size() < 40 && !(s.can_end() && pick(4) == 0)) {
                std::vector<uint8_t> next;
                for (int c = 32; c < 127; ++c)
                    if (GrammarState(s).accept_byte(static_cast<uint8_t>(c))) next.push_back(static_cast<uint8_t>(c));
                if (next.empty()) break;
                const uint8_t c = next[static_cast<size_t>(pick(static_cast<int>(next.size())))];
                REQUIRE(s.accept_byte(c));
                text += static_cast<char>(c);
            }
            if (!s.can_end()) continue;  // stopped at 40 bytes inside an exponent's digits
            CAPTURE(schema.dump());
            CAPTURE(text);
            REQUIRE(json::accept(text));
            const double v = std::strtod(text.c_str(), nullptr);
            if (schema.contains("minimum")) CHECK(v >= schema["minimum"].get<double>());
            if (schema.contains("exclusiveMinimum")) CHECK(v > schema["exclusiveMinimum"].get<double>());
            if (schema.contains("maximum")) CHECK(v <= schema["maximum"].get<double>());
            if (schema.contains("exclusiveMaximum")) CHECK(v < schema["exclusiveMaximum"].get<double>());
            ++texts;
            fractional += v != std::floor(v);
        }
    }
    MESSAGE(texts, " texts of bounded-number schemas within their bounds, ", fractional, " of them fractional");
    CHECK(texts > 4000);
    CHECK(fractional > texts / 4);
}

TEST_CASE("arraysCountsAndPrefixItems") {
    auto g = compile(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
    CHECK(matches(g, "[1]"));
    CHECK(matches(g, "[1, 2, 3]"));
    CHECK_FALSE(matches(g, "[]"));
    CHECK_FALSE(matches(g, "[1,2,3,4]"));
    auto empty_ok = compile(R"({"type":"array","items":{"type":"boolean"}})");
    CHECK(matches(empty_ok, "[]"));
    CHECK(matches(empty_ok, "[true,false,true]"));
    auto tuple = compile(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})");
    CHECK(matches(tuple, R"(["a", 1])"));
    CHECK_FALSE(matches(tuple, R"(["a"])"));
    CHECK_FALSE(matches(tuple, R"(["a", 1, 2])"));
}

TEST_CASE("enumConstAnyOfAndNullableTypes") {
    auto e = compile(R"({"enum":["red","green",3,null,{"a":[1]}]})");
    CHECK(matches(e, R"("red")"));
    CHECK(matches(e, "3"));
    CHECK(matches(e, "null"));
    CHECK(matches(e, R"({"a":[1]})"));
    CHECK_FALSE(matches(e, R"("blue")"));
    CHECK(matches(compile(R"({"const":"say \"hi\""})"), R"("say \"hi\"")"));
    auto any = compile(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})");
    CHECK(matches(any, "12"));
    CHECK(matches(any, R"("x")"));
    CHECK_FALSE(matches(any, R"("xy")"));
    auto nullable = compile(R"({"type":["string","null"]})");
    CHECK(matches(nullable, "null"));
    CHECK(matches(nullable, R"("s")"));
    CHECK_FALSE(matches(nullable, "1"));
}

namespace {

std::shared_ptr<const Grammar> pattern(const std::string& regex) {
    return compile(json{{"type", "string"}, {"pattern", regex}}.dump());
}

// A random text the grammar accepts, byte by byte among printable ASCII; "" when it runs
// past 60 bytes.
std::string random_text(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
    GrammarState s(g);
    std::string text;
    while (!(s.can_end() && rng() % 4 == 0)) {
        std::vector<char> next;
        for (char c = 32; c < 127; ++c)
            if (GrammarState(s).accept_byte(static_cast<uint8_t>(c))) next.push_back(c);
        if (next.empty() || text.size() > 60) return s.can_end() ? text : "";
        text += next[rng() % next.size()];
        REQUIRE(s.accept_byte(static_cast<uint8_t>(text.back())));
    }
    return text;
}

}  // namespace

TEST_CASE("patternsBecomeGrammars") {
    struct Case {
        const char* regex;
        std::vector<const char*> yes, no;  // JSON texts
    };
    const std::vector<Case> cases = {
        {"^[A-Z]{2}-[0-9]{3}$", {R"("AB-123")"}, {R"("ab-123")", R"("AB-12")", R"("AB-1234")", R"("xAB-123")"}},
        {"^(foo|bar)+baz?$", {R"("foobarba")", R"("barfooba")", R"("foobaz")"}, {R"("baz")", R"("foobar")"}},
        {"^\\d{2,}\\.\\d?$", {R"("12.")", R"("123.4")"}, {R"("1.2")", R"("12")", R"("12.34")"}},
        {"^[^a-c]\\w*$", {R"("x_9")", R"("Z")"}, {R"("abc")", R"("")"}},
        {"^(?:ab|cd){2,3}$", {R"("abcd")", R"("cdcdab")"}, {R"("ab")", R"("abababab")"}},
        {"^(?<year>\\d{4})$", {R"("2026")"}, {R"("26")"}},
        {"^[\\\\\"]+$", {R"("\\\"")"}, {R"("a")", R"(""")"}},  // a class of backslash and quote
        {"^\\t\\n$", {R"("\t\n")"}, {R"("tn")"}},
        {"^a.c$", {R"("abc")", R"("a-c")", R"("aéc")"}, {R"("a\nc")", R"("ac")"}},
        {"^(a|)b$", {R"("ab")", R"("b")"}, {R"("aab")"}},
        {"ab", {R"("ab")", R"("xxabyy")"}, {R"("a b")"}},  // unanchored: anywhere
        {"^é+€?$", {R"("éé€")"}, {R"("€")"}},
        {"^\\u00e9\\x41$", {R"("éA")"}, {R"("eA")"}},
    };
    for (const Case& c : cases) {
        const std::string regex = c.regex;
        CAPTURE(regex);
        auto g = pattern(c.regex);
        for (const std::string y : c.yes) CHECK_MESSAGE(matches(g, y), y);
        for (const std::string n : c.no) CHECK_MESSAGE(!matches(g, n), n);
    }
}

TEST_CASE("patternsOutsideTheSubsetAreRefusedNamingIt") {
    for (const char* regex : {"^(?=a)b$",   "^(?!a)",
                              "(?<=a)b",    "(a)\\1",
                              "\\bword\\b", "a^b",
                              "a$b",        "(^a)",
                              "[]",         "[z-a]",
                              "(a",         "a)",
                              "*a",         "a**",
                              "a{2,1}",     "a{1001}",
                              "a{x}",       "\\",
                              "\\q",        "\\u{41}",
                              "[\\D]",      "((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))"}) {
        CAPTURE(regex);
        CHECK(refused_keyword(json{{"type", "string"}, {"pattern", regex}}) == "pattern");
    }
    CHECK(refused_keyword(json::parse(R"({"type":"string","pattern":"^a$","maxLength":3})")) == "pattern");
    CHECK(refused_keyword(json::parse(R"({"type":"string","pattern":5})")) == "pattern");
    CHECK(matches(compile(R"({"pattern":"^a+$"})"), R"("aa")"));  // no type: a string still
}

// Random texts each pattern's grammar accepts, decoded from JSON, match the pattern by
// std::regex (ECMAScript, the dialect JSON schema names) on many seeds.
TEST_CASE("patternTextsMatchTheRegexOnManySeeds") {
    const std::vector<std::string> regexes = {"^[A-Z]{2}-[0-9]{3}$",
                                              "^\\d{3}-\\d{4}$",
                                              "^(foo|bar)+baz?$",
                                              "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,4}$",
                                              "^#[0-9a-fA-F]{6}$",
                                              "^\\w+\\s\\w+$",
                                              "^(\\+\\d{1,3} )?\\(\\d{3}\\) \\d{3}-\\d{4}$",
                                              "abc",
                                              "x$",
                                              "^a.c$",
                                              "^(?:ab|cd){2,3}$",
                                              "^[\\\\\"/]+$",
                                              "^\\.\\*\\?[-a]$",
                                              "^(a|)b$",
                                              "^[^a-y]{2}$",
                                              "^v\\d+(\\.\\d+){0,2}$",
                                              "^\\S+\\D$",
                                              "^[\\s\\d]{1,3}$",
                                              "^(?:[01]\\d|2[0-3]):[0-5]\\d$",
                                              "^a|b$"};
    std::mt19937 rng(37);
    int texts = 0;
    for (const std::string& regex : regexes) {
        CAPTURE(regex);
        auto g = pattern(regex);
        const std::regex re(regex, std::regex::ECMAScript);
        for (int seed = 0; seed < 60; ++seed) {
            const std::string text = random_text(g, rng);
            if (text.empty()) continue;
            CAPTURE(text);
            const json value = json::parse(text);
            REQUIRE(value.is_string());
            CHECK(std::regex_search(value.get<std::string>(), re));
            ++texts;
        }
    }
    MESSAGE(texts, " random texts of ", regexes.size(), " patterns, each matching its regex");
    CHECK(texts > 800);
}

TEST_CASE("allOfMergesObjects") {
    auto g = compile(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                                  {"properties":{"b":{"type":"string"}},"required":["b"]}]})");
    CHECK(matches(g, R"({"a":1,"b":"x"})"));
    CHECK_FALSE(matches(g, R"({"a":1})"));
}

TEST_CASE("refsToDefsRecurse") {
    auto g = compile(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
        "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}})");
    CHECK(matches(g, R"({"v":1})"));
    CHECK(matches(g, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"));
    CHECK_FALSE(matches(g, R"({"v":1,"kids":[{}]})"));
    auto defs = compile(R"({"type":"object","properties":{"p":{"$ref":"#/definitions/pos"}},"required":["p"],
                            "definitions":{"pos":{"type":"integer","minimum":1}}})");
    CHECK(matches(defs, R"({"p":5})"));
    CHECK_FALSE(matches(defs, R"({"p":0})"));
}

TEST_CASE("annotationsAreIgnored") {
    auto g = compile(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"T",
                         "description":"d","type":"boolean","default":true,"examples":[false]})");
    CHECK(matches(g, "true"));
}

TEST_CASE("unsupportedKeywordsAreNamed") {
    CHECK(refused_keyword(json::parse(R"({"type":"object","patternProperties":{"^a":{}}})")) == "patternProperties");
    CHECK(refused_keyword(json::parse(R"({"type":"object","minProperties":1})")) == "minProperties");
    CHECK(refused_keyword(json::parse(R"({"not":{"type":"string"}})")) == "not");
    CHECK(refused_keyword(json::parse(R"({"type":"string","format":"hostname"})")) == "format");
    CHECK(refused_keyword(json::parse(R"({"$ref":"https://example.com/s.json"})")) == "$ref");
    CHECK(refused_keyword(json::parse(R"({"$ref":"#/$defs/missing"})")) == "$ref");
    CHECK(refused_keyword(json::parse(R"({"type":"strnig"})")) == "type");
    CHECK(refused_keyword(json::parse(R"({"type":"object","properties":{"a":{"type":"integer","if":{}}}})")) == "if");
    CHECK(refused_keyword(json::parse("false")) == "false");
}

TEST_CASE("hostileSchemasAreRefused") {
    json deep = {{"type", "integer"}};
    for (int i = 0; i < 40; ++i) deep = {{"type", "array"}, {"items", deep}};
    CHECK(refused_keyword(deep) == "items");
    json huge_enum = {{"enum", json::array()}};
    for (int i = 0; i < 100000; ++i) huge_enum["enum"].push_back(i);
    CHECK(refused_keyword(huge_enum) == "enum");
    // $ref cycles with no base case: bare, and through a required property.
    CHECK(refused_keyword(json::parse(
              R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}})")) == "$ref");
    CHECK(refused_keyword(json::parse(R"({"$ref":"#"})")) == "$ref");
    CHECK(refused_keyword(json::parse(R"({"$ref":"#/$defs/n","$defs":{"n":{"type":"object",
        "properties":{"next":{"$ref":"#/$defs/n"}},"required":["next"]}}})")) == "$ref");
    Limits few;
    few.max_rules = 20;
    json wide = {{"type", "object"}, {"properties", json::object()}};
    for (int i = 0; i < 50; ++i) {
        const std::string key =
            std::string(1, 'p').append(std::to_string(i));  // GCC 12's -Wrestrict misfires on "p" + s
        wide["properties"][key] = {{"type", "string"}};
    }
    CHECK(refused_keyword(wide, few).find("20") != std::string::npos);
}

TEST_CASE("rulesEmbedInALargerGrammar") {
    const std::string a = json_schema_rules(
        json::parse(R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]})"), "call-a");
    const std::string b = json_schema_rules(json::parse(R"({"type":"array","items":{"type":"string"}})"), "call-b");
    auto g = Grammar::parse("root ::= \"A\" call-a | \"B\" call-b\n" + a + b);
    CHECK(matches(g, R"(A{"x":1})"));
    CHECK(matches(g, R"(B["q"])"));
    CHECK_FALSE(matches(g, R"(A["q"])"));
    CHECK(matches(Grammar::parse(any_json_object_gbnf()), R"({"k":[1,{"z":null}]})"));
    CHECK_FALSE(matches(Grammar::parse(any_json_object_gbnf()), "[1]"));
}
