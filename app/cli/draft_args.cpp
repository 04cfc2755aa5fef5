#include "app/cli/draft_args.h"

#include <cstdio>
#include <filesystem>

#ifdef EMBER_HAVE_HUB
#include "engine/library/library.h"
#endif
#include "kernels/common/error.h"

namespace ember::cli {

std::set<std::string> draft_value_options() { return {"--draft", "--draft-max"}; }

std::string draft_options_help() {
    return "  draft:    --draft MODEL (a smaller model with the same vocabulary proposes tokens; greedy output\n"
           "            unchanged, sampled output of the same distribution)\n"
           "            --draft-max N (tokens proposed per pass at most, 8)\n";
}

std::string resolve_model_arg(const std::string& arg, const char* option, const std::filesystem::path& models_dir) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(arg, ec)) return arg;
#ifdef EMBER_HAVE_HUB
    const library::Library lib(models_dir.empty() ? library::Library::default_dir() : models_dir);
    if (const auto m = lib.find(arg)) {
        if (!m->present)
            throw Error(std::string("option ") + option + ": library model '" + arg + "' is missing its file " +
                        m->path);
        return m->path;
    }
    throw Error(std::string("option ") + option + ": '" + arg + "' is neither a file nor a model in the library (" +
                lib.dir().string() + ")");
#else
    (void)models_dir;
    throw Error(std::string("option ") + option + ": '" + arg + "' is not a file");
#endif
}

LoadedDraft load_draft(const Args& args, const LoadOptions& target_options, const Model& target) {
    LoadedDraft d;
    const auto name = args.get("--draft");
    const auto max = static_cast<int32_t>(args.get_int("--draft-max", kDefaultDraftMax, 1, 64));
    if (!name) {
        if (args.get("--draft-max")) throw Error("option --draft-max needs --draft MODEL");
        return d;
    }
    const std::string path = resolve_model_arg(*name, "--draft");
    d = load_draft_model(path, target_options, target, max);
    std::fprintf(stderr, "draft model: %s on %s, up to %d tokens a pass\n", path.c_str(), d.model->device().c_str(),
                 max);
    return d;
}

}  // namespace ember::cli
