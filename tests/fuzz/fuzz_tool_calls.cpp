// libFuzzer target for the tool-call parser (engine/template/tool_calls.h): what a model writes
// is not under our control. The first input byte picks the format (low 3 bits, mod 7), streamed
// arguments (bit 6) and a limit of one call (bit 7); the rest is the output.
//
// Invariants, as tool_calls.h states them:
//  - the result does not depend on how the output is cut: fed whole, and fed one byte at a
//    time, it gives the same content and calls;
//  - never more calls than allowed; every call has a name; a call released whole has arguments
//    that are a JSON object;
//  - with no format, the content is the output unchanged.
// Build with the `fuzz` preset; run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "engine/template/tool_calls.h"

namespace {

using ember::ToolCallChunk;
using ember::ToolCallFormat;
using ember::ToolCallParser;

void add(ToolCallChunk& to, const ToolCallChunk& t) {
    to.content += t.content;
    to.calls.insert(to.calls.end(), t.calls.begin(), t.calls.end());
}

// A call's deltas joined (streamed arguments come in pieces).
std::vector<ember::ToolCallDelta> joined(const std::vector<ember::ToolCallDelta>& deltas) {
    std::vector<ember::ToolCallDelta> calls;
    for (const auto& d : deltas) {
        if (!d.id.empty()) calls.push_back(d);
        else if (!calls.empty() && d.index == calls.back().index) calls.back().arguments += d.arguments;
        else std::abort();  // a fragment of no call
    }
    return calls;
}

ToolCallChunk parse(ToolCallFormat f, size_t max_calls, bool streamed, std::string_view out, bool bytewise) {
    ToolCallParser p(f, "call_", max_calls);
    p.stream_arguments(streamed);
    ToolCallChunk all;
    if (bytewise)
        for (char c : out) add(all, p.feed(std::string_view(&c, 1)));
    else add(all, p.feed(out));
    add(all, p.finish());
    all.calls = joined(all.calls);
    return all;
}

bool same(const ToolCallChunk& a, const ToolCallChunk& b) {
    if (a.content != b.content || a.calls.size() != b.calls.size()) return false;
    for (size_t i = 0; i < a.calls.size(); ++i)
        if (a.calls[i].id != b.calls[i].id || a.calls[i].name != b.calls[i].name ||
            a.calls[i].arguments != b.calls[i].arguments)
            return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const auto f = static_cast<ToolCallFormat>((data[0] & 7) % 7);
    const bool streamed = data[0] & 0x40;
    const size_t max_calls = (data[0] & 0x80) ? 1 : std::numeric_limits<size_t>::max();
    const std::string_view out(reinterpret_cast<const char*>(data) + 1, size - 1);

    const ToolCallChunk whole = parse(f, max_calls, streamed, out, false);
    if (!same(whole, parse(f, max_calls, streamed, out, true))) std::abort();
    if (whole.calls.size() > max_calls) std::abort();
    for (const auto& c : whole.calls)
        if (c.name.empty() || (!streamed && (c.arguments.empty() || c.arguments.front() != '{'))) std::abort();
    if (f == ToolCallFormat::None && whole.content != out) std::abort();
    return 0;
}
