// libFuzzer target for what the remote engine client reads from a server (engine/remote): an
// event stream cut into pieces where the input says, each event's chunk, a model list, an
// error body. Any input must be read or refused with ember::Error; the reader's bound on one
// line must hold (no event longer than it comes out).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/remote/remote_wire.h"
#include "engine/remote/sse_reader.h"
#include "kernels/common/error.h"

namespace {
constexpr size_t kMaxLine = 4096;

void read_stream(std::string_view text, size_t piece) {
    std::vector<ember::ChatToolCall> calls;
    ember::remote::SseReader reader(kMaxLine, [&](const std::string&, const std::string& data) {
        if (data.size() > kMaxLine) __builtin_trap();
        try {
            const ember::remote::Chunk c = ember::remote::parse_chunk(data);
            for (const auto& p : c.tool_calls) ember::remote::add_tool_call(calls, p);
        } catch (const ember::Error&) {
            return false;
        }
        return true;
    });
    for (size_t i = 0; i < text.size(); i += piece)
        if (!reader.feed(text.substr(i, piece))) return;
    reader.finish();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
    try {
        switch (data[0] % 3) {
            case 0:
                read_stream(text, 1 + data[1] % 64);
                break;
            case 1:
                (void)ember::remote::parse_models(text);
                break;
            default:
                (void)ember::remote::server_message(text);
                break;
        }
    } catch (const ember::Error&) {}
    return 0;
}
