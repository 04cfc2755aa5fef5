// This process's resident memory and CPU use, read from /proc (Linux). CPU use is a rate, so
// a ProcessSampler remembers its previous reading; each reader thread keeps its own sampler.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>

namespace ember {

struct ProcessStats {
    uint64_t rss_bytes = 0;  // resident set (file-backed pages of a mapped model included)
    double cpu_percent = 0;  // since the previous sample, 100 = one core busy (0 on the first)
    double cpu_seconds = 0;  // user + system since the process started
    int32_t threads = 0;
};

class ProcessSampler {
public:
    // nullopt when /proc is not readable (the monitor then hides those fields).
    std::optional<ProcessStats> sample();

private:
    bool have_previous_ = false;
    double prev_cpu_s_ = 0;
    std::chrono::steady_clock::time_point prev_t_;
};

}  // namespace ember
