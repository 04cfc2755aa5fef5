// `ember bench MODEL [--pp 512] [--tg 128] [-r 3] [--threads N] [--json]`: prompt processing
// and generation speed in tokens/s (mean +- stddev over repetitions), as a table or JSON.
// Tokens are fixed pseudo-random ids, so the numbers do not depend on a prompt.
//
// `--parallel N`: N requests at once through the serving scheduler (continuous batching, the
// path of `ember serve` without HTTP), each a --pp-token prompt and --tg generated tokens.
// Reports the round's throughput (N x tg tokens over the wall time, prompts included) and the
// decode steps' own (tokens sampled in steps where every sequence decodes, over those steps'
// time): how far batching multiplies a single stream's speed, measured without a network.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/draft_args.h"
#include "app/cli/options.h"
#include "engine/scheduler/scheduler.h"
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

// What the scheduler's on_step hook records during a `--parallel` round (engine thread).
struct StepLog {
    std::mutex mu;
    std::condition_variable cv;
    std::chrono::steady_clock::time_point origin;    // the round's start
    std::vector<std::pair<double, StepInfo>> steps;  // seconds since origin at each step's end
    int ended = 0;                                   // requests whose last step is recorded
    std::string error;                               // a request that failed
};

// One round of `--parallel`: n requests submitted at once, timed step by step.
struct Round {
    double wall_s = 0;
    double decode_s = 0;  // steps where every sequence of the pass was decoding
    int64_t decode_tokens = 0;
    int64_t decode_steps = 0;
};

Round parallel_round(Scheduler& sched, StepLog& rec, int n, std::span<const int32_t> tokens, int pp, int tg) {
    {
        std::lock_guard lock(rec.mu);
        rec.steps.clear();
        rec.ended = 0;
        rec.origin = std::chrono::steady_clock::now();
    }
    for (int i = 0; i < n; ++i) {
        EngineRequest req;
        const size_t off = static_cast<size_t>(i) * 7 % (tokens.size() - static_cast<size_t>(pp) + 1);
        req.prompt_tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(off),
                                 tokens.begin() + static_cast<std::ptrdiff_t>(off) + pp);
        req.sampling = SamplingParams::greedy();
        req.max_tokens = tg;
        req.ignore_eog = true;
        sched.submit(std::move(req), [&rec](EngineEvent&& e) {
            if (e.kind != EngineEvent::Kind::Failed) return;
            std::lock_guard lock(rec.mu);
            rec.error = e.error;
            rec.cv.notify_all();
        });
    }
    // A request's Finished event goes out during its last step, before on_step records that
    // step: wait for the records, so the round's last step is counted in it.
    std::unique_lock lock(rec.mu);
    rec.cv.wait(lock, [&] { return !rec.error.empty() || rec.ended == n; });
    if (!rec.error.empty()) throw Error("bench --parallel: a request failed: " + rec.error);
    Round r;
    r.wall_s = rec.steps.back().first;
    double prev = 0;
    for (const auto& [at, info] : rec.steps) {
        const bool all_decode = std::all_of(info.batch.begin(), info.batch.end(),
                                            [](const StepEntry& e) { return e.decode && e.tokens == 1; });
        if (all_decode && !info.batch.empty()) {
            r.decode_s += at - prev;
            r.decode_tokens += static_cast<int64_t>(info.batch.size());
            ++r.decode_steps;
        }
        prev = at;
    }
    return r;
}

int bench_parallel(const Args& args, int n, int pp, int tg, int reps) {
    if (pp < 1 || tg < 2) throw Error("--parallel needs --pp >= 1 and --tg >= 2");
    LoadOptions lo = load_options(args, args.positional()[0]);
    if (lo.n_ctx == 0) lo.n_ctx = pp + tg + 16;
    lo.n_seqs = n;
    auto model = Model::load(lo);
    const LoadedDraft draft = load_draft(args, lo, *model);
    StepLog step_log;
    SchedulerOptions so;
    so.draft = draft.get();
    so.max_batch = n;
    so.prefix_cache = false;               // every round prefills its prompts (they repeat from round to round)
    so.max_stall_ms = kDefaultMaxStallMs;  // as `ember serve` schedules
    so.on_step = [&step_log](const StepInfo& info) {
        std::lock_guard lock(step_log.mu);
        const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_log.origin).count();
        step_log.steps.emplace_back(at, info);
        step_log.ended += static_cast<int>(
            std::count_if(info.batch.begin(), info.batch.end(), [](const StepEntry& e) { return e.ended; }));
        step_log.cv.notify_all();
    };
    Scheduler sched(*model, so);
    const auto tokens = bench_tokens(pp + 7 * n, model->config().n_vocab);
    Result round{
        "round " + std::to_string(n) + " x (pp" + std::to_string(pp) + " + tg" + std::to_string(tg) + ")", n * tg, {}};
    Result decode{"decode " + std::to_string(n) + " x tg", n * tg, {}};
    std::vector<double> step_ms;
    for (int r = -1; r < reps; ++r) {  // r = -1 is the warm-up
        const Round x = parallel_round(sched, step_log, n, tokens, pp, tg);
        if (r < 0) continue;
        round.tok_s.push_back(n * tg / x.wall_s);
        if (x.decode_steps > 0) {
            decode.tok_s.push_back(static_cast<double>(x.decode_tokens) / x.decode_s);
            step_ms.push_back(x.decode_s * 1000 / static_cast<double>(x.decode_steps));
        }
    }
    const auto& info = model->info();
    const double ms = step_ms.empty() ? 0 : std::accumulate(step_ms.begin(), step_ms.end(), 0.0) / step_ms.size();
    if (args.flag("--json")) {
        std::printf(
            "{\"model\": \"%s\", \"type\": \"%s\", \"parallel\": %d, \"pp\": %d, \"tg\": %d, "
            "\"round_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"decode_step_ms\": %.3f}\n",
            info.name.c_str(), info.file_type.c_str(), n, pp, tg, round.mean(),
            decode.tok_s.empty() ? 0.0 : decode.mean(), ms);
        return 0;
    }
    std::printf("| model | type | backend | test | t/s |\n|---|---|---|---|---|\n");
    for (const Result* r : {&round, &decode}) {
        if (r->tok_s.empty()) continue;
        std::printf("| %s | %s | %s | %s | %.2f ± %.2f |\n", info.name.c_str(), info.file_type.c_str(),
                    model->backend().name().c_str(), r->test.c_str(), r->mean(), r->stddev());
    }
    std::printf("decode step: %.2f ms for %d sequences\n", ms, n);
    return 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    Args args(argc, argv, 0,
              merge(merge(model_value_options(), draft_value_options()),
                    {"--pp", "--tg", "-r", "--repetitions", "--parallel"}),
              {"--json"});
    if (args.positional().size() != 1)
        throw Error(
            "usage: ember bench MODEL [--pp N] [--tg N] [-r N] [--parallel N] [--threads N] [--draft M] [--json]");
    const int pp = static_cast<int>(args.get_int("--pp", 512, 0, 65536));
    const int tg = static_cast<int>(args.get_int("--tg", 128, 0, 65536));
    const int reps = static_cast<int>(args.get_int("-r", args.get_int("--repetitions", 3, 1, 1000), 1, 1000));
    if (pp + tg == 0) throw Error("--pp and --tg cannot both be 0");
    const int parallel = static_cast<int>(args.get_int("--parallel", 1, 1, 256));
    if (parallel > 1) return bench_parallel(args, parallel, pp, tg, reps);
    LoadOptions lo = load_options(args, args.positional()[0]);
    if (lo.n_ctx == 0) lo.n_ctx = std::max(pp, tg + 1) + 16;
    lo.n_batch = std::max(lo.n_batch, std::max(pp, 1));
    auto model = Model::load(lo);
    const LoadedDraft draft = load_draft(args, lo, *model);
    // Through the scheduler, as `ember run` and `serve` decode: pp is a prompt processed with
    // nothing sampled; tg the greedy tokens after the first (tg passes of one token each).
    Sequence seq(*model);
    const auto tokens = bench_tokens(std::max(pp, tg), model->config().n_vocab);
    Result rpp{"pp" + std::to_string(pp), pp, {}}, rtg{"tg" + std::to_string(tg), tg, {}};
    GenerateOptions prefill_only;
    prefill_only.max_tokens = 0;
    GenerateOptions decode;
    decode.sampling = SamplingParams::greedy();
    decode.max_tokens = tg + 1;
    decode.ignore_eog = true;
    decode.draft = draft.get();  // tg with draft-model speculation: its acceptance is printed
    int32_t drafted = 0, accepted = 0;
    for (int r = -1; r < reps; ++r) {  // r = -1 is the warm-up
        double tpp = 0, ttg = 0;
        if (pp > 0) {
            seq.reset();
            tpp = seconds_of([&] { seq.generate(std::span(tokens).first(static_cast<size_t>(pp)), prefill_only, {}); });
        }
        if (tg > 0) {
            seq.reset();
            const GenerateStats st = seq.generate(std::span(tokens).first(1), decode, {});
            ttg = st.decode_ms / 1000;
            if (r >= 0) drafted += st.drafted_tokens, accepted += st.accepted_tokens;
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
        std::printf("]");
        if (decode.draft) std::printf(", \"drafted\": %d, \"accepted\": %d", drafted, accepted);
        std::printf("}\n");
        return 0;
    }
    std::printf("| model | type | size | params | backend | test | t/s |\n|---|---|---|---|---|---|---|\n");
    for (const Result* r : {&rpp, &rtg}) {
        if (r->tok_s.empty()) continue;
        std::printf("| %s | %s | %s | %s | %s | %s | %.2f ± %.2f |\n", info.name.c_str(), info.file_type.c_str(),
                    format_bytes(info.file_size).c_str(), format_param_count(info.n_params).c_str(),
                    model->backend().name().c_str(), r->test.c_str(), r->mean(), r->stddev());
    }
    if (decode.draft)
        std::printf("draft: %d drafted, %d accepted (%.0f%%)\n", drafted, accepted,
                    drafted > 0 ? 100.0 * accepted / drafted : 0.0);
    return 0;
}

}  // namespace ember::cli
