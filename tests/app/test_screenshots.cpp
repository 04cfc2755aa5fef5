// Screenshots of the real app: ember-app's own wiring (AppContext) and QML, a real
// conversation with SmolLM2, grabbed offscreen (QQuickWindow::grabWindow) into
// <build>/screenshots/: empty-state.png, main-window.png, main-window-dark.png,
// chat-settings.png, settings.png, long-message.png (+ -dark, -720), context-full.png
// (+ -dark), context-settings.png, search-in-chat.png, reasoning-collapsed-720.png and
// reasoning-expanded-720.png (+ -dark): a stored answer with its thinking above it;
// snackbar-720.png (+ -dark): a deleted chat's Undo notice, above the message box;
// settings-720.png (+ -dark): Settings in a 720 px window, with long paths and system prompt;
// chat-draft-720.png (+ -dark): the chat settings' draft model chosen and loaded.
// Each image is checked to be the window's size and to have real content (not blank).
#include <QApplication>
#include <cmath>
#include <QDir>
#include <QImage>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSet>
#include <QSignalSpy>
#include <QtTest>
#include <algorithm>
#include <memory>
#include <tuple>

#include "app/desktop/app_context.h"
#include "engine/quant/quantizer.h"
#include "test_paths.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

class TestScreenshots : public QObject {
    Q_OBJECT
    // A long folder name: the Settings page shows paths under it and must wrap them.
    QTemporaryDir dir_{QDir::tempPath() +
                       QStringLiteral("/test_screenshots-a-data-folder-with-a-long-name-to-wrap-XXXXXX")};
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

    // Where `item` (or its painted text, wider than the item when it neither wraps nor elides)
    // ends, in `page`'s coordinates.
    static qreal right_edge(QQuickItem* item, QQuickItem* page) {
        qreal w = item->width();
        const QVariant painted = item->property("paintedWidth");  // Text (Label), TextEdit (TextArea)
        if (painted.isValid()) w = std::max(w, painted.toReal());
        return item->mapToItem(page, QPointF(w, 0)).x();
    }
    static QString describe(QQuickItem* item) {
        QString s;
        for (QQuickItem* i = item; i && !i->objectName().startsWith(QLatin1String("settingsColumn"));
             i = i->parentItem())
            s += QStringLiteral(" < %1 \"%2\" x %3 w %4")
                     .arg(QString::fromLatin1(i->metaObject()->className()), i->objectName())
                     .arg(i->x())
                     .arg(i->width());
        return s;
    }
    // Visible items under `root` that run past the right edge of `page` (+0.5 px of rounding).
    static void past_the_edge(QQuickItem* root, QQuickItem* page, QStringList& out) {
        for (QQuickItem* c : root->childItems()) {
            if (!c->isVisible() || c->width() <= 0) continue;
            const qreal right = right_edge(c, page);
            if (right > page->width() + 0.5)  // the outermost such item: its children follow it
                out << QStringLiteral("ends at %1 of %2:%3").arg(right).arg(page->width()).arg(describe(c));
            else past_the_edge(c, page, out);
        }
    }

    // Issue: at 720 px the Settings page ran past the window's right edge (the default system
    // prompt, the temperature slider's value, the storage paths). With a long system prompt and
    // long paths (the data folder's name), nothing under the settings column may end past the
    // page, in either theme.
    void settingsFitA720PxWindow() {
        const QString prompt = ctx_->settings.defaultSystemPrompt();
        ctx_->settings.setDefaultSystemPrompt(
            QStringLiteral("You are a careful assistant who answers in full sentences, names the sources it "
                           "used and says plainly when it does not know; ")
                .repeated(3));
        window_->resize(720, 1700);  // tall enough for the whole page in one picture
        QTRY_COMPARE(window_->contentItem()->width(), qreal(720));
        QVERIFY(window_->setProperty("settingsOpen", true));
        QQuickItem* page = find(QStringLiteral("settingsScroll"));
        QQuickItem* column = find(QStringLiteral("settingsColumn"));
        QVERIFY(page && column);
        QTRY_VERIFY(right_edge(column, page) <= page->width());
        QVERIFY(dir_.path().size() > 60);  // the storage paths are longer than their column
        for (const char* theme : {"light", "dark"}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            // The layouts settle at the next polish after the resize (or the theme's change).
            QStringList past;
            const auto settled = [&] {
                past.clear();
                past_the_edge(column, page, past);
                return past.isEmpty();
            };
            QTRY_VERIFY2(settled(), qPrintable(past.join('\n')));
            qInfo("page %g, column %g", page->width(), column->width());
            for (QQuickItem* row : column->childItems())
                if (row->isVisible()) qInfo("  row %s: width %g", row->metaObject()->className(), row->width());
            const QString dark =
                QString::fromLatin1(theme) == QLatin1String("dark") ? QStringLiteral("-dark") : QString();
            QVERIFY(shoot(QStringLiteral("settings-720%1.png").arg(dark)) > 20);
        }
        window_->setProperty("settingsOpen", false);
        ctx_->settings.setTheme(QStringLiteral("light"));
        ctx_->settings.setDefaultSystemPrompt(prompt);
        window_->resize(1180, 760);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(1180));
    }

    // A stored conversation (as a restart finds it), opened: its id.
    qint64 stored_chat(const QString& title, const QString& question, const QString& answer, const MessageStats& st) {
        ConversationStore& store = *ctx_->store.store;
        const qint64 id = store.create_conversation(title).id;
        store.add_message(id, QStringLiteral("user"), question);
        store.add_message(id, QStringLiteral("assistant"), answer, MessageState::Complete, st);
        ctx_->chat.conversations()->refresh();
        ctx_->chat.selectConversation(id);
        return id;
    }
    // Visible items named `name` under `root`, through the visual tree (a ListView's
    // delegates have no QObject parent, so findChildren does not see them).
    static void named(QQuickItem* root, const QString& name, QList<QQuickItem*>& out) {
        for (QQuickItem* c : root->childItems()) {
            if (c->objectName() == name && c->isVisible()) out.append(c);
            named(c, name, out);
        }
    }
    QQuickItem* find(const QString& name) {
        QList<QQuickItem*> found;
        named(window_->contentItem(), name, found);
        return found.isEmpty() ? nullptr : found.first();
    }
    // The widest message bubble on screen (the long one).
    QQuickItem* widest_bubble() {
        QList<QQuickItem*> found;
        named(window_->contentItem(), QStringLiteral("bubble"), found);
        QQuickItem* best = nullptr;
        for (QQuickItem* b : found)
            if (!best || b->width() > best->width()) best = b;
        return best;
    }

    // Issue: a message over 400 characters was drawn as a ~60 px column, a word per line.
    void longMessageFillsTheColumn() {
        QString answer;
        for (int i = 0; answer.size() < 2000; ++i)
            answer += QStringLiteral("Sentence %1 of a long answer, which goes on to say a little more. ").arg(i);
        MessageStats st;
        st.prompt_tokens = 1500;
        st.n_tokens = 400;
        st.dropped_messages = 6;
        st.model = QStringLiteral("SmolLM2-135M-Instruct.Q4_1");
        stored_chat(QStringLiteral("A long answer"), QStringLiteral("Tell me everything."), answer, st);
        for (const auto& [w, theme, name] : {std::tuple{1280, "light", "long-message.png"},
                                             {1280, "dark", "long-message-dark.png"},
                                             {720, "light", "long-message-720.png"}}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            window_->resize(w, 800);
            QTRY_COMPARE(window_->contentItem()->width(), qreal(w));
            QQuickItem* list = find(QStringLiteral("messageList"));
            QVERIFY(list);
            QTRY_VERIFY2(widest_bubble() && widest_bubble()->width() >= std::min(list->width() - 48, 780.0) - 1,
                         qPrintable(QStringLiteral("bubble %1, list %2")
                                        .arg(widest_bubble() ? widest_bubble()->width() : -1)
                                        .arg(list->width())));
            QVERIFY(shoot(QString::fromLatin1(name)) > 20);
        }
        QQuickItem* dropped = find(QStringLiteral("droppedNote"));
        QVERIFY(dropped);
        QVERIFY(dropped->property("text").toString().contains(QStringLiteral("The 6 oldest messages")));
        ctx_->settings.setTheme(QStringLiteral("light"));
        window_->resize(1180, 760);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(1180));
    }

    // Issue #39: where the latest answer began reading, after older messages that no longer
    // fit the context, a divider across the chat says how many messages above it the model
    // no longer reads; the chat keeps them all.
    void overflowDividerMarksWhereTheModelReads() {
        ConversationStore& store = *ctx_->store.store;
        const qint64 id = store.create_conversation(QStringLiteral("A long chat")).id;
        for (int i = 0; i < 4; ++i) {
            store.add_message(id, QStringLiteral("user"),
                              QStringLiteral("Tell me something about the number %1.").arg(i));
            store.add_message(id, QStringLiteral("assistant"),
                              QStringLiteral("The number %1 is a fine number to think about.").arg(i),
                              MessageState::Complete, {});
        }
        store.add_message(id, QStringLiteral("user"), QStringLiteral("Which number did we talk about last?"));
        MessageStats st;
        st.prompt_tokens = 120;
        st.n_tokens = 12;
        st.dropped_messages = 4;  // the first two exchanges
        st.model = QStringLiteral("SmolLM2-135M-Instruct.Q4_1");
        store.add_message(id, QStringLiteral("assistant"), QStringLiteral("We talked about the number 3 last."),
                          MessageState::Complete, st);
        ctx_->chat.conversations()->refresh();
        ctx_->chat.selectConversation(id);
        MessageListModel* m = ctx_->chat.messages();
        QCOMPARE(m->count(), 10);
        for (int row = 0; row < m->count(); ++row)
            QCOMPARE(m->get(row).value("droppedAbove").toInt(), row == 4 ? 4 : 0);  // above "...number 2."
        QTRY_VERIFY(find(QStringLiteral("overflowDivider")));
        QList<QQuickItem*> dividers;
        named(window_->contentItem(), QStringLiteral("overflowDivider"), dividers);
        QCOMPARE(dividers.size(), 1);
        QQuickItem* delegate = dividers.first()->parentItem();
        QCOMPARE(delegate->property("content").toString(), QStringLiteral("Tell me something about the number 2."));
        QVERIFY(shoot(QStringLiteral("overflow.png")) > 20);
    }

    // A message too long for the context: marked in place, with what can be done.
    void failedSendIsMarkedInline() {
        MessageStats st;
        st.error = QStringLiteral(
            "the message is 4900 tokens long; with room for the answer (200 tokens) it needs a "
            "context of 5100 tokens, and the model is loaded with 2048");
        st.needed_ctx = 5100;
        const qint64 id = stored_chat(QStringLiteral("Too long"), QStringLiteral("(a very long paste)"), {}, st);
        QCOMPARE(ctx_->chat.currentConversationId(), id);
        QTRY_VERIFY(find(QStringLiteral("failedAnswer")));
        QQuickItem* longer = find(QStringLiteral("longerContextButton"));
        QVERIFY(longer);
        QCOMPARE(longer->property("text").toString(), QStringLiteral("Use 8,192 tokens and retry"));
        QVERIFY(shoot(QStringLiteral("context-full.png")) > 20);
        ctx_->settings.setTheme(QStringLiteral("dark"));
        QVERIFY(shoot(QStringLiteral("context-full-dark.png")) > 20);
        ctx_->settings.setTheme(QStringLiteral("light"));
    }

    // The context meter's popup: this model's context, why, and how to change it.
    void contextSettings() {
        QQuickItem* change = find(QStringLiteral("contextSettingsButton"));
        QVERIFY(change);
        QVERIFY(QMetaObject::invokeMethod(change, "clicked"));
        QObject* popup = window_->findChild<QObject*>(QStringLiteral("contextPopup"));
        QVERIFY(popup);
        QTRY_VERIFY(popup->property("opened").toBool());
        QQuickItem* reason = find(QStringLiteral("contextReason"));
        QVERIFY(reason);
        QVERIFY2(reason->property("text").toString().contains(
                     QStringLiteral("Now 2,048 tokens: your setting for every model")),
                 qPrintable(reason->property("text").toString()));
        QVERIFY(shoot(QStringLiteral("context-settings.png")) > 20);
        QVERIFY(QMetaObject::invokeMethod(popup, "close"));
        QTRY_VERIFY(!popup->property("visible").toBool());
    }

    // A search hit opened: the word is marked where the chat draws it.
    void searchHitMarkedInTheOpenedChat() {
        ConversationListModel* convs = ctx_->chat.conversations();
        convs->setFilter(QStringLiteral("capital"));
        QTRY_COMPARE(convs->count(), 1);
        ctx_->chat.selectConversation(convs->get(0).value("conversationId").toLongLong());
        QTRY_VERIFY(find(QStringLiteral("segmentText")));
        const auto hits = [&] {
            QList<QQuickItem*> texts;
            named(window_->contentItem(), QStringLiteral("segmentText"), texts);
            int n = 0;
            for (QQuickItem* t : texts) n += t->property("searchHits").toInt();
            return n;
        };
        QTRY_VERIFY(hits() >= 1);
        QVERIFY(shoot(QStringLiteral("search-in-chat.png")) > 20);
        convs->setFilter(QString());
    }

    // A reasoning model's stored answer (as a restart finds it): its thinking collapsed to one
    // line above the answer, then opened; light and dark, 720 px wide.
    void reasoningAnswerCollapsedAndExpanded() {
        const QString thoughts = QStringLiteral(
            "The user asks why the sky is blue. Sunlight holds every colour; air molecules are much "
            "smaller than its wavelengths, so they scatter short (blue) waves far more than long (red) ones "
            "— Rayleigh scattering, about 1/λ⁴. So blue light reaches the eye from all over the sky. "
            "I should say that simply, and mention sunsets.");
        const QString answer = QStringLiteral(
            "Sunlight is scattered by the air's molecules, and blue light far more than red "
            "(**Rayleigh scattering**). Blue reaches your eyes from every direction, so the sky looks blue; "
            "at sunset the light crosses more air and the blue is scattered away, leaving red and orange.");
        ConversationStore& store = *ctx_->store.store;
        const qint64 id = store.create_conversation(QStringLiteral("Why is the sky blue?")).id;
        store.add_message(id, QStringLiteral("user"), QStringLiteral("Why is the sky blue?"));
        MessageStats st;
        st.thinking_ms = 12'400;
        st.n_tokens = 143;
        st.model = QStringLiteral("Qwen3-0.6B-Q4_K_M");
        st.stop_reason = ember::StopReason::EndOfText;
        store.add_message(id, QStringLiteral("assistant"), answer, MessageState::Complete, st, thoughts);
        ctx_->chat.conversations()->refresh();
        ctx_->chat.selectConversation(id);
        window_->resize(720, 800);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(720));
        QTRY_VERIFY(find(QStringLiteral("thinkingSection")));
        QQuickItem* label = find(QStringLiteral("thinkingLabel"));
        QVERIFY(label);
        QCOMPARE(label->property("text").toString(), QStringLiteral("Thought for 12 s"));
        QVERIFY(!find(QStringLiteral("thinkingText")));  // collapsed
        QQuickItem* text = find(QStringLiteral("messageText"));
        QVERIFY(text);
        for (const char* theme : {"light", "dark"}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            const QString dark =
                QString::fromLatin1(theme) == QLatin1String("dark") ? QStringLiteral("-dark") : QString();
            QVERIFY(shoot(QStringLiteral("reasoning-collapsed-720%1.png").arg(dark)) > 20);
        }
        QQuickItem* header = find(QStringLiteral("thinkingHeader"));
        QVERIFY(header);
        QVERIFY(QMetaObject::invokeMethod(header, "clicked"));
        QTRY_VERIFY(find(QStringLiteral("thinkingText")));
        QCOMPARE(find(QStringLiteral("thinkingText"))->property("text").toString(), thoughts);
        for (const char* theme : {"light", "dark"}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            const QString dark =
                QString::fromLatin1(theme) == QLatin1String("dark") ? QStringLiteral("-dark") : QString();
            QVERIFY(shoot(QStringLiteral("reasoning-expanded-720%1.png").arg(dark)) > 20);
        }
        ctx_->settings.setTheme(QStringLiteral("light"));
        window_->resize(1180, 760);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(1180));
    }

    // A notice (here: a deleted chat's Undo) sits above the composer at 720 px, never over the
    // message box, in both themes.
    void snackbarAboveTheComposer() {
        MessageStats st;
        st.n_tokens = 12;
        const qint64 gone = stored_chat(QStringLiteral("Old shopping list"), QStringLiteral("Milk?"),
                                        QStringLiteral("Yes, and eggs."), st);
        stored_chat(QStringLiteral("Trip to Lisbon"), QStringLiteral("What should I see in Lisbon in two days?"),
                    QStringLiteral("Day one: Alfama and the castle, then Baixa. Day two: Belém (the tower, the "
                                   "monastery, the pastries) and LX Factory."),
                    st);
        window_->resize(720, 800);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(720));
        ctx_->chat.deleteConversation(gone);
        auto* notice = window_->property("snackbar").value<QObject*>();
        QVERIFY(notice);
        QTRY_VERIFY(notice->property("opened").toBool());
        QQuickItem* composer = find(QStringLiteral("inputBox"));
        QVERIFY(composer);
        const qreal notice_bottom = notice->property("y").toReal() + notice->property("height").toReal();
        QVERIFY2(notice_bottom <= composer->mapToScene(QPointF(0, 0)).y(),
                 qPrintable(QStringLiteral("the notice ends at %1, the composer starts at %2")
                                .arg(notice_bottom)
                                .arg(composer->mapToScene(QPointF(0, 0)).y())));
        QQuickItem* page = find(QStringLiteral("messageList"));  // centred over the chat, not the sidebar
        QVERIFY(page);
        const qreal page_mid = page->mapToScene(QPointF(page->width() / 2, 0)).x();
        const qreal notice_mid = notice->property("x").toReal() + notice->property("width").toReal() / 2;
        QVERIFY2(std::abs(page_mid - notice_mid) < 2,
                 qPrintable(QStringLiteral("%1 vs %2").arg(notice_mid).arg(page_mid)));
        for (const char* theme : {"light", "dark"}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            const QString dark =
                QString::fromLatin1(theme) == QLatin1String("dark") ? QStringLiteral("-dark") : QString();
            QVERIFY(shoot(QStringLiteral("snackbar-720%1.png").arg(dark)) > 20);
        }
        ctx_->settings.setTheme(QStringLiteral("light"));
        ctx_->chat.undoDelete();
        QVERIFY(QMetaObject::invokeMethod(notice, "close"));
        QTRY_VERIFY(!notice->property("visible").toBool());
        window_->resize(1180, 760);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(1180));
    }

    // Issue #38: the chat settings' "Draft model" with a draft chosen and loaded (a Q4_0 copy of
    // SmolLM2 in the library, made here), in a 720 px window, light and dark: the draft list and
    // its status end inside the panel.
    void draftModelSettingAt720() {
        const std::string smol = ember::test::test_model(ember::test::kSmolLM2);
        const QString copy = dir_.filePath(QStringLiteral("SmolLM2-135M-Instruct-Q4_0.gguf"));
        ember::QuantizeOptions q;
        q.input = smol;
        q.output = copy.toStdString();
        q.type = "Q4_0";
        q.n_threads = 1;
        q.allow_requantize = true;
        ember::quantize_model(q);
        QSignalSpy imported(&ctx_->library, &LibraryController::imported);
        ctx_->library.importFile(copy);
        QVERIFY(imported.wait(60'000));
        if (ctx_->models.path() != QString::fromStdString(smol) || !ctx_->models.ready()) {
            ctx_->models.load(QString::fromStdString(smol));
            QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready(), 120'000);
        }
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.draftReason().isEmpty(), 60'000);
        ctx_->chat.newConversation();
        QVariantMap s = ctx_->chat.sampling();
        s["speculation"] = QStringLiteral("draft");
        ctx_->chat.setSampling(s);
        ctx_->models.setDraft(copy);
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready() && ctx_->models.draftName() != QString(), 120'000);
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.draftReason().isEmpty(), 60'000);
        window_->resize(720, 900);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(720));
        QObject* panel = window_->findChild<QObject*>(QStringLiteral("chatSettingsPanel"));
        QVERIFY(panel);
        QVERIFY(QMetaObject::invokeMethod(panel, "open"));
        QTRY_VERIFY(panel->property("opened").toBool());
        QQuickItem* section = nullptr;
        QTRY_VERIFY((section = find(QStringLiteral("draftSection"))) != nullptr);
        QQuickItem* status = find(QStringLiteral("draftStatus"));
        QVERIFY(status);
        QVERIFY2(status->property("text").toString().contains(QStringLiteral("SmolLM2-135M-Instruct-Q4_0")),
                 qPrintable(status->property("text").toString()));
        auto* panel_item = qobject_cast<QQuickItem*>(panel->property("contentItem").value<QObject*>());
        QVERIFY(panel_item);
        for (const char* theme : {"light", "dark"}) {
            ctx_->settings.setTheme(QString::fromLatin1(theme));
            QStringList past;
            const auto inside = [&] {
                past.clear();
                past_the_edge(section, panel_item, past);
                return past.isEmpty() && right_edge(section, panel_item) <= panel_item->width() + 0.5;
            };
            QTRY_VERIFY2(inside(), qPrintable(past.join('\n')));
            // The whole section shows: its bottom is above the window's.
            QVERIFY(section->mapToItem(window_->contentItem(), QPointF(0, section->height())).y() <=
                    window_->contentItem()->height());
            const QString dark =
                QString::fromLatin1(theme) == QLatin1String("dark") ? QStringLiteral("-dark") : QString();
            QVERIFY(shoot(QStringLiteral("chat-draft-720%1.png").arg(dark)) > 20);
        }
        ctx_->settings.setTheme(QStringLiteral("light"));
        QVERIFY(QMetaObject::invokeMethod(panel, "close"));
        QTRY_VERIFY(!panel->property("visible").toBool());
        window_->resize(1180, 760);
        QTRY_COMPARE(window_->contentItem()->width(), qreal(1180));
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
