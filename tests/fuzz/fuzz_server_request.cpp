// libFuzzer target for the HTTP server's request parsers: OpenAI's (engine/server/
// request_parser) and Ollama's (ollama_parser). Any body, for any endpoint (the first byte
// picks it: 0 completions, 1 chat, 2 /api/generate, 3 /api/chat), must give a request or an
// error, never a crash, a hang or an exception; and what it accepts must respect the limits.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "engine/server/ollama_format.h"
#include "engine/server/ollama_parser.h"
#include "engine/server/request_parser.h"
#include "engine/server/response_format.h"

namespace {

using namespace ember::server;

// What every accepted request must respect, whichever API it came through.
void check_engine_request(const ember::EngineRequest& q, const ServerLimits& limits, bool logprobs) {
    const bool one_prompt = (!q.messages.empty()) + (!q.prompt.empty()) + (!q.prompt_tokens.empty()) == 1;
    if (!one_prompt || q.max_tokens < 0 || q.max_tokens > limits.max_tokens || q.stop.size() > limits.max_stop ||
        q.top_logprobs < -1 || q.top_logprobs > 20 || (logprobs != (q.top_logprobs >= 0)))
        __builtin_trap();
    size_t prompt_bytes = q.prompt.size();
    for (const auto& m : q.messages) prompt_bytes += m.content.size() + m.reasoning_content.size();
    if (prompt_bytes > limits.max_prompt_bytes) __builtin_trap();
    for (int32_t id : q.prompt_tokens)
        if (id < 0) __builtin_trap();
}

void check_error(const ApiError& e) {
    if (e.status != 400 && e.status != 413) __builtin_trap();
    // error messages quote the body: must serialise whatever it held
    (void)error_json(e);
    (void)ollama_error_json(e);
}

void fuzz_openai(Endpoint endpoint, std::string_view body, const ServerLimits& limits) {
    const auto r = parse_request(endpoint, body, limits);
    if (const ApiError* e = std::get_if<ApiError>(&r)) return check_error(*e);
    const ApiRequest& a = std::get<ApiRequest>(r);
    check_engine_request(a.engine, limits, a.logprobs);
}

void fuzz_ollama(OllamaEndpoint endpoint, std::string_view body, const ServerLimits& limits) {
    const auto r = parse_ollama_request(endpoint, body, limits);
    if (const ApiError* e = std::get_if<ApiError>(&r)) return check_error(*e);
    const OllamaRequest& o = std::get<OllamaRequest>(r);
    if (o.model.empty()) __builtin_trap();
    if (o.load_only) {
        if (!o.engine.messages.empty() || !o.engine.prompt.empty()) __builtin_trap();
    } else {
        check_engine_request(o.engine, limits, o.logprobs);
    }
    (void)dump(ollama_load_json({endpoint, o.model, o.logprobs}));  // the model's name is echoed back
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    ServerLimits limits;
    limits.max_tokens = 512;
    limits.max_prompt_bytes = 4096;
    switch (data[0] % 4) {
        case 0:
            fuzz_openai(Endpoint::Completion, body, limits);
            break;
        case 1:
            fuzz_openai(Endpoint::Chat, body, limits);
            break;
        case 2:
            fuzz_ollama(OllamaEndpoint::Generate, body, limits);
            break;
        default:
            fuzz_ollama(OllamaEndpoint::Chat, body, limits);
    }
    return 0;
}
