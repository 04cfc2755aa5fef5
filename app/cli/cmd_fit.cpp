// `ember fit MODEL.gguf | DIR | FILE...`: will it fit, and where. One file: the planned bytes
// per device and kind, and the placement (all layers on the GPU, N of M, or the CPU) with
// its reason. A folder or several files: every file ranked, and the one to use with why
// (engine/fit/quant_choice.h). The budget is measured (free VRAM, available RAM) unless
// given: `--vram 24GiB --ram 32GiB`.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "engine/fit/byte_size.h"
#include "engine/fit/measured_budget.h"
#include "engine/fit/quant_choice.h"
#include "engine/models/model_info.h"
#include "kernels/common/error.h"

namespace ember::cli {
namespace {

constexpr const char* kUsage =
    "usage: ember fit MODEL.gguf|DIR|FILE... [--ctx N] [--vram SIZE] [--ram SIZE] [--batch N] [--seqs N]\n"
    "                 [--cache-type f16|q8_0] [--margin F]\n"
    "  SIZE: 24GiB, 24G, 512MiB, ... (--vram 0: no GPU). Default: measured on this machine.\n";

DType cache_type(const std::string& t) {
    if (t == "f16" || t == "F16") return DType::F16;
    if (t == "q8_0" || t == "Q8_0") return DType::Q8_0;
    throw Error("--cache-type must be f16 or q8_0, not '" + t + "'");
}

fit::Budget budget(const Args& a) {
    std::string note;
    const bool need_gpu = !a.get("--vram"), need_ram = !a.get("--ram");
    fit::Budget b = need_gpu || need_ram ? fit::measured_budget(&note) : fit::Budget{};
    if (auto v = a.get("--vram")) {
        b.vram = fit::parse_byte_size(*v, "--vram");
        b.vram_measured = false;
    } else {
        std::printf("GPU: %s\n", note.c_str());
    }
    if (auto r = a.get("--ram")) b.ram = fit::parse_byte_size(*r, "--ram");
    else std::printf("RAM: %s available\n", format_bytes(b.ram).c_str());
    return b;
}

std::string bytes_or_dash(uint64_t n) { return n ? format_bytes(n) : "-"; }

void print_row(const char* kind, uint64_t gpu, uint64_t cpu) {
    std::printf("  %-22s %12s %12s\n", kind, bytes_or_dash(gpu).c_str(), bytes_or_dash(cpu).c_str());
}

void print_plan(const fit::FitPlan& p) {
    std::printf("\n  %-22s %12s %12s\n", "", "GPU", "CPU");
    std::printf("  %-22s %12d %12d\n", "layers", p.gpu.layers, p.cpu.layers);
    print_row("weights (copied)", p.gpu.weights, p.cpu.weights);
    print_row("weights (mapped file)", p.gpu.mapped_weights, p.cpu.mapped_weights);
    print_row("KV cache", p.gpu.kv_cache, p.cpu.kv_cache);
    print_row("scratch", p.gpu.scratch, p.cpu.scratch);
    print_row("CUDA buffers (est.)", p.gpu.backend_scratch, p.cpu.backend_scratch);
    print_row("CUDA context (est.)", p.gpu.overhead, p.cpu.overhead);
    print_row("total", p.gpu.total(), p.cpu.total());
    print_row("budget", p.budget.vram, p.budget.ram);
    std::printf("\n%s: %s\n", fit::placement_name(p.placement), p.reason.c_str());
    if (p.placement == fit::Placement::Split)
        std::printf("load with: --gpu-layers %d --ctx %lld\n", p.gpu_layers, static_cast<long long>(p.n_ctx));
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

int rank_files(const std::vector<std::string>& args, const fit::Budget& b, const fit::ChoiceOptions& o) {
    const fit::QuantChoice c = fit::choose_from_listing(listing(args), read_prefix, b, o);
    std::printf("\n  %-3s %-8s %10s %-6s %10s %10s  %s\n", "", "quant", "file", "where", "GPU", "CPU", "file / note");
    for (size_t i = 0; i < c.ranked.size(); ++i) {
        const fit::RankedFile& r = c.ranked[i];
        const bool chosen = c.chosen && *c.chosen == i;
        if (!r.plan) {
            std::printf("  %-3s %-8s %10s %-6s %10s %10s  %s: %s\n", "", "-", format_bytes(r.size).c_str(), "-", "-",
                        "-", r.path.c_str(), r.note.c_str());
            continue;
        }
        std::printf("  %-3s %-8s %10s %-6s %10s %10s  %s\n", chosen ? "->" : "", r.quant.c_str(),
                    format_bytes(r.size).c_str(), fit::placement_name(r.plan->placement),
                    bytes_or_dash(r.plan->gpu.total()).c_str(), bytes_or_dash(r.plan->cpu.total()).c_str(),
                    r.path.c_str());
    }
    std::printf("\n%s\n", c.reason.c_str());
    if (!c.chosen) return 1;
    const fit::FitPlan& p = *c.plan;
    std::printf("use: %s --ctx %lld%s\n", c.ranked[*c.chosen].path.c_str(), static_cast<long long>(p.n_ctx),
                p.placement == fit::Placement::Split ? (" --gpu-layers " + std::to_string(p.gpu_layers)).c_str()
                : p.placement == fit::Placement::Cpu ? " --device cpu"
                                                     : "");
    return 0;
}

}  // namespace

int cmd_fit(int argc, char** argv) {
    Args a(argc, argv, 0, {"--ctx", "-c", "--vram", "--ram", "--batch", "--seqs", "--cache-type", "--margin"},
           {"--help"});
    if (a.flag("--help") || a.positional().empty()) {
        std::fputs(kUsage, a.flag("--help") ? stdout : stderr);
        return a.flag("--help") ? 0 : 2;
    }
    fit::FitOptions fo;
    fo.n_ctx = a.get_int("--ctx", a.get_int("-c", 0, 0, int64_t{1} << 30), 0, int64_t{1} << 30);
    fo.n_batch = static_cast<int32_t>(a.get_int("--batch", 512, 1, 65536));
    fo.n_seqs = static_cast<int32_t>(a.get_int("--seqs", 1, 1, 4096));
    fo.kv_type = cache_type(a.get_or("--cache-type", "f16"));
    const fit::Budget b = budget(a);
    const auto& files = a.positional();
    if (files.size() == 1 && !std::filesystem::is_directory(files[0])) {
        const GgufFile f = GgufFile::open(files[0]);
        const fit::FitModel m = fit::fit_model(f);
        const fit::FitPlan p = fit::plan(m, fo, b);
        std::printf("model: %s (%s, %s, %d layers), context %lld, batch %d, KV cache %s\n", m.name.c_str(),
                    m.quant.c_str(), format_param_count(m.n_params).c_str(), m.config.n_layers,
                    static_cast<long long>(p.n_ctx), fo.n_batch, std::string(dtype_name(fo.kv_type)).c_str());
        print_plan(p);
        return p.placement == fit::Placement::TooLarge ? 1 : 0;
    }
    fit::ChoiceOptions o;
    o.fit = fo;
    if (fo.n_ctx == 0) o.fit.n_ctx = 8192;
    o.margin = a.get_double("--margin", o.margin, 0.0, 0.9);
    return rank_files(files, b, o);
}

}  // namespace ember::cli
