// `ember ls`: the models in the library (only verified ones have rows), and partial downloads.
#include <cstdio>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "engine/library/library.h"
#include "engine/models/model_info.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::cli {

int cmd_ls(int argc, char** argv) {
#ifdef EMBER_HAVE_REMOTE
    if (wants_remote(argc, argv)) return cmd_ls_remote(argc, argv);
#endif
    Args args(argc, argv, 0, {"--models-dir"}, {"--paths"});
    if (!args.positional().empty()) throw Error("usage: ember ls [--models-dir DIR] [--paths]");
    const library::Library lib(args.get("--models-dir") ? std::filesystem::path(*args.get("--models-dir"))
                                                        : library::Library::default_dir());
    const auto models = lib.list();
    if (models.empty()) std::printf("no models in %s\n", lib.dir().c_str());
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
    for (const auto& p : lib.partial_downloads()) std::printf("partial: %s\n", p.c_str());
    return 0;
}

}  // namespace ember::cli
