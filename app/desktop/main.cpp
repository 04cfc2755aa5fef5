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
    QCommandLineOption model_opt({QStringLiteral("m"), QStringLiteral("model")},
                                 QStringLiteral("Load this GGUF model at start."), QStringLiteral("path"));
    QCommandLineOption builtin_opt(QStringLiteral("default-model"),
                                   QStringLiteral("Load the built-in default model (SmolLM2-135M-Instruct) at start."));
    QCommandLineOption quit_opt(QStringLiteral("quit-after"),
                                QStringLiteral("Quit after this many milliseconds (smoke tests)."),
                                QStringLiteral("ms"));
    cli.addOptions({model_opt, builtin_opt, quit_opt});
    cli.process(qapp);

    const QString data_dir = ember::app::app_data_dir();
    // One Ember per data folder: a second launch hands its command line to the first.
    ember::app::SingleInstance instance(data_dir);
    if (!instance.primary()) {
        const QStringList args = qapp.arguments().mid(1);
        if (instance.hand_over(args)) {
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
        ctx.register_qml();

        QQuickStyle::setStyle(QStringLiteral("Fusion"));  // follows the palette Theme.qml sets
        QQmlApplicationEngine engine;
        QObject::connect(
            &engine, &QQmlApplicationEngine::objectCreationFailed, &qapp, [] { QCoreApplication::exit(1); },
            Qt::QueuedConnection);
        // Qt 6.4 has no loadFromModule(): the module's files live under qrc:/<URI path>/.
        engine.load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        if (engine.rootObjects().isEmpty()) return 1;

        if (cli.isSet(model_opt)) ctx.models.load(cli.value(model_opt));
        else if (cli.isSet(builtin_opt)) ctx.models.loadBuiltin();
        else ctx.restore_last_model();

        // A later launch's command line: load what it names and come to the front.
        QObject::connect(
            &instance, &ember::app::SingleInstance::argumentsReceived, &qapp, [&](const QStringList& args) {
                spdlog::info("A second launch handed over its command line: {}", args.join(' ').toStdString());
                QCommandLineParser again;
                again.addOptions({model_opt, builtin_opt, quit_opt});
                if (again.parse(QStringList{qapp.applicationFilePath()} + args)) {
                    if (again.isSet(model_opt)) ctx.models.load(again.value(model_opt));
                    else if (again.isSet(builtin_opt)) ctx.models.loadBuiltin();
                }
                if (auto* w = qobject_cast<QWindow*>(engine.rootObjects().value(0))) {
                    w->show();
                    w->raise();
                    w->requestActivate();
                }
            });
        if (!instance.listen())
            spdlog::warn("Could not listen for later launches on {}",
                         ember::app::SingleInstance::server_name(data_dir).toStdString());
        if (cli.isSet(quit_opt)) QTimer::singleShot(cli.value(quit_opt).toInt(), &qapp, &QCoreApplication::quit);

        rc = QApplication::exec();
    }
    spdlog::info("Ember exiting ({})", rc);
    ember::app::shutdown_logging();
    return rc;
}
