// A JSON schema's `pattern` (an ECMAScript regular expression) as GBNF for the JSON string
// whose text matches it: the subset schema writers use. Supported: literals and escapes
// (\n \t \r \f \v \0 \xHH \uHHHH, an escaped punctuation character), `.`, classes `[a-z_]`
// and `[^...]` with \d \w \s inside, \d \D \w \W \s \S, groups `( )`, `(?: )` and
// `(?<name> )`, alternation `|`, quantifiers * + ? {m} {m,} {m,n} (lazy forms too: the same
// strings), `^` at the start and `$` at the end of a top-level alternative. A side without
// its anchor may have any text there, as the regex matches anywhere in the string. Refused
// (GrammarError, keyword "pattern"): backreferences, lookaround, \b \B, anchors elsewhere,
// counts above 1000, and anything malformed.
//
// The grammar writes the string's JSON text: a `"`, `\` or control character the pattern
// allows is written escaped; a negated class or `.` never writes those (fewer strings than
// the pattern allows, never more).
#pragma once
#include <string>
#include <string_view>

namespace ember::grammar {

// GBNF for the quoted JSON string (the quotes included) whose value matches `pattern`.
// `any_char`: the grammar's rule for one JSON string character (an unanchored side's text).
std::string pattern_to_gbnf(std::string_view pattern, std::string_view any_char);

}  // namespace ember::grammar
