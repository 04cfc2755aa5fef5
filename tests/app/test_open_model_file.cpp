// How a model file reaches Ember from outside (app/desktop/open_model_file.h): the command
// line's FILE / --model / file:// URL become one absolute path, and end to end with the real
// ember-app binary: a second launch given a relative path, from another folder, makes the
// running instance load that model (the .desktop entry's "Open with Ember").
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "app/desktop/open_model_file.h"
#include "engine/library/library.h"
#include "test_paths.h"

using namespace ember::app;

namespace {

LaunchRequest parse(const QStringList& args, const QDir& cwd) {
    LaunchOptions options;
    QCommandLineParser p;
    options.add_to(p);
    if (!p.parse(QStringList{QStringLiteral("ember-app")} + args)) qWarning() << p.errorText();
    return read_launch_request(p, options, cwd);
}

// Reads `p`'s output into `out` until it contains `what` (or `p` ends, or 60 s pass).
bool wait_for_output(QProcess& p, QByteArray& out, const QByteArray& what) {
    QElapsedTimer t;
    t.start();
    while (!out.contains(what) && t.elapsed() < 60'000 && p.state() == QProcess::Running) {
        p.waitForReadyRead(200);
        out += p.readAll();
    }
    out += p.readAll();
    return out.contains(what);
}

}  // namespace

class TestOpenModelFile : public QObject {
    Q_OBJECT

private slots:
    void commandLinesBecomeOneAbsolutePath() {
        const QDir cwd(QStringLiteral("/home/user/models"));
        QCOMPARE(parse({QStringLiteral("a.gguf")}, cwd).model_file, QStringLiteral("/home/user/models/a.gguf"));
        QCOMPARE(parse({QStringLiteral("../b.gguf")}, cwd).model_file, QStringLiteral("/home/user/b.gguf"));
        QCOMPARE(parse({QStringLiteral("--model"), QStringLiteral("sub/c.gguf")}, cwd).model_file,
                 QStringLiteral("/home/user/models/sub/c.gguf"));
        QCOMPARE(parse({QStringLiteral("file:///data/My%20Model.gguf")}, cwd).model_file,
                 QStringLiteral("/data/My Model.gguf"));
        // One model at a time: the last file named wins, and beats --model.
        QCOMPARE(parse({QStringLiteral("--model"), QStringLiteral("x.gguf"), QStringLiteral("/m/1.gguf"),
                        QStringLiteral("/m/2.gguf")},
                       cwd)
                     .model_file,
                 QStringLiteral("/m/2.gguf"));
        const LaunchRequest builtin = parse({QStringLiteral("--default-model")}, cwd);
        QVERIFY(builtin.model_file.isEmpty());
        QVERIFY(builtin.default_model);
        QCOMPARE(handover_arguments(builtin), QStringList{QStringLiteral("--default-model")});
        QCOMPARE(handover_arguments(parse({QStringLiteral("a.gguf")}, cwd)),
                 (QStringList{QStringLiteral("--model"), QStringLiteral("/home/user/models/a.gguf")}));
        QVERIFY(handover_arguments(parse({}, cwd)).isEmpty());
    }

    void secondLaunchOpensTheFileInTheRunningApp() {
        const QString model = QFileInfo(QString::fromStdString(ember::test::testdata(ember::test::kStories)))
                                  .canonicalFilePath();  // what a shell's folder resolves to
        EMBER_REQUIRE_FILE(ember::test::testdata(ember::test::kStories));
        QVERIFY(QFile::exists(QStringLiteral(EMBER_APP_BINARY)));
        QTemporaryDir dir;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("EMBER_DATA_DIR"), dir.filePath(QStringLiteral("data")));
        env.insert(QStringLiteral("XDG_STATE_HOME"), dir.filePath(QStringLiteral("state")));
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), dir.filePath(QStringLiteral("config")));
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        env.insert(QStringLiteral("EMBER_MODELS_DIR"), dir.filePath(QStringLiteral("models")));
        QProcess first;
        first.setProcessEnvironment(env);
        first.setProcessChannelMode(QProcess::MergedChannels);
        first.start(QStringLiteral(EMBER_APP_BINARY), {QStringLiteral("--quit-after"), QStringLiteral("120000")});
        QVERIFY(first.waitForStarted());
        QByteArray out;
        QVERIFY2(wait_for_output(first, out, "starting"), out.constData());

        // From the model's folder, by its bare name, as a file manager or a shell would.
        QProcess second;
        second.setProcessEnvironment(env);
        second.setProcessChannelMode(QProcess::MergedChannels);
        second.setWorkingDirectory(QFileInfo(model).absolutePath());
        second.start(QStringLiteral(EMBER_APP_BINARY), {QFileInfo(model).fileName()});
        QVERIFY(second.waitForFinished(60'000));
        const QByteArray second_out = second.readAll();
        QCOMPARE(second.exitCode(), 0);
        QVERIFY2(second_out.contains("already running"), second_out.constData());

        QVERIFY2(wait_for_output(first, out, "Model loaded: "), out.constData());
        QVERIFY2(out.contains("handed over its command line: --model " + model.toUtf8()), out.constData());
        QVERIFY2(out.contains("Opening the model file " + model.toUtf8()), out.constData());
        QVERIFY2(!out.contains("Model not loaded"), out.constData());
        QCOMPARE(first.state(), QProcess::Running);
        // The opened file is in the model library too, referenced where it is.
        ember::library::Library lib(dir.filePath(QStringLiteral("models")).toStdString());
        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         for (const auto& m : lib.list())
                             if (QString::fromStdString(m.path) == model) return true;
                         return false;
                     },
                     30'000),
                 out.constData());
        first.terminate();
        QVERIFY(first.waitForFinished(30'000));
    }
};

QTEST_GUILESS_MAIN(TestOpenModelFile)
#include "test_open_model_file.moc"
