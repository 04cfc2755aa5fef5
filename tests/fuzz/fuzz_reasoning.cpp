// libFuzzer target for the reasoning splitter (engine/template/reasoning.h): what a model writes
// is not under our control. The first input byte picks the format (low 2 bits) and where the
// generation prompt ends (the next bytes up to the first '\n' prime the splitter); the rest is
// the output.
//
// Invariants, as reasoning.h states them:
//  - the split does not depend on how the output is cut: fed whole, and fed one byte at a
//    time, it gives the same reasoning and content;
//  - with no format, the content is the output unchanged.
// Build with the `fuzz` preset; run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/template/reasoning.h"

namespace {

using ember::ReasoningFormat;
using ember::ReasoningSplitter;
using ember::SplitText;

void add(SplitText& to, const SplitText& t) {
    to.reasoning += t.reasoning;
    to.content += t.content;
}

SplitText split(ReasoningFormat f, std::string_view prompt, std::string_view out, bool bytewise) {
    ReasoningSplitter s(f);
    s.prime(prompt);
    SplitText all;
    if (bytewise)
        for (char c : out) add(all, s.feed(std::string_view(&c, 1)));
    else add(all, s.feed(out));
    add(all, s.finish());
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const auto f = static_cast<ReasoningFormat>(data[0] & 3);
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    const size_t nl = rest.find('\n');
    const std::string_view prompt = nl == std::string_view::npos ? std::string_view() : rest.substr(0, nl);
    const std::string_view out = nl == std::string_view::npos ? rest : rest.substr(nl + 1);

    const SplitText whole = split(f, prompt, out, false);
    const SplitText bytes = split(f, prompt, out, true);
    if (whole.reasoning != bytes.reasoning || whole.content != bytes.content) std::abort();
    if (f == ReasoningFormat::None && whole.content != out) std::abort();
    return 0;
}
