// `--draft MODEL` and `--draft-max N` (draft-model speculation, engine/scheduler/draft_model.h)
// as `ember run`, `chat`, `serve` and `bench` take them: MODEL is a GGUF path or, where the
// model library is built, a library model's id or name; it is loaded with the target's load
// options (same device choice, threads, context, KV type, sequences) and refused when its
// vocabulary is not the target's.
#pragma once
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "app/cli/args.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/draft_load.h"

namespace ember::cli {

std::set<std::string> draft_value_options();  // --draft, --draft-max
std::string draft_options_help();

// A GGUF path as given when the file exists, else the library model it names (id or name) in
// `models_dir` (empty: the default library); throws ember::Error naming `option` when neither.
std::string resolve_model_arg(const std::string& arg, const char* option, const std::filesystem::path& models_dir = {});

using ember::LoadedDraft;
// Loads --draft next to `target` (loaded from `target_options`, engine/scheduler/draft_load.h);
// empty without --draft.
LoadedDraft load_draft(const Args& args, const LoadOptions& target_options, const Model& target);

}  // namespace ember::cli
