#include "app/storage/schema.h"

#include <stdexcept>
#include <string>

#include "app/storage/sqlite.h"

namespace ember::app {
namespace {

constexpr int SQLITE_CORRUPT_CODE = 11;  // SQLITE_CORRUPT (SQLITE_CORRUPT_VTAB's primary code)

// Timestamps are milliseconds since the Unix epoch (UTC). AUTOINCREMENT: an id is never
// handed out twice, so a late write for a deleted message (an answer still streaming when
// its conversation was deleted) can never land on a newer message.
constexpr const char* kV1 = R"sql(
CREATE TABLE conversations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    title         TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    system_prompt TEXT    NOT NULL DEFAULT '',
    model         TEXT    NOT NULL DEFAULT ''
);
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role            TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content         TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'complete'
                    CHECK (state IN ('complete', 'streaming', 'interrupted'))
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
)sql";

// FTS5 as an external-content table: the text lives once, in messages; triggers keep the
// index in step with every insert, update and delete (including ON DELETE CASCADE).
constexpr const char* kV2 = R"sql(
ALTER TABLE conversations ADD COLUMN sampling_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN deleted_at INTEGER;
ALTER TABLE messages ADD COLUMN ttft_ms REAL;
ALTER TABLE messages ADD COLUMN tok_s REAL;
ALTER TABLE messages ADD COLUMN n_tokens INTEGER;
ALTER TABLE messages ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
CREATE INDEX conversations_by_update ON conversations(deleted_at, updated_at);
)sql";

// The search index and the triggers that keep it in step; run again to rebuild a missing one.
constexpr const char* kFts = R"sql(
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
)sql";

// Who is writing a streaming answer (see ConversationStore::mark_streaming_interrupted):
// only answers whose writer is gone are marked interrupted.
constexpr const char* kV3 = R"sql(
ALTER TABLE messages ADD COLUMN writer TEXT NOT NULL DEFAULT '';
)sql";

// Per-answer costs: the prompt it read (and how much of it the KV cache already held), and
// the energy measured while it was made (NULL where no meter was readable).
constexpr const char* kV4 = R"sql(
ALTER TABLE messages ADD COLUMN prompt_tokens INTEGER;
ALTER TABLE messages ADD COLUMN reused_tokens INTEGER;
ALTER TABLE messages ADD COLUMN energy_j REAL;
)sql";

// What the transcript shows beside an answer: why it failed (empty: it did not), the context
// it would have needed when the message alone did not fit, and how many of the oldest
// messages were left out of its prompt to fit the context.
constexpr const char* kV5 = R"sql(
ALTER TABLE messages ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN needed_ctx INTEGER;
ALTER TABLE messages ADD COLUMN dropped_messages INTEGER;
)sql";

// A reasoning model's thinking, kept apart from the answer (the answer's `content` never holds
// it, so search, copy and later prompts see the answer alone; the template decides whether
// the model reads the thinking again), and the time it thought (NULL: it did not, or a row
// from before v6). Not in the search index: thoughts are drafts, not what was said.
constexpr const char* kV6 = R"sql(
ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN thinking_ms REAL;
)sql";

// kSteps[v] upgrades v -> v + 1 (each step is one or two scripts).
constexpr const char* kSteps[][2] = {{kV1, ""}, {kV2, kFts}, {kV3, ""}, {kV4, ""}, {kV5, ""}, {kV6, ""}};
static_assert(std::size(kSteps) == kSchemaVersion);

constexpr const char* kDropFts = R"sql(
DROP TRIGGER IF EXISTS messages_fts_insert;
DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_fts_update;
DROP TABLE IF EXISTS messages_fts;
)sql";

}  // namespace

int schema_version(Db& db) { return static_cast<int>(db.scalar_int("PRAGMA user_version")); }

void migrate(Db& db, int target) {
    int v = schema_version(db);
    if (v > kSchemaVersion)
        throw SchemaTooNewError("the conversation database has schema version " + std::to_string(v) +
                                ", newer than this Ember understands (" + std::to_string(kSchemaVersion) + ")");
    for (; v < target; ++v) {
        Transaction tx(db);
        for (const char* sql : kSteps[v]) db.exec(sql);
        // PRAGMA takes no bound parameters; the number is ours, not user input.
        db.exec(("PRAGMA user_version = " + std::to_string(v + 1)).c_str());
        tx.commit();
    }
}

bool search_index_ok(Db& db) {
    if (db.scalar_int("SELECT count(*) FROM sqlite_master WHERE name = 'messages_fts'") == 0) return false;
    if (db.scalar_int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'messages_fts_%'") != 3)
        return false;
    try {
        // Compares the index with the messages it was built from (an INSERT in name only:
        // it changes nothing, but needs a writable connection).
        db.exec("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')");
    } catch (const SqliteError& e) {
        if (e.code() == SQLITE_CORRUPT_CODE) return false;
        throw;
    }
    return true;
}

void rebuild_search_index(Db& db) {
    Transaction tx(db);
    db.exec(kDropFts);
    db.exec(kFts);
    tx.commit();
}

}  // namespace ember::app
