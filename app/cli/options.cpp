#include "app/cli/options.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "kernels/common/error.h"

namespace ember::cli {

std::set<std::string> model_value_options() {
    return {"--threads",           "-t",      "--ctx",    "-c",           "--cache-type",
            "--kv-type",           "--batch", "--device", "--gpu-layers", "--gpu-expert-layers",
            "--chat-template-file"};
}

std::set<std::string> sampling_value_options() {
    return {"-n",
            "--temp",
            "--seed",
            "--top-k",
            "--top-p",
            "--min-p",
            "--repeat-penalty",
            "--repeat-last-n",
            "--presence-penalty",
            "--frequency-penalty",
            "--stop"};
}

std::set<std::string> merge(std::set<std::string> a, const std::set<std::string>& b) {
    a.insert(b.begin(), b.end());
    return a;
}

namespace {

constexpr long long kInt32Max = INT32_MAX;
constexpr double kFloatMax = 3.0e38;  // options stored as float must stay finite
constexpr long long kMaxThreads = 1024;
constexpr long long kMaxBatch = 65536;

}  // namespace

DType parse_cache_type(const std::string& name) {
    if (name == "f16" || name == "F16") return DType::F16;
    if (name == "q8_0" || name == "Q8_0") return DType::Q8_0;
    throw Error("option --cache-type: '" + name + "' is not a KV cache type (f16 or q8_0)");
}

BackendPreference parse_device(const std::string& name) {
    if (name == "auto") return BackendPreference::Auto;
    if (name == "cpu") return BackendPreference::Cpu;
    if (name == "cuda") return BackendPreference::Cuda;
    throw Error("option --device: '" + name + "' is not a device (auto, cpu or cuda)");
}

LoadOptions load_options(const Args& args, const std::string& model_path) {
    LoadOptions o;
    o.path = model_path;
    o.n_threads = static_cast<int>(args.get_int("--threads", args.get_int("-t", 0, 0, kMaxThreads), 0, kMaxThreads));
    o.n_ctx = args.get_int("--ctx", args.get_int("-c", 0, 0, kMaxContext), 0, kMaxContext);
    o.n_batch = static_cast<int32_t>(args.get_int("--batch", 512, 1, kMaxBatch));
    o.device = parse_device(args.get_or("--device", "auto"));
    o.n_gpu_layers = args.get_or("--gpu-layers", "") == "auto"
                         ? kAutoGpuLayers
                         : static_cast<int>(args.get_int("--gpu-layers", -1, -1, kInt32Max));
    o.n_gpu_expert_layers = static_cast<int>(args.get_int("--gpu-expert-layers", -1, -1, kInt32Max));
    o.kv_type = parse_cache_type(args.get_or("--cache-type", args.get_or("--kv-type", "f16")));
    if (const std::string file = args.get_or("--chat-template-file", ""); !file.empty()) {
        std::ifstream in(file, std::ios::binary);
        std::ostringstream text;
        if (!(in && text << in.rdbuf())) throw Error("option --chat-template-file: cannot read '" + file + "'");
        o.chat_template = text.str();
    }
    return o;
}

GenerateOptions generate_options(const Args& args, int32_t default_max_tokens) {
    GenerateOptions g;
    SamplingParams& s = g.sampling;
    g.max_tokens = static_cast<int32_t>(args.get_int("-n", default_max_tokens, -1, kInt32Max));
    s.temperature = static_cast<float>(args.get_double("--temp", s.temperature, 0.0, kFloatMax));
    s.seed = args.get_u64("--seed", s.seed);
    s.top_k = static_cast<int32_t>(args.get_int("--top-k", s.top_k, 0, kInt32Max));
    s.top_p = static_cast<float>(args.get_double("--top-p", s.top_p, 0.0, 1.0));
    if (!(s.top_p > 0.0f)) throw Error("option --top-p: must be above 0 (1 disables it)");
    s.min_p = static_cast<float>(args.get_double("--min-p", s.min_p, 0.0, 1.0));
    s.repeat_penalty = static_cast<float>(args.get_double("--repeat-penalty", s.repeat_penalty, 0.0, kFloatMax));
    if (!(s.repeat_penalty > 0.0f)) throw Error("option --repeat-penalty: must be above 0 (1 disables it)");
    s.repeat_last_n = static_cast<int32_t>(args.get_int("--repeat-last-n", s.repeat_last_n, -1, kInt32Max));
    s.presence_penalty =
        static_cast<float>(args.get_double("--presence-penalty", s.presence_penalty, -kFloatMax, kFloatMax));
    s.frequency_penalty =
        static_cast<float>(args.get_double("--frequency-penalty", s.frequency_penalty, -kFloatMax, kFloatMax));
    if (auto stop = args.get("--stop")) g.stop.push_back(*stop);
    return g;
}

std::string options_help() {
    return "  model:    --device auto|cpu|cuda  --gpu-layers N|auto (rest on the CPU)  --threads N  --ctx N  --batch "
           "N\n"
           "            --cache-type f16|q8_0 (the KV cache's type; q8_0 takes 17/32 of f16's memory)\n"
           "            --gpu-expert-layers N (mixture of experts: the experts of the GPU's layers past the first N "
           "in RAM)\n"
           "            --chat-template-file F (Jinja used instead of the model's own chat template)\n"
           "  sampling: -n N  --temp T (0 = greedy)  --seed S  --top-k K  --top-p P  --min-p P\n"
           "            --repeat-penalty R  --repeat-last-n N  --presence-penalty P  --frequency-penalty P  --stop "
           "TEXT\n";
}

}  // namespace ember::cli
