// The conversation database's schema, versioned with PRAGMA user_version. Migrations only
// go forward, one version at a time, each in its own transaction together with the
// user_version bump, so a crash mid-migration leaves the previous version intact.
//
//   v1: conversations + messages (the first shipped shape).
//   v2: per-conversation sampling settings, per-message generation stats, soft delete
//       (undo), and FTS5 full-text search over message content.
//   v3: the writer (process + store instance) of each streaming answer.
//   v4: per-answer prompt, reused tokens and energy.
//   v5: a failed answer's error and needed context; messages left out of its prompt.
//   v6: an answer's thinking (reasoning models), apart from its text, and how long it took.
#pragma once
#include <stdexcept>

namespace ember::app {

class Db;

// The file was written by a newer Ember: not damaged, but this build must not touch it.
class SchemaTooNewError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

inline constexpr int kSchemaVersion = 6;

int schema_version(Db& db);
// Upgrades `db` to `target` (default: the newest). Throws SqliteError on failure and
// SchemaTooNewError when the file is newer than this build understands.
void migrate(Db& db, int target = kSchemaVersion);

// The full-text index is derived data: when it is missing (a dropped table), incomplete or
// damaged it is rebuilt from the messages. search_index_ok() needs a writable connection
// (FTS5's integrity-check is an INSERT) and throws SqliteError on anything but damage.
bool search_index_ok(Db& db);
void rebuild_search_index(Db& db);

}  // namespace ember::app
