// The storage fault suite (issue #16): each fault is made for real, on a real SQLite file,
// and after each one the store is still up and every message that was on disk before the
// fault reads back exactly. Faults: a read-only file and a read-only folder (read-only bind
// mounts: root ignores file permissions, so chmod would prove nothing), a full disk (a
// 2 MiB tmpfs; RLIMIT_FSIZE where mount is refused), a write lock held by another
// process, garbage over each kind of page, a 0-byte file, a dropped FTS table, and two and
// three instances (of the store, and of the ember-app binary).
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>
#include <map>
#include <sys/resource.h>

#include "app/storage/backups.h"
#include "app/storage/schema.h"
#include "app/storage/store_open.h"
#include "app/storage/stream_saver.h"

using namespace ember::app;

namespace {

using History = std::map<int64_t, QString>;  // message id -> text

QString db_path(const QString& dir) { return QDir(dir).filePath(QStringLiteral("conversations.db")); }

bool sh(const QString& prog, const QStringList& args) {
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(prog, args);
    return p.waitForFinished(10'000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// A mount made by the test and undone when it ends, whatever happens.
struct Mount {
    QString where;
    bool ok = false;
    ~Mount() {
        if (ok) sh(QStringLiteral("umount"), {QStringLiteral("-l"), where});
    }
};

// Makes `path` (file or folder) read-only even for root: bind it over itself, remount ro.
bool bind_read_only(Mount& m, const QString& path) {
    m.where = path;
    if (!sh(QStringLiteral("mount"), {QStringLiteral("--bind"), path, path})) return false;
    m.ok = true;
    return sh(QStringLiteral("mount"), {QStringLiteral("-o"), QStringLiteral("remount,ro,bind"), path});
}

bool remount_rw(const Mount& m) {
    return sh(QStringLiteral("mount"), {QStringLiteral("-o"), QStringLiteral("remount,rw,bind"), m.where});
}

// Conversations with known text, written and closed (so the WAL is checkpointed away).
History write_history(const QString& dir, int conversations, int each, int chars = 150) {
    History h;
    OpenedStore s = open_conversation_store(dir, {false, false});
    for (int c = 0; c < conversations; ++c) {
        const auto conv = s.store->create_conversation(QStringLiteral("chat %1").arg(c));
        for (int i = 0; i < each; ++i) {
            const QString text =
                QStringLiteral("conversation %1 message %2 ").arg(c).arg(i).leftJustified(chars, QChar('a' + i % 26));
            h[s.store->add_message(conv.id, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"), text).id] =
                text;
        }
    }
    // The history must really be in the file, or the faults below prove nothing.
    if (!s.store->on_disk()) qFatal("history not written to disk: %s", qPrintable(s.store->problem()));
    return h;
}

// Opens once more the way the app does at start-up: that takes the rolling backup.
QString take_backup(const QString& dir) {
    { OpenedStore s = open_conversation_store(dir); }
    const QStringList b = list_backups(dir);
    return b.isEmpty() ? QString() : b.front();
}

// Every message of `h` reads back from `store` with exactly its text.
bool all_readable(ConversationStore& store, const History& h, QString* why) {
    for (const auto& [id, text] : h) {
        const auto m = store.message(id);
        if (!m || m->content != text) {
            *why = QStringLiteral("message %1: %2").arg(id).arg(m ? m->content.left(40) : QStringLiteral("missing"));
            return false;
        }
    }
    return true;
}

#define VERIFY_ALL_READABLE(store, h)                                  \
    do {                                                               \
        QString why_;                                                  \
        QVERIFY2(all_readable((store), (h), &why_), qPrintable(why_)); \
    } while (0)

int page_size(const QString& path) {
    Db db = Db::open(path, Db::Mode::ReadOnly);
    return static_cast<int>(db.scalar_int("PRAGMA page_size"));
}

// Garbage over one whole page (1-based page number).
void stomp_page(const QString& path, int64_t page) {
    const int size = page_size(path);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek((page - 1) * size));
    QCOMPARE(f.write(QByteArray(size, '\xA5')), qint64(size));
}

int64_t page_of(const QString& path, const char* sql) {
    Db db = Db::open(path, Db::Mode::ReadOnly);
    return db.scalar_int(sql);
}

QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TestStorageFaults : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

private slots:
    void initTestCase() { qputenv("TMPDIR", tmp_.path().toUtf8()); }  // rescue copies land here

    // Read-only file in a writable folder: opened read-only, history reads, what is typed
    // is kept in memory and saved once the file is writable again.
    void readOnlyFile() {
        QTemporaryDir dir;
        const History h = write_history(dir.path(), 2, 10);
        Mount m;
        QVERIFY2(bind_read_only(m, db_path(dir.path())), "mount refused: the fault cannot be made");
        QFile probe(db_path(dir.path()));
        QVERIFY2(!probe.open(QIODevice::ReadWrite), "the file is still writable for root");

        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(!s.store->on_disk());
        QVERIFY2(s.store->problem().contains(QStringLiteral("read-only")), qPrintable(s.store->problem()));
        VERIFY_ALL_READABLE(*s.store, h);
        const auto c = s.store->create_conversation(QStringLiteral("typed while read-only"));
        const Message typed = s.store->add_message(c.id, QStringLiteral("user"), QStringLiteral("keep me"));
        QCOMPARE(s.store->message(typed.id)->content, QStringLiteral("keep me"));
        QVERIFY(!s.store->try_save_to_disk());  // still read-only

        QVERIFY(remount_rw(m));
        QVERIFY(s.store->try_save_to_disk());
        QVERIFY(s.store->on_disk());
        QVERIFY(s.store->problem().isEmpty());
        s.store.reset();
        OpenedStore again = open_conversation_store(dir.path());
        QVERIFY2(again.notice.isEmpty(), qPrintable(again.notice));
        VERIFY_ALL_READABLE(*again.store, h);
        QCOMPARE(again.store->message(typed.id)->content, QStringLiteral("keep me"));
        QCOMPARE(again.store->db().scalar_text("PRAGMA integrity_check"), QStringLiteral("ok"));
    }

    // Read-only folder (no -wal/-shm can be made): opened immutable, works in memory.
    void readOnlyFolder() {
        QTemporaryDir dir;
        const History h = write_history(dir.path(), 2, 10);
        Mount m;
        QVERIFY2(bind_read_only(m, dir.path()), "mount refused: the fault cannot be made");
        QVERIFY2(!QFile(dir.filePath(QStringLiteral("x"))).open(QIODevice::WriteOnly),
                 "the folder is writable for root");

        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(!s.store->on_disk());
        VERIFY_ALL_READABLE(*s.store, h);
        QVERIFY(s.store->search(QStringLiteral("conversation")).size() > 0);
        const auto c = s.store->create_conversation(QStringLiteral("typed while read-only"));
        const Message typed = s.store->add_message(c.id, QStringLiteral("user"), QStringLiteral("keep me too"));

        QVERIFY(remount_rw(m));
        QVERIFY(s.store->try_save_to_disk());
        s.store.reset();
        OpenedStore again = open_conversation_store(dir.path());
        VERIFY_ALL_READABLE(*again.store, h);
        QCOMPARE(again.store->message(typed.id)->content, QStringLiteral("keep me too"));
    }

    // The disk fills up while an answer streams: the answer goes on in memory, the user is
    // told, and everything is written once there is room.
    void fullDiskWhileStreaming() {
        QTemporaryDir base;
        const QString mnt = base.filePath(QStringLiteral("small"));
        QDir().mkpath(mnt);
        Mount m;
        m.where = mnt;
        m.ok = sh(QStringLiteral("mount"), {QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"),
                                            QStringLiteral("size=2m"), QStringLiteral("tmpfs"), mnt});
        const bool tmpfs = m.ok;
        qInfo("full disk made with %s", tmpfs ? "a 2 MiB tmpfs" : "RLIMIT_FSIZE (mount refused)");
        const History h = write_history(mnt, 2, 10);

        OpenedStore s = open_conversation_store(mnt, {false, false});
        QVERIFY(s.store->on_disk());
        const QString filler = QDir(mnt).filePath(QStringLiteral("filler"));
        rlimit old_limit{};
        if (tmpfs) {
            QFile f(filler);
            QVERIFY(f.open(QIODevice::WriteOnly));
            const QByteArray chunk(4096, 'x');
            while (f.write(chunk) == chunk.size() && f.flush()) {}
        } else {
            std::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
            QVERIFY(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
            rlimit small = old_limit;
            small.rlim_cur = static_cast<rlim_t>(QFileInfo(db_path(mnt)).size() + 8192);
            QVERIFY(setrlimit(RLIMIT_FSIZE, &small) == 0);
        }
        const auto conv = s.store->conversations().front();
        const Message answer = s.store->add_message(conv.id, QStringLiteral("assistant"), {}, MessageState::Streaming);
        StreamSaver saver(*s.store, answer.id, 0, 1);  // save on every token
        QString expected;
        for (int i = 0; i < 4000 && s.store->on_disk(); ++i) {
            const QString piece = QStringLiteral("token%1 ").arg(i).leftJustified(64, '.');
            expected += piece;
            saver.append(piece, 1);
        }
        for (int i = 0; i < 50; ++i) {  // and it goes on streaming in memory
            const QString piece = QStringLiteral("more%1 ").arg(i);
            expected += piece;
            saver.append(piece, 1);
        }
        QVERIFY2(!s.store->on_disk(), "the disk never filled up");
        QVERIFY2(s.store->problem().contains(tmpfs ? QStringLiteral("full") : QStringLiteral("cannot be written")),
                 qPrintable(s.store->problem()));
        VERIFY_ALL_READABLE(*s.store, h);
        QCOMPARE(s.store->message(answer.id)->content, expected);
        QVERIFY(!s.store->try_save_to_disk());  // still full

        if (tmpfs) QVERIFY(QFile::remove(filler));
        else QVERIFY(setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
        QVERIFY2(s.store->try_save_to_disk(), qPrintable(s.store->problem()));
        saver.finish(MessageState::Complete, {});
        s.store.reset();
        OpenedStore again = open_conversation_store(mnt, {false, false});
        VERIFY_ALL_READABLE(*again.store, h);
        QCOMPARE(again.store->message(answer.id)->content, expected);
        QCOMPARE(again.store->message(answer.id)->state, MessageState::Complete);
        QCOMPARE(again.store->db().scalar_text("PRAGMA integrity_check"), QStringLiteral("ok"));
    }

    // Another process holds the write lock past the 5 s busy timeout (at start-up too).
    void lockHeldByAnotherProcess() {
        QTemporaryDir dir;
        const History h = write_history(dir.path(), 2, 10);
        { OpenedStore warm = open_conversation_store(dir.path(), {false, false}); }  // leave it in WAL mode
        QProcess locker;
        locker.start(QStringLiteral(EMBER_FAULT_HELPER),
                     {QStringLiteral("lock"), db_path(dir.path()), QStringLiteral("9000")});
        QVERIFY(locker.waitForReadyRead(10'000));
        QCOMPARE(locker.readLine().trimmed(), QByteArray("locked"));

        QElapsedTimer t;
        t.start();
        OpenedStore s = open_conversation_store(dir.path(), {false, false});  // readers are not blocked
        VERIFY_ALL_READABLE(*s.store, h);
        const auto conv = s.store->conversations().front();
        const Message typed = s.store->add_message(conv.id, QStringLiteral("user"), QStringLiteral("while locked"));
        QVERIFY(t.elapsed() >= 4000);  // a write (start-up upkeep or this one) waited the busy timeout
        QVERIFY(!s.store->on_disk());
        QVERIFY2(s.store->problem().contains(QStringLiteral("locked")), qPrintable(s.store->problem()));
        QVERIFY(!s.store->try_save_to_disk());  // still held

        QVERIFY(locker.waitForFinished(15'000));
        QCOMPARE(locker.exitCode(), 0);
        QVERIFY2(s.store->try_save_to_disk(), qPrintable(s.store->problem()));
        s.store.reset();
        OpenedStore again = open_conversation_store(dir.path(), {false, false});
        VERIFY_ALL_READABLE(*again.store, h);
        QCOMPARE(again.store->message(typed.id)->content, QStringLiteral("while locked"));
    }

    // Garbage over one page of each kind. The file is set aside byte for byte, every
    // readable row is copied into a fresh database, and rows on the damaged page come back
    // from the rolling backup: every message is readable afterwards, and search works.
    void pageDamage_data() {
        QTest::addColumn<QString>("sql");        // finds the page to damage
        QTest::addColumn<bool>("needs_backup");  // rows live on that page
        QTest::newRow("index") << "SELECT rootpage FROM sqlite_master WHERE name = 'messages_by_conversation'" << false;
        QTest::newRow("fts") << "SELECT rootpage FROM sqlite_master WHERE name = 'messages_fts_data'" << false;
        QTest::newRow("messages leaf") << "SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' "
                                          "ORDER BY pageno LIMIT 1 OFFSET 2"
                                       << true;
        QTest::newRow("messages root") << "SELECT rootpage FROM sqlite_master WHERE name = 'messages'" << true;
        QTest::newRow("conversations") << "SELECT rootpage FROM sqlite_master WHERE name = 'conversations'" << true;
        QTest::newRow("schema page 1") << "SELECT 1" << true;
    }

    void pageDamage() {
        QFETCH(QString, sql);
        QFETCH(bool, needs_backup);
        QTemporaryDir dir;
        const History h = write_history(dir.path(), 3, 40, 300);
        QVERIFY(!take_backup(dir.path()).isEmpty());
        const int64_t page = page_of(db_path(dir.path()), sql.toUtf8().constData());
        QVERIFY2(page > 0, "no such page");
        stomp_page(db_path(dir.path()), page);
        const QByteArray damaged = read_all(db_path(dir.path()));

        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY2(s.recovered, qPrintable(s.notice));
        QVERIFY(s.notice.contains(QStringLiteral("damaged")));
        QCOMPARE(read_all(s.backup_path), damaged);  // the original, kept as it was
        VERIFY_ALL_READABLE(*s.store, h);
        if (needs_backup) {
            QVERIFY2(!s.restored_from.isEmpty(), qPrintable(s.notice));
            QVERIFY(s.notice.contains(QStringLiteral("backup")));
        } else {
            QVERIFY2(s.notice.contains(QStringLiteral("Nothing was lost")), qPrintable(s.notice));
        }
        QCOMPARE(s.store->conversations().size(), size_t(3));
        QCOMPARE(s.store->search(QStringLiteral("message")).size(), size_t(50));  // the search limit
        QCOMPARE(s.store->db().scalar_text("PRAGMA integrity_check"), QStringLiteral("ok"));
        // And it goes on: ids keep counting up past everything recovered.
        const int64_t next =
            s.store->add_message(s.store->conversations().front().id, QStringLiteral("user"), QStringLiteral("after"))
                .id;
        QVERIFY(next > h.rbegin()->first);
    }

    // Index damage with messages newer than the last backup: nothing of them is lost.
    void indexDamageLosesNothingNewerThanTheBackup() {
        QTemporaryDir dir;
        History h = write_history(dir.path(), 1, 20);
        QVERIFY(!take_backup(dir.path()).isEmpty());
        {
            OpenedStore s = open_conversation_store(dir.path());
            const auto conv = s.store->conversations().front();
            for (int i = 0; i < 30; ++i)
                h[s.store->add_message(conv.id, QStringLiteral("user"), QStringLiteral("newer %1").arg(i)).id] =
                    QStringLiteral("newer %1").arg(i);
        }
        stomp_page(
            db_path(dir.path()),
            page_of(db_path(dir.path()), "SELECT rootpage FROM sqlite_master WHERE name = 'messages_by_conversation'"));
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(s.recovered);
        VERIFY_ALL_READABLE(*s.store, h);
        QCOMPARE(s.recovery.unreadable_ranges, int64_t(0));
    }

    // A file cut to 0 bytes is an empty database to SQLite; the settings marker says there
    // was history, so the newest backup comes back and the 0-byte file is kept.
    void zeroByteFile() {
        QTemporaryDir dir;
        const History h = write_history(dir.path(), 2, 10);
        QVERIFY(!take_backup(dir.path()).isEmpty());
        QVERIFY(QFile::resize(db_path(dir.path()), 0));
        OpenedStore s = open_conversation_store(dir.path(), {true, true});
        QVERIFY2(s.notice.contains(QStringLiteral("restored from the backup")), qPrintable(s.notice));
        QVERIFY(s.backup_path.contains(QStringLiteral(".empty-")));
        QCOMPARE(QFileInfo(s.backup_path).size(), qint64(0));
        VERIFY_ALL_READABLE(*s.store, h);
        QCOMPARE(s.store->search(QStringLiteral("conversation")).size(), size_t(20));

        // Without a backup the user is still told.
        QTemporaryDir bare;
        {
            QFile f(db_path(bare.path()));
            QVERIFY(f.open(QIODevice::WriteOnly));
        }
        OpenedStore b = open_conversation_store(bare.path(), {true, true});
        QVERIFY2(b.notice.contains(QStringLiteral("no backup")), qPrintable(b.notice));
    }

    // A dropped FTS table (its triggers left behind) aborted every start: now it is rebuilt.
    void missingFtsTable() {
        QTemporaryDir dir;
        const History h = write_history(dir.path(), 2, 10);
        {
            Db db = Db::open(db_path(dir.path()));
            db.exec("DROP TABLE messages_fts");
        }
        OpenedStore s = open_conversation_store(dir.path());
        QVERIFY(s.search_rebuilt);
        QVERIFY(s.notice.contains(QStringLiteral("search index")));
        VERIFY_ALL_READABLE(*s.store, h);
        QCOMPARE(s.store->search(QStringLiteral("conversation")).size(), size_t(20));
        const auto conv = s.store->conversations().front();
        s.store->add_message(conv.id, QStringLiteral("user"), QStringLiteral("zebra"));
        QCOMPARE(s.store->search(QStringLiteral("zebra")).size(), size_t(1));
        s.store->soft_delete(conv.id);
        QCOMPARE(s.store->purge_deleted(), 1);
    }

    // Two writers streaming answers and a third store opening mid-answer: the live answers
    // stay live; only the one whose writer was killed is marked interrupted.
    void threeStoresMidAnswer() {
        QTemporaryDir dir;
        auto start_writer = [&](QProcess& p) {
            p.start(QStringLiteral(EMBER_CRASH_WRITER), {dir.path()});
            QVERIFY(p.waitForStarted());
            int saves = 0;
            QElapsedTimer t;
            t.start();
            while (saves < 3 && t.elapsed() < 20'000) {
                if (!p.canReadLine() && !p.waitForReadyRead(5000)) break;
                while (p.canReadLine())
                    if (p.readLine().startsWith("saved ")) ++saves;
            }
            QVERIFY2(saves >= 3, "writer did not stream");
        };
        QProcess a, b;
        start_writer(a);
        start_writer(b);
        {
            OpenedStore third = open_conversation_store(dir.path(), {false, false});
            QCOMPARE(third.interrupted, 0);
            QCOMPARE(third.store->db().scalar_int("SELECT count(*) FROM messages WHERE state = 'streaming'"), 2);
        }
        a.kill();
        QVERIFY(a.waitForFinished());
        OpenedStore after = open_conversation_store(dir.path(), {false, false});
        QCOMPARE(after.interrupted, 1);
        QCOMPARE(after.store->db().scalar_int("SELECT count(*) FROM messages WHERE state = 'streaming'"), 1);
        QCOMPARE(after.store->db().scalar_int("SELECT count(*) FROM messages WHERE state = 'interrupted'"), 1);
        b.kill();
        QVERIFY(b.waitForFinished());
        after.store.reset();
        OpenedStore last = open_conversation_store(dir.path(), {false, false});
        QCOMPARE(last.interrupted, 1);
        QCOMPARE(last.store->db().scalar_int("SELECT count(*) FROM messages WHERE state = 'streaming'"), 0);
        QCOMPARE(last.store->db().scalar_text("PRAGMA integrity_check"), QStringLiteral("ok"));
    }

    // ember-app launched three times on one data folder: the second and third hand their
    // command line to the first and exit; once the first is gone a new launch takes over.
    void oneAppPerDataFolder() {
        QVERIFY(QFile::exists(QStringLiteral(EMBER_APP_BINARY)));
        QTemporaryDir dir;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("EMBER_DATA_DIR"), dir.path());
        env.insert(QStringLiteral("XDG_STATE_HOME"), dir.filePath(QStringLiteral("state")));
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        auto launch = [&](QProcess& p, const QStringList& args) {
            p.setProcessEnvironment(env);
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(QStringLiteral(EMBER_APP_BINARY), args);
            QVERIFY(p.waitForStarted());
        };
        QProcess first;
        launch(first, {QStringLiteral("--quit-after"), QStringLiteral("120000")});
        QByteArray first_out;
        QElapsedTimer t;
        t.start();
        while (!first_out.contains("starting") && t.elapsed() < 30'000 && first.state() == QProcess::Running) {
            first.waitForReadyRead(500);
            first_out += first.readAll();
        }
        QVERIFY2(first_out.contains("starting"), first_out.constData());
        for (const char* model : {"/nonexistent/second.gguf", "/nonexistent/third.gguf"}) {
            QProcess later;
            launch(later, {QStringLiteral("--model"), QLatin1String(model)});
            QVERIFY(later.waitForFinished(30'000));
            const QByteArray out = later.readAll();
            QCOMPARE(later.exitCode(), 0);
            QVERIFY2(out.contains("already running"), out.constData());
        }
        t.restart();
        while (!first_out.contains("third.gguf") && t.elapsed() < 20'000) {
            first.waitForReadyRead(500);
            first_out += first.readAll();
        }
        QVERIFY2(first_out.contains("--model /nonexistent/second.gguf"), first_out.constData());
        QVERIFY2(first_out.contains("--model /nonexistent/third.gguf"), first_out.constData());
        QCOMPARE(first.state(), QProcess::Running);  // the first stayed up

        first.kill();  // dies without unlocking: the lock is stale now
        QVERIFY(first.waitForFinished());
        QProcess next;
        launch(next, {QStringLiteral("--quit-after"), QStringLiteral("1500")});
        QVERIFY(next.waitForFinished(60'000));
        const QByteArray out = next.readAll();
        QCOMPARE(next.exitCode(), 0);
        QVERIFY2(!out.contains("already running"), out.constData());
    }
};

QTEST_GUILESS_MAIN(TestStorageFaults)
#include "test_storage_faults.moc"
