// Opening the conversation database at start-up, the way a desktop app must: whatever the
// file looks like, the app starts, and keeps every row it can.
//  - damaged (quick_check fails, or SQLite says corrupt): the file is kept as
//    <name>.corrupt-<timestamp> (with its -wal/-shm), every readable row is copied into a
//    fresh database (recovery.h), ids it could not read are taken from the newest backup;
//  - emptied (0 bytes or gone, though the settings say there was history): kept as
//    <name>.empty-<timestamp> and the newest backup is restored;
//  - from a newer Ember: kept as <name>.newer-<timestamp>, a fresh database starts;
//  - read-only (file, folder or medium): opened read-only (immutable as a last resort) and
//    worked on in memory; locked or full: opened, and writes go to memory when refused
//    (see ConversationStore);
//  - the search index missing or damaged: rebuilt from the messages.
// The caller shows `notice` (what happened at start-up) and store->problem() (what is wrong
// now, e.g. read-only; it changes while the app runs). Answers whose writer is gone are marked interrupted, and a
// rolling backup is taken when one is due (backups.h).
#pragma once
#include <QString>
#include <memory>

#include "app/storage/conversation_store.h"
#include "app/storage/recovery.h"

namespace ember::app {

struct StoreOptions {
    bool had_history = false;  // the app has seen conversations here before (settings marker)
    bool backups = true;       // take a rolling backup when due
};

struct OpenedStore {
    std::unique_ptr<ConversationStore> store;  // never null
    QString path;                              // the database file in use (":memory:" as a last resort)
    QString backup_path;                       // where a damaged, emptied or newer file was moved, or empty
    QString restored_from;                     // the backup restored or consulted, or empty
    QString notice;                            // sentences for the UI when something was wrong, or empty
    int interrupted = 0;                       // answers found mid-stream with their writer gone
    bool recovered = false;                    // rows were salvaged from a damaged file
    RecoveryReport recovery;                   // what that salvage got
    bool search_rebuilt = false;               // the full-text index had to be rebuilt
};

// `dir` is created if missing; the database is `dir`/conversations.db.
OpenedStore open_conversation_store(const QString& dir, const StoreOptions& options = {});

// The app's data folder: $EMBER_DATA_DIR if set (tests), else the XDG data location
// (~/.local/share/ember).
QString app_data_dir();

}  // namespace ember::app
