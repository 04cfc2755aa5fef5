// `ember fit MODEL.gguf | DIR | FILE...`: will it fit, and where. One file: the planned bytes
// per device and kind, and the placement (all layers on the GPU, N of M, or the CPU) with
// its reason. A folder or several files: every file ranked, and the one to use with why
// (engine/fit/quant_choice.h). The budget is measured (free VRAM, available RAM) unless
// given: `--vram 24GiB --ram 32GiB`. `--draft DRAFT.gguf`: a model with its draft model
// (speculative decoding), the draft planned in what the model leaves.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/fit_args.h"
#include "app/cli/options.h"
#include "engine/fit/byte_size.h"
#include "engine/fit/measured_budget.h"
#include "engine/fit/quant_choice.h"
#include "engine/models/model_info.h"
#include "engine/models/transformer.h"
#ifdef EMBER_HAVE_HUB
#include "engine/hub/pull.h"
#endif
#include "kernels/common/error.h"

namespace ember::cli {
namespace {

constexpr const char* kUsage =
    "usage: ember fit MODEL.gguf|DIR|FILE...|OWNER/NAME [--ctx N] [--vram SIZE] [--ram SIZE] [--batch N] [--seqs N]\n"
    "                 [--cache-type f16|q8_0] [--margin F] [--draft DRAFT.gguf]\n"
    "  SIZE: 24GiB, 24G, 512MiB, ... (--vram 0: no GPU). Default: measured on this machine.\n";

// The `ember` options that load a file as the plan places it.
std::string load_flags(const fit::FitPlan& p) {
    switch (p.placement) {
        case fit::Placement::Split:
            return " --gpu-layers " + std::to_string(p.gpu_layers);
        case fit::Placement::ExpertsInRam:
            return " --gpu-expert-layers " + std::to_string(p.gpu_expert_layers);
        case fit::Placement::Cpu:
            return " --device cpu";
        default:
            return "";
    }
}

void print_row(const char* kind, uint64_t gpu, uint64_t cpu) {
    std::printf("  %-22s %12s %12s\n", kind, bytes_or_dash(gpu).c_str(), bytes_or_dash(cpu).c_str());
}

void print_plan(const fit::FitPlan& p) {
    std::printf("\n  %-22s %12s %12s\n", "", "GPU", "CPU");
    std::printf("  %-22s %12d %12d\n", "layers", p.gpu.layers, p.cpu.layers);
    print_row("weights (copied)", p.gpu.weights, p.cpu.weights);
    print_row("weights (mapped file)", p.gpu.mapped_weights, p.cpu.mapped_weights);
    if (p.n_expert > 0) {
        std::printf("  %-22s %12d %12d\n", "layers' experts", p.gpu.expert_layers, p.cpu.expert_layers);
        print_row("of weights: experts", p.gpu.expert_weights, p.cpu.expert_weights);
    }
    print_row("KV cache", p.gpu.kv_cache, p.cpu.kv_cache);
    if (p.gpu.state + p.cpu.state > 0) print_row("recurrent state", p.gpu.state, p.cpu.state);
    print_row("scratch", p.gpu.scratch, p.cpu.scratch);
    print_row("CUDA buffers (est.)", p.gpu.backend_scratch, p.cpu.backend_scratch);
    print_row("CUDA context (est.)", p.gpu.overhead, p.cpu.overhead);
    print_row("total", p.gpu.total(), p.cpu.total());
    print_row("budget", p.budget.vram, p.budget.ram);
    std::printf("\n%s: %s\n", fit::placement_name(p.placement), p.reason.c_str());
    if (p.placement == fit::Placement::Split || p.placement == fit::Placement::ExpertsInRam)
        std::printf("load with:%s --ctx %lld\n", load_flags(p).c_str(), static_cast<long long>(p.n_ctx));
}

// Every cache layer's K and V for one token, in the cache's type (Q8_0: 34 bytes per 32
// values, F16: 64).
uint64_t kv_bytes_per_token(const fit::FitModel& m, const fit::FitOptions& fo) {
    const KvCacheConfig kv = Transformer::kv_config(m.config, 1, 1, fo.kv_type);
    return kv.bytes_per_block() / static_cast<uint64_t>(kv.block_tokens);
}

std::vector<uint8_t> read_prefix(const std::string& path, uint64_t n) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::vector<uint8_t> out(static_cast<size_t>(n));
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n));
    out.resize(static_cast<size_t>(in.gcount()));
    return out;
}

std::vector<fit::ListedFile> listing(const std::vector<std::string>& args) {
    std::vector<fit::ListedFile> out;
    auto add = [&](const std::filesystem::path& p) { out.push_back({p.string(), std::filesystem::file_size(p)}); };
    for (const std::string& a : args) {
        if (!std::filesystem::is_directory(a)) {
            add(a);
            continue;
        }
        for (const auto& e : std::filesystem::directory_iterator(a))
            if (e.is_regular_file() && e.path().extension() == ".gguf") add(e.path());
    }
    return out;
}

// A folder or several files, or (with the model hub built) a repository OWNER/NAME.
int rank_files(const std::vector<std::string>& args, const fit::Budget& b, const fit::ChoiceOptions& o) {
    fit::QuantChoice c;
#ifdef EMBER_HAVE_HUB
    if (args.size() == 1 && !std::filesystem::exists(args[0]) && args[0].find('/') != std::string::npos) {
        const hub::ModelRef ref = hub::parse_model_ref(args[0]);
        c = hub::rank_repository(hub::HubClient(), ref.repo, "main", b, o);
    } else
#endif
        c = fit::choose_from_listing(listing(args), read_prefix, b, o);
    print_ranking(c);
    if (!c.chosen) return 1;
    const fit::FitPlan& p = *c.plan;
    std::printf("use: %s --ctx %lld%s\n", c.ranked[*c.chosen].path.c_str(), static_cast<long long>(p.n_ctx),
                load_flags(p).c_str());
    return 0;
}

// MODEL with --draft DRAFT (ember run|chat|serve --draft): both plans, the draft's in what the
// target leaves, and the two together.
int plan_draft(const std::string& target_path, const std::string& draft_path, const fit::FitOptions& fo,
               const fit::Budget& b) {
    const GgufFile tf = GgufFile::open(target_path), df = GgufFile::open(draft_path);
    const fit::FitModel tm = fit::fit_model(tf), dm = fit::fit_model(df);
    const fit::DraftFitPlan p = fit::plan_with_draft(tm, dm, fo, b);
    for (const auto& [label, m, plan] : {std::tuple{"model", &tm, &p.target}, std::tuple{"draft", &dm, &p.draft}}) {
        std::printf("%s: %s (%s, %s, %d layers), context %lld, batch %d, KV cache %s\n", label, m->name.c_str(),
                    m->quant.c_str(), format_param_count(m->n_params).c_str(), m->config.n_layers,
                    static_cast<long long>(plan->n_ctx), fo.n_batch, std::string(dtype_name(fo.kv_type)).c_str());
        print_plan(*plan);
        std::printf("\n");
    }
    std::printf("model + draft: %s on the GPU, %s on the CPU\n", bytes_or_dash(p.gpu_total()).c_str(),
                bytes_or_dash(p.cpu_total()).c_str());
    return fit::fits(p) ? 0 : 1;
}

}  // namespace

int cmd_fit(int argc, char** argv) {
    Args a(argc, argv, 0, merge(fit_value_options(), {"--draft"}), {"--help"});
    if (a.flag("--help") || a.positional().empty()) {
        std::fputs(kUsage, a.flag("--help") ? stdout : stderr);
        return a.flag("--help") ? 0 : 2;
    }
    const fit::FitOptions fo = fit_options_from_args(a);
    const fit::Budget b = budget_from_args(a);
    const auto& files = a.positional();
    if (const auto draft = a.get("--draft")) {
        if (files.size() != 1 || !std::filesystem::is_regular_file(files[0]))
            throw Error(
                "option --draft: plans one model file with its draft (ember fit MODEL.gguf --draft DRAFT.gguf)");
        return plan_draft(files[0], *draft, fo, b);
    }
    if (files.size() == 1 && std::filesystem::is_regular_file(files[0])) {
        const GgufFile f = GgufFile::open(files[0]);
        const fit::FitModel m = fit::fit_model(f);
        const fit::FitPlan p = fit::plan(m, fo, b);
        std::printf("model: %s (%s, %s, %d layers), context %lld, batch %d, KV cache %s\n", m.name.c_str(),
                    m.quant.c_str(), format_param_count(m.n_params).c_str(), m.config.n_layers,
                    static_cast<long long>(p.n_ctx), fo.n_batch, std::string(dtype_name(fo.kv_type)).c_str());
        print_plan(p);
        std::printf("KV cache per token: %s (%s)\n", format_bytes(kv_bytes_per_token(m, fo)).c_str(),
                    std::string(dtype_name(fo.kv_type)).c_str());
        return p.placement == fit::Placement::TooLarge ? 1 : 0;
    }
    return rank_files(files, b, choice_options_from_args(a));
}

}  // namespace ember::cli
