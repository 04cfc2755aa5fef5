// `ember ls`: the models in the library (only verified ones have rows), and partial downloads.
// `--drafts-for MODEL`: only those that can draft for MODEL (engine/library/drafts.h).
#include <cstdio>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/draft_args.h"
#include "engine/library/drafts.h"
#include "engine/library/library.h"
#include "engine/models/model_info.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::cli {

int cmd_ls(int argc, char** argv) {
#ifdef EMBER_HAVE_REMOTE
    if (wants_remote(argc, argv)) return cmd_ls_remote(argc, argv);
#endif
    Args args(argc, argv, 0, {"--models-dir", "--drafts-for"}, {"--paths"});
    if (!args.positional().empty()) throw Error("usage: ember ls [--models-dir DIR] [--paths] [--drafts-for MODEL]");
    const library::Library lib(args.get("--models-dir") ? std::filesystem::path(*args.get("--models-dir"))
                                                        : library::Library::default_dir());
    const auto drafts_for = args.get("--drafts-for");
    const auto models = drafts_for
                            ? library::compatible_drafts(lib, resolve_model_arg(*drafts_for, "--drafts-for", lib.dir()))
                            : lib.list();
    if (models.empty() && drafts_for)
        std::printf("no draft models for %s in %s\n", drafts_for->c_str(), lib.dir().c_str());
    else if (models.empty()) std::printf("no models in %s\n", lib.dir().c_str());
    else
        std::printf("%-4s %-44s %-8s %-10s %-7s %-8s %-8s %s\n", "ID", "NAME", "QUANT", "SIZE", "PARAMS", "ARCH", "CTX",
                    "SOURCE");
    for (const auto& m : models) {
        std::printf("%-4lld %-44s %-8s %-10s %-7s %-8s %-8llu %s%s\n", static_cast<long long>(m.id), m.name.c_str(),
                    m.quantization.c_str(), format_bytes(m.size).c_str(), format_param_count(m.parameters).c_str(),
                    m.architecture.c_str(), static_cast<unsigned long long>(m.context_length),
                    library::source_name(m.source).c_str(), m.present ? "" : "  (MISSING: file changed or removed)");
        if (args.flag("--paths")) std::printf("     %s\n", m.path.c_str());
    }
    if (drafts_for) return 0;
    for (const auto& p : lib.partial_downloads()) std::printf("partial: %s\n", p.c_str());
    return 0;
}

}  // namespace ember::cli
