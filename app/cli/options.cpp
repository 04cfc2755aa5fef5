#include "app/cli/options.h"

#include "kernels/common/error.h"

namespace ember::cli {

std::set<std::string> model_value_options() { return {"--threads", "-t", "--ctx", "-c", "--kv-type", "--batch", "--device", "--gpu-layers"}; }

std::set<std::string> sampling_value_options() {
    return {"-n", "--temp", "--seed", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
            "--presence-penalty", "--frequency-penalty", "--stop"};
}

std::set<std::string> merge(std::set<std::string> a, const std::set<std::string>& b) {
    a.insert(b.begin(), b.end());
    return a;
}

LoadOptions load_options(const Args& args, const std::string& model_path) {
    LoadOptions o;
    o.path = model_path;
    o.n_threads = static_cast<int>(args.get_int("--threads", args.get_int("-t", 0)));
    o.n_ctx = args.get_int("--ctx", args.get_int("-c", 0));
    o.n_batch = static_cast<int32_t>(args.get_int("--batch", 512));
    o.device = args.get_or("--device", "auto");
    o.n_gpu_layers = static_cast<int>(args.get_int("--gpu-layers", -1));
    const std::string kv = args.get_or("--kv-type", "f16");
    if (kv == "f16" || kv == "F16") o.kv_type = DType::F16;
    else if (kv == "q8_0" || kv == "Q8_0") o.kv_type = DType::Q8_0;
    else throw Error("--kv-type must be f16 or q8_0");
    if (o.n_threads < 0 || o.n_ctx < 0 || o.n_batch <= 0) throw Error("--threads, --ctx and --batch must be positive");
    return o;
}

GenerateOptions generate_options(const Args& args, int32_t default_max_tokens) {
    GenerateOptions g;
    SamplingParams& s = g.sampling;
    g.max_tokens = static_cast<int32_t>(args.get_int("-n", default_max_tokens));
    s.temperature = static_cast<float>(args.get_double("--temp", s.temperature));
    s.seed = static_cast<uint64_t>(args.get_int("--seed", static_cast<long long>(s.seed)));
    s.top_k = static_cast<int32_t>(args.get_int("--top-k", s.top_k));
    s.top_p = static_cast<float>(args.get_double("--top-p", s.top_p));
    s.min_p = static_cast<float>(args.get_double("--min-p", s.min_p));
    s.repeat_penalty = static_cast<float>(args.get_double("--repeat-penalty", s.repeat_penalty));
    s.repeat_last_n = static_cast<int32_t>(args.get_int("--repeat-last-n", s.repeat_last_n));
    s.presence_penalty = static_cast<float>(args.get_double("--presence-penalty", s.presence_penalty));
    s.frequency_penalty = static_cast<float>(args.get_double("--frequency-penalty", s.frequency_penalty));
    if (auto stop = args.get("--stop")) g.stop.push_back(*stop);
    return g;
}

std::string options_help() {
    return "  model:    --device auto|cpu|cuda  --gpu-layers N (rest on the CPU)  --threads N  --ctx N  --kv-type f16|q8_0  --batch N\n"
           "  sampling: -n N  --temp T (0 = greedy)  --seed S  --top-k K  --top-p P  --min-p P\n"
           "            --repeat-penalty R  --repeat-last-n N  --presence-penalty P  --frequency-penalty P  --stop TEXT\n";
}

}  // namespace ember::cli
