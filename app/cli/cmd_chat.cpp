// `ember chat MODEL [--system TEXT] [options]`: interactive chat through the model's own chat
// template. One user turn per line of standard input, so it also works in a pipe; the
// conversation (and its KV cache) carries over from turn to turn.
#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "kernels/common/error.h"
#include "engine/runtime/chat.h"

namespace ember::cli {

int cmd_chat(int argc, char** argv) {
    Args args(argc, argv, 0, merge(merge(model_value_options(), sampling_value_options()), {"--system"}),
              {"--verbose"});
    if (args.positional().size() != 1) throw Error("usage: ember chat MODEL [--system TEXT] [options]\n" + options_help());
    auto model = Model::load(load_options(args, args.positional()[0]));
    const GenerateOptions gen = generate_options(args, -1);
    const bool interactive = isatty(STDIN_FILENO);
    std::fprintf(stderr, "chat template: %s\n", model->chat_template().source_desc.c_str());
    if (interactive) std::fprintf(stderr, "Type a message and press Enter (Ctrl-D to quit).\n");

    std::vector<ChatMessage> messages;
    if (auto sys = args.get("--system")) messages.push_back({"system", *sys});
    Sequence seq(*model);
    std::string line;
    while (true) {
        if (interactive) std::fputs("> ", stdout), std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        messages.push_back({"user", line});
        const std::vector<int32_t> prompt = chat_prompt_tokens(*model, messages);
        std::string reply;
        const GenerateStats st = seq.generate(prompt, gen, [&](std::string_view t) {
            reply += t;
            std::fwrite(t.data(), 1, t.size(), stdout);
            std::fflush(stdout);
            return true;
        });
        std::fputs("\n", stdout);
        std::fflush(stdout);
        messages.push_back({"assistant", reply});
        if (args.flag("--verbose") || interactive)
            std::fprintf(stderr, "[%d prompt tokens (%d reused), %d generated; TTFT %.0f ms; %.2f tok/s; stop: %s]\n",
                         st.prompt_tokens, st.reused_tokens, st.generated_tokens, st.ttft_ms, st.decode_tok_s(),
                         std::string(stop_reason_name(st.stop_reason)).c_str());
    }
    return 0;
}

}  // namespace ember::cli
