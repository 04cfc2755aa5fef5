// Ember's own rolling backups of the conversation database: <data>/backups/
// conversations-<yyyyMMdd-HHmmss>.db, taken with SQLite's online backup API (a consistent
// copy while the app runs), at most one a day, the newest few kept. Empty databases are not
// backed up, so a backup always holds history. Used to restore a database found emptied
// and to fill what a damaged file could not give back.
#pragma once
#include <QString>
#include <QStringList>
#include <cstdint>

namespace ember::app {

class ConversationStore;

inline constexpr int64_t kBackupEveryMs = 24LL * 3600 * 1000;
inline constexpr int kBackupsKept = 3;

QString backups_dir(const QString& data_dir);
// Newest first.
QStringList list_backups(const QString& data_dir);
// Takes a backup of `store` when the newest is older than `every_ms` (or there is none)
// and the store holds conversations and is on disk; removes all but the newest `keep`.
// Returns the new backup's path, or empty when none was due or it failed.
QString backup_if_due(ConversationStore& store, const QString& data_dir, int64_t every_ms = kBackupEveryMs,
                      int keep = kBackupsKept);

}  // namespace ember::app
