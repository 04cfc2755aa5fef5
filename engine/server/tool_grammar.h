// The grammar a forced tool call is decoded under: with tool_choice "required" or a named
// function, the model's output must be a valid call, so it is constrained to the literal
// markers of its family's call form (tool_call_grammar in engine/template/tool_calls.h) around
// arguments that match the tool's JSON schema (grammar::json_schema_rules). Other choices
// decode freely.
#pragma once
#include <memory>
#include <variant>

#include "engine/grammar/grammar.h"
#include "engine/server/api_types.h"

namespace ember::server {

// Null when the request does not force a call. A schema the grammar compiler refuses (an
// unsupported keyword, too deep, too large) is a 400 naming the tool's parameters; a model whose
// call form Ember does not know is a 400 naming tool_choice.
std::variant<std::shared_ptr<const grammar::Grammar>, ApiError> forced_call_grammar(const ToolRequest& tools,
                                                                                    ToolCallFormat format,
                                                                                    const grammar::Limits& limits = {});

}  // namespace ember::server
