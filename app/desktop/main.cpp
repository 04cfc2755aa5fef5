// ember-app: the desktop chat window. A QApplication (not QGuiApplication) because the
// monitor panel's QtCharts ChartView needs QtWidgets underneath.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickStyle>
#include <QTimer>
#include <QUrl>
#include <QWindow>
#include <cstdio>
#include <spdlog/spdlog.h>

#include "app/desktop/app_context.h"
#include "app/desktop/open_model_file.h"
#include "app/desktop/single_instance.h"
#include "app/logging/logging.h"
#include "app/storage/store_open.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

int main(int argc, char** argv) {
    QApplication qapp(argc, argv);
    QApplication::setApplicationName(QStringLiteral("ember"));  // ~/.local/share/ember, ~/.config/ember
    QApplication::setApplicationDisplayName(QStringLiteral("Ember"));
    QApplication::setApplicationVersion(QStringLiteral(EMBER_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("ember"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/ember.png")));

    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("Ember: chat with language models on your own machine."));
    cli.addHelpOption();
    cli.addVersionOption();
    const ember::app::LaunchOptions options;
    options.add_to(cli);
    cli.process(qapp);
    const ember::app::LaunchRequest launch = ember::app::read_launch_request(cli, options);

    const QString data_dir = ember::app::app_data_dir();
    // One Ember per data folder: a second launch hands its command line to the first.
    ember::app::SingleInstance instance(data_dir);
    if (!instance.primary()) {
        // Absolute paths: the running instance has its own working folder.
        if (instance.hand_over(ember::app::handover_arguments(launch))) {
            std::fprintf(stderr, "Ember is already running for %s: handed it the command line.\n",
                         qPrintable(data_dir));
            return 0;
        }
        std::fprintf(stderr, "Ember is already running for %s but did not answer.\n", qPrintable(data_dir));
        return 1;
    }
    ember::app::AppSettings early(ember::app::AppSettings::defaultSettingsFile());
    const ember::app::LoggingSetup log = ember::app::init_logging(early.logLevel());
    spdlog::info("Ember {} starting; data in {}", EMBER_VERSION, data_dir.toStdString());

    int rc = 0;
    {
        ember::app::AppContext ctx(data_dir, log.file);
        if (!ctx.store.notice.isEmpty()) spdlog::error("{}", ctx.store.notice.toStdString());
        if (!ctx.storage.problem().isEmpty()) spdlog::error("{}", ctx.storage.problem().toStdString());
        QObject::connect(&ctx.storage, &ember::app::StorageStatus::changed, [&ctx] {
            if (ctx.storage.problem().isEmpty()) spdlog::info("The conversation database is written again");
            else spdlog::error("{}", ctx.storage.problem().toStdString());
        });
        if (ctx.store.interrupted > 0)
            spdlog::warn("{} answer(s) were interrupted by the last exit", ctx.store.interrupted);
        QObject::connect(&ctx.settings, &ember::app::AppSettings::changed, [&ctx] {
            spdlog::level::level_enum l{};
            if (ember::app::parse_log_level(ctx.settings.logLevel(), &l) &&
                qEnvironmentVariableIsEmpty("EMBER_LOG_LEVEL"))
                ember::app::set_logging_level(l);
        });
        // Where a model opened from outside went (the log is what a bug report carries).
        QObject::connect(&ctx.models, &ember::app::ModelController::loaded,
                         [](const QString& name) { spdlog::info("Model loaded: {}", name.toStdString()); });
        QObject::connect(&ctx.models, &ember::app::ModelController::loadFailed,
                         [](const QString& error) { spdlog::warn("Model not loaded: {}", error.toStdString()); });
        ctx.register_qml();

        QQuickStyle::setStyle(QStringLiteral("Fusion"));  // follows the palette Theme.qml sets
        QQmlApplicationEngine engine;
        QObject::connect(
            &engine, &QQmlApplicationEngine::objectCreationFailed, &qapp, [] { QCoreApplication::exit(1); },
            Qt::QueuedConnection);
        // Qt 6.4 has no loadFromModule(): the module's files live under qrc:/<URI path>/.
        engine.load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        if (engine.rootObjects().isEmpty()) return 1;

        if (!ember::app::open_launch_request(ctx, launch)) ctx.restore_last_model();

        // A later launch's command line: load what it names and come to the front.
        QObject::connect(
            &instance, &ember::app::SingleInstance::argumentsReceived, &qapp, [&](const QStringList& args) {
                spdlog::info("A second launch handed over its command line: {}", args.join(' ').toStdString());
                QCommandLineParser again;
                options.add_to(again);
                if (again.parse(QStringList{qapp.applicationFilePath()} + args))
                    ember::app::open_launch_request(ctx, ember::app::read_launch_request(again, options));
                if (auto* w = qobject_cast<QWindow*>(engine.rootObjects().value(0))) {
                    w->show();
                    w->raise();
                    w->requestActivate();
                }
            });
        if (!instance.listen())
            spdlog::warn("Could not listen for later launches on {}",
                         ember::app::SingleInstance::server_name(data_dir).toStdString());
        if (cli.isSet(options.quit_after))
            QTimer::singleShot(cli.value(options.quit_after).toInt(), &qapp, &QCoreApplication::quit);

        rc = QApplication::exec();
    }
    spdlog::info("Ember exiting ({})", rc);
    ember::app::shutdown_logging();
    return rc;
}
