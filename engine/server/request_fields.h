// What both APIs' request parsers (request_parser for OpenAI's, ollama_parser for Ollama's)
// share: the body's size and nesting checked before it is parsed, typed access to its fields,
// the prompt budget, the stop strings and grammars. A failed check throws Invalid (the ApiError to
// send); each parser's entry point is the one place that turns it into a return value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/server/api_types.h"

namespace ember::server {

struct Invalid {
    ApiError error;
};

[[noreturn]] void invalid(std::string param, std::string message, std::string code = "", int status = 400);
[[noreturn]] void unsupported(const std::string& param, const std::string& what);

std::string type_of(const nlohmann::json& v);  // "a string", "an array", … for messages
std::string number_text(double v);

// Nesting depth of a JSON text (brackets outside strings), checked before parsing so that a
// body of a million '[' is refused in linear time with no deep recursion anywhere.
size_t json_depth(std::string_view text);

// The body as JSON after the size (413) and depth (400) checks; invalid JSON is a 400.
nlohmann::json parse_body(std::string_view body, const ServerLimits& limits);

// Typed access to the fields of a request object. A field that is absent or null is "not
// given" (std::nullopt); one of the wrong type or out of range is a 400 naming it.
class Fields {
public:
    explicit Fields(const nlohmann::json& body) : body_(body) {}

    const nlohmann::json* get(const char* key) const;
    std::optional<bool> boolean(const char* key) const;
    std::optional<std::string> string(const char* key) const;
    std::optional<double> number(const char* key, double lo, double hi) const;
    std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const;
    // Integers as JSON writes them: 7, -3, also 7.0; out of int64's range: nullopt.
    static std::optional<int64_t> as_integer(const nlohmann::json& v);

private:
    const nlohmann::json& body_;
};

// Message contents / prompt text together, against the limit (413 above it).
class PromptBudget {
public:
    explicit PromptBudget(size_t limit) : left_(limit) {}
    void take(const std::string& param, size_t bytes);

private:
    size_t left_, used_ = 0;
};

// A grammar for the request (a JSON schema or GBNF made by `gbnf`), compiled here so that a bad
// or too-large one is a 400 naming `param` before anything is queued.
std::shared_ptr<const grammar::Grammar> compile_grammar(const std::string& param, const ServerLimits& limits,
                                                        const std::function<std::string()>& gbnf);

// "stop": a string or an array of non-empty strings, at most limits.max_stop of them.
std::vector<std::string> parse_stop(const Fields& f, const ServerLimits& limits);

}  // namespace ember::server
