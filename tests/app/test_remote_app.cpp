// The desktop app on a remote endpoint (issue #41), as a user sets it up: Ember's own server
// (`ember serve SmolLM2 --api-key K`, a real process on 127.0.0.1) is added in the real
// window's Settings › Remote endpoints, "Save and test" lists its model, the model picker
// routes the chats to it, an answer streams, is stored in SQLite and found by search, the
// monitor shows its TTFT and the cost view prices its tokens at the endpoint's prices. Then
// every file the app wrote (settings, database, log) is searched for the key: it is not there;
// it is in the keyring (a GNOME Keyring of the test's own: tests/app/keyring-session.sh).
//
// keyWithoutKeyringStaysInMemory runs with no D-Bus session at all: the keyring refuses, the
// key is kept for the session only (the error says so), and no file holds it.
//
// Screenshots into <build>/screenshots: remote-settings.png and remote-chat.png (720 px wide,
// + -dark), with a long endpoint name.
#include <QApplication>
#include <QDirIterator>
#include <QImage>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSignalSpy>
#include <QtTest>
#include <memory>
#include <qt6keychain/keychain.h>
#include <spdlog/spdlog.h>

#include "app/desktop/app_context.h"
#include "app/logging/logging.h"
#include "app/remote/key_store.h"
#include "test_paths.h"
#include "test_util.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

namespace {

const QByteArray kKey = "sk-remote-app-7f3c9e21-do-not-store";
const QString kEndpoint = QStringLiteral("gpu-box in the basement, shared by the whole team (Llama 70B, vLLM)");
const QString kModel = QStringLiteral("SmolLM2-135M-Instruct.Q4_1");

// Visible or not, the items named `name` under `root` through the visual tree (a Repeater's
// delegates are not QObject children of the view).
QQuickItem* item(QQuickItem* root, const QString& name) {
    for (QQuickItem* c : root->childItems()) {
        if (c->objectName() == name) return c;
        if (QQuickItem* found = item(c, name)) return found;
    }
    return nullptr;
}

// Files under `dir` whose bytes contain `needle`.
QStringList files_holding(const QString& dir, const QByteArray& needle) {
    QStringList out;
    QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        QFile f(it.next());
        if (f.open(QIODevice::ReadOnly) && f.readAll().contains(needle)) out << f.fileName();
    }
    return out;
}

// `ember serve` on a free port with an API key; its URL read from the line it prints.
struct EmberServe {
    ember::test::TempDir dir;
    std::unique_ptr<ember::test::ChildProcess> proc;
    QString url;
    EmberServe() {
        proc = std::make_unique<ember::test::ChildProcess>(
            std::vector<std::string>{EMBER_CLI, "serve", ember::test::test_model(ember::test::kSmolLM2), "--port", "0",
                                     "--api-key", kKey.toStdString(), "--ctx", "2048"},
            dir.path() + "/log");
        const std::string tag = "ember serve: http://";
        (void)QTest::qWaitFor(  // the URL, or the server's end: checked below
            [&] {
                const std::string log = proc->log();
                if (const size_t at = log.find(tag); at != std::string::npos)
                    url = QString::fromStdString(log.substr(at + 13, log.find_first_of(" \n", at + 13) - (at + 13)));
                return !url.isEmpty() || !proc->running();
            },
            120'000);
        if (url.isEmpty()) qFatal("ember serve printed no URL:\n%s", proc->log().c_str());
    }
};

}  // namespace

class TestRemoteApp : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<AppContext> ctx_;
    std::unique_ptr<QQmlApplicationEngine> engine_;
    QQuickWindow* window_ = nullptr;
    const QString out_ = QStringLiteral(EMBER_BINARY_DIR "/screenshots");

    QQuickItem* find(const QString& name) {
        QQuickItem* i = item(window_->contentItem(), name);
        if (!i) qWarning("no item named %s", qPrintable(name));
        return i;
    }

    // A grab once two in a row match (layouts settled); saved; its distinct colours.
    int shoot(const QString& name) {
        QImage img = window_->grabWindow();
        (void)QTest::qWaitFor(  // unsettled after 10 s (a blinking cursor): the last grab
            [&] {
                QImage next = window_->grabWindow();
                const bool same = !next.isNull() && next == img;
                img = std::move(next);
                return same;
            },
            10'000);
        if (img.isNull() || !img.save(out_ + '/' + name)) return 0;
        qInfo("saved %s (%dx%d)", qPrintable(out_ + '/' + name), img.width(), img.height());
        QSet<QRgb> colours;
        for (int y = 0; y < img.height(); y += 3)
            for (int x = 0; x < img.width(); x += 3) colours.insert(img.pixel(x, y));
        return static_cast<int>(colours.size());
    }
    void shoot_both(const QString& base) {
        for (const char* theme : {"light", "dark"}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            const QString suffix = QLatin1String(theme) == QLatin1String("dark") ? QStringLiteral("-dark") : QString();
            QVERIFY(shoot(base + suffix + QStringLiteral(".png")) > 20);
        }
        ctx_->settings.setTheme(QStringLiteral("light"));
    }

    void open_window() {
        QVERIFY(QDir().mkpath(out_));
        qputenv("EMBER_DATA_DIR", dir_.path().toUtf8());
        ctx_ = std::make_unique<AppContext>(dir_.path());
        ctx_->register_qml();
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
        engine_ = std::make_unique<QQmlApplicationEngine>();
        engine_->load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        QCOMPARE(engine_->rootObjects().size(), 1);
        window_ = qobject_cast<QQuickWindow*>(engine_->rootObjects().first());
        QVERIFY(window_);
        window_->resize(720, 900);
        QVERIFY(QTest::qWaitForWindowExposed(window_));
    }

    void set_text(const QString& field, const QString& text) {
        QQuickItem* f = find(field);
        QVERIFY(f);
        QVERIFY(f->setProperty("text", text));
    }

    void add_endpoint(const QString& url) {
        QVERIFY(window_->setProperty("settingsOpen", true));
        set_text(QStringLiteral("remoteNameField"), kEndpoint);
        set_text(QStringLiteral("remoteUrlField"), url);
        set_text(QStringLiteral("remoteKeyField"), QString::fromLatin1(kKey));
        set_text(QStringLiteral("remoteInputPriceField"), QStringLiteral("3"));
        set_text(QStringLiteral("remoteOutputPriceField"), QStringLiteral("15"));
        QSignalSpy saved(&ctx_->remote, &RemoteController::keySaved);
        QVERIFY(QMetaObject::invokeMethod(find(QStringLiteral("remoteSaveButton")), "clicked"));
        QVERIFY(saved.wait(30'000));
        QVERIFY2(ctx_->remote.error().isEmpty(), qPrintable(ctx_->remote.error()));
    }

    // The model picker's row of the remote model, chosen as a user clicks it.
    void pick_remote_model() {
        QQuickItem* picker = find(QStringLiteral("modelPicker"));
        QVERIFY(picker);
        const QVariantList rows = picker->property("model").toList();
        int row = -1;
        for (int i = 0; i < rows.size(); ++i)
            if (rows[i].toMap().value("remote").toBool() && rows[i].toMap().value("id").toString() == kModel) row = i;
        QVERIFY2(row >= 0, "the remote model is not in the model picker");
        QVERIFY(rows[row].toMap().value("label").toString().contains(kEndpoint));
        QVERIFY(QMetaObject::invokeMethod(picker, "activated", Q_ARG(int, row)));
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready(), 30'000);
    }

private slots:
    void chatThroughARemoteEndpoint() {
        EMBER_REQUIRE_FILE(ember::test::test_model(ember::test::kSmolLM2));
        const LoggingSetup log = init_logging(QStringLiteral("debug"), dir_.filePath(QStringLiteral("logs")));
        EmberServe server;
        open_window();

        // Settings › Remote endpoints: add, save (the key to the keyring), and the test lists the model.
        add_endpoint(server.url);
        QTRY_VERIFY_WITH_TIMEOUT(!ctx_->remote.testing(), 60'000);
        QVERIFY2(ctx_->remote.testOk(), qPrintable(ctx_->remote.testMessage()));
        QCOMPARE(ctx_->remote.testMessage(), QStringLiteral("Connected: 1 model."));
        QCOMPARE(ctx_->remote.models().size(), 1);
        const QVariantMap listed = ctx_->remote.models().first().toMap();
        QCOMPARE(listed.value("id").toString(), kModel);
        const qint64 context = listed.value("context").toLongLong();  // the context `ember serve` serves per chat
        QVERIFY(context > 0 && context <= 2048);
        QQuickItem* result = find(QStringLiteral("remoteTestResult"));
        QVERIFY(result && result->property("text").toString() == ctx_->remote.testMessage());
        QQuickItem* scroll = find(QStringLiteral("settingsScroll"));
        QQuickItem* section = find(QStringLiteral("remoteEndpoints"));
        QVERIFY(scroll && section);
        auto* flick = scroll->property("contentItem").value<QQuickItem*>();
        QVERIFY(flick);
        flick->setProperty("contentY", section->y() - 48);
        QVERIFY(section->width() <= section->parentItem()->width());  // nothing of it beyond the window
        shoot_both(QStringLiteral("remote-settings"));
        window_->setProperty("settingsOpen", false);

        // The model picker: the remote model beside the local ones; chosen, the chats go there.
        pick_remote_model();
        const QVariantMap details = ctx_->models.details();
        QVERIFY(details.value("remote").toBool());
        QCOMPARE(details.value("endpoint").toString(), kEndpoint);
        QCOMPARE(details.value("context").toLongLong(), context);
        QCOMPARE(ctx_->chat.contextLimit(), context);

        QVariantMap s = ctx_->chat.sampling();
        s["temperature"] = 0;
        s["max_tokens"] = 32;
        ctx_->chat.setSampling(s);
        QSignalSpy done(&ctx_->chat, &ChatController::answerFinished);
        QVERIFY(ctx_->chat.send(QStringLiteral("What is the capital of France?")));
        QVERIFY(done.wait(120'000));
        QVERIFY2(done.first().at(2).toString() != QLatin1String("error"), qPrintable(ctx_->chat.lastError()));

        // History: the answer is in SQLite with the server's token counts and the client's TTFT.
        const qint64 conv = ctx_->chat.currentConversationId();
        const std::vector<Message> stored = ctx_->store.store->messages(conv);
        QCOMPARE(stored.size(), size_t(2));
        const Message& answer = stored.back();
        QVERIFY(answer.content.trimmed().size() > 0);
        QVERIFY(answer.stats.model.contains(kEndpoint));
        QVERIFY(answer.stats.prompt_tokens.value_or(0) > 0);
        QVERIFY(answer.stats.n_tokens.value_or(0) > 0);
        QVERIFY(answer.stats.ttft_ms.value_or(0) > 0);
        QVERIFY(!answer.stats.energy_j);  // drawn on the server, not measured here

        // Search finds it by a word of the answer.
        QString word;
        for (const QString& w : answer.content.split(QRegularExpression(QStringLiteral("\\W+")), Qt::SkipEmptyParts))
            if (w.size() >= 4) {
                word = w;
                break;
            }
        QVERIFY2(!word.isEmpty(), qPrintable(answer.content));
        bool found = false;
        for (const SearchHit& h : ctx_->store.store->search(word)) found = found || h.message_id == answer.id;
        QVERIFY2(found, qPrintable(word));

        // The monitor: the client-side TTFT and inter-token latency of the remote answer.
        ctx_->monitor.setActive(true);
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->monitor.latencyRows().size() == 2 &&
                                     ctx_->monitor.latencyRows()[0].toMap().value("count").toLongLong() == 1,
                                 10'000);
        QVERIFY(ctx_->monitor.latencyRows()[0].toMap().value("p50").toDouble() > 0);

        // The cost view: the server's usage at the endpoint's prices, 3 and 15 per 1M tokens.
        QTRY_COMPARE(ctx_->cost.remoteSpend().size(), 1);  // its queued slot runs after the chat's
        const QVariantMap spend = ctx_->cost.remoteSpend().first().toMap();
        QCOMPARE(spend.value("endpoint").toString(), kEndpoint);
        QCOMPARE(spend.value("input").toLongLong(), qint64(*answer.stats.prompt_tokens));
        QCOMPARE(spend.value("output").toLongLong(), qint64(*answer.stats.n_tokens));
        const double expected = (*answer.stats.prompt_tokens * 3.0 + *answer.stats.n_tokens * 15.0) / 1e6;
        QVERIFY(qFuzzyCompare(ctx_->cost.remoteCost(), expected));

        QTRY_VERIFY_WITH_TIMEOUT(!ctx_->chat.messages()->get(1).value("stats").toString().isEmpty(), 5'000);
        // The picker's closed box elides the long model name (it clipped it mid-letter).
        QQuickItem* picked = find(QStringLiteral("modelPickerText"));
        QVERIFY(picked);
        QVERIFY(picked->property("text").toString().startsWith(QStringLiteral("SmolLM2-135M-Instruct")));
        QVERIFY(picked->property("truncated").toBool());
        QVERIFY(picked->property("paintedWidth").toReal() <= picked->width());
        shoot_both(QStringLiteral("remote-chat"));

        // The key: in the keyring, in no file the app wrote (settings, database, log).
        QKeychain::ReadPasswordJob job(QStringLiteral("Ember"));
        job.setAutoDelete(false);
        job.setKey(QStringLiteral("remote-endpoint/") + kEndpoint);
        QSignalSpy read(&job, &QKeychain::Job::finished);
        job.start();
        QVERIFY(read.wait(10'000));
        QCOMPARE(job.error(), QKeychain::NoError);
        QCOMPARE(job.textData().toLatin1(), kKey);
        ctx_->settings.sync();
        spdlog::default_logger()->flush();
        QVERIFY(QFileInfo(log.file).size() > 0);
        QVERIFY(QFileInfo(ctx_->settings.settingsFile()).size() > 0);
        QVERIFY(files_holding(dir_.path(), kEndpoint.toUtf8()).size() >= 2);  // the probe works: settings + database
        const QStringList holding = files_holding(dir_.path(), kKey);
        QVERIFY2(holding.isEmpty(), qPrintable(holding.join(", ")));
    }

    // The same app on llama.cpp's llama-server (the peer built from llama-cpp-python's vendored
    // tree by scripts/llama-cpp-tools.sh; a test tool only): an endpoint saved through the
    // controller the settings page uses, its model chosen, an answer streamed and stored.
    void chatThroughLlamaServer() {
        const std::string model = ember::test::test_model(ember::test::kSmolLM2);
        EMBER_REQUIRE_FILE(model);
        const auto tools =
            ember::test::run_process({EMBER_SOURCE_DIR "/scripts/llama-cpp-tools.sh", "llama-server"}, 3 * 3600 * 1000);
        QVERIFY2(tools.ok(), tools.err.c_str());
        const QString dir = QString::fromStdString(tools.out).trimmed().split('\n').last();
        ember::test::TempDir tmp;
        const int port = ember::test::free_port();
        QVERIFY(port > 0);
        ember::test::ChildProcess server({(dir + QStringLiteral("/llama-server")).toStdString(), "-m", model, "--host",
                                          "127.0.0.1", "--port", std::to_string(port), "-a", "smollm2", "-c", "2048",
                                          "-np", "1", "-t", "2", "--api-key", kKey.toStdString()},
                                         tmp.path() + "/log");
        if (!ctx_) open_window();
        const QString name = QStringLiteral("llama-server");
        QVERIFY(ctx_->remote.saveEndpoint({{"name", name},
                                           {"baseUrl", QStringLiteral("http://127.0.0.1:%1").arg(port)},
                                           {"inputPer1M", 0.5},
                                           {"outputPer1M", 1.0}},
                                          {}, QString::fromLatin1(kKey)));
        // Its /v1/models answers 503 while the model loads: asked again until it lists it.
        const bool listed = QTest::qWaitFor(
            [&] {
                if (!server.running() || ctx_->remote.testing()) return !server.running();
                if (ctx_->remote.testedEndpoint() == name && ctx_->remote.testOk()) return true;
                ctx_->remote.testConnection(name);
                return false;
            },
            120'000);
        QVERIFY2(listed && ctx_->remote.testOk(), (ctx_->remote.testMessage().toStdString() + server.log()).c_str());
        ctx_->remote.useModel(name, QStringLiteral("smollm2"));
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready() && ctx_->models.details().value("endpoint") == name, 30'000);
        QVERIFY(ctx_->models.details().value("context").toLongLong() > 0);  // meta.n_ctx_train

        ctx_->chat.newConversation();
        QVariantMap s = ctx_->chat.sampling();
        s["temperature"] = 0;
        s["max_tokens"] = 16;
        ctx_->chat.setSampling(s);
        QSignalSpy done(&ctx_->chat, &ChatController::answerFinished);
        QVERIFY(ctx_->chat.send(QStringLiteral("What is the capital of France?")));
        QVERIFY(done.wait(120'000));
        QVERIFY2(done.first().at(2).toString() != QLatin1String("error"), qPrintable(ctx_->chat.lastError()));
        const std::vector<Message> stored = ctx_->store.store->messages(ctx_->chat.currentConversationId());
        QCOMPARE(stored.size(), size_t(2));
        QVERIFY(!stored.back().content.trimmed().isEmpty());
        QVERIFY(stored.back().stats.model.contains(name));
        QVERIFY(stored.back().stats.n_tokens.value_or(0) > 0);  // the server's usage
        QTRY_VERIFY(ctx_->cost.remoteSpend().size() == 2);
    }

    void cleanupTestCase() {
        engine_.reset();
        ctx_.reset();
    }

    void keyWithoutKeyringStaysInMemory() {
        QVERIFY2(qEnvironmentVariableIsEmpty("DBUS_SESSION_BUS_ADDRESS"), "run me with no D-Bus session");
        qputenv("XDG_CONFIG_HOME", dir_.filePath(QStringLiteral("config")).toUtf8());
        qputenv("HOME", dir_.path().toUtf8());
        KeyStore keys(QStringLiteral("Ember-test"));
        QString error = QStringLiteral("unset");
        keys.write(QStringLiteral("box"), QString::fromLatin1(kKey), [&](const QString& e) { error = e; });
        QTRY_VERIFY_WITH_TIMEOUT(error != QLatin1String("unset"), 30'000);
        QVERIFY2(error.contains(QLatin1String("kept for this session only")), qPrintable(error));
        QVERIFY(keys.sessionOnly());
        QString key = QStringLiteral("unset");
        keys.read(QStringLiteral("box"), [&](const QString& k, const QString&) { key = k; });
        QTRY_VERIFY(key != QLatin1String("unset"));
        QCOMPARE(key.toLatin1(), kKey);
        const QStringList holding = files_holding(dir_.path(), kKey);  // QtKeychain's plaintext fallback is off
        QVERIFY2(holding.isEmpty(), qPrintable(holding.join(", ")));
    }
};

QTEST_MAIN(TestRemoteApp)
#include "test_remote_app.moc"
