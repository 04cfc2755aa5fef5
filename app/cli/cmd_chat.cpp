// `ember chat MODEL [--system TEXT] [--context-overflow truncate|stop] [--lookup | --draft M] [options]`: interactive
// chat through the model's own chat template. One user turn per line of standard input, so it
// also works in a pipe; the conversation (and its KV cache) carries over from turn to turn.
// When it outgrows the context, truncate (the default) leaves its oldest exchanges out of the
// prompt (the system prompt stays, and its KV is reused) and says how many on stderr; stop
// refuses the turn, clears the conversation and says so. A turn that fails (a line too long
// for the context, a model file changed underneath, ...) is reported on stderr and the session
// goes on with the next line; the exit status is then 1. A model that thinks first
// (engine/template/reasoning.h) has its thinking written to stderr and kept apart from the
// reply on stdout; the next turn gives it back to the template as reasoning_content.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <unistd.h>

#include <vector>

#include "app/cli/commands.h"
#include "app/cli/draft_args.h"
#include "app/cli/options.h"
#include "kernels/common/error.h"
#include "engine/runtime/chat.h"
#include "engine/runtime/prompt_fit.h"

namespace ember::cli {
namespace {

// The conversation kept from turn to turn: the system prompt (if any) and the exchanges.
struct Conversation {
    std::vector<ChatMessage> messages;
    size_t n_fixed = 0;  // leading messages a reset keeps (the system prompt)
    bool has_history() const { return messages.size() > n_fixed; }
    void reset() { messages.resize(n_fixed); }
};

// The prompt of a turn under the overflow policy. Stop: an ember::Error when it does not fit,
// the conversation cleared (and the error says so) when it has a history to let go.
std::vector<int32_t> turn_prompt(Model& model, Conversation& conv, const std::vector<ChatMessage>& messages,
                                 OverflowPolicy policy, const GenerateOptions& gen) {
    if (policy == OverflowPolicy::Truncate) {
        FittedPrompt f;
        try {
            f = fit_prompt(model, messages, answer_room(model.n_ctx(), gen.max_tokens));
        } catch (const ContextOverflow& e) {  // the newest message alone
            throw Error(std::string(e.what()) + " (send a shorter message, or raise --ctx)");
        }
        if (f.dropped_turns > 0)
            std::fprintf(stderr, "[%d earlier messages left out to fit the context of %lld tokens]\n", f.dropped_turns,
                         static_cast<long long>(model.n_ctx()));
        return std::move(f.tokens);
    }
    std::vector<int32_t> prompt = chat_prompt_tokens(model, messages);
    if (static_cast<int64_t>(prompt.size()) < model.n_ctx()) return prompt;
    const std::string what = "this turn makes a prompt of " + std::to_string(prompt.size()) +
                             " tokens, which does not fit the context of " + std::to_string(model.n_ctx()) + " tokens";
    if (!conv.has_history()) throw Error(what + " (send a shorter message, or raise --ctx)");
    conv.reset();
    throw Error(what + "; the conversation so far was cleared, the next message starts a new one " +
                "(--context-overflow truncate leaves out the oldest messages instead)");
}

// One turn: the reply streamed to stdout. Throws ember::Error with the conversation as it
// was before the turn, or cleared (stop, and the error says so) when it no longer fits.
GenerateStats run_turn(Model& model, Sequence& seq, Conversation& conv, const std::string& line, OverflowPolicy policy,
                       const GenerateOptions& gen) {
    std::vector<ChatMessage> messages = conv.messages;
    messages.push_back({"user", line});
    const std::vector<int32_t> prompt = turn_prompt(model, conv, messages, policy, gen);
    std::string reply, thinking;
    ReasoningSplitter split(reasoning_format(model));
    if (split.format() != ReasoningFormat::None) split.prime(chat_generation_prompt(model, messages));
    bool thinking_line = false;  // stderr holds an unfinished line of thinking
    auto show = [&](const SplitText& t) {
        thinking += t.reasoning;
        reply += t.content;
        std::fwrite(t.reasoning.data(), 1, t.reasoning.size(), stderr);
        thinking_line = thinking_line || !t.reasoning.empty();
        if (thinking_line && !t.content.empty()) std::fputs("\n", stderr), thinking_line = false;
        std::fwrite(t.content.data(), 1, t.content.size(), stdout);
        std::fflush(stdout);
    };
    GenerateStats st;
    try {
        st = seq.generate(prompt, gen, [&](std::string_view t) {
            show(split.feed(t));
            return true;
        });
        show(split.finish());
    } catch (...) {
        if (!reply.empty()) std::fputs("\n", stdout), std::fflush(stdout);
        throw;
    }
    if (thinking_line) std::fputs("\n", stderr);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    messages.push_back({"assistant", reply, thinking});
    conv.messages = std::move(messages);
    return st;
}

}  // namespace

int cmd_chat(int argc, char** argv) {
#ifdef EMBER_HAVE_REMOTE
    if (wants_remote(argc, argv)) return cmd_chat_remote(argc, argv);
#endif
    Args args(argc, argv, 0,
              merge(merge(merge(model_value_options(), sampling_value_options()), draft_value_options()),
                    {"--system", "--context-overflow"}),
              {"--verbose", "--lookup"});
    if (args.positional().size() != 1)
        throw Error(
            "usage: ember chat MODEL [--system TEXT] [--context-overflow truncate|stop] [--lookup] [options]\n" +
            options_help() + draft_options_help());
    const std::string overflow = args.get_or("--context-overflow", "truncate");
    const std::optional<OverflowPolicy> policy = parse_overflow_policy(overflow);
    if (!policy || *policy == OverflowPolicy::Roll)  // roll: the scheduler's (ember serve, the app)
        throw Error("option --context-overflow: '" + overflow + "' is not a policy of ember chat (truncate or stop)");
    const LoadOptions lo = load_options(args, args.positional()[0]);
    GenerateOptions gen = generate_options(args, -1);
    gen.lookup = args.flag("--lookup");  // prompt lookup speculation: the same greedy text, sooner
    auto model = Model::load(lo);
    const LoadedDraft draft = load_draft(args, lo, *model);
    gen.draft = draft.get();
    const bool interactive = isatty(STDIN_FILENO);
    std::fprintf(stderr, "chat template: %s\n", model->chat_template().source_desc.c_str());
    if (interactive) std::fprintf(stderr, "Type a message and press Enter (Ctrl-D to quit).\n");

    Conversation conv;
    if (auto sys = args.get("--system")) conv.messages.push_back({"system", *sys});
    conv.n_fixed = conv.messages.size();
    Sequence seq(*model);
    std::string line;
    int failed_turns = 0;
    while (true) {
        if (interactive) std::fputs("> ", stdout), std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        // One bad turn (too long, a broken model file, ...) is reported and the session
        // goes on with the next line.
        try {
            const GenerateStats st = run_turn(*model, seq, conv, line, *policy, gen);
            if (*policy == OverflowPolicy::Stop && static_cast<int64_t>(seq.tokens().size()) + 1 >= model->n_ctx()) {
                std::fprintf(stderr, "ember chat: the context of %lld tokens is full; the conversation was cleared\n",
                             static_cast<long long>(model->n_ctx()));
                conv.reset();
            }
            if (args.flag("--verbose") || interactive)
                std::fprintf(stderr,
                             "[%d prompt tokens (%d reused), %d generated; TTFT %.0f ms; %.2f tok/s; stop: %s]\n",
                             st.prompt_tokens, st.reused_tokens, st.generated_tokens, st.ttft_ms, st.decode_tok_s(),
                             std::string(stop_reason_name(st.stop_reason)).c_str());
        } catch (const std::exception& e) {
            ++failed_turns;
            std::fprintf(stderr, "ember chat: error: %s\n", e.what());
        }
    }
    return failed_turns > 0 ? 1 : 0;
}

}  // namespace ember::cli
