// Unicode case mapping for the upper/lower/title/capitalize filters and string methods.
// Covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (where chat text that gets
// case-mapped lives in practice), with Python's special cases ß -> SS and İ -> i̇. Other
// characters pass through unchanged.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/utf8.h"  // append_utf8, used beside these

namespace ember::jinja {

std::string utf8_upper(std::string_view s);
std::string utf8_lower(std::string_view s);
bool is_cased_letter(uint32_t cp);  // has a different upper- or lower-case form here
bool is_upper_letter(uint32_t cp);
bool is_lower_letter(uint32_t cp);

// One code point of `s` at byte `i` (advances i); U+FFFD for invalid bytes.
uint32_t next_code_point(std::string_view s, size_t& i);

}  // namespace ember::jinja
