#include "app/storage/store_open.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QStandardPaths>

#include "app/storage/schema.h"

namespace ember::app {
namespace {

// Opens and checks the file; throws SqliteError (corruption or otherwise).
std::unique_ptr<ConversationStore> open_checked(const QString& path) {
    Db db = Db::open(path);
    // quick_check reads every page (O(size), milliseconds for a typical chat history) and
    // catches damage that would otherwise surface later, in the middle of a chat.
    const QString check = db.scalar_text("PRAGMA quick_check");
    if (check != QLatin1String("ok"))
        throw SqliteError(11 /* SQLITE_CORRUPT */, "integrity check failed: " + check.toStdString());
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

}  // namespace

QString app_data_dir() {
    const QString env = qEnvironmentVariable("EMBER_DATA_DIR");
    if (!env.isEmpty()) return env;
    return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
}

OpenedStore open_conversation_store(const QString& dir) {
    OpenedStore r;
    QDir().mkpath(dir);
    r.path = QDir(dir).filePath(QStringLiteral("conversations.db"));
    try {
        r.store = open_checked(r.path);
    } catch (const std::exception& e) {
        const auto* sq = dynamic_cast<const SqliteError*>(&e);
        const bool corrupt = sq && sq->is_corruption();
        // Only a damaged file or one from a newer Ember is moved aside (and kept, never
        // deleted). Anything else (locked by another process, no permission, disk error) may
        // be transient: leave the file alone and run on an in-memory database this time.
        const bool too_new = dynamic_cast<const SchemaTooNewError*>(&e) != nullptr;
        if ((corrupt || too_new) && QFile::exists(r.path))
            r.backup_path = move_aside(r.path, corrupt ? QStringLiteral("corrupt") : QStringLiteral("newer"));
        try {
            if (!r.backup_path.isEmpty()) r.store = open_checked(r.path);
        } catch (const std::exception&) {
            r.store.reset();
        }
        if (!r.store) {
            // Cannot write the data folder at all: chat still works, nothing is kept.
            r.path = QStringLiteral(":memory:");
            r.store = std::make_unique<ConversationStore>(Db::open(r.path));
            r.notice = QStringLiteral("Could not open the conversation database (%1). Conversations will not be "
                                      "saved in this session.")
                           .arg(QString::fromStdString(e.what()));
            return r;
        }
        r.notice = (corrupt ? QStringLiteral("The conversation database was damaged (%1). It was kept as %2 and a "
                                             "new, empty one was started.")
                            : QStringLiteral("The conversation database is from a newer Ember (%1). It was kept "
                                             "as %2 and a new, empty one was started."))
                       .arg(QString::fromStdString(e.what()), r.backup_path);
    }
    r.interrupted = r.store->mark_streaming_interrupted();
    r.store->purge_deleted();  // deletions whose undo window closed with the last session
    return r;
}

}  // namespace ember::app
