// Salvage from a damaged conversation database, the way SQLite's .recover does it: every
// row that can still be read is copied into a fresh database. Rows are read by id range
// straight from each table's b-tree (indexes are never needed, so a damaged index loses
// nothing); a range that fails to read is halved until the unreadable ids are pinned down,
// and those ids alone are then taken from a backup when one is given.
#pragma once
#include <QString>
#include <cstdint>

namespace ember::app {

class Db;

struct RecoveryReport {
    int64_t conversations = 0;  // rows copied from the damaged file
    int64_t messages = 0;
    int64_t from_backup_conversations = 0;  // rows of unreadable ids found in the backup
    int64_t from_backup_messages = 0;
    int64_t unreadable_ranges = 0;   // stretches of ids that could not be read from the file
    bool schema_unreadable = false;  // the file's table list itself is gone
    QString backup_used;             // the backup consulted, or empty

    QString summary() const;  // a sentence for the user
};

// Copies into `fresh` (migrated to the current schema, empty) what can be read from the
// database file `damaged` (opened read-only; pass a copy: SQLite may still touch a WAL
// file), then the ids it could not read from `backup` (a file path, may be empty).
RecoveryReport recover_rows(Db& fresh, const QString& damaged, const QString& backup);

}  // namespace ember::app
