#include "app/storage/conversation_store.h"

#include <QDateTime>
#include <QRegularExpression>
#include <QStringList>

#include "app/storage/schema.h"

namespace ember::app {
namespace {

int64_t now_ms() { return QDateTime::currentMSecsSinceEpoch(); }

constexpr const char* kConversationColumns =
    "id, title, created_at, updated_at, system_prompt, sampling_json, model";

Conversation read_conversation(const Stmt& s) {
    Conversation c;
    c.id = s.int64(0);
    c.title = s.text(1);
    c.created_at = s.int64(2);
    c.updated_at = s.int64(3);
    c.system_prompt = s.text(4);
    c.sampling_json = s.text(5);
    c.model = s.text(6);
    return c;
}

constexpr const char* kMessageColumns =
    "id, conversation_id, role, content, created_at, state, ttft_ms, tok_s, n_tokens, model, stop_reason";

Message read_message(const Stmt& s) {
    Message m;
    m.id = s.int64(0);
    m.conversation_id = s.int64(1);
    m.role = s.text(2);
    m.content = s.text(3);
    m.created_at = s.int64(4);
    m.state = message_state_from(s.text(5));
    if (!s.is_null(6)) m.stats.ttft_ms = s.real(6);
    if (!s.is_null(7)) m.stats.tok_s = s.real(7);
    if (!s.is_null(8)) m.stats.n_tokens = static_cast<int>(s.int64(8));
    m.stats.model = s.text(9);
    m.stats.stop_reason = stop_reason_from(s.text(10));
    return m;
}

QString like_pattern(QString text) {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    return '%' + text + '%';
}

}  // namespace

QString to_string(MessageState s) {
    switch (s) {
    case MessageState::Streaming: return QStringLiteral("streaming");
    case MessageState::Interrupted: return QStringLiteral("interrupted");
    case MessageState::Complete: break;
    }
    return QStringLiteral("complete");
}

MessageState message_state_from(const QString& s) {
    if (s == QLatin1String("streaming")) return MessageState::Streaming;
    if (s == QLatin1String("interrupted")) return MessageState::Interrupted;
    return MessageState::Complete;
}

QString to_string(StopReason r) {
    const std::string_view name = stop_reason_name(r);
    return QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()));
}

StopReason stop_reason_from(const QString& s) {
    return parse_stop_reason(s.toStdString()).value_or(StopReason::None);
}

QString fts_query(const QString& user_text) {
    static const QRegularExpression kSpace(QStringLiteral("\\s+"));
    QStringList terms;
    for (QString w : user_text.split(kSpace, Qt::SkipEmptyParts)) terms << '"' + w.replace('"', "\"\"") + "\"*";
    return terms.join(' ');
}

ConversationStore::ConversationStore(Db db) : db_(std::move(db)) {
    // WAL: readers never block the writer, and a committed transaction survives the process
    // being killed. synchronous=NORMAL trades durability of the very last commits on power
    // loss (not on a crash) for not fsyncing on every streamed save.
    db_.exec("PRAGMA journal_mode = WAL");
    db_.exec("PRAGMA synchronous = NORMAL");
    db_.exec("PRAGMA foreign_keys = ON");
    migrate(db_);
}

Conversation ConversationStore::create_conversation(const QString& title, const QString& system_prompt,
                                                    const QString& sampling_json, const QString& model) {
    Conversation c;
    c.title = title;
    c.created_at = c.updated_at = now_ms();
    c.system_prompt = system_prompt;
    c.sampling_json = sampling_json.isEmpty() ? QStringLiteral("{}") : sampling_json;
    c.model = model;
    db_.prepare("INSERT INTO conversations (title, created_at, updated_at, system_prompt, sampling_json, model) "
                "VALUES (?, ?, ?, ?, ?, ?)")
        .bind(1, c.title).bind(2, c.created_at).bind(3, c.updated_at).bind(4, c.system_prompt)
        .bind(5, c.sampling_json).bind(6, c.model).run();
    c.id = db_.last_insert_id();
    return c;
}

std::optional<Conversation> ConversationStore::conversation(int64_t id) {
    Stmt s = db_.prepare((std::string("SELECT ") + kConversationColumns + " FROM conversations WHERE id = ?").c_str());
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_conversation(s);
}

std::vector<Conversation> ConversationStore::conversations(const QString& filter) {
    const QString query = fts_query(filter);
    std::string sql = std::string("SELECT ") + kConversationColumns + " FROM conversations WHERE deleted_at IS NULL";
    if (!query.isEmpty())
        sql += " AND (title LIKE ?1 ESCAPE '\\' OR id IN (SELECT conversation_id FROM messages WHERE id IN "
               "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?2)))";
    sql += " ORDER BY updated_at DESC, id DESC";
    Stmt s = db_.prepare(sql.c_str());
    if (!query.isEmpty()) s.bind(1, like_pattern(filter.trimmed())).bind(2, query);
    std::vector<Conversation> out;
    while (s.step()) out.push_back(read_conversation(s));
    return out;
}

void ConversationStore::rename(int64_t id, const QString& title) {
    db_.prepare("UPDATE conversations SET title = ? WHERE id = ?").bind(1, title).bind(2, id).run();
}

void ConversationStore::set_system_prompt(int64_t id, const QString& prompt) {
    db_.prepare("UPDATE conversations SET system_prompt = ? WHERE id = ?").bind(1, prompt).bind(2, id).run();
}

void ConversationStore::set_sampling_json(int64_t id, const QString& json) {
    db_.prepare("UPDATE conversations SET sampling_json = ? WHERE id = ?").bind(1, json).bind(2, id).run();
}

void ConversationStore::set_model(int64_t id, const QString& model) {
    db_.prepare("UPDATE conversations SET model = ? WHERE id = ?").bind(1, model).bind(2, id).run();
}

void ConversationStore::soft_delete(int64_t id) {
    db_.prepare("UPDATE conversations SET deleted_at = ? WHERE id = ?").bind(1, now_ms()).bind(2, id).run();
}

void ConversationStore::restore(int64_t id) {
    db_.prepare("UPDATE conversations SET deleted_at = NULL WHERE id = ?").bind(1, id).run();
}

int ConversationStore::purge_deleted() {
    db_.exec("DELETE FROM conversations WHERE deleted_at IS NOT NULL");  // messages cascade
    return db_.changes();
}

void ConversationStore::touch(int64_t conversation_id) {
    db_.prepare("UPDATE conversations SET updated_at = ? WHERE id = ?").bind(1, now_ms()).bind(2, conversation_id).run();
}

Message ConversationStore::add_message(int64_t conversation_id, const QString& role, const QString& content,
                                       MessageState state, const MessageStats& stats) {
    Message m;
    m.conversation_id = conversation_id;
    m.role = role;
    m.content = content;
    m.created_at = now_ms();
    m.state = state;
    m.stats = stats;
    Transaction tx(db_);
    db_.prepare("INSERT INTO messages (conversation_id, role, content, created_at, state, ttft_ms, tok_s, n_tokens, "
                "model, stop_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, conversation_id).bind(2, role).bind(3, content).bind(4, m.created_at).bind(5, to_string(state))
        .bind(6, stats.ttft_ms).bind(7, stats.tok_s).bind(8, stats.n_tokens).bind(9, stats.model)
        .bind(10, to_string(stats.stop_reason)).run();
    m.id = db_.last_insert_id();
    touch(conversation_id);
    tx.commit();
    return m;
}

std::optional<Message> ConversationStore::message(int64_t id) {
    Stmt s = db_.prepare((std::string("SELECT ") + kMessageColumns + " FROM messages WHERE id = ?").c_str());
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_message(s);
}

std::vector<Message> ConversationStore::messages(int64_t conversation_id) {
    Stmt s = db_.prepare(
        (std::string("SELECT ") + kMessageColumns + " FROM messages WHERE conversation_id = ? ORDER BY id").c_str());
    s.bind(1, conversation_id);
    std::vector<Message> out;
    while (s.step()) out.push_back(read_message(s));
    return out;
}

void ConversationStore::update_content(int64_t message_id, const QString& content, MessageState state) {
    db_.prepare("UPDATE messages SET content = ?, state = ? WHERE id = ?")
        .bind(1, content).bind(2, to_string(state)).bind(3, message_id).run();
}

void ConversationStore::finish_message(int64_t message_id, const QString& content, MessageState state,
                                       const MessageStats& stats) {
    Transaction tx(db_);
    db_.prepare("UPDATE messages SET content = ?, state = ?, ttft_ms = ?, tok_s = ?, n_tokens = ?, model = ?, "
                "stop_reason = ? WHERE id = ?")
        .bind(1, content).bind(2, to_string(state)).bind(3, stats.ttft_ms).bind(4, stats.tok_s)
        .bind(5, stats.n_tokens).bind(6, stats.model).bind(7, to_string(stats.stop_reason)).bind(8, message_id).run();
    db_.prepare("UPDATE conversations SET updated_at = ? WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)")
        .bind(1, now_ms()).bind(2, message_id).run();
    tx.commit();
}

void ConversationStore::set_message_content(int64_t message_id, const QString& content) {
    db_.prepare("UPDATE messages SET content = ? WHERE id = ?").bind(1, content).bind(2, message_id).run();
}

void ConversationStore::delete_from(int64_t message_id) {
    db_.prepare("DELETE FROM messages WHERE conversation_id = (SELECT conversation_id FROM messages WHERE id = ?1) "
                "AND id >= ?1")
        .bind(1, message_id).run();
}

int ConversationStore::mark_streaming_interrupted() {
    db_.exec("UPDATE messages SET state = 'interrupted' WHERE state = 'streaming'");
    return db_.changes();
}

std::vector<SearchHit> ConversationStore::search(const QString& query, int limit) {
    std::vector<SearchHit> out;
    const QString q = fts_query(query);
    if (q.isEmpty()) return out;
    Stmt s = db_.prepare(
        "SELECT m.conversation_id, m.id, snippet(messages_fts, 0, '[', ']', '…', 10) FROM messages_fts "
        "JOIN messages m ON m.id = messages_fts.rowid JOIN conversations c ON c.id = m.conversation_id "
        "WHERE messages_fts MATCH ? AND c.deleted_at IS NULL ORDER BY rank LIMIT ?");
    s.bind(1, q).bind(2, limit);
    while (s.step()) out.push_back({s.int64(0), s.int64(1), s.text(2)});
    return out;
}

}  // namespace ember::app
