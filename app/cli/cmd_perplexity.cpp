// `ember perplexity MODEL -f TEXT [--ctx 512] [--chunks N] [--save-logits F | --kl-divergence F
// [--kl-values OUT]]`: perplexity over a text, chunked as llama-perplexity does, and the KL
// divergence from a saved base run (engine/quant/perplexity.h); --kl-values writes each scored
// token's KL, one per line, for paired comparisons of two files. The report's last lines are
// machine-readable "key: value" pairs (tests/bench/quant_quality.py reads them).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "engine/quant/perplexity.h"
#include "kernels/common/error.h"

namespace ember::cli {

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the text file");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void print_kl(const KlReport& k) {
    std::printf("ppl_base: %.6f\n", k.ppl_base);
    std::printf("ln_ppl_ratio: %.6f +/- %.6f\n", k.ln_ppl_ratio.mean, k.ln_ppl_ratio.error);
    std::printf("kld_mean: %.6f +/- %.6f\n", k.kld.mean, k.kld.error);
    std::printf("kld_median: %.6f\n", k.kld_median);
    std::printf("kld_p99: %.6f\n", k.kld_p99);
    std::printf("kld_max: %.6f\n", k.kld_max);
    std::printf("rms_p_diff_percent: %.3f\n", 100 * k.rms_p_diff);
    std::printf("same_top_percent: %.3f +/- %.3f\n", 100 * k.same_top.mean, 100 * k.same_top.error);
}

// One value per line, full float precision; written beside and renamed, so a run that fails
// leaves no partial file under the name asked for.
void write_kl_values(const std::string& path, const std::vector<float>& values) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        if (!out) throw Error(tmp + ": cannot write the KL values");
        char line[32];
        for (const float v : values) {
            std::snprintf(line, sizeof line, "%.9g\n", static_cast<double>(v));
            out << line;
        }
        out.flush();
        if (!out) throw Error(tmp + ": write failed (disk full?)");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw Error(path + ": cannot rename the KL values file into place");
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
    Args args(
        argc, argv, 0,
        merge(model_value_options(), {"-f", "--file", "--chunks", "--save-logits", "--kl-divergence", "--kl-values"}),
        {"--quiet"});
    const auto file = args.get("-f") ? args.get("-f") : args.get("--file");
    const auto kl = args.get("--kl-divergence");
    if (args.positional().size() != 1 || (!file && !kl))
        throw Error(
            "usage: ember perplexity MODEL -f TEXT [--ctx 512] [--chunks N] [--save-logits FILE]\n"
            "       ember perplexity MODEL --kl-divergence BASE_FILE [--chunks N] [--kl-values OUT]\n" +
            options_help());
    if (kl && args.get("--save-logits")) throw Error("--save-logits and --kl-divergence cannot be combined");
    const auto kl_values = args.get("--kl-values");
    if (kl_values && !kl) throw Error("--kl-values needs --kl-divergence BASE_FILE");
    PerplexityOptions po;
    po.n_ctx = static_cast<int32_t>(args.get_int("--ctx", 512, 4, 1 << 20));
    po.n_chunks = static_cast<int32_t>(args.get_int("--chunks", -1, -1, 1 << 20));
    po.save_logits = args.get_or("--save-logits", "");
    po.kl_divergence = kl.value_or("");
    if (kl) po.n_ctx = LogitsFileReader(*kl).n_ctx();  // the base run's chunk size sizes the context
    const std::string text = file ? read_text(*file) : std::string();
    LoadOptions lo = load_options(args, args.positional()[0]);
    lo.n_ctx = po.n_ctx;
    lo.n_batch = std::min<int32_t>(lo.n_batch, po.n_ctx);
    auto model = Model::load(lo);
    const bool quiet = args.flag("--quiet");
    po.on_chunk = [quiet](int32_t done, int32_t total, double ppl) {
        if (!quiet) std::fprintf(stderr, "[%d/%d] %.4f\n", done, total, ppl);
    };
    const PerplexityResult r = perplexity(*model, text, po);
    std::printf("chunks: %d\n", r.n_chunks);
    std::printf("n_ctx: %d\n", r.n_ctx);
    std::printf("tokens_scored: %lld\n", static_cast<long long>(r.n_scored));
    std::printf("ppl: %.6f +/- %.6f\n", r.ppl, r.ppl_error);
    if (r.kl) print_kl(*r.kl);
    if (r.kl && kl_values) write_kl_values(*kl_values, r.kl->kld_tokens);
    return 0;
}

}  // namespace ember::cli
