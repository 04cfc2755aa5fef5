#include "engine/core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace ember {
namespace {

std::mutex g_mutex;
std::atomic<int> g_min_level{static_cast<int>(LogLevel::Info)};

void default_sink(LogLevel level, std::string_view m) {
    static const char* names[] = {"trace", "debug", "info", "warn", "error"};
    std::fprintf(stderr, "[ember %s] %.*s\n", names[static_cast<int>(level)], static_cast<int>(m.size()), m.data());
}

LogSink& sink() {
    static LogSink s = default_sink;
    return s;
}

}  // namespace

void set_log_sink(LogSink s) {
    std::lock_guard lock(g_mutex);
    sink() = std::move(s);
}

void set_log_level(LogLevel min_level) { g_min_level = static_cast<int>(min_level); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= g_min_level.load(); }

void log(LogLevel level, std::string_view message) {
    if (!log_enabled(level)) return;
    std::lock_guard lock(g_mutex);
    if (sink()) sink()(level, message);
}

}  // namespace ember
