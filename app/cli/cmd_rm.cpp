// `ember rm NAME|ID`: remove a model from the library (a download's files too; an imported
// file stays where the user keeps it), or a repository's partial downloads.
#include <cstdio>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "engine/hub/hub_names.h"
#include "engine/library/library.h"
#include "kernels/common/error.h"

namespace ember::cli {

int cmd_rm(int argc, char** argv) {
    Args args(argc, argv, 0, {"--models-dir"}, {});
    if (args.positional().size() != 1) throw Error("usage: ember rm NAME|ID [--models-dir DIR]");
    library::Library lib(args.get("--models-dir") ? std::filesystem::path(*args.get("--models-dir"))
                                                  : library::Library::default_dir());
    const std::string key = args.positional()[0];
    if (const auto m = lib.find(key)) {
        lib.remove(m->id);
        std::printf("removed %s%s\n", m->name.c_str(),
                    m->source == library::ModelSource::Imported ? " (the imported file itself is kept)" : "");
        return 0;
    }
    // Not a model: perhaps a pull that never finished.
    const std::string repo = key.substr(0, key.find(':'));
    bool valid_repo = true;
    try {
        hub::check_repo_id(repo);
    } catch (const Error&) {
        valid_repo = false;
    }
    if (valid_repo)
        if (const size_t n = lib.remove_partials(repo); n > 0) {
            std::printf("removed %zu partial download%s of %s\n", n, n == 1 ? "" : "s", repo.c_str());
            return 0;
        }
    throw Error("no model '" + key + "' in " + lib.dir().string() + " (see ember ls)");
}

}  // namespace ember::cli
