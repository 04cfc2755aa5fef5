// The conversation store on real SQLite files: schema migrations from v1 data, full-text
// search, delete-with-undo, streaming saves, corruption recovery, and crash safety against
// a writer process killed with SIGKILL in the middle of streaming an answer.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "app/storage/schema.h"
#include "app/storage/store_open.h"
#include "app/storage/stream_saver.h"

using namespace ember::app;

class TestStorage : public QObject {
    Q_OBJECT

    static QString db_path(const QTemporaryDir& d) { return d.filePath(QStringLiteral("conversations.db")); }

    static QStringList files_matching(const QTemporaryDir& d, const QString& pattern) {
        return QDir(d.path()).entryList({pattern}, QDir::Files);
    }

private slots:
    void freshDatabaseIsWalAtLatestVersion() {
        QTemporaryDir dir;
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(s.notice.isEmpty());
        QCOMPARE(s.path, db_path(dir));
        QCOMPARE(schema_version(s.store->db()), kSchemaVersion);
        QCOMPARE(s.store->db().scalar_text("PRAGMA journal_mode"), QStringLiteral("wal"));
        QCOMPARE(s.store->db().scalar_int("PRAGMA foreign_keys"), 1);
    }

    // Data written by a v1 build survives the v2 migration, gains defaults for the new
    // columns, and becomes searchable (the FTS index is rebuilt from existing rows).
    void migratesV1Data() {
        QTemporaryDir dir;
        {
            Db db = Db::open(db_path(dir));
            migrate(db, 1);
            QCOMPARE(schema_version(db), 1);
            db.exec(
                "INSERT INTO conversations (id, title, created_at, updated_at, system_prompt, model) "
                "VALUES (7, 'Old chat', 1000, 2000, 'You are terse.', '/m/old.gguf')");
            db.exec(
                "INSERT INTO messages (conversation_id, role, content, created_at, state) VALUES "
                "(7, 'user', 'Tell me about photosynthesis', 1100, 'complete'),"
                "(7, 'assistant', 'Plants turn light into sugar', 1200, 'streaming')");
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY2(s.notice.isEmpty(), qPrintable(s.notice));
        QCOMPARE(schema_version(s.store->db()), kSchemaVersion);
        QCOMPARE(s.interrupted, 1);  // the v1 streaming row was left by a dead process

        const auto convs = s.store->conversations();
        QCOMPARE(convs.size(), size_t(1));
        QCOMPARE(convs[0].id, int64_t(7));
        QCOMPARE(convs[0].title, QStringLiteral("Old chat"));
        QCOMPARE(convs[0].system_prompt, QStringLiteral("You are terse."));
        QCOMPARE(convs[0].sampling_json, QStringLiteral("{}"));
        QCOMPARE(convs[0].model, QStringLiteral("/m/old.gguf"));

        const auto msgs = s.store->messages(7);
        QCOMPARE(msgs.size(), size_t(2));
        QCOMPARE(msgs[0].role, QStringLiteral("user"));
        QCOMPARE(msgs[0].state, MessageState::Complete);
        QVERIFY(!msgs[0].stats.ttft_ms.has_value());
        QCOMPARE(msgs[1].state, MessageState::Interrupted);
        QCOMPARE(msgs[1].content, QStringLiteral("Plants turn light into sugar"));

        const auto hits = s.store->search(QStringLiteral("photosynth"));
        QCOMPARE(hits.size(), size_t(1));
        QCOMPARE(hits[0].message_id, msgs[0].id);
        QVERIFY2(hits[0].snippet.contains(kHitOpen + QStringLiteral("photosynthesis") + kHitClose),
                 qPrintable(hits[0].snippet));

        // New rows use the new columns.
        MessageStats st;
        st.ttft_ms = 12.5;
        st.tok_s = 80.0;
        st.n_tokens = 42;
        st.model = QStringLiteral("SmolLM2");
        st.stop_reason = ember::StopReason::EndOfText;
        st.prompt_tokens = 300;
        st.reused_tokens = 250;
        const Message m =
            s.store->add_message(7, QStringLiteral("assistant"), QStringLiteral("ok"), MessageState::Complete, st);
        const auto back = s.store->message(m.id);
        QVERIFY(back.has_value());
        QCOMPARE(*back->stats.ttft_ms, 12.5);
        QCOMPARE(*back->stats.n_tokens, 42);
        QVERIFY(back->stats.stop_reason == ember::StopReason::EndOfText);
        QCOMPARE(*back->stats.prompt_tokens, 300);
        QCOMPARE(*back->stats.reused_tokens, 250);
        QVERIFY(!back->stats.energy_j.has_value());  // no meter: NULL, not 0
        // Stored as the same text as before the enum, so old databases read the same.
        QCOMPARE(
            s.store->db().scalar_text(("SELECT stop_reason FROM messages WHERE id = " + std::to_string(m.id)).c_str()),
            QStringLiteral("eog"));
        QVERIFY(stop_reason_from(QStringLiteral("length")) == ember::StopReason::Length);
        QVERIFY(stop_reason_from(QStringLiteral("something else")) == ember::StopReason::None);
    }

    // Every value a v5 build wrote reads back the same after the v6 migration (one quote()d
    // text per row, so NULLs, reals and texts are told apart); the thinking is empty, and the
    // new columns take a reasoning answer.
    void migratesV5DataLosslessly() {
        QTemporaryDir dir;
        const char* rows =
            "SELECT group_concat(row, char(10)) FROM (SELECT quote(id) || '|' || quote(conversation_id) "
            "|| '|' || quote(role) || '|' || quote(content) || '|' || quote(created_at) || '|' || "
            "quote(state) || '|' || quote(ttft_ms) || '|' || quote(tok_s) || '|' || quote(n_tokens) || "
            "'|' || quote(model) || '|' || quote(stop_reason) || '|' || quote(writer) || '|' || "
            "quote(prompt_tokens) || '|' || quote(reused_tokens) || '|' || quote(energy_j) || '|' || "
            "quote(error) || '|' || quote(needed_ctx) || '|' || quote(dropped_messages) AS row "
            "FROM messages ORDER BY id)";
        QString before;
        {
            Db db = Db::open(db_path(dir));
            migrate(db, 5);
            QCOMPARE(schema_version(db), 5);
            db.exec(
                "INSERT INTO conversations (id, title, created_at, updated_at, system_prompt, sampling_json, model) "
                "VALUES (3, 'Think <b>', 1000, 2000, 'Be brief.', '{\"temperature\":0.2}', '/m/q.gguf')");
            db.exec(
                "INSERT INTO messages (conversation_id, role, content, created_at, state, ttft_ms, tok_s, n_tokens, "
                "model, stop_reason, writer, prompt_tokens, reused_tokens, energy_j, error, needed_ctx, "
                "dropped_messages) VALUES "
                "(3, 'user', 'Why is the sky blue? ☀', 1100, 'complete', NULL, NULL, NULL, '', '', '', NULL, NULL, "
                "NULL, '', NULL, NULL),"
                "(3, 'assistant', 'Rayleigh scattering.', 1200, 'complete', 12.5, 80.25, 42, 'q', 'eog', '', 300, "
                "250, 1.5, '', NULL, 2),"
                "(3, 'assistant', '', 1300, 'interrupted', NULL, NULL, NULL, 'q', '', '', NULL, NULL, NULL, "
                "'too long', 5100, NULL)");
            before = db.scalar_text(rows);
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY2(s.notice.isEmpty(), qPrintable(s.notice));
        QCOMPARE(schema_version(s.store->db()), kSchemaVersion);
        QCOMPARE(s.store->db().scalar_text(rows), before);
        for (const Message& m : s.store->messages(3)) {
            QVERIFY(m.reasoning.isEmpty());
            QVERIFY(!m.stats.thinking_ms);
        }
        QCOMPARE(s.store->messages(3)[1].stats.dropped_messages.value_or(0), 2);
        QCOMPARE(s.store->conversation(3)->sampling_json, QStringLiteral("{\"temperature\":0.2}"));
        QCOMPARE(s.store->search(QStringLiteral("Rayleigh")).size(), size_t(1));

        // A reasoning answer, streamed then finished: the thinking apart from the text.
        const Message a = s.store->add_message(3, QStringLiteral("assistant"), {}, MessageState::Streaming);
        StreamSaver saver(*s.store, a.id, 60'000, 2);
        saver.append({}, 1, QStringLiteral("The user asks about color. "));
        QVERIFY(saver.append({}, 1, QStringLiteral("Light scatters.")));  // 2 tokens: saved
        QCOMPARE(s.store->message(a.id)->reasoning, QStringLiteral("The user asks about color. Light scatters."));
        QVERIFY(s.store->message(a.id)->content.isEmpty());
        saver.append(QStringLiteral("Blue light scatters most."), 1);
        MessageStats st;
        st.thinking_ms = 1234.5;
        saver.finish(MessageState::Complete, st);
        const auto done = s.store->message(a.id);
        QCOMPARE(done->content, QStringLiteral("Blue light scatters most."));
        QCOMPARE(done->reasoning, QStringLiteral("The user asks about color. Light scatters."));
        QCOMPARE(*done->stats.thinking_ms, 1234.5);
        QCOMPARE(s.store->search(QStringLiteral("scatters")).size(), size_t(1));  // the answer, not the thinking
    }

    void migrationIsIdempotent() {
        QTemporaryDir dir;
        { open_conversation_store(dir.path()).store->create_conversation(QStringLiteral("a")); }
        OpenedStore s = open_conversation_store(dir.path());
        QCOMPARE(schema_version(s.store->db()), kSchemaVersion);
        QCOMPARE(s.store->conversations().size(), size_t(1));
    }

    void conversationsCrudAndOrder() {
        QTemporaryDir dir;
        OpenedStore s = open_conversation_store(dir.path());
        ConversationStore& st = *s.store;
        // Times are in ms: wait until the clock has moved past each step's (a condition, not a sleep).
        const auto clock_passes = [](int64_t ms) {
            return QTest::qWaitFor([ms] { return QDateTime::currentMSecsSinceEpoch() > ms; }, 5000);
        };
        const Conversation a = st.create_conversation(QStringLiteral("first"));
        QVERIFY(clock_passes(a.updated_at));
        const Conversation b =
            st.create_conversation(QStringLiteral("second"), QStringLiteral("sys"),
                                   QStringLiteral("{\"temperature\":0.2}"), QStringLiteral("/m.gguf"));
        auto list = st.conversations();
        QCOMPARE(list.size(), size_t(2));
        QCOMPARE(list[0].id, b.id);  // newest first
        QVERIFY(clock_passes(b.updated_at));
        st.add_message(a.id, QStringLiteral("user"), QStringLiteral("hi"));  // activity moves `a` up
        list = st.conversations();
        QCOMPARE(list[0].id, a.id);

        st.rename(a.id, QStringLiteral("renamed"));
        st.set_system_prompt(a.id, QStringLiteral("be kind"));
        st.set_sampling_json(a.id, QStringLiteral("{\"top_k\":5}"));
        st.set_model(a.id, QStringLiteral("/x.gguf"));
        const auto a2 = st.conversation(a.id);
        QCOMPARE(a2->title, QStringLiteral("renamed"));
        QCOMPARE(a2->system_prompt, QStringLiteral("be kind"));
        QCOMPARE(a2->sampling_json, QStringLiteral("{\"top_k\":5}"));
        QCOMPARE(a2->model, QStringLiteral("/x.gguf"));
        QCOMPARE(st.conversation(b.id)->sampling_json, QStringLiteral("{\"temperature\":0.2}"));
    }

    void deleteWithUndo() {
        QTemporaryDir dir;
        int64_t id = 0;
        {
            OpenedStore s = open_conversation_store(dir.path());
            ConversationStore& st = *s.store;
            id = st.create_conversation(QStringLiteral("doomed")).id;
            st.add_message(id, QStringLiteral("user"), QStringLiteral("unique zebra words"));
            st.soft_delete(id);
            QVERIFY(st.conversations().empty());
            QVERIFY(st.search(QStringLiteral("zebra")).empty());
            st.restore(id);
            QCOMPARE(st.conversations().size(), size_t(1));
            QCOMPARE(st.search(QStringLiteral("zebra")).size(), size_t(1));
            st.soft_delete(id);  // and the app closes before the undo window ends
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(!s.store->conversation(id).has_value());  // purged at start-up
        QVERIFY(s.store->messages(id).empty());           // messages cascaded
        QCOMPARE(s.store->db().scalar_int("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'zebra'"), 0);
    }

    void fullTextSearch() {
        QTemporaryDir dir;
        OpenedStore s = open_conversation_store(dir.path());
        ConversationStore& st = *s.store;
        const auto pets = st.create_conversation(QStringLiteral("Pets"));
        const auto cook = st.create_conversation(QStringLiteral("Cooking ideas"));
        st.add_message(pets.id, QStringLiteral("user"), QStringLiteral("The quick brown fox jumps"));
        const Message lazy = st.add_message(pets.id, QStringLiteral("assistant"), QStringLiteral("over the lazy dog"));
        st.add_message(cook.id, QStringLiteral("user"), QStringLiteral("How do I make a brownie? Café au lait too."));

        QCOMPARE(st.search(QStringLiteral("fox")).size(), size_t(1));
        QCOMPARE(st.search(QStringLiteral("brown")).size(), size_t(2));      // prefix: brown, brownie
        QCOMPARE(st.search(QStringLiteral("brown fox")).size(), size_t(1));  // all words
        QCOMPARE(st.search(QStringLiteral("cafe")).size(), size_t(1));       // diacritics folded
        QCOMPARE(st.search(QStringLiteral("QUICK")).size(), size_t(1));
        QVERIFY(st.search(QStringLiteral("   ")).empty());
        // FTS operators and quotes in user input are literal, never a syntax error.
        QVERIFY(st.search(QStringLiteral("\"fox AND OR NEAR( * -")).empty());
        QCOMPARE(st.search(QStringLiteral("fox\"")).size(), size_t(1));

        // The index follows edits and deletions (triggers on the external content table).
        st.update_content(lazy.id, QStringLiteral("over the sleepy cat"), MessageState::Streaming);
        QVERIFY(st.search(QStringLiteral("lazy")).empty());
        QCOMPARE(st.search(QStringLiteral("sleepy")).size(), size_t(1));
        st.delete_from(lazy.id);
        QVERIFY(st.search(QStringLiteral("sleepy")).empty());

        // The sidebar filter: title or message text.
        auto only = [&](const QString& f) {
            const auto v = st.conversations(f);
            return v.size() == 1 ? v[0].id : -1;
        };
        QCOMPARE(only(QStringLiteral("cooking")), cook.id);  // title
        QCOMPARE(only(QStringLiteral("jumps")), pets.id);    // message text
        QCOMPARE(st.conversations(QStringLiteral("brow")).size(), size_t(2));
        QVERIFY(st.conversations(QStringLiteral("nothing-like-this")).empty());
        QCOMPARE(st.conversations(QStringLiteral("100%_")).size(), size_t(0));  // LIKE wildcards escaped
        QCOMPARE(fts_query(QStringLiteral(" a  \"b ")), QStringLiteral("\"a\"* \"\"\"b\"*"));
    }

    void deleteFromTruncatesConversation() {
        QTemporaryDir dir;
        OpenedStore s = open_conversation_store(dir.path());
        ConversationStore& st = *s.store;
        const auto c = st.create_conversation(QStringLiteral("t"));
        const auto other = st.create_conversation(QStringLiteral("o"));
        const Message m1 = st.add_message(c.id, QStringLiteral("user"), QStringLiteral("one"));
        const Message m2 = st.add_message(c.id, QStringLiteral("assistant"), QStringLiteral("two"));
        const Message o1 = st.add_message(other.id, QStringLiteral("user"), QStringLiteral("elsewhere"));
        st.add_message(c.id, QStringLiteral("user"), QStringLiteral("three"));
        st.delete_from(m2.id);
        const auto msgs = st.messages(c.id);
        QCOMPARE(msgs.size(), size_t(1));
        QCOMPARE(msgs[0].id, m1.id);
        QVERIFY(st.message(o1.id).has_value());  // later ids of other conversations stay
        // Ids are never reused, even after the newest rows were deleted.
        const int64_t max_before = st.add_message(c.id, QStringLiteral("user"), QStringLiteral("x")).id;
        st.delete_from(max_before);
        QVERIFY(st.add_message(c.id, QStringLiteral("user"), QStringLiteral("y")).id > max_before);
    }

    void streamSaverSavesByTokensAndTime() {
        QTemporaryDir dir;
        OpenedStore s = open_conversation_store(dir.path());
        ConversationStore& st = *s.store;
        const auto c = st.create_conversation(QStringLiteral("t"));
        const Message m = st.add_message(c.id, QStringLiteral("assistant"), {}, MessageState::Streaming);
        StreamSaver saver(st, m.id, 60'000, 4);
        QVERIFY(!saver.append(QStringLiteral("a"), 1));
        QVERIFY(!saver.append(QStringLiteral("b"), 1));
        QCOMPARE(st.message(m.id)->content, QString());
        QVERIFY(!saver.append(QStringLiteral("c"), 1));
        QVERIFY(saver.append(QStringLiteral("d"), 1));  // 4 tokens
        QCOMPARE(st.message(m.id)->content, QStringLiteral("abcd"));
        QCOMPARE(st.message(m.id)->state, MessageState::Streaming);

        StreamSaver timed(st, m.id, 30, 1000);
        QVERIFY(!timed.append(QStringLiteral("x"), 1));
        QElapsedTimer since;  // started after the saver's own interval clock
        since.start();
        QVERIFY(QTest::qWaitFor([&] { return since.hasExpired(30); }, 5000));
        QVERIFY(timed.append(QStringLiteral("y"), 1));  // interval elapsed
        QCOMPARE(st.message(m.id)->content, QStringLiteral("xy"));

        MessageStats stats;
        stats.n_tokens = 2;
        stats.stop_reason = ember::StopReason::Cancelled;
        stats.energy_j = 1.5;
        timed.append(QStringLiteral("z"), 1);
        timed.finish(MessageState::Complete, stats);
        const auto done = st.message(m.id);
        QCOMPARE(done->content, QStringLiteral("xyz"));
        QCOMPARE(done->state, MessageState::Complete);
        QVERIFY(done->stats.stop_reason == ember::StopReason::Cancelled);
        QCOMPARE(*done->stats.energy_j, 1.5);
        QVERIFY(done->stats.error.isEmpty());
        QVERIFY(!done->stats.needed_ctx && !done->stats.dropped_messages);

        // A failed answer keeps why, and the context it would have needed (v5 columns).
        MessageStats failed;
        failed.error = QStringLiteral("the message is 5000 tokens long");
        failed.needed_ctx = 5256;
        const Message f = st.add_message(c.id, QStringLiteral("assistant"), {}, MessageState::Streaming);
        st.finish_message(f.id, {}, MessageState::Interrupted, failed);
        MessageStats dropped;
        dropped.dropped_messages = 6;
        const Message d =
            st.add_message(c.id, QStringLiteral("assistant"), QStringLiteral("ok"), MessageState::Complete, dropped);
        const auto f2 = st.message(f.id);  // read back from the database, not from a cache
        QCOMPARE(f2->stats.error, QStringLiteral("the message is 5000 tokens long"));
        QCOMPARE(*f2->stats.needed_ctx, 5256);
        QCOMPARE(f2->state, MessageState::Interrupted);
        QCOMPARE(*st.message(d.id)->stats.dropped_messages, 6);
    }

    // Garbage where the database should be: the app still starts, the file is kept.
    void corruptFileIsKeptAndReplaced() {
        QTemporaryDir dir;
        QByteArray garbage;
        for (int i = 0; i < 2000; ++i) garbage += "this is not an sqlite database ";
        {
            QFile f(db_path(dir));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(garbage);
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(!s.notice.isEmpty());
        QVERIFY2(s.notice.contains(QStringLiteral("damaged")), qPrintable(s.notice));
        QCOMPARE(s.path, db_path(dir));
        QVERIFY(s.backup_path.startsWith(db_path(dir) + QStringLiteral(".corrupt-")));
        QFile backup(s.backup_path);
        QVERIFY(backup.open(QIODevice::ReadOnly));
        QCOMPARE(backup.readAll(), garbage);
        QCOMPARE(files_matching(dir, QStringLiteral("*.corrupt-*")).size(), 1);
        // And the fresh database works.
        const auto c = s.store->create_conversation(QStringLiteral("after"));
        QCOMPARE(s.store->conversations().front().id, c.id);
    }

    // A real database with damaged pages (valid header): caught by the start-up check, and
    // every row outside the damaged pages is copied into a fresh database.
    void damagedPagesAreDetected() {
        QTemporaryDir dir;
        {
            OpenedStore s = open_conversation_store(dir.path());
            const auto c = s.store->create_conversation(QStringLiteral("big"));
            for (int i = 0; i < 300; ++i)
                s.store->add_message(c.id, QStringLiteral("user"), QString(200, QChar('a' + i % 26)));
            s.store->db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
        }
        {
            QFile f(db_path(dir));
            QVERIFY(f.size() > 16 * 4096);
            QVERIFY(f.open(QIODevice::ReadWrite));
            f.seek(8 * 4096);  // stomp on a run of b-tree pages, headers and all
            f.write(QByteArray(6 * 4096, '\xA5'));
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY2(!s.backup_path.isEmpty(), "damage was not detected");
        QVERIFY(s.notice.contains(QStringLiteral("damaged")));
        QVERIFY(s.recovered);
        QCOMPARE(s.recovery.conversations, int64_t(1));
        QVERIFY2(s.recovery.messages > 200 && s.recovery.messages < 300, qPrintable(s.notice));
        QVERIFY(s.recovery.unreadable_ranges >= 1);
        QVERIFY(s.notice.contains(QStringLiteral("could not be read")));
        const auto convs = s.store->conversations();
        QCOMPARE(convs.size(), size_t(1));
        const auto msgs = s.store->messages(convs[0].id);
        QCOMPARE(int64_t(msgs.size()), s.recovery.messages);
        for (const Message& m : msgs)  // each one as written: message i is 200 x ('a' + i % 26)
            QCOMPARE(m.content, QString(200, QChar(char('a' + (m.id - 1) % 26))));
        QCOMPARE(s.store->db().scalar_text("PRAGMA integrity_check"), QStringLiteral("ok"));
    }

    void newerSchemaIsKeptAside() {
        QTemporaryDir dir;
        {
            Db db = Db::open(db_path(dir));
            db.exec("CREATE TABLE future (x); PRAGMA user_version = 99");
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(s.backup_path.contains(QStringLiteral(".newer-")));
        QVERIFY(s.notice.contains(QStringLiteral("newer")));
        QCOMPARE(schema_version(s.store->db()), kSchemaVersion);
        Db old = Db::open(s.backup_path);
        QCOMPARE(schema_version(old), 99);
    }

    void unwritableFolderFallsBackToMemory() {
        QTemporaryDir tmp;  // the rescue copy made at exit lands in $TMPDIR
        qputenv("TMPDIR", tmp.path().toUtf8());
        {
            OpenedStore s = open_conversation_store(QStringLiteral("/proc/ember-cannot-write-here"));
            QVERIFY(!s.notice.isEmpty());
            QVERIFY(!s.store->on_disk());
            QVERIFY(!s.store->problem().isEmpty());
            s.store->create_conversation(QStringLiteral("still works"));
            QCOMPARE(s.store->conversations().size(), size_t(1));
            QVERIFY(!s.store->try_save_to_disk());  // /proc stays unwritable
        }
        qunsetenv("TMPDIR");
        const QStringList rescued = QDir(tmp.path()).entryList({QStringLiteral("*.unsaved-*")}, QDir::Files);
        QCOMPARE(rescued.size(), 1);  // what was typed is kept: a rescue copy
        Db db = Db::open(QDir(tmp.path()).filePath(rescued[0]), Db::Mode::ReadOnly);
        QCOMPARE(db.scalar_text("SELECT title FROM conversations"), QStringLiteral("still works"));
    }

    // The real thing: a writer process streaming an answer is killed with SIGKILL. On the
    // next open every sent message is there, and the partial answer is marked interrupted
    // with at least the text the writer had reported saved.
    void survivesSigkillMidStream() {
        QTemporaryDir dir;
        QVERIFY(QFile::exists(QStringLiteral(EMBER_CRASH_WRITER)));
        QProcess p;
        p.start(QStringLiteral(EMBER_CRASH_WRITER), {dir.path()});
        QVERIFY(p.waitForStarted());
        qint64 conv = -1, saved_len = 0;
        int saves = 0;
        QElapsedTimer t;
        t.start();
        while (saves < 25 && t.elapsed() < 20'000) {
            if (!p.canReadLine() && !p.waitForReadyRead(5000)) break;
            while (p.canReadLine()) {
                const QByteArray line = p.readLine().trimmed();
                if (line.startsWith("sent ")) conv = line.mid(5).toLongLong();
                if (line.startsWith("saved ")) saved_len = line.mid(6).toLongLong(), ++saves;
            }
        }
        QVERIFY2(saves >= 25, "writer did not stream");
        p.kill();  // SIGKILL: no destructors, no checkpoint, possibly mid-transaction
        QVERIFY(p.waitForFinished());
        QCOMPARE(p.exitStatus(), QProcess::CrashExit);
        QVERIFY(QFile::exists(db_path(dir) + QStringLiteral("-wal")));  // recovery goes through the WAL

        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY2(s.notice.isEmpty(), qPrintable(s.notice));
        QCOMPARE(s.interrupted, 1);
        const auto msgs = s.store->messages(conv);
        QCOMPARE(msgs.size(), size_t(6));
        const QStringList expect = {"question 0", "answer 0", "question 1", "answer 1", "question 2"};
        for (int i = 0; i < expect.size(); ++i) {
            QCOMPARE(msgs[i].content, expect[i]);
            QCOMPARE(msgs[i].state, MessageState::Complete);
        }
        const Message& partial = msgs.back();
        QCOMPARE(partial.role, QStringLiteral("assistant"));
        QCOMPARE(partial.state, MessageState::Interrupted);
        QVERIFY2(partial.content.size() >= saved_len,
                 qPrintable(QStringLiteral("%1 < %2").arg(partial.content.size()).arg(saved_len)));
        // Exactly what the writer produced, cut at a save boundary (whole tokens).
        QString expected;
        for (int i = 0; expected.size() < partial.content.size(); ++i) expected += QStringLiteral("token%1 ").arg(i);
        QCOMPARE(partial.content, expected);
        QCOMPARE(s.store->db().scalar_text("PRAGMA integrity_check"), QStringLiteral("ok"));
    }
};

QTEST_GUILESS_MAIN(TestStorage)
#include "test_storage.moc"
