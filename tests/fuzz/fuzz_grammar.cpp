// libFuzzer target for engine/grammar: any GBNF text or JSON schema from a request must
// compile or be refused with a GrammarError (never a crash, a hang or another exception), and
// a compiled grammar must take any bytes without breaking. First byte: 0 = the rest is GBNF;
// 1 = the rest is a JSON schema; then the text splits at the first NUL into grammar and the
// bytes fed to its matcher.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "engine/grammar/json_schema.h"

using namespace ember::grammar;

namespace {

void feed(const std::shared_ptr<const Grammar>& g, std::string_view bytes) {
    GrammarState s(g);
    for (char c : bytes) {
        GrammarState before = s;
        if (!s.accept_byte(static_cast<uint8_t>(c))) {
            if (s.can_end() != before.can_end()) __builtin_trap();  // a refusal leaves the state alone
        }
    }
    (void)s.can_end();
    (void)s.must_end();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
    const size_t nul = all.find('\0');
    const std::string_view text = all.substr(0, nul), bytes = nul == all.npos ? "" : all.substr(nul + 1);
    Limits limits;
    limits.max_rules = 512;  // keeps each input fast; the limits themselves are what is tested
    limits.max_text_bytes = 1 << 14;
    try {
        std::string gbnf(text);
        if (data[0] % 2) {
            const nlohmann::json schema = nlohmann::json::parse(text, nullptr, false);
            if (schema.is_discarded()) return 0;
            gbnf = json_schema_to_gbnf(schema, limits);
        }
        feed(Grammar::parse(gbnf, limits), bytes);
    } catch (const GrammarError&) {}
    return 0;
}
