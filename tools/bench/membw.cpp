// ember-membw: this machine's main-memory bandwidth, measured like STREAM, as the ceiling
// that decode speed is compared against (decode of a dense model streams every weight once
// per token, so tok/s x bytes/token can never beat what this tool measures).
//
//   ember-membw [--threads N] [--size-mib M] [--reps R] [--no-huge] [--json]
//
//   copy: each thread memcpy()s its slice of SRC into DST. Reported GB/s counts the bytes
//         read plus the bytes written (2 x size), as STREAM's "Copy" does; write-allocate
//         traffic, if the stores are not streaming, is not counted.
//   read: each thread sums its slice of SRC as 64-bit integers with several independent
//         vector accumulators (the widest of AVX-512 / AVX2 / SSE2 the CPU has, picked at run
//         time), i.e. a pure load stream. Reported GB/s counts the bytes read (1 x size).
//
// Buffers default to 1 GiB each (far larger than any L3), are 2 MiB aligned with transparent
// huge pages requested (--no-huge: refused, i.e. 4 KiB pages like a model file mmapped from
// the page cache; how much THP really gave is reported), and are first touched by the thread that later reads them with
// a non-zero pattern (so reads never hit the shared zero page). Each test runs one untimed warm-up and then R timed
// repetitions; the best (fastest) repetition is reported, as STREAM does, together with every sample. Time is wall time
// from a barrier before the first thread starts to the last thread finishing.
//
// Plain C++20 + pthreads, no Qt, no engine dependency.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "ember-membw: %s\n", msg.c_str());
    std::exit(2);
}

long long parse_int(const char* s, const char* name) {
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (!s[0] || *end || v <= 0) die(std::string("bad value for ") + name + ": '" + s + "'");
    return v;
}

// Sums n 64-bit words. Several independent accumulators keep enough loads in flight; the
// clones let one baseline-x86-64 binary use AVX-512 or AVX2 where the CPU has them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
uint64_t
sum_words(const uint64_t* p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    // 8 words per accumulator lane group; the compiler vectorizes each group of eight
    // independent sums into the widest vectors the clone allows.
    for (; i + 32 <= n; i += 32) {
        for (size_t j = 0; j < 32; j += 8) {
            a0 += p[i + j + 0];
            a1 += p[i + j + 1];
            a2 += p[i + j + 2];
            a3 += p[i + j + 3];
            a4 += p[i + j + 4];
            a5 += p[i + j + 5];
            a6 += p[i + j + 6];
            a7 += p[i + j + 7];
        }
    }
    for (; i < n; ++i) a0 += p[i];
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

void* alloc_buffer(size_t bytes, bool huge) {
    constexpr size_t kAlign = size_t{2} << 20;
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes);
    if (!p) die("cannot allocate " + std::to_string(bytes >> 20) + " MiB");
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);  // a hint; THP may be off or unavailable
#endif
    return p;
}

// Bytes of this process's anonymous memory backed by transparent huge pages (-1: unknown).
long long anon_huge_bytes() {
    FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "AnonHugePages: %lld kB", &kb) == 1) break;
    std::fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

struct Stats {
    std::vector<double> gbs;  // one per timed repetition
    double best() const { return *std::max_element(gbs.begin(), gbs.end()); }
    double mean() const {
        double s = 0;
        for (double x : gbs) s += x;
        return s / static_cast<double>(gbs.size());
    }
};

}  // namespace

int main(int argc, char** argv) {
    unsigned n_threads = std::max(1u, std::thread::hardware_concurrency());
    size_t size_mib = 1024;
    int reps = 5;
    bool json = false, huge = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char* name) {
            if (i + 1 >= argc) die(std::string("missing value for ") + name);
            return parse_int(argv[++i], name);
        };
        if (a == "--threads" || a == "-t") n_threads = static_cast<unsigned>(value("--threads"));
        else if (a == "--size-mib") size_mib = static_cast<size_t>(value("--size-mib"));
        else if (a == "--reps" || a == "-r") reps = static_cast<int>(value("--reps"));
        else if (a == "--json") json = true;
        else if (a == "--no-huge") huge = false;
        else if (a == "--help" || a == "-h") {
            std::printf(
                "usage: ember-membw [--threads N] [--size-mib M (per buffer, default 1024)] [--reps R (default 5)]\n"
                "                   [--no-huge (4 KiB pages, like a page-cache mmap)] [--json]\n");
            return 0;
        } else die("unknown argument '" + a + "' (try --help)");
    }

    const size_t bytes = size_mib << 20;
    const size_t words = bytes / sizeof(uint64_t);
    auto* src = static_cast<uint64_t*>(alloc_buffer(bytes, huge));
    auto* dst = static_cast<uint64_t*>(alloc_buffer(bytes, huge));

    // Slice [begin, end) of thread t, in words, rounded to 4 KiB so slices never share a page.
    auto slice = [&](unsigned t, size_t& b, size_t& e) {
        const size_t page_words = 4096 / sizeof(uint64_t);
        const size_t per = (words / n_threads) / page_words * page_words;
        b = per * t;
        e = t + 1 == n_threads ? words : b + per;
    };

    std::barrier start(static_cast<std::ptrdiff_t>(n_threads));
    std::barrier done(static_cast<std::ptrdiff_t>(n_threads));
    std::function<void(unsigned)> job;  // set by the main thread before each phase
    std::atomic<bool> quit{false};
    std::vector<uint64_t> sink(n_threads * 8, 0);  // per-thread results, padded apart

    auto worker = [&](unsigned t) {
        for (;;) {
            start.arrive_and_wait();
            if (quit.load(std::memory_order_acquire)) return;
            job(t);
            done.arrive_and_wait();
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < n_threads; ++t) pool.emplace_back(worker, t);

    // Runs f on every thread (thread 0 is this one); returns wall seconds barrier-to-barrier.
    auto run = [&](std::function<void(unsigned)> f) {
        job = std::move(f);
        start.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        job(0);
        done.arrive_and_wait();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };

    // First touch, by the owning thread, with a non-zero pattern.
    run([&](unsigned t) {
        size_t b, e;
        slice(t, b, e);
        for (size_t i = b; i < e; ++i) src[i] = i * 0x9E3779B97F4A7C15ull + 1;
        std::memset(dst + b, 0x5A, (e - b) * sizeof(uint64_t));
    });

    const long long huge_bytes = anon_huge_bytes();  // after first touch: what THP really gave us

    Stats copy, read;
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up, not recorded
        const double tc = run([&](unsigned t) {
            size_t b, e;
            slice(t, b, e);
            std::memcpy(dst + b, src + b, (e - b) * sizeof(uint64_t));
        });
        const double tr = run([&](unsigned t) {
            size_t b, e;
            slice(t, b, e);
            sink[t * 8] += sum_words(src + b, e - b);
        });
        if (r < 0) continue;
        copy.gbs.push_back(2.0 * static_cast<double>(bytes) / tc / 1e9);
        read.gbs.push_back(static_cast<double>(bytes) / tr / 1e9);
    }
    quit.store(true, std::memory_order_release);
    start.arrive_and_wait();
    for (auto& th : pool) th.join();

    // Check the copy really happened and keep the sums alive.
    uint64_t check = 0;
    for (unsigned t = 0; t < n_threads; ++t) check ^= sink[t * 8];
    if (std::memcmp(src, dst, bytes) != 0) die("copy check failed");

    if (json) {
        auto samples = [](const Stats& s) {
            std::string out;
            for (size_t i = 0; i < s.gbs.size(); ++i) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%s%.3f", i ? ", " : "", s.gbs[i]);
                out += buf;
            }
            return out;
        };
        std::printf(
            "{\"threads\": %u, \"buffer_bytes\": %zu, \"reps\": %d, \"huge_pages_requested\": %s, "
            "\"huge_page_bytes\": %lld, "
            "\"copy_gbs\": %.3f, \"copy_mean_gbs\": %.3f, \"copy_samples\": [%s], "
            "\"read_gbs\": %.3f, \"read_mean_gbs\": %.3f, \"read_samples\": [%s], "
            "\"checksum\": \"%016" PRIx64 "\"}\n",
            n_threads, bytes, reps, huge ? "true" : "false", huge_bytes, copy.best(), copy.mean(),
            samples(copy).c_str(), read.best(), read.mean(), samples(read).c_str(), check);
    } else {
        std::printf("ember-membw: %u threads, %zu MiB per buffer, best of %d (GB = 1e9 bytes)\n", n_threads, size_mib,
                    reps);
        std::printf("  pages: %s requested, %lld MiB of %zu MiB on huge pages\n", huge ? "2 MiB" : "4 KiB",
                    huge_bytes < 0 ? -1 : huge_bytes >> 20, 2 * (bytes >> 20));
        std::printf("  copy (read+write bytes): %8.2f GB/s best, %8.2f GB/s mean\n", copy.best(), copy.mean());
        std::printf("  read (sum reduction):    %8.2f GB/s best, %8.2f GB/s mean\n", read.best(), read.mean());
        std::printf("  (checksum %016" PRIx64 ")\n", check);
    }
    std::free(src);
    std::free(dst);
    return 0;
}
