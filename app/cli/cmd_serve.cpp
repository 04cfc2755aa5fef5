// `ember serve MODEL [--host H] [--port P] [--api-key K] [--parallel N] [--max-stall-ms N]
// [--cache-ram SIZE] [--cache-disk SIZE] [--cache-dir DIR] [--no-prefix-cache] [--read-deadline-ms N]
// [--max-connections N] [--max-client-connections N] [--context-overflow stop|truncate|roll]
// [--lookup] [model options]`: the
// OpenAI-compatible HTTP server (engine/server) over a Scheduler on one loaded model, until
// SIGINT or SIGTERM.
//
// Signals: SIGINT and SIGTERM are blocked before any thread starts (every thread inherits the
// mask), and the main thread waits for them with sigwait(): the shutdown then runs as plain
// code (stop the server, cancelling what is in flight; then the scheduler; then the model)
// instead of inside a signal handler.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "app/cli/commands.h"
#include "app/cli/draft_args.h"
#include "app/cli/options.h"
#include "app/cli/serve_defaults.h"
#include "engine/fit/byte_size.h"
#include "engine/scheduler/scheduler.h"
#include "engine/server/http_server.h"
#include "kernels/common/error.h"

namespace ember::cli {

namespace {

server::ServerOptions server_options(const Args& args) {
    server::ServerOptions o;
    o.host = args.get_or("--host", kServeHost);
    o.port = static_cast<int>(args.get_int("--port", kServePort, 0, 65535));
    o.api_key = args.get_or("--api-key", "");
    if (o.api_key.empty())
        if (const char* env = std::getenv("EMBER_API_KEY")) o.api_key = env;
    o.limits.max_tokens = static_cast<int32_t>(args.get_int("--max-tokens", o.limits.max_tokens, 1, 1 << 20));
    o.read_deadline_ms = static_cast<int>(args.get_int("--read-deadline-ms", o.read_deadline_ms, 1, 24 * 3600 * 1000));
    o.max_connections = static_cast<int>(args.get_int("--max-connections", o.max_connections, 2, 65536));
    o.max_connections_per_client =
        static_cast<int>(args.get_int("--max-client-connections", o.max_connections_per_client, 1, o.max_connections));
    const std::string overflow = args.get_or("--context-overflow", "stop");
    const std::optional<OverflowPolicy> policy = parse_overflow_policy(overflow);
    if (!policy) throw Error("option --context-overflow: '" + overflow + "' is not a policy (stop, truncate or roll)");
    o.context_overflow = *policy;
    return o;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
    Args args(argc, argv, 0,
              merge(merge(model_value_options(), draft_value_options()),
                    {"--host", "--port", "--api-key", "--parallel", "--max-tokens", "--max-stall-ms", "--cache-ram",
                     "--cache-disk", "--cache-dir", "--read-deadline-ms", "--max-connections",
                     "--max-client-connections", "--context-overflow"}),
              {"--no-prefix-cache", "--lookup"});
    if (args.positional().size() != 1)
        throw Error(
            "usage: ember serve MODEL [--host H] [--port P (0: any free port)] [--api-key K] [--parallel N] "
            "[--max-tokens N] [--max-stall-ms N (250; 0: off)] [--cache-ram SIZE (4GiB; 0: off)] [--cache-disk SIZE "
            "(0: off)] [--cache-dir DIR] "
            "[--no-prefix-cache] [--read-deadline-ms N (10000)] [--max-connections N (512)] "
            "[--max-client-connections N (64)] [--context-overflow stop|truncate|roll (stop)] "
            "[--lookup (prompt lookup speculation for greedy requests)]\n" +
            options_help() + draft_options_help());
    const server::ServerOptions so = server_options(args);
    const int32_t parallel = static_cast<int32_t>(args.get_int("--parallel", 4, 1, 256));
    const int32_t max_stall_ms =
        static_cast<int32_t>(args.get_int("--max-stall-ms", kDefaultMaxStallMs, 0, 24 * 3600 * 1000));
    LoadOptions lo = load_options(args, args.positional()[0]);
    lo.n_seqs = parallel;  // one KV sequence per request in the batch

    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before the first thread starts

    const uint64_t cache_ram = fit::parse_byte_size(args.get_or("--cache-ram", kServeCacheRam), "--cache-ram");
    const uint64_t cache_disk = fit::parse_byte_size(args.get_or("--cache-disk", "0"), "--cache-disk");
    const bool prefix_cache = !args.flag("--no-prefix-cache");
    if (!prefix_cache && (args.get("--cache-disk") || args.get("--cache-ram")))
        throw Error("--no-prefix-cache turns the prefix cache off: --cache-ram and --cache-disk do not apply");
    if (args.get("--cache-dir") && cache_disk == 0) throw Error("--cache-dir needs --cache-disk SIZE");
    auto model = Model::load(lo);
    if (prefix_cache) model->kv().set_host_cache(cache_ram);
    if (prefix_cache && cache_disk > 0) {
        // Without its disk tier the server still answers (every prompt computed): said, not fatal.
        try {
            model->open_disk_prefix_cache(args.get_or("--cache-dir", default_disk_prefix_cache_root().string()),
                                          cache_disk);
        } catch (const Error& e) {
            std::fprintf(stderr, "ember serve: KV disk cache off: %s\n", e.what());
        }
    }
    const LoadedDraft draft = load_draft(args, lo, *model);  // proposes for every request that speculates
    SchedulerOptions sched;
    sched.max_batch = parallel;
    sched.prefix_cache = prefix_cache;
    sched.max_stall_ms = max_stall_ms;
    sched.lookup = args.flag("--lookup");
    sched.draft = draft.get();
    Scheduler scheduler(*model, sched);
    server::HttpServer http(scheduler, so);
    http.start();
    const EngineStatus st = scheduler.status();
    std::printf("ember serve: %s  (model %s on %s, %d parallel, context %lld%s)\n", http.url().c_str(),
                st.model.c_str(), st.device.c_str(), parallel, static_cast<long long>(st.n_ctx),
                so.api_key.empty() ? "" : ", API key required");
    std::fflush(stdout);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "ember serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http.stop();  // cancels the requests in flight first
    return 0;
}

}  // namespace ember::cli
