// JSON schema -> GBNF (engine/grammar/json_schema.h). One pass over the schema writes one
// rule per object property, array item, $ref target and alternative, named after the
// caller's rule; everything refers to the shared JSON primitives below. Choices made here
// (engine/grammar/README.md has the full list):
//  - properties come required first, then optional ones, each in key order (nlohmann::json
//    keeps objects sorted); no property beyond `properties` unless additionalProperties
//    allows it;
//  - whitespace between tokens is bounded (ws), numbers have at most 16 integral and 16
//    fractional digits, so a model cannot loop on spaces or digits;
//  - integer bounds are exact (digit-range rules); a bounded `number` is generated in fixed
//    point (at most 6 fractional digits, magnitude below 10^12) within exact bounds, with
//    exponents only where a bound leaves a half-line open;
//  - oneOf is generated like anyOf; formats date, time, date-time, uuid, email.
#include "engine/grammar/json_schema.h"

#include "engine/grammar/json_pattern.h"

#include <cctype>
#include <cmath>
#include <map>
#include <set>

namespace ember::grammar {
namespace {

using nlohmann::json;

const char* const kPrimitives = R"(value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
integer ::= "-"? integral
integral ::= "0" | [1-9] [0-9]{0,15}
boolean ::= "true" | "false"
null ::= "null"
ws ::= | " " | "\n" [ \t]{0,20}
)";

// Formats: only valid values (days 01-28, so every date exists).
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", R"(date ::= [12] [0-9]{3} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ))"},
    {"time",
     R"(time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
    {"date-time", R"(date-time ::= date "T" time)"},
    {"uuid", R"(uuid ::= [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
    {"email", R"(email ::= [a-zA-Z0-9] [a-zA-Z0-9._+-]{0,15} "@" [a-zA-Z0-9]{1,15} ( "." [a-zA-Z]{2,6} ){1,2})"},
};

const std::set<std::string, std::less<>> kAnnotations = {
    "description", "title", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string, std::less<>> kKeywords = {"type",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "items",
                                                      "prefixItems",
                                                      "minItems",
                                                      "maxItems",
                                                      "enum",
                                                      "const",
                                                      "minLength",
                                                      "maxLength",
                                                      "format",
                                                      "pattern",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum",
                                                      "anyOf",
                                                      "oneOf",
                                                      "allOf",
                                                      "$ref",
                                                      "$defs",
                                                      "definitions"};

constexpr int64_t kMaxMagnitude = 9'999'999'999'999'999;  // 16 digits, as `integral`

[[noreturn]] void refuse(const std::string& keyword, const std::string& what) {
    throw GrammarError("json schema: " + what, keyword);
}

// Bytes as a GBNF literal.
std::string literal(std::string_view bytes) {
    std::string out = "\"";
    static const char* hex = "0123456789ABCDEF";
    for (char ch : bytes) {
        const auto c = static_cast<uint8_t>(ch);
        if (c == '"' || c == '\\') out += '\\', out += ch;
        else if (c < 0x20 || c == 0x7F) out += "\\x", out += hex[c >> 4], out += hex[c & 15];
        else out += ch;
    }
    return out + "\"";
}

// A property or definition name as part of a rule name ([a-zA-Z0-9-]).
std::string rule_safe(std::string_view name) {
    std::string out;
    for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    return out.empty() ? std::string("p") : out;
}

// ---- integer ranges as digit patterns ----------------------------------------------

// Patterns for the fixed-width digit strings in [lo, hi] (same length, leading zeros).
void fixed_range(const std::string& lo, const std::string& hi, std::string prefix, std::vector<std::string>& out) {
    if (lo.empty()) {
        out.push_back(prefix);
        return;
    }
    const size_t n = lo.size() - 1;
    const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
    auto digits = [](char a, char b) {
        return a == b ? std::string("\"") + a + "\"" : std::string("[") + a + "-" + b + "]";
    };
    auto any = [&](size_t k) { return k == 0 ? std::string() : " [0-9]{" + std::to_string(k) + "}"; };
    if (lo[0] == hi[0]) {
        fixed_range(rest_lo, rest_hi, prefix + digits(lo[0], lo[0]) + " ", out);
        return;
    }
    const bool lo_full = rest_lo == std::string(n, '0'), hi_full = rest_hi == std::string(n, '9');
    char from = lo[0], to = hi[0];
    if (!lo_full) {
        fixed_range(rest_lo, std::string(n, '9'), prefix + digits(lo[0], lo[0]) + " ", out);
        ++from;
    }
    if (!hi_full) --to;
    if (from <= to) out.push_back(prefix + digits(from, to) + any(n));
    if (!hi_full) fixed_range(std::string(n, '0'), rest_hi, prefix + digits(hi[0], hi[0]) + " ", out);
}

// Patterns for the decimal numbers in [lo, hi], 0 <= lo <= hi, no leading zeros.
void natural_range(int64_t lo, int64_t hi, std::vector<std::string>& out) {
    int64_t low_of_width = 0, high_of_width = 9;
    for (size_t width = 1; width <= 16 && low_of_width <= hi; ++width) {
        const int64_t a = std::max(lo, low_of_width), b = std::min(hi, high_of_width);
        if (a <= b) fixed_range(std::to_string(a), std::to_string(b), "", out);
        low_of_width = high_of_width + 1;
        high_of_width = high_of_width * 10 + 9;
    }
}

std::string integer_range(int64_t lo, int64_t hi) {
    std::vector<std::string> alts;
    if (lo < 0) {
        std::vector<std::string> neg;
        natural_range(std::max<int64_t>(1, hi < 0 ? -hi : 1), -lo, neg);
        for (const std::string& p : neg) alts.push_back("\"-\" " + p);
    }
    if (hi >= 0) natural_range(std::max<int64_t>(lo, 0), hi, alts);
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
}

// ---- bounded real numbers as digit patterns ----------------------------------------
// A bounded `number` is generated in fixed point: at most kFractionDigits fractional digits
// and a magnitude below 10^12, so every bound is an exact integer count of 10^-6 steps
// (int64) and the comparisons are exact in decimal. Decimal order survives the rounding to
// binary floating point (rounding is monotone), so a validator that parses both the bound and
// the output as doubles agrees.

constexpr int kFractionDigits = 6;
constexpr int64_t kScale = 1'000'000;                         // 10^kFractionDigits
constexpr int64_t kMaxScaled = 999'999'999'999'999'999;       // below 10^12, in 10^-6 steps
constexpr int64_t kBeyondScaled = 1'000'000'000'000'000'000;  // a bound past the range

// A JSON number times 10^6, rounded down (or up), exactly: from its shortest decimal text (the
// double's own, as nlohmann writes it), never through a binary product. Past the range:
// +-kBeyondScaled.
int64_t scaled_bound(const json& v, bool round_up) {
    const std::string text = v.dump();
    size_t i = 0;
    const bool negative = text[0] == '-';
    if (negative) ++i;
    std::string digits;
    int64_t exponent = 0;  // value = digits * 10^exponent
    for (bool point = false; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
        if (text[i] == '.') point = true;
        else digits += text[i], exponent -= point ? 1 : 0;
    }
    if (i < text.size()) exponent += std::stoll(text.substr(i + 1));
    exponent += kFractionDigits;
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
    bool remainder = false;  // digits dropped below 10^-6 were not all zero
    if (exponent < 0) {
        const size_t drop = static_cast<size_t>(std::min<int64_t>(-exponent, static_cast<int64_t>(digits.size())));
        remainder = digits.find_first_not_of('0', digits.size() - drop) != std::string::npos;
        digits.erase(digits.size() - drop);
        exponent = 0;
    }
    if (!digits.empty() && static_cast<int64_t>(digits.size()) + exponent > 18)
        return negative ? -kBeyondScaled : kBeyondScaled;
    int64_t n = 0;
    for (char c : digits) n = n * 10 + (c - '0');
    for (int64_t k = 0; k < exponent && n != 0; ++k) n *= 10;
    const bool away = remainder && (round_up != negative);  // away from zero
    return negative ? -(n + away) : n + away;
}

bool all_of_digit(const std::string& s, char d) { return s.find_first_not_of(d) == std::string::npos; }

std::string padded_digits(const std::string& lo, const std::string& hi);

// What may follow a first digit: nothing (when the rest of `lo` is zeros) or more digits.
std::string padded_tail(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return "";
    const std::string more = padded_digits(lo, hi);
    return all_of_digit(lo, '0') ? " ( " + more + " )?" : " " + more;
}

// Strings of 1..n digits (n = lo.size() = hi.size()) whose value, padded with zeros to n
// digits, lies in [lo, hi]: a number's fraction between two bounds.
std::string padded_digits(const std::string& lo, const std::string& hi) {
    const size_t n = lo.size();
    if (all_of_digit(lo, '0') && all_of_digit(hi, '9')) return "[0-9]{1," + std::to_string(n) + "}";
    const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
    auto digit = [](char d) { return std::string("\"") + d + "\""; };
    if (lo[0] == hi[0]) return "( " + digit(lo[0]) + padded_tail(lo_rest, hi_rest) + " )";
    std::string out = "( " + digit(lo[0]) + padded_tail(lo_rest, std::string(n - 1, '9'));
    if (lo[0] + 1 <= hi[0] - 1)
        out += std::string(" | [") + static_cast<char>(lo[0] + 1) + "-" + static_cast<char>(hi[0] - 1) + "]" +
               (n > 1 ? " [0-9]{0," + std::to_string(n - 1) + "}" : "");
    return out + " | " + digit(hi[0]) + padded_tail(std::string(n - 1, '0'), hi_rest) + " )";
}

std::string six_digits(int64_t v) {
    std::string s = std::to_string(v);
    return std::string(static_cast<size_t>(kFractionDigits) - s.size(), '0') + s;
}

// The fraction after a fixed integral part: scaled steps [lo, hi] of 10^-6 within one unit.
std::string fraction_range(int64_t lo, int64_t hi) {
    const std::string p = "\".\" " + padded_digits(six_digits(lo), six_digits(hi));
    return lo == 0 ? " ( " + p + " )?" : " " + p;
}

// Non-negative numbers in [lo, hi], in 10^-6 steps, without exponent.
std::string non_negative_range(int64_t lo, int64_t hi) {
    const int64_t ia = lo / kScale, fa = lo % kScale, ib = hi / kScale, fb = hi % kScale;
    if (ia == ib) return "( \"" + std::to_string(ia) + "\"" + fraction_range(fa, fb) + " )";
    std::string out = "( \"" + std::to_string(ia) + "\"" + fraction_range(fa, kScale - 1);
    if (ia + 1 <= ib - 1)
        out += " | " + integer_range(ia + 1, ib - 1) + " ( \".\" [0-9]{1," + std::to_string(kFractionDigits) + "} )?";
    return out + " | \"" + std::to_string(ib) + "\"" + fraction_range(0, fb) + " )";
}

class SchemaCompiler {
public:
    SchemaCompiler(const json& root, const Limits& limits) : root_(root), limits_(limits) {}
    std::string compile(const json& schema, const std::string& name);

private:
    std::string visit(const json& s, const std::string& name, size_t depth, std::string_view via);
    std::string define(const std::string& name, const std::string& body);
    std::string fresh(const std::string& base);
    void check_keywords(const json& s) const;
    std::string typed(const json& s, const std::string& type, const std::string& name, size_t depth);
    std::string ref(const json& s, size_t depth);
    std::string enumeration(const json& values);
    std::string string_rule(const json& s);
    std::string number_rule(const json& s, bool integer);
    std::string real_range(const json& s);
    std::string shared_rule(const std::string& what, const std::string& body);
    std::string object_rule(const json& s, const std::string& name, size_t depth);
    std::string array_rule(const json& s, const std::string& name, size_t depth);
    std::string alternatives(const json& list, const std::string& name, size_t depth, std::string_view kw);
    json merge_all_of(const json& s) const;
    const json& resolve(const std::string& pointer) const;
    std::string repeat_upto(const std::string& item, int64_t n);
    int64_t count(const json& s, const char* key, int64_t fallback) const;

    const json& root_;
    const Limits& limits_;
    std::vector<std::pair<std::string, std::string>> rules_;  // in order of definition
    std::set<std::string> names_;
    std::map<std::string, std::string> ref_rules_;  // $ref -> its rule
    std::set<std::string> formats_;
    std::map<std::string, int64_t> upto_;        // repeat_upto chains already written
    std::map<std::string, std::string> shared_;  // a long body -> the rule that holds it
    std::string prefix_;                         // the caller's rule name
};

std::string SchemaCompiler::fresh(const std::string& base) {
    std::string n = base;
    for (int i = 2; names_.count(n); ++i) n = base + "-" + std::to_string(i);
    names_.insert(n);
    return n;
}

std::string SchemaCompiler::define(const std::string& name, const std::string& body) {
    if (rules_.size() >= limits_.max_rules)
        refuse("", "more than " + std::to_string(limits_.max_rules) + " grammar rules for this schema");
    rules_.push_back({name, body});
    return name;
}

void SchemaCompiler::check_keywords(const json& s) const {
    for (const auto& [key, v] : s.items())
        if (!kKeywords.count(key) && !kAnnotations.count(key))
            refuse(key, "the keyword '" + key + "' is not supported");
}

int64_t SchemaCompiler::count(const json& s, const char* key, int64_t fallback) const {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
        refuse(key, std::string(key) + " must be a non-negative integer");
    return v.get<int64_t>();
}

const json& SchemaCompiler::resolve(const std::string& pointer) const {
    if (pointer == "#") return root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p(prefix);
        if (pointer.rfind(p, 0) != 0) continue;
        const std::string section = p.substr(2, p.size() - 3), key = pointer.substr(p.size());
        if (root_.contains(section) && root_[section].is_object() && root_[section].contains(key))
            return root_[section][key];
        refuse("$ref", "$ref '" + pointer + "' names no definition");
    }
    refuse("$ref", "$ref '" + pointer + "' is not supported (only #, #/$defs/NAME and #/definitions/NAME)");
}

// A $ref is one rule, written once: recursion in the schema is recursion in the grammar.
std::string SchemaCompiler::ref(const json& s, size_t depth) {
    if (!s["$ref"].is_string()) refuse("$ref", "$ref must be a string");
    const std::string pointer = s["$ref"];
    for (const auto& [key, v] : s.items())
        if (key != "$ref" && !kAnnotations.count(key) && key != "$defs" && key != "definitions")
            refuse(key, "'" + key + "' beside $ref is not supported");
    if (auto it = ref_rules_.find(pointer); it != ref_rules_.end()) return it->second;
    const std::string rule = fresh(prefix_ + "-ref-" + rule_safe(pointer.substr(pointer.rfind('/') + 1)));
    ref_rules_[pointer] = rule;
    const json& target = resolve(pointer);
    // A chain of bare $refs back to this one would never produce a character.
    std::set<std::string> seen{pointer};
    for (const json* t = &target; t->is_object() && t->contains("$ref") && (*t)["$ref"].is_string();) {
        const std::string next = (*t)["$ref"];
        if (!seen.insert(next).second) refuse("$ref", "$ref '" + pointer + "' refers to itself with nothing between");
        t = &resolve(next);
    }
    define(rule, visit(target, rule, depth + 1, "$ref"));
    return rule;
}

std::string SchemaCompiler::enumeration(const json& values) {
    if (!values.is_array() || values.empty()) refuse("enum", "enum must be a non-empty array");
    if (values.size() > limits_.max_enum)
        refuse("enum", "enum of " + std::to_string(values.size()) + " values, more than the limit of " +
                           std::to_string(limits_.max_enum));
    std::string out = "(";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? " | " : " ") + literal(values[i].dump());
    return out + " )";
}

// x{0,n} as a chain of rules shared by every use of the same item: `item-upto-k ::= ( item
// item-upto-(k-1) )?`, so many strings with the same maxLength cost n rules once.
std::string SchemaCompiler::repeat_upto(const std::string& item, int64_t n) {
    if (n <= 0) return "";
    if (n > static_cast<int64_t>(limits_.max_rules))
        refuse("maxLength", "a length bound of " + std::to_string(n) + " is above the rule limit");
    int64_t& have = upto_[item];
    for (int64_t k = have + 1; k <= n; ++k) {
        const std::string rule = item + "-upto-" + std::to_string(k);
        names_.insert(rule);
        define(rule, "( " + item + (k > 1 ? " " + item + "-upto-" + std::to_string(k - 1) : "") + " )?");
    }
    have = std::max(have, n);
    return item + "-upto-" + std::to_string(n);
}

std::string SchemaCompiler::string_rule(const json& s) {
    if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) refuse("pattern", "pattern must be a string");
        for (const char* k : {"format", "minLength", "maxLength"})
            if (s.contains(k)) refuse("pattern", std::string("pattern together with ") + k + " is not supported");
        return pattern_to_gbnf(s["pattern"].get<std::string>(), "char");
    }
    if (s.contains("format")) {
        if (!s["format"].is_string()) refuse("format", "format must be a string");
        const std::string f = s["format"];
        if (!kFormats.count(f))
            refuse("format", "the string format '" + f + "' is not supported (date, time, date-time, uuid, email)");
        if (s.contains("minLength") || s.contains("maxLength"))
            refuse("format", "minLength/maxLength together with a format are not supported");
        formats_.insert(f);
        if (f == "date-time") formats_.insert({"date", "time"});
        return "\"\\\"\" " + f + " \"\\\"\"";
    }
    const int64_t min = count(s, "minLength", 0), max = count(s, "maxLength", -1);
    if (max >= 0 && max < min) refuse("maxLength", "maxLength is below minLength");
    if (min == 0 && max < 0) return "string";
    if (min > 1000) refuse("minLength", "minLength above 1000 is not supported");
    std::string body = "\"\\\"\"";
    if (min > 0) body += " char{" + std::to_string(min) + "}";
    if (max < 0) body += " char*";
    else if (max > min) body += " " + repeat_upto("char", max - min);
    return body + " \"\\\"\"";
}

std::string SchemaCompiler::number_rule(const json& s, bool integer) {
    const char* keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    bool bounded = false;
    for (const char* k : keys)
        if (s.contains(k)) {
            if (!s[k].is_number()) refuse(k, std::string(k) + " must be a number");
            bounded = true;
        }
    if (!bounded) return integer ? "integer" : "number";
    if (!integer) return shared_rule("number", real_range(s));
    double lo = -static_cast<double>(kMaxMagnitude), hi = static_cast<double>(kMaxMagnitude);
    if (s.contains("minimum")) lo = std::max(lo, std::ceil(s["minimum"].get<double>()));
    if (s.contains("exclusiveMinimum")) lo = std::max(lo, std::floor(s["exclusiveMinimum"].get<double>()) + 1);
    if (s.contains("maximum")) hi = std::min(hi, std::floor(s["maximum"].get<double>()));
    if (s.contains("exclusiveMaximum")) hi = std::min(hi, std::ceil(s["exclusiveMaximum"].get<double>()) - 1);
    lo = std::max(lo, -static_cast<double>(kMaxMagnitude));
    hi = std::min(hi, static_cast<double>(kMaxMagnitude));
    if (lo > hi) refuse("minimum", "no integer lies within minimum/maximum");
    return integer_range(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
}

// A rule for `body`, written once for all its uses (a bounded number is ~30-120 rules once
// parsed: a schema with many equal ones would otherwise reach the rule limit).
std::string SchemaCompiler::shared_rule(const std::string& what, const std::string& body) {
    auto [it, fresh_body] = shared_.try_emplace(body);
    if (fresh_body) it->second = define(fresh(prefix_ + "-" + what), body);
    return it->second;
}

// A bounded `number`: every value with at most 6 fractional digits within the bounds, and,
// where a bound leaves a whole half-line open (no maximum and a minimum <= 0, or the
// reverse), every number with an exponent on that side of 0.
std::string SchemaCompiler::real_range(const json& s) {
    int64_t lo = -kMaxScaled, hi = kMaxScaled;
    if (s.contains("minimum")) lo = std::max(lo, scaled_bound(s["minimum"], true));
    if (s.contains("exclusiveMinimum")) lo = std::max(lo, scaled_bound(s["exclusiveMinimum"], false) + 1);
    if (s.contains("maximum")) hi = std::min(hi, scaled_bound(s["maximum"], false));
    if (s.contains("exclusiveMaximum")) hi = std::min(hi, scaled_bound(s["exclusiveMaximum"], true) - 1);
    const bool open_above = !s.contains("maximum") && !s.contains("exclusiveMaximum");
    const bool open_below = !s.contains("minimum") && !s.contains("exclusiveMinimum");
    lo = std::max(lo, -kMaxScaled);
    hi = std::min(hi, kMaxScaled);
    if (lo > hi)
        refuse("minimum", "no number with at most " + std::to_string(kFractionDigits) +
                              " fractional digits below 10^12 lies within minimum/maximum");
    std::vector<std::string> alts;
    if (lo < 0) alts.push_back("\"-\" " + non_negative_range(hi < 0 ? -hi : 1, -lo));
    if (hi >= 0) alts.push_back(non_negative_range(std::max<int64_t>(lo, 0), hi));
    // Two exponent digits: no double overflows to infinity.
    const std::string exp = "integral ( \".\" [0-9]{1,16} )? [eE] [-+]? [0-9]{1,2}";
    if (open_above && lo <= 0) alts.push_back(exp);
    if (open_below && hi >= 0) alts.push_back("\"-\" " + exp);
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
}

// allOf whose parts are all object schemas: one object with every part's properties and
// required names.
json SchemaCompiler::merge_all_of(const json& s) const {
    if (!s["allOf"].is_array() || s["allOf"].empty()) refuse("allOf", "allOf must be a non-empty array");
    json merged = s;
    merged.erase("allOf");
    merged["type"] = "object";
    json required = merged.value("required", json::array());
    for (json part : s["allOf"]) {
        while (part.is_object() && part.contains("$ref") && part["$ref"].is_string()) part = resolve(part["$ref"]);
        if (!part.is_object()) refuse("allOf", "allOf parts must be object schemas");
        for (const auto& [key, v] : part.items()) {
            if (key == "properties") {
                if (!v.is_object()) refuse("properties", "properties must be an object");
                for (const auto& [p, ps] : v.items()) merged["properties"][p] = ps;
            } else if (key == "required") {
                for (const json& r : v) required.push_back(r);
            } else if (key == "type") {
                if (v != "object") refuse("allOf", "allOf is supported only over object schemas");
            } else if (key == "additionalProperties") {
                merged[key] = v;
            } else if (!kAnnotations.count(key)) {
                refuse("allOf",
                       "allOf is supported only over objects with properties/required/additionalProperties (found '" +
                           key + "')");
            }
        }
    }
    merged["required"] = required;
    return merged;
}

std::string SchemaCompiler::object_rule(const json& s, const std::string& name, size_t depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) refuse("properties", "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
        if (!s["required"].is_array()) refuse("required", "required must be an array of names");
        for (const json& r : s["required"]) {
            if (!r.is_string()) refuse("required", "required must be an array of names");
            if (!props.contains(r.get<std::string>()))
                refuse("required", "required property '" + r.get<std::string>() + "' is not in properties");
            required.insert(r.get<std::string>());
        }
    }
    std::vector<std::string> req_kv, opt_kv;
    for (const auto& [key, ps] : props.items()) {
        const std::string rule = fresh(name + "-" + rule_safe(key));
        const std::string value = visit(ps, rule, depth + 1, "properties");
        define(rule, literal(json(key).dump()) + " ws \":\" ws " + value + " ws");
        (required.count(key) ? req_kv : opt_kv).push_back(rule);
    }
    std::string extra;  // additionalProperties: more "key": value pairs
    if (s.contains("additionalProperties")) {
        const json& ap = s["additionalProperties"];
        if (!(ap.is_boolean() && !ap.get<bool>())) {
            const std::string rule = fresh(name + "-additional");
            define(rule, "string ws \":\" ws " +
                             (ap.is_boolean() ? std::string("value")
                                              : visit(ap, rule + "-value", depth + 1, "additionalProperties")) +
                             " ws");
            extra = rule;
        }
    }
    // Optional properties after the first present one: ( "," ws kv )? each, in order.
    std::string body = "\"{\" ws ";
    std::string seq;
    for (size_t i = 0; i < req_kv.size(); ++i) seq += (i ? " \",\" ws " : "") + req_kv[i];
    if (!req_kv.empty()) {
        for (const std::string& t : opt_kv) seq += " ( \",\" ws " + t + " )?";
        if (!extra.empty()) seq += " ( \",\" ws " + extra + " )*";
        return body + seq + " \"}\"";
    }
    // None required: whichever comes first has no comma before it.
    std::string alts;
    for (size_t i = 0; i < opt_kv.size(); ++i) {
        std::string a = opt_kv[i];
        for (size_t j = i + 1; j < opt_kv.size(); ++j) a += " ( \",\" ws " + opt_kv[j] + " )?";
        if (!extra.empty()) a += " ( \",\" ws " + extra + " )*";
        alts += (alts.empty() ? "" : " | ") + a;
    }
    if (!extra.empty()) alts += (alts.empty() ? "" : " | ") + extra + " ( \",\" ws " + extra + " )*";
    if (alts.empty()) return body + "\"}\"";
    const std::string rule = fresh(name + "-members");
    define(rule, alts);
    return body + rule + "? \"}\"";
}

std::string SchemaCompiler::array_rule(const json& s, const std::string& name, size_t depth) {
    const int64_t min = count(s, "minItems", 0), max = count(s, "maxItems", -1);
    if (max >= 0 && max < min) refuse("maxItems", "maxItems is below minItems");
    if (min > 1000 || max > 1000)
        refuse(min > 1000 ? "minItems" : "maxItems", "item counts above 1000 are not supported");
    std::vector<std::string> fixed;  // prefixItems, all generated
    if (s.contains("prefixItems")) {
        if (!s["prefixItems"].is_array()) refuse("prefixItems", "prefixItems must be an array");
        for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
            const std::string rule = fresh(name + "-item" + std::to_string(i));
            define(rule, visit(s["prefixItems"][i], rule, depth + 1, "prefixItems"));
            fixed.push_back(rule);
        }
        if (max >= 0 && static_cast<int64_t>(fixed.size()) > max)
            refuse("prefixItems", "more prefixItems than maxItems (all prefixItems are generated)");
    }
    std::string item;
    const bool items_false = s.contains("items") && s["items"].is_boolean() && !s["items"].get<bool>();
    if (!items_false && (s.contains("items") || fixed.empty())) {
        item = fresh(name + "-item");
        define(item, s.contains("items") ? visit(s["items"], item, depth + 1, "items") : "value");
    }
    const int64_t k = static_cast<int64_t>(fixed.size());
    const int64_t extra_min = std::max<int64_t>(0, min - k), extra_max = max < 0 ? -1 : max - k;
    if (item.empty() && extra_min > 0) refuse("minItems", "minItems needs more items than prefixItems and items allow");
    std::string seq;
    for (size_t i = 0; i < fixed.size(); ++i) seq += (i ? " \",\" ws " : "") + fixed[i] + " ws";
    if (!item.empty() && extra_max != 0) {
        const std::string next = "\",\" ws " + item + " ws";
        if (k > 0) {  // every extra item follows a comma
            const std::string reps = extra_max < 0
                                         ? "{" + std::to_string(extra_min) + ",}"
                                         : "{" + std::to_string(extra_min) + "," + std::to_string(extra_max) + "}";
            seq += " ( " + next + " )" + reps;
        } else {
            const std::string more = extra_max < 0 ? "{" + std::to_string(std::max<int64_t>(0, extra_min - 1)) + ",}"
                                                   : "{" + std::to_string(std::max<int64_t>(0, extra_min - 1)) + "," +
                                                         std::to_string(extra_max - 1) + "}";
            seq = item + " ws ( " + next + " )" + more;
            if (extra_min == 0) seq = "( " + seq + " )?";
        }
    }
    return "\"[\" ws " + seq + " \"]\"";
}

std::string SchemaCompiler::alternatives(const json& list, const std::string& name, size_t depth, std::string_view kw) {
    if (!list.is_array() || list.empty()) refuse(std::string(kw), std::string(kw) + " must be a non-empty array");
    if (list.size() > limits_.max_enum) refuse(std::string(kw), std::string(kw) + " has too many alternatives");
    std::string out = "(";
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string rule = fresh(name + "-" + std::to_string(i));
        define(rule, visit(list[i], rule, depth + 1, kw));
        out += (i ? " | " : " ") + rule;
    }
    return out + " )";
}

std::string SchemaCompiler::typed(const json& s, const std::string& type, const std::string& name, size_t depth) {
    if (type == "string") return string_rule(s);
    if (type == "integer") return number_rule(s, true);
    if (type == "number") return number_rule(s, false);
    if (type == "boolean") return "boolean";
    if (type == "null") return "null";
    if (type == "object") return object_rule(s, name, depth);
    if (type == "array") return array_rule(s, name, depth);
    refuse("type", "unknown type '" + type + "'");
}

std::string SchemaCompiler::visit(const json& s, const std::string& name, size_t depth, std::string_view via) {
    if (depth > limits_.max_depth)
        refuse(std::string(via), "the schema nests deeper than " + std::to_string(limits_.max_depth) + " levels");
    if (s.is_boolean()) {
        if (s.get<bool>()) return "value";
        refuse("false", "a schema of false allows no value");
    }
    if (!s.is_object()) refuse(std::string(via), "a schema must be an object or a boolean");
    check_keywords(s);
    if (s.contains("$ref")) return ref(s, depth);
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) return enumeration(s["enum"]);
    if (s.contains("allOf")) return visit(merge_all_of(s), name, depth + 1, "allOf");
    if (s.contains("anyOf")) return alternatives(s["anyOf"], name, depth, "anyOf");
    if (s.contains("oneOf")) return alternatives(s["oneOf"], name, depth, "oneOf");
    if (!s.contains("type")) {
        if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
            return object_rule(s, name, depth);
        if (s.contains("items") || s.contains("prefixItems")) return array_rule(s, name, depth);
        // String keywords alone: a string (any other value would ignore them).
        if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
            return string_rule(s);
        return "value";
    }
    const json& t = s["type"];
    if (t.is_string()) return typed(s, t, name, depth);
    if (!t.is_array() || t.empty()) refuse("type", "type must be a string or a non-empty array of strings");
    std::string out = "(";
    for (size_t i = 0; i < t.size(); ++i) {
        if (!t[i].is_string()) refuse("type", "type must be a string or a non-empty array of strings");
        const std::string rule = fresh(name + "-" + t[i].get<std::string>());
        define(rule, typed(s, t[i], rule, depth));
        out += (i ? " | " : " ") + rule;
    }
    return out + " )";
}

std::string SchemaCompiler::compile(const json& schema, const std::string& name) {
    if (schema.dump().size() > limits_.max_text_bytes)
        refuse("", "the schema is larger than " + std::to_string(limits_.max_text_bytes) + " bytes");
    prefix_ = name;
    names_.insert(name);
    const std::string body = visit(schema, name, 0, "");
    std::string out = name + " ::= " + body + "\n";
    for (const auto& [n, b] : rules_) out += n + " ::= " + b + "\n";
    for (const std::string& f : formats_) out += kFormats.at(f) + "\n";
    return out + kPrimitives;
}

}  // namespace

std::string json_schema_rules(const nlohmann::json& schema, std::string_view name, const Limits& limits) {
    return SchemaCompiler(schema, limits).compile(schema, std::string(name));
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, const Limits& limits) {
    std::string gbnf = json_schema_rules(schema, "root", limits);
    try {
        Grammar::parse(gbnf, limits);  // a $ref recursion with no way out, too many rules
    } catch (const GrammarError& e) {
        throw GrammarError(std::string("json schema: ") + e.what(),
                           schema.dump().find("$ref") != std::string::npos ? "$ref" : "");
    }
    return gbnf;
}

std::string any_json_object_gbnf() { return std::string("root ::= object\n") + kPrimitives; }

}  // namespace ember::grammar
