// Screenshots of the real app: ember-app's own wiring (AppContext) and QML, a real
// conversation with SmolLM2, grabbed offscreen (QQuickWindow::grabWindow) into
// <build>/screenshots/: empty-state.png, main-window.png, main-window-dark.png,
// chat-settings.png, settings.png.
// Each image is checked to be the window's size and to have real content (not blank).
#include <QApplication>
#include <QDir>
#include <QImage>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSet>
#include <QSignalSpy>
#include <QtTest>
#include <memory>

#include "app/desktop/app_context.h"
#include "test_paths.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

class TestScreenshots : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<AppContext> ctx_;
    std::unique_ptr<QQmlApplicationEngine> engine_;
    QQuickWindow* window_ = nullptr;
    const QString out_ = QStringLiteral(EMBER_BINARY_DIR "/screenshots");

    // Saves a grab; returns the number of distinct colours (a blank grab has one or two).
    int shoot(const QString& name) {
        // Streaming updates, layouts and the scroll have settled when two grabs in a row match
        // (a condition, not a fixed wait; a blinking cursor may keep it from ever holding:
        // then the last grab is used).
        QImage img = window_->grabWindow();
        const bool settled = QTest::qWaitFor(
            [&] {
                QImage next = window_->grabWindow();
                const bool settled = !next.isNull() && next == img;
                img = std::move(next);
                return settled;
            },
            10'000);
        if (!settled) qInfo("%s: the window kept changing for 10 s; using the last grab", qPrintable(name));
        if (img.isNull()) return 0;
        const QString path = out_ + '/' + name;
        if (!img.save(path)) return 0;
        qInfo("saved %s (%dx%d)", qPrintable(path), img.width(), img.height());
        QSet<QRgb> colours;
        for (int y = 0; y < img.height(); y += 3)
            for (int x = 0; x < img.width(); x += 3) colours.insert(img.pixel(x, y));
        return static_cast<int>(colours.size());
    }

    bool answer(const QString& question) {
        QSignalSpy done(&ctx_->chat, &ChatController::answerFinished);
        if (!ctx_->chat.send(question)) return false;
        return done.wait(120'000);
    }

private slots:
    void initTestCase() {
        EMBER_REQUIRE_FILE(ember::test::test_model(ember::test::kSmolLM2));
        QVERIFY(QDir().mkpath(out_));
        qputenv("EMBER_DATA_DIR", dir_.path().toUtf8());
        ctx_ = std::make_unique<AppContext>(dir_.path());
        ctx_->settings.setContextLength(2048);
        ctx_->register_qml();
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
        engine_ = std::make_unique<QQmlApplicationEngine>();
        engine_->load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        QCOMPARE(engine_->rootObjects().size(), 1);
        window_ = qobject_cast<QQuickWindow*>(engine_->rootObjects().first());
        QVERIFY(window_);
        QVERIFY(QTest::qWaitForWindowExposed(window_));
    }

    void emptyState() { QVERIFY(shoot(QStringLiteral("empty-state.png")) > 8); }

    void mainWindowWithConversation() {
        ctx_->models.load(QString::fromStdString(ember::test::test_model(ember::test::kSmolLM2)));
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready(), 120'000);
        QVariantMap s = ctx_->chat.sampling();
        s["temperature"] = 0.2;
        s["seed"] = 42;
        s["max_tokens"] = 200;
        ctx_->chat.setSampling(s);
        QVERIFY(answer(QStringLiteral("What is the capital of France?")));
        QVERIFY(answer(QStringLiteral("Write a Python function that adds two numbers, in a code block.")));
        ctx_->chat.newConversation();  // a second chat in the sidebar
        QVERIFY(answer(QStringLiteral("Give me three tips for learning to cook.")));
        ctx_->chat.selectConversation(ctx_->chat.conversations()->get(1).value("conversationId").toLongLong());
        QCOMPARE(ctx_->chat.messages()->count(), 4);
        QVERIFY(ctx_->chat.messages()->get(3).value("stats").toString().contains(QStringLiteral("tok/s")));
        QVERIFY(shoot(QStringLiteral("main-window.png")) > 50);
        ctx_->settings.setTheme(QStringLiteral("dark"));
        QVERIFY(shoot(QStringLiteral("main-window-dark.png")) > 50);
        ctx_->settings.setTheme(QStringLiteral("light"));
    }

    void chatSettingsPanel() {
        QObject* panel = window_->findChild<QObject*>(QStringLiteral("chatSettingsPanel"));
        QVERIFY(panel);
        QVERIFY(QMetaObject::invokeMethod(panel, "open"));
        QTRY_VERIFY(panel->property("opened").toBool());
        QVERIFY(shoot(QStringLiteral("chat-settings.png")) > 20);
        QVERIFY(QMetaObject::invokeMethod(panel, "close"));
        QTRY_VERIFY(!panel->property("visible").toBool());
    }

    void settingsPage() {
        QVERIFY(window_->setProperty("settingsOpen", true));
        QVERIFY(shoot(QStringLiteral("settings.png")) > 20);
        window_->setProperty("settingsOpen", false);
    }

    void cleanupTestCase() {
        engine_.reset();
        ctx_.reset();
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);  // what ember-app runs (QtCharts needs widgets)
    TestScreenshots t;
    return QTest::qExec(&t, argc, argv);
}
#include "test_screenshots.moc"
