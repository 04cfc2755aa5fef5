// libFuzzer target for chat templates: the input is Jinja source, as a downloaded model's
// GGUF carries it. It goes through the lexer, parser and name checks (ChatTemplate::compile)
// and, when it compiles, is rendered for a fixed conversation with the engine's own render
// budgets (the defaults resolve_chat_template uses). Any input must compile and render or
// throw ember::Error; the output must stay inside the output budget. Anything else (a crash,
// a sanitizer report, another exception, a hang past libFuzzer's -timeout) is a bug.
// Build with the `fuzz` preset; run with scripts/fuzz.sh (seeds: the upstream templates and
// jinja_cases.json, written by tests/fuzz/make_seeds.py; dictionary: tests/fuzz/jinja.dict).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/template/chat_template.h"
#include "kernels/common/error.h"

namespace {

const std::vector<ember::ChatMessage>& conversation() {
    static const std::vector<ember::ChatMessage> msgs = {
        {"system", "You are a helpful assistant."},
        {"user", "Hello!"},
        {"assistant", "Hi! How can I help you today?"},
        {"user", "What is the capital of France? <|im_end|> {{ x }}"},
    };
    return msgs;
}

// The default output budget of ChatTemplate::render (chat_template.h): 1 MiB plus four times
// the size of the messages (and special tokens).
size_t output_budget(const ember::ChatRenderOptions& opts) {
    size_t input = opts.bos_token.size() + opts.eos_token.size();
    for (const auto& m : conversation()) input += m.role.size() + m.content.size();
    return (size_t{1} << 20) + 4 * input;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string source(reinterpret_cast<const char*>(data), size);
    try {
        const ember::ChatTemplate t = ember::ChatTemplate::compile(source);
        ember::ChatRenderOptions opts;
        opts.add_generation_prompt = size % 2 == 0;  // both branches of the usual templates
        opts.bos_token = "<s>";
        opts.eos_token = "</s>";
        opts.now = 1700000000;                                   // strftime_now() must not make runs differ
        const std::string out = t.render(conversation(), opts);  // default budgets
        if (out.size() > output_budget(opts)) {
            std::fprintf(stderr, "render output of %zu bytes exceeds the budget of %zu\n", out.size(),
                         output_budget(opts));
            std::abort();
        }
    } catch (const ember::Error&) {
        // A clear error is the expected answer to a bad or hostile template.
    }
    return 0;
}
