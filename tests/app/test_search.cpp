// Chat search in the sidebar (issue #33): a hit is shown with the matched words highlighted
// (bold, in the theme's accent), never as literal "[Paris]"; everything else in the message
// is shown exactly as written, so a message's own "<b>", "[1]" or "&" is not taken for markup;
// and the list model tells the opened chat what was searched for (searchQuery, searchTerms,
// matchRanges). Checked on the snippet functions, on a real store through the list model, and
// on the sidebar of the real main window (offscreen, <build>/screenshots/search-dark.png).
#include <QApplication>
#include <QDir>
#include <QImage>
#include <QQmlApplicationEngine>
#include <QQmlComponent>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QTemporaryDir>
#include <QtTest>
#include <memory>

#include "app/core/conversation_list_model.h"
#include "app/desktop/app_context.h"
#include "app/storage/conversation_store.h"
#include "app/storage/store_open.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

namespace {

// An answer with a hit ("Paris") and text that looks like markup but is the message's own.
const QString kHostile = QStringLiteral("It is in Paris [1]. Use <b>care</b> & \"joy\".");

QString marked(const QString& word) { return kHitOpen + word + kHitClose; }

QQuickItem* find_item(QQuickItem* root, const QString& name) {
    if (!root) return nullptr;
    if (root->objectName() == name) return root;
    for (QQuickItem* c : root->childItems())
        if (QQuickItem* hit = find_item(c, name)) return hit;
    return nullptr;
}

QVariantMap range(int start, int length) { return {{"start", start}, {"length", length}}; }

}  // namespace

class TestSearch : public QObject {
    Q_OBJECT

private slots:
    void snippetsAreEscapedWithTheHitsHighlighted() {
        const QString s = marked(QStringLiteral("Paris")) + QStringLiteral(" <b>x</b> [y] & \"q\"\nz ") +
                          marked(QStringLiteral("paris"));
        QCOMPARE(snippet_plain(s), QStringLiteral("Paris <b>x</b> [y] & \"q\"\nz paris"));
        QCOMPARE(snippet_styled(s, QColor("#ff8a3d")),
                 QStringLiteral("<b><font color=\"#ff8a3d\">Paris</font></b> &lt;b&gt;x&lt;/b&gt; [y] &amp; "
                                "&quot;q&quot; z <b><font color=\"#ff8a3d\">paris</font></b>"));
        // Stray or repeated markers never leave a tag open or closed twice.
        QCOMPARE(snippet_styled(kHitOpen + QStringLiteral("a") + kHitOpen + QStringLiteral("b"), QColor("#000000")),
                 QStringLiteral("<b><font color=\"#000000\">ab</font></b>"));
        QCOMPARE(snippet_styled(kHitClose + QStringLiteral("a<"), QColor("#000000")), QStringLiteral("a&lt;"));
    }

    // A real store: the hit comes from SQLite's FTS snippet, through the sidebar's model.
    void listModelShowsHitsAndExposesTheQuery() {
        QTemporaryDir dir;
        OpenedStore opened = open_conversation_store(dir.path());
        ConversationStore& store = *opened.store;
        const Conversation trip = store.create_conversation(QStringLiteral("Trip"));
        store.add_message(trip.id, QStringLiteral("user"), QStringLiteral("Where is the Eiffel tower?"));
        store.add_message(trip.id, QStringLiteral("assistant"), kHostile);
        const Conversation other = store.create_conversation(QStringLiteral("Other"));
        store.add_message(other.id, QStringLiteral("user"), QStringLiteral("Nothing to see here"));

        ConversationListModel list(store);
        QCOMPARE(list.searchQuery(), QString());
        QVERIFY(list.matchRanges(kHostile).isEmpty());
        list.setHighlightColor(QColor("#d9480f"));
        list.setFilter(QStringLiteral("  paris "));
        QCOMPARE(list.count(), 1);
        QCOMPARE(list.searchQuery(), QStringLiteral("paris"));
        QCOMPARE(list.searchTerms(), QStringList{QStringLiteral("paris")});
        const QString plain = list.get(0).value("snippet").toString();
        const QString html = list.get(0).value("snippetHtml").toString();
        // Plain: the message as written, no marker and no added bracket.
        QVERIFY2(plain.contains(QStringLiteral("Paris [1]. Use <b>care</b> & \"joy\"")), qPrintable(plain));
        QVERIFY(!plain.contains(QStringLiteral("[Paris]")) && !plain.contains(kHitOpen) && !plain.contains(kHitClose));
        // Styled: the hit highlighted, the message's own markup escaped.
        QVERIFY2(html.contains(QStringLiteral("in <b><font color=\"#d9480f\">Paris</font></b> [1]. Use "
                                              "&lt;b&gt;care&lt;/b&gt; &amp; &quot;joy&quot;")),
                 qPrintable(html));
        QCOMPARE(html.count(QStringLiteral("<b>")), 1);
        // A new accent reaches the rows.
        QSignalSpy changed(&list, &QAbstractItemModel::dataChanged);
        list.setHighlightColor(QColor("#ff8a3d"));
        QCOMPARE(changed.count(), 1);
        QVERIFY(list.get(0).value("snippetHtml").toString().contains(QStringLiteral("#ff8a3d\">Paris<")));

        // What the opened chat highlights: the words the search matches, as it matches them
        // (the start of a word, any case, accents ignored).
        list.setFilter(QStringLiteral("Pàris tow"));
        QCOMPARE(list.searchQuery(), QStringLiteral("Pàris tow"));
        QCOMPARE(list.searchTerms(), (QStringList{QStringLiteral("Pàris"), QStringLiteral("tow")}));
        QCOMPARE(list.matchRanges(QStringLiteral("Paris, parisian, PARÍS and sparis: a tower")),
                 (QVariantList{range(0, 5), range(7, 8), range(17, 5), range(37, 5)}));
        list.setFilter(QString());
        QCOMPARE(list.searchQuery(), QString());
        QVERIFY(list.matchRanges(QStringLiteral("Paris")).isEmpty());
    }

    // The real sidebar: the snippet label draws the hit in the accent colour and shows the
    // message's own "<b>care</b>" as those characters (its width is that of the plain text).
    void sidebarDrawsTheHitAndTheMessageAsWritten() {
        QTemporaryDir dir;
        qputenv("EMBER_DATA_DIR", dir.path().toUtf8());
        AppContext ctx(dir.path());
        {
            ConversationStore& store = *ctx.store.store;
            const Conversation trip = store.create_conversation(QStringLiteral("Trip"));
            store.add_message(trip.id, QStringLiteral("user"), QStringLiteral("Where is the Eiffel tower?"));
            store.add_message(trip.id, QStringLiteral("assistant"), kHostile);
            ctx.chat.conversations()->refresh();
        }
        ctx.settings.setTheme(QStringLiteral("dark"));
        ctx.register_qml();
        QQmlApplicationEngine engine;
        engine.load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        QCOMPARE(engine.rootObjects().size(), 1);
        auto* window = qobject_cast<QQuickWindow*>(engine.rootObjects().first());
        QVERIFY(window && QTest::qWaitForWindowExposed(window));

        QQuickItem* field = find_item(window->contentItem(), QStringLiteral("searchField"));
        QVERIFY(field);
        field->setProperty("text", QStringLiteral("paris"));
        QCOMPARE(ctx.chat.conversations()->searchQuery(), QStringLiteral("paris"));
        QQuickItem* label = nullptr;
        QTRY_VERIFY((label = find_item(window->contentItem(), QStringLiteral("snippetText"))) && label->isVisible());

        // Drawn: pixels of the accent inside the label (the hit).
        const QImage img = window->grabWindow();
        const qreal dpr = window->devicePixelRatio();
        const QRectF r = label->mapRectToScene(QRectF(0, 0, label->width(), label->height()));
        const QRect px = QRectF(r.topLeft() * dpr, r.size() * dpr).toAlignedRect() & img.rect();
        const QColor accent("#ff8a3d");
        int accent_pixels = 0;
        for (int y = px.top(); y <= px.bottom(); ++y)
            for (int x = px.left(); x <= px.right(); ++x) {
                const QColor c = img.pixelColor(x, y);
                if (qAbs(c.red() - accent.red()) + qAbs(c.green() - accent.green()) + qAbs(c.blue() - accent.blue()) <
                    60)
                    ++accent_pixels;
            }
        QVERIFY2(accent_pixels >= 10, qPrintable(QStringLiteral("%1 accent pixels").arg(accent_pixels)));

        // As written: the styled label is as wide as the plain text in the same font (the bold
        // hit adds a few pixels); were "<b>care</b>" taken for a tag, 7 characters would vanish.
        QQmlComponent plain(&engine);
        plain.setData("import QtQuick\nText { textFormat: Text.PlainText }", QUrl());
        std::unique_ptr<QObject> reference(plain.create());
        QVERIFY2(reference, qPrintable(plain.errorString()));
        reference->setProperty("font", label->property("font"));
        reference->setProperty("text", ctx.chat.conversations()->get(0).value("snippet"));
        const qreal styled_w = label->implicitWidth(), plain_w = reference->property("implicitWidth").toReal();
        QVERIFY2(qAbs(styled_w - plain_w) < 10,
                 qPrintable(QStringLiteral("styled %1 px, plain %2 px").arg(styled_w).arg(plain_w)));

        // And it is the model's styled snippet, in the dark theme's accent.
        const QString html = ctx.chat.conversations()->get(0).value("snippetHtml").toString();
        QCOMPARE(label->property("text").toString(), html);
        QVERIFY2(html.contains(QStringLiteral("<font color=\"#ff8a3d\">Paris</font>")), qPrintable(html));

        QDir().mkpath(QStringLiteral(EMBER_BINARY_DIR "/screenshots"));
        QVERIFY(img.save(QStringLiteral(EMBER_BINARY_DIR "/screenshots/search-dark.png")));
        field->setProperty("text", QString());
        QCOMPARE(ctx.chat.conversations()->searchQuery(), QString());
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QQuickStyle::setStyle(QStringLiteral("Fusion"));
    TestSearch t;
    return QTest::qExec(&t, argc, argv);
}
#include "test_search.moc"
