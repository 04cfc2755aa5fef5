#include "app/storage/store_open.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <sqlite3.h>

#include "app/storage/backups.h"
#include "app/storage/schema.h"

namespace ember::app {
namespace {

// Opens the file for writing if it can, else read-only, else immutable (read-only media,
// where not even the -shm file can be made). Throws SqliteError when none works.
Db open_best(const QString& path) {
    try {
        Db db = Db::open(path);
        db.scalar_int("SELECT count(*) FROM sqlite_master");  // SQLite opens lazily: read now
        return db;
    } catch (const SqliteError& e) {
        if (e.is_corruption() || !QFileInfo::exists(path)) throw;
    }
    for (const Db::Mode mode : {Db::Mode::ReadOnly, Db::Mode::Immutable}) {
        try {
            Db db = Db::open(path, mode);
            db.scalar_int("SELECT count(*) FROM sqlite_master");
            return db;
        } catch (const SqliteError& e) {
            if (e.is_corruption() || mode == Db::Mode::Immutable) throw;
        }
    }
    throw SqliteError(SQLITE_CANTOPEN, "cannot open " + path.toStdString());
}

// Throws SqliteError (corruption or otherwise) or SchemaTooNewError.
std::unique_ptr<ConversationStore> open_checked(const QString& path) {
    Db db = open_best(path);
    // quick_check reads every page (O(size), milliseconds for a typical chat history) and
    // catches damage that would otherwise surface later, in the middle of a chat.
    const QString check = db.scalar_text("PRAGMA quick_check");
    if (check != QLatin1String("ok"))
        throw SqliteError(SQLITE_CORRUPT, "integrity check failed: " + check.toStdString());
    return std::make_unique<ConversationStore>(std::move(db));
}

// Moves the database and its WAL/SHM side files out of the way; returns the new name.
QString move_aside(const QString& path, const QString& why) {
    const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
    const QString backup = path + '.' + why + '-' + stamp;
    if (!QFile::rename(path, backup)) return {};
    for (const char* side : {"-wal", "-shm"}) {
        const QString from = path + QLatin1String(side);
        if (QFile::exists(from)) QFile::rename(from, backup + QLatin1String(side));
    }
    return backup;
}

// A fresh database at `path`, built under a temporary name and renamed into place when
// complete, so a crash half-way leaves the kept original and no half-made file.
template <class Fill>
std::unique_ptr<ConversationStore> build_fresh(const QString& path, Fill&& fill) {
    const QString tmp = path + QStringLiteral(".new");
    for (const char* side : {"", "-wal", "-shm", "-journal"}) QFile::remove(tmp + QLatin1String(side));
    {
        Db db = Db::open(tmp);
        db.exec("PRAGMA journal_mode = DELETE");  // one file to rename
        fill(db);
    }
    if (!QFile::rename(tmp, path)) throw SqliteError(SQLITE_CANTOPEN, "cannot rename " + tmp.toStdString());
    return open_checked(path);
}

// Every readable row of the damaged file at `kept` (and the ids it lost, from the newest
// backup) into a fresh database at `path`.
std::unique_ptr<ConversationStore> recover(const QString& path, const QString& kept, const QString& backup,
                                           RecoveryReport& rep) {
    // SQLite may write to what it reads (WAL recovery, a checkpoint at close): read a copy.
    QTemporaryDir work;
    QString copy = work.filePath(QStringLiteral("damaged.db"));
    if (!work.isValid() || !QFile::copy(kept, copy)) copy = kept;
    else if (QFile::exists(kept + QStringLiteral("-wal")))
        QFile::copy(kept + QStringLiteral("-wal"), copy + QStringLiteral("-wal"));
    return build_fresh(path, [&](Db& db) {
        migrate(db);
        rep = recover_rows(db, copy, backup);
    });
}

std::unique_ptr<ConversationStore> restore_backup(const QString& path, const QString& backup) {
    return build_fresh(path, [&](Db& db) {
        Db from = Db::open(backup, Db::Mode::ReadOnly);
        copy_database(from, db);
    });
}

QString first_or_empty(const QStringList& l) { return l.isEmpty() ? QString() : l.front(); }

void add_notice(OpenedStore& r, const QString& sentence) {
    if (!r.notice.isEmpty()) r.notice += ' ';
    r.notice += sentence;
}

// The file could not be used at all: chat still works, in memory, saved there if it can
// be created later (a read-only folder made writable).
void open_in_memory(OpenedStore& r, const std::exception& e) {
    const auto* sq = dynamic_cast<const SqliteError*>(&e);
    const SqliteError why = sq ? *sq : SqliteError(SQLITE_CANTOPEN, e.what());
    const bool can_retry = !QFileInfo::exists(r.path);  // never overwrite a file we couldn't read
    r.store = std::make_unique<ConversationStore>(can_retry ? r.path : QStringLiteral(":memory:"), why);
    if (!can_retry) r.path = QStringLiteral(":memory:");
    add_notice(
        r, QStringLiteral("Could not open the conversation database (%1). Conversations are kept in memory%2.")
               .arg(QString::fromUtf8(e.what()), can_retry ? QStringLiteral(" and saved when the folder can be written")
                                                           : QStringLiteral(" only, for this session")));
}

}  // namespace

QString app_data_dir() {
    const QString env = qEnvironmentVariable("EMBER_DATA_DIR");
    if (!env.isEmpty()) return env;
    return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
}

OpenedStore open_conversation_store(const QString& dir, const StoreOptions& options) {
    OpenedStore r;
    QDir().mkpath(dir);
    r.path = QDir(dir).filePath(QStringLiteral("conversations.db"));
    const QString newest_backup = first_or_empty(list_backups(dir));
    try {
        const QFileInfo file(r.path);
        if (options.had_history && (!file.exists() || file.size() == 0)) {
            // SQLite takes an empty file for an empty database; the settings know better.
            if (file.exists()) r.backup_path = move_aside(r.path, QStringLiteral("empty"));
            if (!newest_backup.isEmpty()) {
                r.store = restore_backup(r.path, newest_backup);
                r.restored_from = newest_backup;
                add_notice(r, QStringLiteral("The conversation database was found empty although it held "
                                             "conversations; they were restored from the backup %1.")
                                  .arg(QFileInfo(newest_backup).fileName()));
            } else {
                add_notice(r, QStringLiteral("The conversation database was found empty although it held "
                                             "conversations, and there is no backup to restore."));
            }
        }
        if (!r.store) r.store = open_checked(r.path);
    } catch (const SchemaTooNewError& e) {
        r.backup_path = move_aside(r.path, QStringLiteral("newer"));
        try {
            if (r.backup_path.isEmpty()) throw;
            r.store = open_checked(r.path);
            add_notice(r, QStringLiteral("The conversation database is from a newer Ember (%1). It was kept as %2 "
                                         "and a new, empty one was started.")
                              .arg(QString::fromUtf8(e.what()), r.backup_path));
        } catch (const std::exception& e2) {
            open_in_memory(r, e2);
        }
    } catch (const SqliteError& e) {
        if (!e.is_corruption()) {
            open_in_memory(r, e);
        } else {
            r.backup_path = move_aside(r.path, QStringLiteral("corrupt"));
            try {
                if (r.backup_path.isEmpty()) throw SqliteError(SQLITE_CANTOPEN, "cannot move the damaged file aside");
                r.store = recover(r.path, r.backup_path, newest_backup, r.recovery);
                r.recovered = true;
                if (!r.recovery.backup_used.isEmpty()) r.restored_from = r.recovery.backup_used;
                add_notice(r, QStringLiteral("The conversation database was damaged (%1). %2 The damaged file was "
                                             "kept as %3.")
                                  .arg(QString::fromUtf8(e.what()), r.recovery.summary(), r.backup_path));
            } catch (const std::exception& e2) {
                open_in_memory(r, e2);
            }
        }
    }
    // Start-up upkeep. Each step writes only when it has something to do, and a refusal
    // (read-only, locked) moves the store to memory instead of failing the start.
    try {
        r.search_rebuilt = r.store->ensure_search_index();
        if (r.search_rebuilt && !r.recovered)
            add_notice(r, QStringLiteral("The search index was missing or damaged and was rebuilt from the messages."));
        r.interrupted = r.store->mark_streaming_interrupted();
        r.store->purge_deleted();  // deletions whose undo window closed with the last session
        if (options.backups) backup_if_due(*r.store, dir);
    } catch (const std::exception& e) {
        add_notice(r, QStringLiteral("Start-up upkeep of the conversation database failed (%1).")
                          .arg(QString::fromUtf8(e.what())));
    }
    return r;
}

}  // namespace ember::app
