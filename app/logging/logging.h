// One log for the whole app: spdlog with a rotating file (5 files x 5 MiB) in the XDG state
// folder plus the console. Engine messages (ember::set_log_sink) and Qt/QML messages
// (qInstallMessageHandler) are routed into the same sinks, so a user's bug report has one
// file with everything in order.
#pragma once
#include <QString>
#include <spdlog/common.h>

namespace ember::app {

struct LoggingSetup {
    QString dir;   // folder holding the log files
    QString file;  // the current log file
    spdlog::level::level_enum level = spdlog::level::info;
    QString level_source;  // "EMBER_LOG_LEVEL", "settings" or "default"
};

// $XDG_STATE_HOME/ember/logs, else ~/.local/state/ember/logs (Qt 6.4 has no StateLocation).
QString log_dir();

// "trace", "debug", "info", "warn"/"warning", "error", "off"; nullopt-like: returns false
// when the text is not a level.
bool parse_log_level(const QString& text, spdlog::level::level_enum* out);

// Installs the sinks. The level comes from $EMBER_LOG_LEVEL if set and valid, else from
// `settings_level`, else info. Safe to call again (tests): it replaces the previous setup.
LoggingSetup init_logging(const QString& settings_level = {}, const QString& dir = log_dir());

// Changes the level at run time (settings page) for app and engine alike.
void set_logging_level(spdlog::level::level_enum level);

// Flushes and detaches the engine and Qt hooks (before exit).
void shutdown_logging();

}  // namespace ember::app
