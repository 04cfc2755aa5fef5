// Engine logging hook. The engine has no logging library of its own: front ends (the Qt app
// with spdlog, the CLI with stderr) install a sink, so everything lands in the same place.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace ember {

enum class LogLevel { Trace, Debug, Info, Warn, Error };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink (thread-safe). Passing an empty function silences the engine.
void set_log_sink(LogSink sink);
void set_log_level(LogLevel min_level);
bool log_enabled(LogLevel level);
void log(LogLevel level, std::string_view message);

inline void log_info(std::string_view m) { log(LogLevel::Info, m); }
inline void log_warn(std::string_view m) { log(LogLevel::Warn, m); }
inline void log_debug(std::string_view m) { log(LogLevel::Debug, m); }

}  // namespace ember
