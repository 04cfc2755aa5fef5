#include "app/storage/backups.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "app/storage/conversation_store.h"

namespace ember::app {

QString backups_dir(const QString& data_dir) { return QDir(data_dir).filePath(QStringLiteral("backups")); }

QStringList list_backups(const QString& data_dir) {
    const QDir d(backups_dir(data_dir));
    QStringList out;
    // The timestamp in the name sorts as time; newest first.
    for (const QString& f :
         d.entryList({QStringLiteral("conversations-*.db")}, QDir::Files, QDir::Name | QDir::Reversed))
        out << d.filePath(f);
    return out;
}

QString backup_if_due(ConversationStore& store, const QString& data_dir, int64_t every_ms, int keep) {
    try {
        if (!store.on_disk() || store.conversation_count() == 0) return {};
        const QStringList existing = list_backups(data_dir);
        const QDateTime now = QDateTime::currentDateTime();
        if (!existing.isEmpty() && QFileInfo(existing.front()).lastModified().msecsTo(now) < every_ms) return {};
        QDir().mkpath(backups_dir(data_dir));
        const QString path =
            QDir(backups_dir(data_dir))
                .filePath(
                    QStringLiteral("conversations-%1.db").arg(now.toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"))));
        const QString tmp = path + QStringLiteral(".tmp");
        QFile::remove(tmp);
        {
            Db out = Db::open(tmp);
            copy_database(store.db(), out);
            out.exec("PRAGMA journal_mode = DELETE");  // one self-contained file
        }
        // Renamed into place only when complete: a crash never leaves half a backup.
        if (!QFile::rename(tmp, path)) {
            QFile::remove(tmp);
            return {};
        }
        const QStringList all = list_backups(data_dir);
        for (int i = keep; i < all.size(); ++i) QFile::remove(all[i]);
        return path;
    } catch (const SqliteError&) {
        return {};  // a full or read-only disk: no backup today, the database is unharmed
    }
}

}  // namespace ember::app
