#include "app/logging/logging.h"

#include <QDir>
#include <QtGlobal>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/spdlog.h>

#include "engine/core/log.h"

namespace ember::app {
namespace {

constexpr size_t kMaxFileBytes = 5 * 1024 * 1024;
constexpr size_t kMaxFiles = 5;

ember::LogLevel engine_level(spdlog::level::level_enum l) {
    switch (l) {
        case spdlog::level::trace:
            return ember::LogLevel::Trace;
        case spdlog::level::debug:
            return ember::LogLevel::Debug;
        case spdlog::level::info:
            return ember::LogLevel::Info;
        case spdlog::level::warn:
            return ember::LogLevel::Warn;
        default:
            return ember::LogLevel::Error;
    }
}

spdlog::level::level_enum spd_level(ember::LogLevel l) {
    switch (l) {
        case ember::LogLevel::Trace:
            return spdlog::level::trace;
        case ember::LogLevel::Debug:
            return spdlog::level::debug;
        case ember::LogLevel::Info:
            return spdlog::level::info;
        case ember::LogLevel::Warn:
            return spdlog::level::warn;
        case ember::LogLevel::Error:
            break;
    }
    return spdlog::level::err;
}

void qt_message_handler(QtMsgType type, const QMessageLogContext& ctx, const QString& msg) {
    auto logger = spdlog::get("qt");
    if (!logger) return;
    spdlog::level::level_enum l = spdlog::level::info;
    switch (type) {
        case QtDebugMsg:
            l = spdlog::level::debug;
            break;
        case QtInfoMsg:
            l = spdlog::level::info;
            break;
        case QtWarningMsg:
            l = spdlog::level::warn;
            break;
        case QtCriticalMsg:
            l = spdlog::level::err;
            break;
        case QtFatalMsg:
            l = spdlog::level::critical;
            break;
    }
    if (ctx.file) logger->log(l, "{} ({}:{})", msg.toStdString(), ctx.file, ctx.line);
    else logger->log(l, "{}", msg.toStdString());
    if (type == QtFatalMsg) logger->flush();
}

}  // namespace

QString log_dir() {
    QString state = qEnvironmentVariable("XDG_STATE_HOME");
    if (state.isEmpty()) state = QDir::homePath() + QStringLiteral("/.local/state");
    return state + QStringLiteral("/ember/logs");
}

bool parse_log_level(const QString& text, spdlog::level::level_enum* out) {
    const QString t = text.trimmed().toLower();
    static const std::pair<const char*, spdlog::level::level_enum> kNames[] = {
        {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},  {"info", spdlog::level::info},
        {"warn", spdlog::level::warn},   {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
        {"off", spdlog::level::off}};
    for (const auto& [name, level] : kNames)
        if (t == QLatin1String(name)) {
            *out = level;
            return true;
        }
    return false;
}

LoggingSetup init_logging(const QString& settings_level, const QString& dir) {
    LoggingSetup s;
    s.dir = dir;
    s.level_source = QStringLiteral("default");
    if (parse_log_level(settings_level, &s.level)) s.level_source = QStringLiteral("settings");
    if (parse_log_level(qEnvironmentVariable("EMBER_LOG_LEVEL"), &s.level))
        s.level_source = QStringLiteral("EMBER_LOG_LEVEL");

    std::vector<spdlog::sink_ptr> sinks;
    sinks.push_back(std::make_shared<spdlog::sinks::ansicolor_stderr_sink_mt>());
    if (QDir().mkpath(dir)) {
        s.file = QDir(dir).filePath(QStringLiteral("ember.log"));
        try {
            sinks.push_back(
                std::make_shared<spdlog::sinks::rotating_file_sink_mt>(s.file.toStdString(), kMaxFileBytes, kMaxFiles));
        } catch (const spdlog::spdlog_ex&) {
            s.file.clear();  // unwritable folder: console only, never a reason not to start
        }
    }
    spdlog::drop_all();
    for (const char* name : {"app", "engine", "qt"}) {
        auto logger = std::make_shared<spdlog::logger>(name, sinks.begin(), sinks.end());
        logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ [%n] %v");
        // Warnings and errors reach the file at once; chatty levels are flushed in batches.
        logger->flush_on(spdlog::level::warn);
        spdlog::register_logger(logger);
    }
    spdlog::set_default_logger(spdlog::get("app"));
    set_logging_level(s.level);

    ember::set_log_sink([](ember::LogLevel l, std::string_view m) {
        if (auto logger = spdlog::get("engine")) logger->log(spd_level(l), "{}", m);
    });
    qInstallMessageHandler(qt_message_handler);
    spdlog::info("logging at level {} (from {}) to {}", spdlog::level::to_string_view(s.level),
                 s.level_source.toStdString(),
                 s.file.isEmpty() ? std::string("the console only") : s.file.toStdString());
    return s;
}

void set_logging_level(spdlog::level::level_enum level) {
    spdlog::apply_all([level](const std::shared_ptr<spdlog::logger>& l) { l->set_level(level); });
    ember::set_log_level(level == spdlog::level::off ? ember::LogLevel::Error : engine_level(level));
}

void shutdown_logging() {
    ember::set_log_sink({});
    qInstallMessageHandler(nullptr);
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
}

}  // namespace ember::app
