// `ember quantize IN OUT TYPE [--threads N] [--allow-requantize]`: converts a model file to
// another weight type (engine/quant/quantizer.h); progress on stderr, Ctrl-C leaves no OUT.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "engine/quant/quant_plan.h"
#include "engine/quant/quantizer.h"
#include "kernels/common/error.h"

namespace ember::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_quantize_interrupt(int) { g_interrupted.store(true); }

std::string usage() {
    std::string types;
    for (const auto& n : quant_scheme_names()) types += (types.empty() ? "" : "|") + n;
    return "usage: ember quantize IN.gguf OUT.gguf (" + types + ") [--threads N] [--allow-requantize] [--quiet]";
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
    Args args(argc, argv, 0, {"--threads", "-t"}, {"--allow-requantize", "--quiet", "--verbose"});
    if (args.positional().size() != 3) throw Error(usage());
    QuantizeOptions o;
    o.input = args.positional()[0];
    o.output = args.positional()[1];
    o.type = args.positional()[2];
    quant_scheme(o.type);  // an unknown type is reported before the file is read
    o.n_threads = static_cast<int>(args.get_int(args.get("-t") ? "-t" : "--threads", 0, 0, 1024));
    o.allow_requantize = args.flag("--allow-requantize");
    o.cancel = &g_interrupted;
    // A progress line that rewrites itself is for a terminal; a log gets the summary only.
    const bool quiet = args.flag("--quiet") || !::isatty(2);
    int last_percent = -1;
    o.on_progress = [&](const QuantizeProgress& p) {
        const int percent = static_cast<int>(p.fraction() * 100);
        if (quiet || percent == last_percent) return;
        last_percent = percent;
        std::fprintf(stderr, "\r[%3d%%] tensor %d/%d %-40s", percent, p.tensor_index + 1, p.n_tensors,
                     p.tensor.c_str());
    };
    o.on_warning = [](const std::string& w) { std::fprintf(stderr, "warning: %s\n", w.c_str()); };
    std::signal(SIGINT, on_quantize_interrupt);
    std::signal(SIGTERM, on_quantize_interrupt);
    const QuantizeResult r = quantize_model(o);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (!quiet) std::fputc('\n', stderr);
    if (r.cancelled) {
        std::fprintf(stderr, "cancelled: %s was not written\n", o.output.c_str());
        return 130;
    }
    if (args.flag("--verbose")) {
        for (const auto& t : r.tensors)
            if (t.from != t.to || t.fallback)
                std::printf("%-36s %-5s -> %-5s%s\n", t.name.c_str(), std::string(dtype_name(t.from)).c_str(),
                            std::string(dtype_name(t.to)).c_str(), t.fallback ? "  (row length: fallback)" : "");
    }
    std::printf("wrote %s (%s): %.1f MiB -> %.1f MiB, %zu tensors, %d with a fallback type\n", o.output.c_str(),
                o.type.c_str(), double(r.input_bytes) / (1 << 20), double(r.output_bytes) / (1 << 20), r.tensors.size(),
                r.n_fallback());
    return 0;
}

}  // namespace ember::cli
