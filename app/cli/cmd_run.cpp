// `ember run MODEL -p TEXT [options]`: raw completion, streamed to stdout; timing to stderr.
// --json-schema FILE / --grammar FILE constrain the output (engine/grammar). --lookup: prompt
// lookup speculation (greedy: the same text, fewer passes; engine/scheduler/prompt_lookup.h);
// --draft MODEL: a draft model's (engine/scheduler/draft_model.h).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/cli/commands.h"
#include "app/cli/draft_args.h"
#include "app/cli/options.h"
#include "engine/grammar/grammar.h"
#include "kernels/common/error.h"
#ifdef EMBER_HAVE_JSON_SCHEMA
#include "engine/grammar/json_schema.h"
#endif

namespace ember::cli {

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read " + path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The grammar --json-schema FILE or --grammar FILE (GBNF) asks for; null when neither.
std::shared_ptr<const grammar::Grammar> grammar_option(const Args& args) {
    const auto schema = args.get("--json-schema");
    const auto gbnf = args.get("--grammar");
    if (schema && gbnf) throw Error("give --json-schema or --grammar, not both");
    const std::string path = schema ? *schema : gbnf ? *gbnf : "";
    if (path.empty()) return nullptr;
    try {
        if (gbnf) return grammar::Grammar::parse(read_text(path));
#ifdef EMBER_HAVE_JSON_SCHEMA
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(read_text(path));
        } catch (const nlohmann::json::exception& e) {
            throw Error(path + ": not valid JSON: " + e.what());
        }
        return grammar::Grammar::parse(grammar::json_schema_to_gbnf(j));
#else
        throw Error("--json-schema: this build has no JSON schema support (nlohmann-json was not found)");
#endif
    } catch (const grammar::GrammarError& e) {
        throw Error(path + ": " + e.what());
    }
}

}  // namespace

int cmd_run(int argc, char** argv) {
#ifdef EMBER_HAVE_REMOTE
    if (wants_remote(argc, argv)) return cmd_run_remote(argc, argv);
#endif
    Args args(argc, argv, 0,
              merge(merge(merge(model_value_options(), sampling_value_options()), draft_value_options()),
                    {"-p", "--prompt", "--json-schema", "--grammar"}),
              {"--no-bos", "--parse-special", "--quiet", "--lookup"});
    if (args.positional().size() != 1)
        throw Error("usage: ember run MODEL -p TEXT [--json-schema FILE | --grammar FILE] [--lookup] [options]\n" +
                    options_help() + draft_options_help());
    const std::string prompt = args.get_or("-p", args.get_or("--prompt", ""));
    if (prompt.empty()) throw Error("ember run needs a prompt (-p TEXT)");
    const LoadOptions lo = load_options(args, args.positional()[0]);
    GenerateOptions gen = generate_options(args, 128);  // every option checked before loading
    gen.grammar = grammar_option(args);
    gen.lookup = args.flag("--lookup");
    auto model = Model::load(lo);
    const LoadedDraft draft = load_draft(args, lo, *model);
    gen.draft = draft.get();
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
    if (!args.flag("--quiet") && (gen.lookup || gen.draft))
        std::fprintf(stderr, "[%s: %d drafted, %d accepted (%.0f%%); %.2f tokens/pass]\n",
                     gen.draft ? "draft" : "lookup", st.drafted_tokens, st.accepted_tokens,
                     100.0 * st.acceptance_rate(), st.tokens_per_pass());
    return 0;
}

}  // namespace ember::cli
