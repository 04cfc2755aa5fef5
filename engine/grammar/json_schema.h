// JSON schema -> GBNF (engine/grammar/grammar.h's notation), the subset of draft 2020-12 that
// OpenAI's structured outputs use. engine/grammar/README.md lists the keywords; any other
// keyword is a GrammarError naming it, never silently ignored.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/grammar/grammar.h"

namespace ember::grammar {

// A JSON schema as GBNF rules: defines rule `name` and helper rules prefixed `name-`, plus the
// shared JSON primitives under fixed names (value object array string char number integer
// integral boolean null ws, and the format rules date time date-time uuid email), so callers
// can embed a schema in a larger grammar (a tool call's arguments). Grammar::parse accepts
// the primitives defined more than once (they are the same text each time).
std::string json_schema_rules(const nlohmann::json& schema, std::string_view name, const Limits& = {});
// A whole grammar for a schema: root ::= <the schema>.
std::string json_schema_to_gbnf(const nlohmann::json& schema, const Limits& = {});
// {"type":"json_object"} mode: any JSON object.
std::string any_json_object_gbnf();

}  // namespace ember::grammar
