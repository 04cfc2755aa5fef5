// Conversations and their messages in SQLite (schema in schema.h). One store per open
// database connection; used from one thread (the GUI thread: every call is a short indexed
// query, a millisecond or less in WAL mode, so it never stalls the UI noticeably).
#pragma once
#include <QString>
#include <optional>
#include <vector>

#include "app/storage/records.h"
#include "app/storage/sqlite.h"

namespace ember::app {

class ConversationStore {
public:
    // Takes an open connection, configures it (WAL, foreign keys) and migrates the schema.
    explicit ConversationStore(Db db);

    Conversation create_conversation(const QString& title, const QString& system_prompt = {},
                                     const QString& sampling_json = QStringLiteral("{}"), const QString& model = {});
    std::optional<Conversation> conversation(int64_t id);
    // Newest first; soft-deleted ones are hidden. A non-empty `filter` keeps conversations
    // whose title contains it or whose messages match it as a full-text query.
    std::vector<Conversation> conversations(const QString& filter = {});
    void rename(int64_t id, const QString& title);
    void set_system_prompt(int64_t id, const QString& prompt);
    void set_sampling_json(int64_t id, const QString& json);
    void set_model(int64_t id, const QString& model);

    // Delete with undo: hide now, restore() brings it back, purge_deleted() makes it final.
    void soft_delete(int64_t id);
    void restore(int64_t id);
    int purge_deleted();

    Message add_message(int64_t conversation_id, const QString& role, const QString& content,
                        MessageState state = MessageState::Complete, const MessageStats& stats = {});
    std::optional<Message> message(int64_t id);
    std::vector<Message> messages(int64_t conversation_id);
    // Saves a streaming answer's text so far (cheap enough to call every ~500 ms).
    void update_content(int64_t message_id, const QString& content, MessageState state);
    void finish_message(int64_t message_id, const QString& content, MessageState state, const MessageStats& stats);
    void set_message_content(int64_t message_id, const QString& content);  // user edits
    // Deletes this message and every later one in its conversation (regenerate / edit).
    void delete_from(int64_t message_id);
    // Run once at start-up: answers left `streaming` by a previous run that died.
    int mark_streaming_interrupted();

    // Full-text search over message text; words are matched as prefixes, all must occur.
    std::vector<SearchHit> search(const QString& query, int limit = 50);

    Db& db() { return db_; }

private:
    void touch(int64_t conversation_id);
    Db db_;
};

// Turns what a user types into a safe FTS5 query: each word quoted (so operators and
// punctuation are literal) and matched as a prefix. Empty when there are no words.
QString fts_query(const QString& user_text);

}  // namespace ember::app
