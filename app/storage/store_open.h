// Opening the conversation database at start-up, the way a desktop app must: whatever the
// file looks like, the app starts. A damaged file is kept (renamed to
// <name>.corrupt-<timestamp>, with its -wal/-shm) and a fresh database takes its place; the
// caller shows `notice` to the user. Answers a previous run left half-written are marked
// interrupted.
#pragma once
#include <QString>
#include <memory>

#include "app/storage/conversation_store.h"

namespace ember::app {

struct OpenedStore {
    std::unique_ptr<ConversationStore> store;  // never null
    QString path;          // the database file in use (":memory:" as a last resort)
    QString backup_path;   // where a damaged file was moved, or empty
    QString notice;        // a sentence for the UI when something was wrong, or empty
    int interrupted = 0;   // answers found mid-stream and marked interrupted
};

// `dir` is created if missing; the database is `dir`/conversations.db.
OpenedStore open_conversation_store(const QString& dir);

// The app's data folder: $EMBER_DATA_DIR if set (tests), else the XDG data location
// (~/.local/share/ember).
QString app_data_dir();

}  // namespace ember::app
