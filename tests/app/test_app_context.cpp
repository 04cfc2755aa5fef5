// ember-app's start-up as a user meets it: a damaged conversation database is kept aside
// and the window says so; answers cut off by a crash are counted and shown as interrupted;
// the last model comes back on its own.
#include <QApplication>
#include <QFile>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QtTest>

#include "app/core/message_list_model.h"
#include "app/desktop/app_context.h"
#include "test_paths.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

// Items made by QML are found through the visual tree (childItems), not QObject children.
static QQuickItem* find_item(QQuickItem* root, const QString& name) {
    if (!root) return nullptr;
    if (root->objectName() == name) return root;
    for (QQuickItem* c : root->childItems())
        if (QQuickItem* hit = find_item(c, name)) return hit;
    return nullptr;
}

class TestAppContext : public QObject {
    Q_OBJECT

private slots:
    void interruptedAnswersAndLastModelComeBack() {
        EMBER_REQUIRE_FILE(ember::test::testdata(ember::test::kStories));
        QTemporaryDir dir;
        int64_t conv = 0;
        {
            OpenedStore s = open_conversation_store(dir.path());
            conv = s.store->create_conversation(QStringLiteral("cut off")).id;
            s.store->add_message(conv, QStringLiteral("user"), QStringLiteral("Tell me a story"));
            s.store->add_message(conv, QStringLiteral("assistant"), QStringLiteral("Once upon a"),
                                 MessageState::Streaming);
            AppSettings settings(dir.filePath(QStringLiteral("settings.ini")));
            settings.setLastModelPath(QString::fromStdString(ember::test::testdata(ember::test::kStories)));
            settings.setContextLength(256);
        }
        AppContext ctx(dir.path());
        QCOMPARE(ctx.info.interrupted, 1);
        QVERIFY(ctx.info.storage_notice.isEmpty());
        ctx.chat.selectConversation(conv);
        QCOMPARE(ctx.chat.messages()->get(1).value("messageState").toString(), QStringLiteral("interrupted"));
        QVERIFY(ctx.chat.messages()->get(1).value("stats").toString().contains(QStringLiteral("interrupted")));
        ctx.restore_last_model();
        QCOMPARE(ctx.models.state(), ModelController::Loading);
        QTRY_VERIFY_WITH_TIMEOUT(ctx.models.ready(), 60'000);
        // And the chat can go on from the interrupted answer.
        QSignalSpy done(&ctx.chat, &ChatController::answerFinished);
        QVERIFY(ctx.chat.send(QStringLiteral("Go on")));
        QVERIFY(done.wait(60'000));
        QCOMPARE(ctx.chat.messages()->count(), 4);
    }

    void damagedDatabaseIsShownInTheWindow() {
        QTemporaryDir dir;
        {
            QFile f(dir.filePath(QStringLiteral("conversations.db")));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray(64 * 1024, '\x42'));
        }
        AppContext ctx(dir.path());
        QVERIFY(ctx.info.storage_notice.contains(QStringLiteral("damaged")));
        QVERIFY(ctx.store.backup_path.contains(QStringLiteral(".corrupt-")));
        QVERIFY(QFile::exists(ctx.store.backup_path));
        ctx.register_qml();
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
        QQmlApplicationEngine engine;
        engine.load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        QCOMPARE(engine.rootObjects().size(), 1);
        auto* window = qobject_cast<QQuickWindow*>(engine.rootObjects().first());
        QVERIFY(QTest::qWaitForWindowExposed(window));
        QQuickItem* banner = find_item(window->contentItem(), QStringLiteral("storageBanner"));
        QVERIFY(banner);
        QVERIFY(banner->isVisible());
        QQuickItem* text = find_item(banner, QStringLiteral("bannerText"));
        QVERIFY(text);
        QVERIFY(text->property("text").toString().contains(ctx.store.backup_path));
        // The fresh database works straight away.
        ctx.chat.renameConversation(ctx.store.store->create_conversation(QStringLiteral("x")).id, QStringLiteral("y"));
        QCOMPARE(ctx.chat.conversations()->count(), 1);
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    TestAppContext t;
    return QTest::qExec(&t, argc, argv);
}
#include "test_app_context.moc"
