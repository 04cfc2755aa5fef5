#include "engine/telemetry/process_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ember {
namespace {

// Fields of /proc/self/stat after the command name (which may itself hold spaces and ')').
bool read_stat(double& cpu_s, int32_t& threads) {
    std::ifstream in("/proc/self/stat");
    std::string line;
    if (!std::getline(in, line)) return false;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return false;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    // Fields from 3 (state) on; utime is 14, stime 15, num_threads 20 (proc(5)).
    unsigned long long utime = 0, stime = 0;
    long nthreads = 0;
    for (int i = 3; i <= 20 && (rest >> field); ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
        if (i == 20) nthreads = std::stol(field);
    }
    const long ticks = sysconf(_SC_CLK_TCK);
    if (ticks <= 0) return false;
    cpu_s = static_cast<double>(utime + stime) / static_cast<double>(ticks);
    threads = static_cast<int32_t>(nthreads);
    return true;
}

}  // namespace

std::optional<ProcessStats> ProcessSampler::sample() {
    ProcessStats s;
    std::ifstream statm("/proc/self/statm");
    unsigned long long size_pages = 0, resident_pages = 0;
    if (!(statm >> size_pages >> resident_pages)) return std::nullopt;
    s.rss_bytes = resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (!read_stat(s.cpu_seconds, s.threads)) return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    if (have_previous_) {
        const double wall = std::chrono::duration<double>(now - prev_t_).count();
        if (wall > 0) s.cpu_percent = 100.0 * (s.cpu_seconds - prev_cpu_s_) / wall;
    }
    have_previous_ = true;
    prev_cpu_s_ = s.cpu_seconds;
    prev_t_ = now;
    return s;
}

}  // namespace ember
