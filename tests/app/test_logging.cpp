// Logging: app, engine and Qt messages land in one rotating file in the XDG state folder,
// at the level chosen by $EMBER_LOG_LEVEL over the settings.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <spdlog/spdlog.h>

#include "app/logging/logging.h"
#include "engine/core/log.h"

using namespace ember::app;

class TestLogging : public QObject {
    Q_OBJECT

    static QString read_all(const QString& path) {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
    }

private slots:
    void cleanup() {
        shutdown_logging();
        qunsetenv("EMBER_LOG_LEVEL");
    }

    void logDirFollowsXdgStateHome() {
        qputenv("XDG_STATE_HOME", "/tmp/ember-xdg-state");
        QCOMPARE(log_dir(), QStringLiteral("/tmp/ember-xdg-state/ember/logs"));
        qunsetenv("XDG_STATE_HOME");
        QVERIFY(log_dir().endsWith(QStringLiteral("/.local/state/ember/logs")));
    }

    void parsesLevels() {
        spdlog::level::level_enum l{};
        QVERIFY(parse_log_level(QStringLiteral(" DEBUG "), &l));
        QCOMPARE(l, spdlog::level::debug);
        QVERIFY(parse_log_level(QStringLiteral("warning"), &l));
        QCOMPARE(l, spdlog::level::warn);
        QVERIFY(!parse_log_level(QStringLiteral("loud"), &l));
        QVERIFY(!parse_log_level(QString(), &l));
    }

    void appEngineAndQtShareTheFile() {
        QTemporaryDir dir;
        const LoggingSetup s = init_logging(QStringLiteral("info"), dir.filePath(QStringLiteral("logs")));
        QCOMPARE(s.level, spdlog::level::info);
        QCOMPARE(s.level_source, QStringLiteral("settings"));
        QVERIFY(!s.file.isEmpty());
        spdlog::info("hello from the app");
        ember::log_warn("hello from the engine");
        qWarning("hello from Qt");
        ember::log_debug("engine debug is filtered");
        spdlog::debug("app debug is filtered");
        shutdown_logging();
        const QString text = read_all(s.file);
        QVERIFY2(text.contains(QStringLiteral("[app] hello from the app")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("[engine] hello from the engine")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("[qt] hello from Qt")), qPrintable(text));
        QVERIFY(!text.contains(QStringLiteral("filtered")));
    }

    void environmentOverridesSettings() {
        QTemporaryDir dir;
        qputenv("EMBER_LOG_LEVEL", "debug");
        const LoggingSetup s = init_logging(QStringLiteral("error"), dir.path());
        QCOMPARE(s.level, spdlog::level::debug);
        QCOMPARE(s.level_source, QStringLiteral("EMBER_LOG_LEVEL"));
        QVERIFY(ember::log_enabled(ember::LogLevel::Debug));
        ember::log_debug("engine debug shows");
        shutdown_logging();
        QVERIFY(read_all(s.file).contains(QStringLiteral("engine debug shows")));
    }

    void levelChangesAtRunTime() {
        QTemporaryDir dir;
        const LoggingSetup s = init_logging(QString(), dir.path());
        QCOMPARE(s.level_source, QStringLiteral("default"));
        set_logging_level(spdlog::level::err);
        QVERIFY(!ember::log_enabled(ember::LogLevel::Warn));
        ember::log_warn("hidden warning");
        spdlog::error("shown error");
        shutdown_logging();
        const QString text = read_all(s.file);
        QVERIFY(!text.contains(QStringLiteral("hidden warning")));
        QVERIFY(text.contains(QStringLiteral("shown error")));
    }
};

QTEST_GUILESS_MAIN(TestLogging)
#include "test_logging.moc"
