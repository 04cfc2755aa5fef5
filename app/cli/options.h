// Options shared by the CLI commands that load a model and generate: model loading
// (--threads, --ctx, --cache-type, --batch) and sampling (-n, --temp, --seed, ...).
#pragma once
#include <set>
#include <string>

#include "app/cli/args.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"

namespace ember::cli {

// Option names that take a value, for Args.
std::set<std::string> model_value_options();
std::set<std::string> sampling_value_options();
std::set<std::string> merge(std::set<std::string> a, const std::set<std::string>& b);

// The text of --device, turned into the engine's enum here (the CLI's edge).
BackendPreference parse_device(const std::string& name);
// --cache-type (alias --kv-type): f16 or q8_0, the KV cache's element type.
DType parse_cache_type(const std::string& name);
// Every number is range-checked (ember::Error names the option and the range).
LoadOptions load_options(const Args& args, const std::string& model_path);
GenerateOptions generate_options(const Args& args, int32_t default_max_tokens);
std::string options_help();

}  // namespace ember::cli
