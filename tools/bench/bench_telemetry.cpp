// ember-bench-telemetry: what recording telemetry costs the engine thread, and what a
// snapshot costs its reader. Prints a table; --json FILE writes the numbers.
//
//   token():    ns per call with no reader, and with readers polling at 4 Hz and 100 Hz
//               (each token's share of a decode step is this over the step's duration)
//   snapshot(): us per call with a full window (16384 inter-token samples to copy and sort)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/telemetry/telemetry.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

double token_ns(int readers, int hz, int64_t calls) {
    Telemetry t;
    t.request_started(1, 1, 0, 0, 1);
    std::atomic<bool> done{false};
    std::vector<std::thread> pool;
    for (int r = 0; r < readers; ++r)
        pool.emplace_back([&] {
            while (!done.load()) {
                volatile int64_t n = t.snapshot().inter_token_ms.count;
                (void)n;
                std::this_thread::sleep_for(std::chrono::microseconds(1000000 / hz));
            }
        });
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < calls; ++i) t.token(1, 1.0 + static_cast<double>(i & 7));
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(calls);
    done = true;
    for (auto& th : pool) th.join();
    return ns;
}

double snapshot_us(int calls) {
    Telemetry t;
    t.request_started(1, 1, 0, 0, 1);
    for (int i = 0; i < 20000; ++i) t.token(1, 1.0 + (i % 50) * 0.1);
    const auto t0 = Clock::now();
    int64_t sink = 0;
    for (int i = 0; i < calls; ++i) sink += t.snapshot().inter_token_ms.count;
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls;
    return sink > 0 ? us : -1;
}

}  // namespace

int main(int argc, char** argv) {
    const char* json = nullptr;
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    const int64_t calls = 20'000'000;
    const double idle = token_ns(0, 1, calls), at4 = token_ns(1, 4, calls), at100 = token_ns(1, 100, calls);
    const double snap = snapshot_us(2000);
    std::printf("| measurement | value |\n|---|---|\n");
    std::printf("| token(), no reader | %.1f ns |\n", idle);
    std::printf("| token(), 1 reader at 4 Hz | %.1f ns |\n", at4);
    std::printf("| token(), 1 reader at 100 Hz | %.1f ns |\n", at100);
    std::printf("| snapshot(), full window | %.1f us |\n", snap);
    if (json) {
        FILE* f = std::fopen(json, "w");
        if (!f) return 1;
        std::fprintf(f,
                     "{\"token_ns\": {\"no_reader\": %.2f, \"reader_4hz\": %.2f, \"reader_100hz\": %.2f}, "
                     "\"snapshot_us\": %.2f}\n",
                     idle, at4, at100, snap);
        std::fclose(f);
    }
    return 0;
}
