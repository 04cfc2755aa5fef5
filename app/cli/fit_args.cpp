// The fit planner's command-line options and its ranking table (see fit_args.h).
#include "app/cli/fit_args.h"

#include <cstdio>

#include "app/cli/options.h"
#include "engine/fit/byte_size.h"
#include "engine/fit/measured_budget.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::cli {
std::string bytes_or_dash(uint64_t n) { return n ? format_bytes(n) : "-"; }

std::set<std::string> fit_value_options() {
    return {"--ctx", "-c", "--vram", "--ram", "--batch", "--seqs", "--cache-type", "--margin"};
}

fit::Budget budget_from_args(const Args& a) {
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

fit::FitOptions fit_options_from_args(const Args& a) {
    fit::FitOptions fo;
    fo.n_ctx = a.get_int("--ctx", a.get_int("-c", 0, 0, int64_t{1} << 30), 0, int64_t{1} << 30);
    fo.n_batch = static_cast<int32_t>(a.get_int("--batch", 512, 1, 65536));
    fo.n_seqs = static_cast<int32_t>(a.get_int("--seqs", 1, 1, 4096));
    fo.kv_type = parse_cache_type(a.get_or("--cache-type", "f16"));
    return fo;
}

fit::ChoiceOptions choice_options_from_args(const Args& a) {
    fit::ChoiceOptions o;
    o.fit = fit_options_from_args(a);
    if (o.fit.n_ctx == 0) o.fit.n_ctx = 8192;
    o.margin = a.get_double("--margin", o.margin, 0.0, 0.9);
    return o;
}

void print_ranking(const fit::QuantChoice& c) {
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
}

}  // namespace ember::cli
