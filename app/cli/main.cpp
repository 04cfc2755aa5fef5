// `ember`: the engine's command-line front door (no Qt needed).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "app/build_info/build_info.h"
#include "app/cli/commands.h"
#include "engine/core/log.h"
#include "kernels/common/error.h"

namespace {

struct Command {
    const char* name;
    int (*run)(int, char**);
    const char* help;
};

const Command kCommands[] = {
    {"info", ember::cli::cmd_info, "MODEL.gguf [--metadata] [--tensors] | --devices   describe a model file / devices"},
    {"tokenize", ember::cli::cmd_tokenize, "MODEL [--ids] [--add-special] [--parse-special] (TEXT | --file F)"},
    {"run", ember::cli::cmd_run,
     "MODEL -p TEXT [-n N] [--json-schema FILE] [--lookup | --draft M] ... | --remote URL --model NAME -p TEXT   raw "
     "completion"},
    {"chat", ember::cli::cmd_chat,
     "MODEL [--system TEXT] [options] | --remote URL --model NAME   chat (one user turn per input line)"},
    {"bench", ember::cli::cmd_bench, "MODEL [--pp 512] [--tg 128] [-r 3] [--parallel N] [--json]   speed"},
    {"synth", ember::cli::cmd_synth,
     "--shape S --type T [--layers N] -o FILE   random-weight model for benchmarks (--layers: a draft for it)"},
#ifdef EMBER_HAVE_HUB
    {"pull", ember::cli::cmd_pull,
     "OWNER/NAME[:QUANT] [--revision R]   download a model (resumes; no QUANT: the best that fits)"},
    {"ls", ember::cli::cmd_ls,
     "[--paths] [--drafts-for MODEL] | --remote URL [--api-key K]   models in the library / drafts for MODEL / on a "
     "server"},
    {"rm", ember::cli::cmd_rm, "NAME|ID   remove a model (or a pull's partial files)"},
#endif
    {"quantize", ember::cli::cmd_quantize, "IN OUT TYPE [--threads N]   convert a model to another weight type"},
    {"perplexity", ember::cli::cmd_perplexity,
     "MODEL -f TEXT [--save-logits F] | MODEL --kl-divergence F [--kl-values OUT]   quality"},
#ifdef EMBER_HAVE_SERVER
    {"serve", ember::cli::cmd_serve,
     "MODEL [--host H] [--port P] [--api-key K] [--parallel N]   OpenAI-compatible server (Ctrl-C stops)"},
    {"ps", ember::cli::cmd_ps,
     "[--host H] [--port P] [--api-key K] [--json]   what a running server has loaded and runs"},
#endif
    {"fit", ember::cli::cmd_fit,
     "MODEL|DIR [--ctx N] [--vram S] [--ram S] [--draft D]   will it fit (with a draft); which quant to use"},
};

void usage() {
    std::fprintf(stderr, "usage: ember COMMAND [ARGS] | --version\n\ncommands:\n");
    for (const auto& c : kCommands) std::fprintf(stderr, "  %-9s %s\n", c.name, c.help);
}

}  // namespace

// Engine log level: warnings by default (the commands print their own results), or
// EMBER_LOG_LEVEL=trace|debug|info|warn|error.
void set_log_level_from_env() {
    ember::LogLevel level = ember::LogLevel::Warn;
    if (const char* env = std::getenv("EMBER_LOG_LEVEL")) {
        const std::string v = env;
        if (v == "trace") level = ember::LogLevel::Trace;
        else if (v == "debug") level = ember::LogLevel::Debug;
        else if (v == "info") level = ember::LogLevel::Info;
        else if (v == "error") level = ember::LogLevel::Error;
    }
    ember::set_log_level(level);
}

int main(int argc, char** argv) {
    set_log_level_from_env();
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::printf("%s\n", ember::build::version_line("ember").c_str());
        return 0;
    }
    for (const auto& c : kCommands) {
        if (std::strcmp(argv[1], c.name) != 0) continue;
        try {
            return c.run(argc - 2, argv + 2);
        } catch (const ember::Error& e) {
            std::fprintf(stderr, "ember %s: error: %s\n", c.name, e.what());
            return 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "ember %s: internal error: %s\n", c.name, e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "ember: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
}
