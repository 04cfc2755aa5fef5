// `ember bench MODEL [--pp 512] [--tg 128] [-r 3] [--threads N] [--json]`: prompt processing
// and generation speed in tokens/s (mean +- stddev over repetitions), as a table or JSON.
// Tokens are fixed pseudo-random ids, so the numbers do not depend on a prompt.
#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "kernels/common/error.h"

namespace ember::cli {
namespace {

struct Result {
    std::string test;
    int n_tokens;
    std::vector<double> tok_s;
    double mean() const { return std::accumulate(tok_s.begin(), tok_s.end(), 0.0) / static_cast<double>(tok_s.size()); }
    double stddev() const {
        if (tok_s.size() < 2) return 0;
        double m = mean(), s = 0;
        for (double x : tok_s) s += (x - m) * (x - m);
        return std::sqrt(s / static_cast<double>(tok_s.size() - 1));
    }
};

std::vector<int32_t> bench_tokens(int n, int32_t n_vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint32_t x = 12345;
    for (auto& id : t) id = static_cast<int32_t>((x = x * 1664525u + 1013904223u) % static_cast<uint32_t>(n_vocab));
    return t;
}

double seconds_of(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    Args args(argc, argv, 0, merge(model_value_options(), {"--pp", "--tg", "-r", "--repetitions"}), {"--json"});
    if (args.positional().size() != 1)
        throw Error("usage: ember bench MODEL [--pp N] [--tg N] [-r N] [--threads N] [--json]");
    const int pp = static_cast<int>(args.get_int("--pp", 512, 0, 65536));
    const int tg = static_cast<int>(args.get_int("--tg", 128, 0, 65536));
    const int reps = static_cast<int>(args.get_int("-r", args.get_int("--repetitions", 3, 1, 1000), 1, 1000));
    if (pp + tg == 0) throw Error("--pp and --tg cannot both be 0");
    LoadOptions lo = load_options(args, args.positional()[0]);
    if (lo.n_ctx == 0) lo.n_ctx = std::max(pp, tg + 1) + 16;
    lo.n_batch = std::max(lo.n_batch, std::max(pp, 1));
    auto model = Model::load(lo);
    Sequence seq(*model);
    const auto tokens = bench_tokens(std::max(pp, tg), model->config().n_vocab);
    Result rpp{"pp" + std::to_string(pp), pp, {}}, rtg{"tg" + std::to_string(tg), tg, {}};
    for (int r = -1; r < reps; ++r) {  // r = -1 is the warm-up
        double tpp = 0, ttg = 0;
        if (pp > 0) {
            seq.reset();
            tpp = seconds_of([&] { seq.prefill(std::span(tokens).first(static_cast<size_t>(pp))); });
        }
        if (tg > 0) {
            seq.reset();
            seq.prefill(std::span(tokens).first(1));
            ttg = seconds_of([&] {
                for (int i = 1; i <= tg; ++i)
                    seq.prefill(std::span(tokens).subspan(static_cast<size_t>(i) % tokens.size(), 1));
            });
        }
        if (r < 0) continue;
        if (pp > 0) rpp.tok_s.push_back(pp / tpp);
        if (tg > 0) rtg.tok_s.push_back(tg / ttg);
    }
    const auto& info = model->info();
    if (args.flag("--json")) {
        std::printf(
            "{\"model\": \"%s\", \"type\": \"%s\", \"params\": %llu, \"size_bytes\": %llu, \"backend\": \"%s\", "
            "\"results\": [",
            info.name.c_str(), info.file_type.c_str(), static_cast<unsigned long long>(info.n_params),
            static_cast<unsigned long long>(info.file_size), model->backend().name().c_str());
        bool first = true;
        for (const Result* r : {&rpp, &rtg}) {
            if (r->tok_s.empty()) continue;
            std::printf("%s{\"test\": \"%s\", \"tokens\": %d, \"tok_s\": %.3f, \"stddev\": %.3f, \"samples\": [",
                        first ? "" : ", ", r->test.c_str(), r->n_tokens, r->mean(), r->stddev());
            for (size_t i = 0; i < r->tok_s.size(); ++i) std::printf("%s%.3f", i ? ", " : "", r->tok_s[i]);
            std::printf("]}");
            first = false;
        }
        std::printf("]}\n");
        return 0;
    }
    std::printf("| model | type | size | params | backend | test | t/s |\n|---|---|---|---|---|---|---|\n");
    for (const Result* r : {&rpp, &rtg}) {
        if (r->tok_s.empty()) continue;
        std::printf("| %s | %s | %s | %s | %s | %s | %.2f ± %.2f |\n", info.name.c_str(), info.file_type.c_str(),
                    format_bytes(info.file_size).c_str(), format_param_count(info.n_params).c_str(),
                    model->backend().name().c_str(), r->test.c_str(), r->mean(), r->stddev());
    }
    return 0;
}

}  // namespace ember::cli
