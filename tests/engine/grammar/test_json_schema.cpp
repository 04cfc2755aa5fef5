// JSON schema -> GBNF (engine/grammar/json_schema.h): per keyword, the texts the compiled
// grammar accepts and refuses; the keywords it refuses with their names; the limits.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

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
    auto number = compile(R"({"type":"number","minimum":0.5,"maximum":3.5})");  // integers 1..3
    CHECK(matches(number, "1"));
    CHECK(matches(number, "3"));
    CHECK_FALSE(matches(number, "0"));
    CHECK(matches(compile(R"({"type":"number"})"), "-12.5e-3"));
    CHECK(refused_keyword(json::parse(R"({"type":"number","minimum":0.1,"maximum":0.2})")) == "minimum");
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
    CHECK(refused_keyword(json::parse(R"({"type":"string","pattern":"^a+$"})")) == "pattern");
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
