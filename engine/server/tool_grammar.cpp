// Forced tool calls -> a GBNF grammar, compiled once per request.
#include "engine/server/tool_grammar.h"

#include <string>
#include <vector>

#include "engine/grammar/json_schema.h"

namespace ember::server {

namespace {

// A tool given without parameters takes none: its arguments are an object all the same.
nlohmann::json arguments_schema(const nlohmann::json& parameters) {
    return parameters.empty() ? nlohmann::json{{"type", "object"}} : parameters;
}

ApiError schema_error(size_t tool, const grammar::GrammarError& e) {
    const std::string param = "tools[" + std::to_string(tool) + "].function.parameters";
    return {400, param + ": " + e.what(), "invalid_request_error", param, "unsupported_schema"};
}

}  // namespace

std::variant<std::shared_ptr<const grammar::Grammar>, ApiError> forced_call_grammar(const ToolRequest& t,
                                                                                    ToolCallFormat format,
                                                                                    const grammar::Limits& limits) {
    if (t.choice != ToolChoice::Required && t.choice != ToolChoice::Named) return nullptr;
    if (format == ToolCallFormat::None)
        return ApiError{400,
                        "this model's chat template writes tool calls in a form Ember does not know, so a call "
                        "cannot be forced (use tool_choice \"auto\")",
                        "invalid_request_error", "tool_choice", "unsupported_tool_format"};
    std::vector<ToolGrammarTool> tools;
    std::string rules;
    for (size_t i = 0; i < t.tools.size(); ++i) {
        if (t.choice == ToolChoice::Named && t.tools[i].name != t.named) continue;
        const std::string rule = "args-" + std::to_string(i);
        try {
            rules += grammar::json_schema_rules(arguments_schema(t.tools[i].parameters), rule, limits) + "\n";
        } catch (const grammar::GrammarError& e) {
            return schema_error(i, e);
        }
        tools.push_back({t.tools[i].name, rule});
    }
    try {
        return grammar::Grammar::parse(tool_call_grammar(format, tools, t.parallel) + rules, limits);
    } catch (const grammar::GrammarError& e) {
        return ApiError{400, std::string("the tools' schemas make too large a grammar: ") + e.what(),
                        "invalid_request_error", "tools", "unsupported_schema"};
    }
}

}  // namespace ember::server
