// JSON text -> Jinja values, the way Python's json.loads builds them for transformers: objects
// become insertion-ordered dicts, integers (no '.', 'e' or 'E') ints, other numbers floats.
//
// Chat templates see tool definitions and tool-call arguments as Python objects, while the
// API carries them as JSON text; this turns the one into the other without a JSON library, so
// the engine keeps building where nlohmann-json is absent. Input is untrusted: nesting is
// bounded (kMaxValueNesting) and every error names the byte offset.
#pragma once
#include <string_view>

#include "engine/template/jinja_value.h"

namespace ember::jinja {

// Throws ember::Error("<what>: invalid JSON at byte N: ...") on malformed input, integers
// outside int64, or nesting deeper than kMaxValueNesting.
Value parse_json(std::string_view text, std::string_view what);

}  // namespace ember::jinja
