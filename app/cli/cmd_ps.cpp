// `ember ps [--host H] [--port P] [--api-key K]`: what a running `ember serve` (or the app's
// server) has loaded, where, how much memory, and the requests it is running, from its
// /v1/status endpoint.
#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/serve_defaults.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::cli {
namespace {

using nlohmann::json;

std::string bytes(const json& j, const char* key) {
    const uint64_t n = j.value(key, uint64_t(0));
    return n ? format_bytes(n) : "-";
}

void print_status(const json& s) {
    std::printf("model     %s\n          %s\n", s.value("model", "").c_str(), s.value("model_path", "").c_str());
    std::printf("device    %s", s.value("device", "").c_str());
    const std::string reason = s.value("device_reason", "");
    std::printf(reason.empty() ? "\n" : " (%s)\n", reason.c_str());
    std::printf("context   %lld tokens per sequence, up to %d sequences per batch\n", s.value("n_ctx", 0LL),
                s.value("max_batch", 0));
    const json kv = s.value("kv_blocks", json::object());
    std::printf(
        "kv cache  %d of %d blocks in use, %d more holding prompt prefixes for reuse, %s more in host RAM, "
        "%s on disk\n",
        kv.value("used", 0), kv.value("total", 0), kv.value("cached", 0),
        format_bytes(s.value("kv_host_cache_bytes", uint64_t{0})).c_str(),
        format_bytes(s.value("kv_disk_cache_bytes", uint64_t{0})).c_str());
    std::printf("memory    %-8s %6s %11s %11s %11s %11s %11s\n", "device", "layers", "weights", "mapped", "kv cache",
                "scratch", "total");
    for (const json& m : s.value("memory", json::array()))
        std::printf("          %-8s %6d %11s %11s %11s %11s %11s\n", m.value("device", "").c_str(),
                    m.value("layers", 0), bytes(m, "weights").c_str(), bytes(m, "mapped_weights").c_str(),
                    bytes(m, "kv_cache").c_str(), bytes(m, "scratch").c_str(), bytes(m, "held").c_str());
    const json requests = s.value("requests", json::array());
    std::printf("requests  %d running, %d queued\n", s.value("running", 0), s.value("queued", 0));
    if (requests.empty()) return;
    std::printf("          %8s  %-8s %8s %10s %9s\n", "id", "state", "prompt", "generated", "age");
    for (const json& r : requests)
        std::printf("          %8llu  %-8s %8d %10d %8.1fs\n", r.value("id", 0ULL), r.value("state", "").c_str(),
                    r.value("prompt_tokens", 0), r.value("generated_tokens", 0), r.value("age_ms", 0.0) / 1000.0);
}

}  // namespace

int cmd_ps(int argc, char** argv) {
    Args args(argc, argv, 0, {"--host", "--port", "--api-key"}, {"--json"});
    if (!args.positional().empty()) throw Error("usage: ember ps [--host H] [--port P] [--api-key K] [--json]");
    const std::string host = args.get_or("--host", kServeHost);
    const int port = static_cast<int>(args.get_int("--port", kServePort, 1, 65535));
    httplib::Client client(host, port);
    client.set_connection_timeout(2);
    client.set_read_timeout(10);
    httplib::Headers headers;
    if (auto key = args.get("--api-key")) headers.emplace("Authorization", "Bearer " + *key);
    const auto res = client.Get("/v1/status", headers);
    const std::string where = "http://" + host + ":" + std::to_string(port);
    if (!res)
        throw Error("no Ember server at " + where + " (" + httplib::to_string(res.error()) +
                    "); start one with `ember serve MODEL`");
    if (res->status != 200) {
        const json e = json::parse(res->body, nullptr, false);
        const std::string why = e.is_object() && e.contains("error") ? e["error"].value("message", "") : res->body;
        throw Error(where + "/v1/status answered " + std::to_string(res->status) + ": " + why);
    }
    const json status = json::parse(res->body, nullptr, false);
    if (!status.is_object()) throw Error(where + "/v1/status did not answer JSON");
    if (args.flag("--json")) std::printf("%s\n", status.dump(2).c_str());
    else {
        std::printf("server    %s\n", where.c_str());
        print_status(status);
    }
    return 0;
}

}  // namespace ember::cli
