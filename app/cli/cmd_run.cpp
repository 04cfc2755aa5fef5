// `ember run MODEL -p TEXT [options]`: raw completion, streamed to stdout; timing to stderr.
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "kernels/common/error.h"

namespace ember::cli {

int cmd_run(int argc, char** argv) {
    Args args(argc, argv, 0, merge(merge(model_value_options(), sampling_value_options()), {"-p", "--prompt"}),
              {"--no-bos", "--parse-special", "--quiet"});
    if (args.positional().size() != 1) throw Error("usage: ember run MODEL -p TEXT [options]\n" + options_help());
    const std::string prompt = args.get_or("-p", args.get_or("--prompt", ""));
    if (prompt.empty()) throw Error("ember run needs a prompt (-p TEXT)");
    const LoadOptions lo = load_options(args, args.positional()[0]);
    const GenerateOptions gen = generate_options(args, 128);  // every option checked before loading
    auto model = Model::load(lo);
    const Tokenizer& tok = model->tokenizer();
    std::vector<int32_t> ids = tok.encode(prompt, false, args.flag("--parse-special"));
    if (tok.add_bos() && tok.bos() >= 0 && !args.flag("--no-bos")) ids.insert(ids.begin(), tok.bos());
    Sequence seq(*model);
    std::fputs(prompt.c_str(), stdout);
    const GenerateStats st = seq.generate(ids, gen, [](std::string_view t) {
        std::fwrite(t.data(), 1, t.size(), stdout);
        std::fflush(stdout);
        return true;
    });
    std::fputs("\n", stdout);
    if (!args.flag("--quiet"))
        std::fprintf(
            stderr,
            "\n[%d prompt tokens, %d generated; TTFT %.0f ms; prefill %.1f tok/s; decode %.2f tok/s; stop: %s]\n",
            st.prompt_tokens, st.generated_tokens, st.ttft_ms, st.prefill_tok_s(), st.decode_tok_s(),
            std::string(stop_reason_name(st.stop_reason)).c_str());
    return 0;
}

}  // namespace ember::cli
