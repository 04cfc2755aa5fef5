// The checks both APIs' request parsers share (request_fields.h).
#include "engine/server/request_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::server {

using json = nlohmann::json;

void invalid(std::string param, std::string message, std::string code, int status) {
    throw Invalid{ApiError{status, std::move(message), "invalid_request_error", std::move(param), std::move(code)}};
}

void unsupported(const std::string& param, const std::string& what) {
    invalid(param, what + " is not supported by this server", "unsupported_parameter");
}

std::string type_of(const json& v) {
    switch (v.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::string:
            return "a string";
        case json::value_t::array:
            return "an array";
        case json::value_t::object:
            return "an object";
        default:
            return v.is_number() ? "a number" : "a value of another type";
    }
}

std::string number_text(double v) {
    json j = v;
    return j.dump();
}

size_t json_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

json parse_body(std::string_view body, const ServerLimits& limits) {
    if (body.size() > limits.max_body_bytes)
        invalid(
            "",
            "the request body is larger than this server accepts (" + std::to_string(limits.max_body_bytes) + " bytes)",
            "request_too_large", 413);
    if (json_depth(body) > limits.max_json_depth)
        invalid("", "the request body nests deeper than " + std::to_string(limits.max_json_depth) + " levels");
    try {
        return json::parse(body);
    } catch (const json::exception& e) {
        invalid("", std::string("the request body is not valid JSON: ") + e.what(), "invalid_json");
    }
}

const json* Fields::get(const char* key) const {
    const auto it = body_.find(key);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> Fields::boolean(const char* key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) invalid(key, std::string("'") + key + "' must be a boolean, not " + type_of(*v));
    return v->get<bool>();
}

std::optional<std::string> Fields::string(const char* key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) invalid(key, std::string("'") + key + "' must be a string, not " + type_of(*v));
    return v->get<std::string>();
}

std::optional<double> Fields::number(const char* key, double lo, double hi) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) invalid(key, std::string("'") + key + "' must be a number, not " + type_of(*v));
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi))
        invalid(key, std::string("'") + key + "' must be between " + number_text(lo) + " and " + number_text(hi) +
                         "; got " + v->dump());
    return x;
}

std::optional<int64_t> Fields::integer(const char* key, int64_t lo, int64_t hi) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    const auto x = as_integer(*v);
    if (!x) invalid(key, std::string("'") + key + "' must be an integer, not " + type_of(*v));
    if (*x < lo || *x > hi)
        invalid(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                         "; got " + v->dump());
    return *x;
}

std::optional<int64_t> Fields::as_integer(const json& v) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    return std::nullopt;
}

void PromptBudget::take(const std::string& param, size_t bytes) {
    if (bytes > left_)
        invalid(param,
                "the prompt is larger than this server accepts (" + std::to_string(left_ + used_) +
                    " bytes of text at most)",
                "prompt_too_long", 413);
    left_ -= bytes;
    used_ += bytes;
}

std::vector<std::string> parse_stop(const Fields& f, const ServerLimits& limits) {
    const json* s = f.get("stop");
    if (!s) return {};
    if (s->is_string()) {
        if (s->get<std::string>().empty()) invalid("stop", "a stop string must not be empty");
        return {s->get<std::string>()};
    }
    if (!s->is_array()) invalid("stop", "'stop' must be a string or an array of strings, not " + type_of(*s));
    if (s->size() > limits.max_stop)
        invalid("stop",
                "at most " + std::to_string(limits.max_stop) + " stop strings; got " + std::to_string(s->size()));
    std::vector<std::string> out;
    for (const json& e : *s) {
        if (!e.is_string() || e.get<std::string>().empty())
            invalid("stop", "every stop string must be a non-empty string; got " + e.dump());
        out.push_back(e.get<std::string>());
    }
    return out;
}

std::shared_ptr<const grammar::Grammar> compile_grammar(const std::string& param, const ServerLimits& limits,
                                                        const std::function<std::string()>& gbnf) {
    try {
        return grammar::Grammar::parse(gbnf(), limits.grammar);
    } catch (const grammar::GrammarError& e) {
        const std::string kw = e.keyword();
        invalid(param, std::string(e.what()) + (kw.empty() ? "" : " (keyword '" + kw + "')"),
                kw.empty() ? "invalid_grammar" : "unsupported_schema");
    }
}

}  // namespace ember::server
