// libFuzzer target for the HTTP server's request parser (engine/server/request_parser): any
// body, for either endpoint, must give a request or an OpenAI-style error, never a crash, a
// hang or an exception; and what it accepts must respect the server's limits.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "engine/server/request_parser.h"
#include "engine/server/response_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    using namespace ember::server;
    const Endpoint endpoint = data[0] % 2 ? Endpoint::Chat : Endpoint::Completion;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    ServerLimits limits;
    limits.max_tokens = 512;
    limits.max_prompt_bytes = 4096;
    const auto r = parse_request(endpoint, body, limits);
    if (const ApiError* e = std::get_if<ApiError>(&r)) {
        if (e->status != 400 && e->status != 413) __builtin_trap();
        (void)error_json(*e);  // error messages quote the body: must serialise whatever it held
        return 0;
    }
    const ApiRequest& a = std::get<ApiRequest>(r);
    const auto& q = a.engine;
    const bool one_prompt = (!q.messages.empty()) + (!q.prompt.empty()) + (!q.prompt_tokens.empty()) == 1;
    if (!one_prompt || q.max_tokens < 0 || q.max_tokens > limits.max_tokens || q.stop.size() > limits.max_stop ||
        q.top_logprobs < -1 || q.top_logprobs > 20 || (a.logprobs != (q.top_logprobs >= 0)))
        __builtin_trap();
    size_t prompt_bytes = q.prompt.size();
    for (const auto& m : q.messages) prompt_bytes += m.content.size();
    if (prompt_bytes > limits.max_prompt_bytes) __builtin_trap();
    for (int32_t id : q.prompt_tokens)
        if (id < 0) __builtin_trap();
    return 0;
}
