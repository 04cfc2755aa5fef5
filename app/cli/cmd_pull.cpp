// `ember pull REPO[:QUANT|:FILE.gguf]`: download a model into the library, with a progress line.
// Ctrl-C stops the transfer and keeps the partial file, so running the same command again
// resumes; a second pull of the same file waits for the first (engine/hub/pull_lock.h).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/fit_args.h"
#include "engine/hub/pull.h"
#include "kernels/common/format.h"

namespace ember::cli {
namespace {

// The signal handler's only act: a lock-free atomic store, which is async-signal-safe.
hub::TransferControl* g_control = nullptr;
extern "C" void on_pull_interrupt(int) {
    if (g_control) g_control->pause.store(true);
}

std::string eta_text(double s) {
    if (s < 0) return "--";
    char buf[32];
    if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
    else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
    return buf;
}

// One line, rewritten in place on a terminal (once per percent); a line per 10% otherwise.
class ProgressLine {
public:
    explicit ProgressLine(bool tty) : tty_(tty) {}
    void show(const hub::PullProgress& p) {
        const int pct = p.total ? static_cast<int>(100 * p.bytes / p.total) : 100;
        if (!tty_ && last_pct_ >= 0 && pct / 10 == last_pct_ / 10) return;  // a log file: every 10%
        if (tty_ && pct == last_pct_ && p.bytes != p.total) return;
        last_pct_ = pct;
        std::fprintf(stderr, "%s%s %s / %s %3d%%  %s/s  ETA %s  (part %zu/%zu)%s", tty_ ? "\r" : "", p.quant.c_str(),
                     format_bytes(p.bytes).c_str(), format_bytes(p.total).c_str(), pct,
                     format_bytes(static_cast<uint64_t>(p.bytes_per_s)).c_str(), eta_text(p.eta_s).c_str(), p.part,
                     p.parts, tty_ ? "\033[K" : "\n");
    }
    void end() {
        if (tty_ && last_pct_ >= 0) std::fputc('\n', stderr);
    }

private:
    bool tty_;
    int last_pct_ = -1;
};

// No quantization named: the fit planner ranks the repository's files (reading their headers
// only) and picks one; the ranking and the one-line reason are printed before the download.
hub::PullPlan choose(const hub::HubClient& client, const std::string& repo, const std::string& revision,
                     const Args& args) {
    const fit::Budget budget = budget_from_args(args);
    hub::AutoPullPlan a = hub::plan_pull_auto(client, repo, revision, budget, choice_options_from_args(args));
    print_ranking(a.choice);
    std::fflush(stdout);
    return std::move(a.plan);
}

}  // namespace

int cmd_pull(int argc, char** argv) {
    std::set<std::string> value_options = fit_value_options();
    value_options.insert({"--revision", "--models-dir", "--stall-timeout-ms", "--retries"});
    Args args(argc, argv, 0, value_options, {});
    if (args.positional().size() != 1)
        throw Error(
            "usage: ember pull OWNER/NAME[:QUANT|:FILE.gguf] [--revision R] [--models-dir DIR] "
            "[--stall-timeout-ms N] [--retries N]\n"
            "  without QUANT, the fit planner picks the best file for this machine (or for --vram S --ram S,\n"
            "  at --ctx N, default 8192) and says why");
    const hub::ModelRef ref = hub::parse_model_ref(args.positional()[0]);
    hub::HubConfig cfg = hub::HubConfig::from_env();
    cfg.stall_timeout = std::chrono::milliseconds(args.get_int("--stall-timeout-ms", 30000, 1, 3600000));
    cfg.max_attempts = static_cast<int>(args.get_int("--retries", 5, 1, 100));
    const hub::HubClient client(cfg);
    library::Library lib(args.get("--models-dir") ? std::filesystem::path(*args.get("--models-dir"))
                                                  : library::Library::default_dir());
    const std::string revision = args.get_or("--revision", "main");
    const hub::PullPlan plan = ref.quant.empty() ? choose(client, ref.repo, revision, args)
                                                 : hub::plan_pull(client, ref.repo, revision, ref.quant);
    std::fprintf(stderr, "pulling %s:%s (%s in %zu file%s) into %s\n", plan.repo.c_str(), plan.quant.c_str(),
                 format_bytes(plan.total_bytes).c_str(), plan.files.size(), plan.files.size() == 1 ? "" : "s",
                 lib.dir().c_str());

    hub::TransferControl control;
    g_control = &control;
    std::signal(SIGINT, on_pull_interrupt);
    std::signal(SIGTERM, on_pull_interrupt);
    ProgressLine line(isatty(2));
    int64_t id = 0;
    const hub::PullState end = hub::run_pull(
        client, lib, plan, control, [&](const hub::PullProgress& p) { line.show(p); }, &id);
    line.end();
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    g_control = nullptr;
    if (end == hub::PullState::Paused) {
        std::fprintf(stderr, "stopped; the partial download is kept: run the same command again to resume\n");
        return 130;
    }
    const auto m = lib.find(std::to_string(id));
    std::printf("ready: %s (%s, %s, id %lld)\n", m->name.c_str(), format_bytes(m->size).c_str(), m->path.c_str(),
                static_cast<long long>(id));
    return 0;
}

}  // namespace ember::cli
