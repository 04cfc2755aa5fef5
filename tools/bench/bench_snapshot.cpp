// ember-bench-snapshot: what one recurrent-state snapshot (qwen35's prefix reuse, kv_cache.h)
// costs at a model file's real shape: its bytes, the time to take one (KvCache::publish of a
// block that ends the sequence: the state copied to host RAM, and queued for the disk tier),
// the disk tier's write of it and of the last KV block (DiskPrefixStore::flush), and the time to restore it
// (attach_prefix: from RAM; and after a restart, a new KvCache on the same folders, from disk
// with the prefix's KV blocks). Only the cache runs (no forward passes), on the CPU backend,
// with the state filled with random bytes. Prints a table; --json FILE writes the numbers.
//
//   ember-bench-snapshot MODEL.gguf [--tokens 4096] [--reps 5] [--dir DIR] [--json FILE]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/disk_prefix_store.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/model_config.h"
#include "engine/models/transformer.h"
#include "kernels/backend.h"
#include "kernels/common/error.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::string model, dir, json;
    int32_t tokens = 4096, reps = 5;
};

// Per repetition, in ms: wall time, and the calling thread's CPU time (which other
// processes' load on a shared machine does not inflate) for what the engine thread does.
struct Times {
    double take_ram = 0, take_disk = 0, flush = 0, restore_ram = 0, restore_disk = 0;
    double take_ram_cpu = 0, restore_ram_cpu = 0, restore_disk_cpu = 0;
};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Timed {
    double wall = 0, cpu = 0;
};

constexpr uint64_t kIdentity = 0x51353542454e4348ull;  // any fixed value: one folder per store
constexpr uint64_t kStateSalt = 0x5354415445534e50ull;

void open_disk_tiers(KvCache& kv, const std::filesystem::path& root) {
    const KvCacheConfig& c = kv.config();
    const uint64_t budget = 64ull << 30;
    kv.set_disk_cache(std::make_unique<DiskPrefixStore>(root, kIdentity, c.block_tokens, c.bytes_per_block(), budget));
    kv.set_disk_state_store(std::make_unique<DiskPrefixStore>(root, kIdentity ^ kStateSalt, c.block_tokens,
                                                              kv.state_bytes_per_snapshot(), budget));
}

// Random bytes in every recurrent layer's state (all slots), so no page is a zero page.
void fill_state(Backend& be, KvCache& kv, std::mt19937_64& rng) {
    for (int i = 0; i < kv.config().n_recurrent_layers; ++i)
        for (Tensor* t : {&kv.recurrent(i).conv, &kv.recurrent(i).delta}) {
            std::vector<float> v(t->bytes() / sizeof(float));
            std::uniform_real_distribution<float> u(-1.0f, 1.0f);
            for (float& x : v) x = u(rng);
            be.upload(*t, v.data(), t->bytes());
        }
}

void flush_disk_tiers(KvCache& kv) {
    if (kv.disk_cache()) kv.disk_cache()->flush();
    if (kv.disk_state_store()) kv.disk_state_store()->flush();
}

// A sequence of `tokens` ids published in 512-token chunks (the scheduler's prefill chunks,
// each written to disk before the next, as a chunk's compute takes longer than its write) up
// to its last block, then that last block published on its own (timed): one snapshot, one block.
Timed take_one(KvCache& kv, std::span<const int32_t> ids) {
    const int32_t B = kv.config().block_tokens, n = static_cast<int32_t>(ids.size());
    const int32_t seq = kv.new_sequence();
    for (int32_t done = 0; done < n - B;) {
        const int32_t chunk = std::min(512, n - B - done);
        kv.append(seq, chunk);
        done += chunk;
        kv.publish(seq, ids.first(static_cast<size_t>(done)));
        flush_disk_tiers(kv);
    }
    kv.append(seq, B);
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_ms();
    kv.publish(seq, ids);
    const Timed t{ms_since(t0), thread_cpu_ms() - c0};
    kv.free_sequence(seq);
    return t;
}

Timed restore_one(KvCache& kv, std::span<const int32_t> ids, const char* from) {
    const int32_t seq = kv.new_sequence();
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_ms();
    const int32_t got = kv.attach_prefix(seq, ids);
    const Timed t{ms_since(t0), thread_cpu_ms() - c0};
    if (got != static_cast<int32_t>(ids.size()))
        throw Error(std::string("snapshot bench: attach_prefix ") + from + " resumed " + std::to_string(got) + " of " +
                    std::to_string(ids.size()) + " tokens");
    kv.free_sequence(seq);
    return t;
}

Times one_rep(Backend& be, const KvCacheConfig& cfg, int32_t tokens, const std::filesystem::path& root, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(tokens));
    for (int32_t& t : ids) t = static_cast<int32_t>(rng() % 100000);
    Times t;
    {
        KvCache ram_only(be, cfg);
        fill_state(be, ram_only, rng);
        const Timed take = take_one(ram_only, ids), restore = restore_one(ram_only, ids, "from RAM");
        t.take_ram = take.wall, t.take_ram_cpu = take.cpu, t.restore_ram = restore.wall,
        t.restore_ram_cpu = restore.cpu;
    }
    std::filesystem::remove_all(root);
    {
        KvCache kv(be, cfg);
        open_disk_tiers(kv, root);
        fill_state(be, kv, rng);
        t.take_disk = take_one(kv, ids).wall;
        const auto t0 = Clock::now();
        flush_disk_tiers(kv);
        t.flush = ms_since(t0);
    }
    KvCache restarted(be, cfg);  // a new process: RAM holds nothing, the folders everything
    open_disk_tiers(restarted, root);
    const Timed restore = restore_one(restarted, ids, "after a restart");
    t.restore_disk = restore.wall, t.restore_disk_cpu = restore.cpu;
    return t;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool more = i + 1 < argc;
        if (a == "--tokens" && more) o.tokens = std::stoi(argv[++i]);
        else if (a == "--reps" && more) o.reps = std::max(1, std::stoi(argv[++i]));
        else if (a == "--dir" && more) o.dir = argv[++i];
        else if (a == "--json" && more) o.json = argv[++i];
        else if (o.model.empty() && a[0] != '-') o.model = a;
        else throw Error("usage: ember-bench-snapshot MODEL.gguf [--tokens N] [--reps N] [--dir DIR] [--json FILE]");
    }
    if (o.tokens < 32 || o.tokens % 16) throw Error("--tokens: a multiple of 16 (the KV block), at least 32");
    if (o.model.empty())
        throw Error("usage: ember-bench-snapshot MODEL.gguf [--tokens N] [--reps N] [--dir DIR] [--json FILE]");
    if (o.dir.empty()) o.dir = (std::filesystem::temp_directory_path() / "ember-bench-snapshot").string();
    return o;
}

int run(const Options& o) {
    const GgufFile f = GgufFile::open(o.model);
    const ModelConfig c = read_model_config(f);
    // Room for two sequences of `tokens` (the one published and the one that attaches).
    KvCacheConfig cfg = Transformer::kv_config(c, o.tokens, 2, DType::F16);
    if (cfg.n_recurrent_layers == 0) throw Error(o.model + ": no linear-attention layers, so no state snapshots");
    auto be = make_cpu_backend(1);
    std::vector<Times> reps;
    for (int r = 0; r < o.reps; ++r)
        reps.push_back(one_rep(*be, cfg, o.tokens, o.dir, 1000 + static_cast<uint64_t>(r)));
    std::filesystem::remove_all(o.dir);
    auto med = [&](double Times::*m) {
        std::vector<double> v;
        for (const Times& t : reps) v.push_back(t.*m);
        return median(v);
    };
    const double mib = static_cast<double>(cfg.n_recurrent_layers * cfg.recurrent.bytes_per_slot()) / (1 << 20);
    const double kv_mib = static_cast<double>(cfg.bytes_per_block()) * (o.tokens / cfg.block_tokens) / (1 << 20);
    std::printf("%s: %d linear-attention layers, %d KV layers; %d tokens (%.1f MiB of KV blocks)\n", o.model.c_str(),
                cfg.n_recurrent_layers, cfg.n_layers, o.tokens, kv_mib);
    std::printf(
        "| snapshot | MiB | take, RAM: wall (CPU) ms | take, RAM + disk queue, ms | disk write (flush), ms | "
        "restore from RAM: wall (CPU) ms | after a restart, from disk (KV + snapshot): wall (CPU) ms |\n"
        "|--:|--:|--:|--:|--:|--:|--:|\n");
    std::printf("| median of %d | %.2f | %.1f (%.1f) | %.1f | %.1f | %.1f (%.1f) | %.1f (%.1f) |\n", o.reps, mib,
                med(&Times::take_ram), med(&Times::take_ram_cpu), med(&Times::take_disk), med(&Times::flush),
                med(&Times::restore_ram), med(&Times::restore_ram_cpu), med(&Times::restore_disk),
                med(&Times::restore_disk_cpu));
    if (!o.json.empty()) {
        FILE* out = std::fopen(o.json.c_str(), "w");
        if (!out) throw Error("cannot write " + o.json);
        std::fprintf(out,
                     "{\"model\": \"%s\", \"tokens\": %d, \"snapshot_bytes\": %llu, \"kv_block_bytes\": %llu, "
                     "\"take_ram_ms\": %.3f, \"take_ram_cpu_ms\": %.3f, \"take_disk_ms\": %.3f, \"flush_ms\": %.3f, "
                     "\"restore_ram_ms\": %.3f, \"restore_ram_cpu_ms\": %.3f, \"restore_disk_ms\": %.3f, "
                     "\"restore_disk_cpu_ms\": %.3f}\n",
                     o.model.c_str(), o.tokens,
                     static_cast<unsigned long long>(cfg.n_recurrent_layers * cfg.recurrent.bytes_per_slot()),
                     static_cast<unsigned long long>(cfg.bytes_per_block()), med(&Times::take_ram),
                     med(&Times::take_ram_cpu), med(&Times::take_disk), med(&Times::flush), med(&Times::restore_ram),
                     med(&Times::restore_ram_cpu), med(&Times::restore_disk), med(&Times::restore_disk_cpu));
        std::fclose(out);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember-bench-snapshot: %s\n", e.what());
        return 1;
    }
}
