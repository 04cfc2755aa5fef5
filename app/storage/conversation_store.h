// Conversations and their messages in SQLite (schema in schema.h). One store per open
// database connection; used from one thread (the GUI thread: every call is a short indexed
// query, a millisecond or less in WAL mode, so it never stalls the UI noticeably).
//
// A write the disk refuses (full, read-only, locked past the busy timeout, I/O error) never
// loses what was being written and never throws: the store copies the database into memory
// (SQLite's backup API), carries on there, and problem() says why. try_save_to_disk()
// copies it back as one transaction once the file can be written again. Errors that are the
// program's fault (a constraint, bad SQL) still throw SqliteError.
#pragma once
#include <QString>
#include <functional>
#include <optional>
#include <vector>

#include "app/storage/records.h"
#include "app/storage/sqlite.h"

namespace ember::app {

class ConversationStore {
public:
    // Takes an open connection, configures it (WAL, foreign keys) and migrates the schema.
    // A read-only connection (or file) starts in memory at once.
    explicit ConversationStore(Db db);
    // The file at `path` could not be opened at all (`why`): start empty, in memory, and
    // save to `path` once it can be created (":memory:" for never).
    ConversationStore(const QString& path, const SqliteError& why);
    // Saves what is held only in memory, to the file if it can, else to a rescue copy
    // beside it (<path>.unsaved-<time>) or in the temp folder.
    ~ConversationStore();
    ConversationStore(const ConversationStore&) = delete;
    ConversationStore& operator=(const ConversationStore&) = delete;

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
                        MessageState state = MessageState::Complete, const MessageStats& stats = {},
                        const QString& reasoning = {});
    std::optional<Message> message(int64_t id);
    std::vector<Message> messages(int64_t conversation_id);
    // Saves a streaming answer's text so far (cheap enough to call every ~500 ms).
    void update_content(int64_t message_id, const QString& content, MessageState state);
    // The same with the answer's thinking so far (a reasoning model's).
    void update_answer(int64_t message_id, const QString& content, const QString& reasoning, MessageState state);
    void finish_message(int64_t message_id, const QString& content, MessageState state, const MessageStats& stats,
                        const QString& reasoning = {});
    void set_message_content(int64_t message_id, const QString& content);  // user edits
    // Deletes this message and every later one in its conversation (regenerate / edit).
    void delete_from(int64_t message_id);
    // Run at start-up: answers left `streaming` whose writer (process + store) is gone are
    // marked interrupted; those another running store is still writing are left alone.
    int mark_streaming_interrupted();
    // Rebuilds a missing or damaged full-text index from the messages; true if it had to.
    bool ensure_search_index();
    int64_t conversation_count();

    // Full-text search over message text; words are matched as prefixes, all must occur.
    std::vector<SearchHit> search(const QString& query, int limit = 50);

    // The connection in use: the file, or the in-memory copy while the file can't be written.
    Db& db() { return mem_.is_open() ? mem_ : disk_; }
    const QString& path() const { return path_; }
    // This store's id as the writer of streaming answers ("pid:start-time:serial").
    const QString& writer() const { return writer_; }

    // Storage health, for the UI.
    bool on_disk() const { return !mem_.is_open(); }     // every change so far is in the file
    const QString& problem() const { return problem_; }  // why not, or empty
    bool try_save_to_disk();
    // Called whenever on_disk() or problem() changes.
    void set_on_change(std::function<void()> f) { on_change_ = std::move(f); }
    // Where the destructor put changes it could not save (empty if none).
    const QString& rescue_path() const { return rescue_path_; }

private:
    // Runs `f` on the file; when the disk refuses, moves to memory and runs it there.
    template <class F>
    decltype(auto) write(F&& f);
    void keep_in_memory(const SqliteError& why);
    void set_problem(const QString& p);
    void touch(Db& db, int64_t conversation_id);

    Db disk_;
    Db mem_;
    QString path_;
    QString writer_;
    QString problem_;
    QString disk_fingerprint_;  // the file's state when it was copied to memory
    QString rescue_path_;
    bool dirty_ = false;  // the in-memory copy has changes the file lacks
    std::function<void()> on_change_;
};

// Whether the store that wrote `writer` (see ConversationStore::writer) is still running:
// its process is alive (same pid and start time) and, in this process, the store is open.
bool writer_alive(const QString& writer);

// Turns what a user types into a safe FTS5 query: each word quoted (so operators and
// punctuation are literal) and matched as a prefix. Empty when there are no words.
QString fts_query(const QString& user_text);

// ---- Token and energy totals (read-only; the cost view) ---------------------------------
// Over the answers of conversations that are not deleted; an answer counts once it has token
// counts (stopped before its first token: only its prompt).

struct TokenTotals {
    int64_t answers = 0;
    int64_t prompt_tokens = 0;
    int64_t reused_tokens = 0;  // of those, already in the KV cache (not processed again)
    int64_t generated_tokens = 0;
    double energy_j = 0;           // summed over the answers whose energy was measured
    int64_t measured_answers = 0;  // answers with a measured energy
    int64_t new_prompt_tokens() const { return prompt_tokens - reused_tokens; }
};
struct ConversationTotals {
    int64_t conversation_id = 0;
    QString title;
    TokenTotals totals;
};
struct DayTotals {
    QString day;  // "2026-12-01", in the local time zone ($TZ, else the system's)
    TokenTotals totals;
};
struct UsagePoint {
    int64_t at_ms = 0;  // when the answer was made
    int64_t new_prompt_tokens = 0;
    int64_t generated_tokens = 0;
};

// Most recently active conversation first.
std::vector<ConversationTotals> totals_by_conversation(ConversationStore& store);
// Newest day first.
std::vector<DayTotals> totals_by_day(ConversationStore& store);
// Every counted answer, oldest first (the cumulative plot).
std::vector<UsagePoint> usage_over_time(ConversationStore& store);

}  // namespace ember::app
