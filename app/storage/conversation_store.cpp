#include "app/storage/conversation_store.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSet>
#include <QStringList>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <sqlite3.h>
#include <signal.h>

#include "app/storage/schema.h"

namespace ember::app {
namespace {

int64_t now_ms() { return QDateTime::currentMSecsSinceEpoch(); }

constexpr const char* kConversationColumns = "id, title, created_at, updated_at, system_prompt, sampling_json, model";

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
    "id, conversation_id, role, content, created_at, state, ttft_ms, tok_s, n_tokens, model, stop_reason, "
    "prompt_tokens, reused_tokens, energy_j, error, needed_ctx, dropped_messages, reasoning, thinking_ms";

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
    if (!s.is_null(11)) m.stats.prompt_tokens = static_cast<int>(s.int64(11));
    if (!s.is_null(12)) m.stats.reused_tokens = static_cast<int>(s.int64(12));
    if (!s.is_null(13)) m.stats.energy_j = s.real(13);
    m.stats.error = s.text(14);
    if (!s.is_null(15)) m.stats.needed_ctx = static_cast<int>(s.int64(15));
    if (!s.is_null(16)) m.stats.dropped_messages = static_cast<int>(s.int64(16));
    m.reasoning = s.text(17);
    if (!s.is_null(18)) m.stats.thinking_ms = s.real(18);
    return m;
}

// The stores open in this process, by writer id (a writer in another process is judged by
// its process alone).
std::mutex g_writers_mutex;
QSet<QString> g_open_writers;
std::atomic<int> g_store_serial{0};

// A process's start time (clock ticks since boot, /proc/PID/stat field 22): with the pid
// it names one process, even after the pid is reused. Empty where /proc has no such pid.
QString process_start(qint64 pid) {
    QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!f.open(QIODevice::ReadOnly)) return {};
    const QByteArray stat = f.readAll();
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    const int close = stat.lastIndexOf(')');
    if (close < 0) return {};
    const QList<QByteArray> fields = stat.mid(close + 2).split(' ');
    return fields.size() > 19 ? QString::fromLatin1(fields[19]) : QString();  // field 22
}

QString new_writer_id() {
    const qint64 pid = QCoreApplication::applicationPid();
    return QStringLiteral("%1:%2:%3").arg(pid).arg(process_start(pid)).arg(++g_store_serial);
}

// What the user is told when the disk refuses a write.
QString describe(const SqliteError& e) {
    QString what;
    switch (e.code()) {
        case SQLITE_FULL:
            what = QStringLiteral("The disk is full, so the conversation database cannot grow");
            break;
        case SQLITE_READONLY:
        case SQLITE_PERM:
            what = QStringLiteral("The conversation database is read-only");
            break;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            what = QStringLiteral("Another program is holding the conversation database locked");
            break;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
            what = QStringLiteral("The conversation database is damaged (it is repaired at the next start)");
            break;
        case SQLITE_CANTOPEN:
            what = QStringLiteral("The conversation database cannot be opened for writing");
            break;
        default:
            what = QStringLiteral("The conversation database cannot be written (%1)").arg(QString::fromUtf8(e.what()));
    }
    return what + QStringLiteral(". New messages are kept in memory and saved as soon as it can be written again.");
}

// Enough to tell whether anyone wrote to the file after we copied it to memory: ids handed
// out, message count, last activity. "" for a file with no conversation tables yet.
QString fingerprint(Db& db) {
    try {
        return db.scalar_text(
            "SELECT (SELECT ifnull(group_concat(name || '=' || seq), '') FROM sqlite_sequence) || '/' || "
            "(SELECT count(*) FROM messages) || '/' || (SELECT ifnull(max(updated_at), 0) FROM conversations)");
    } catch (const SqliteError&) {
        return {};
    }
}

QString like_pattern(QString text) {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    return '%' + text + '%';
}

}  // namespace

QString to_string(MessageState s) {
    switch (s) {
        case MessageState::Streaming:
            return QStringLiteral("streaming");
        case MessageState::Interrupted:
            return QStringLiteral("interrupted");
        case MessageState::Complete:
            break;
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

StopReason stop_reason_from(const QString& s) { return parse_stop_reason(s.toStdString()).value_or(StopReason::None); }

QString fts_query(const QString& user_text) {
    static const QRegularExpression kSpace(QStringLiteral("\\s+"));
    QStringList terms;
    for (QString w : user_text.split(kSpace, Qt::SkipEmptyParts)) terms << '"' + w.replace('"', "\"\"") + "\"*";
    return terms.join(' ');
}

template <class F>
decltype(auto) ConversationStore::write(F&& f) {
    if (!mem_.is_open()) {
        try {
            return f(disk_);
        } catch (const SqliteError& e) {
            if (!e.is_storage_fault()) throw;
            keep_in_memory(e);
        }
    }
    dirty_ = true;
    return f(mem_);
}

ConversationStore::ConversationStore(Db db) : disk_(std::move(db)), path_(disk_.path()), writer_(new_writer_id()) {
    {
        std::lock_guard lock(g_writers_mutex);
        g_open_writers.insert(writer_);
    }
    disk_.exec("PRAGMA foreign_keys = ON");
    if (disk_.read_only()) keep_in_memory(SqliteError(SQLITE_READONLY, "read-only"));
    // WAL: readers never block the writer, and a committed transaction survives the process
    // being killed. synchronous=NORMAL trades durability of the very last commits on power
    // loss (not on a crash) for not fsyncing on every streamed save.
    write([](Db& d) {
        d.exec("PRAGMA journal_mode = WAL");
        d.exec("PRAGMA synchronous = NORMAL");
        migrate(d);
    });
}

ConversationStore::ConversationStore(const QString& path, const SqliteError& why)
    : disk_(), path_(path), writer_(new_writer_id()) {
    {
        std::lock_guard lock(g_writers_mutex);
        g_open_writers.insert(writer_);
    }
    keep_in_memory(why);
}

ConversationStore::~ConversationStore() {
    {
        std::lock_guard lock(g_writers_mutex);
        g_open_writers.remove(writer_);
    }
    if (!mem_.is_open() || !dirty_ || try_save_to_disk()) return;
    // Still refused: keep a copy of everything where it can be found (and restored by hand).
    const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
    const QString name =
        QFileInfo(path_ == QLatin1String(":memory:") ? QStringLiteral("conversations.db") : path_).fileName();
    QStringList places;
    if (path_ != QLatin1String(":memory:")) places << path_ + QStringLiteral(".unsaved-") + stamp;
    places << QDir::temp().filePath(name + QStringLiteral(".unsaved-") + stamp);
    for (const QString& place : places) {
        try {
            Db out = Db::open(place);
            copy_database(mem_, out);
            rescue_path_ = place;
            qWarning("ember: conversations that could not be saved were written to %s", qPrintable(place));
            return;
        } catch (const SqliteError&) {
            QFile::remove(place);
        }
    }
    qWarning("ember: conversations held in memory could not be saved anywhere");
}

void ConversationStore::set_problem(const QString& p) {
    if (p == problem_) return;
    problem_ = p;
    if (on_change_) on_change_();
}

void ConversationStore::keep_in_memory(const SqliteError& why) {
    if (!mem_.is_open()) {
        Db m = Db::open(QStringLiteral(":memory:"));
        try {
            if (!disk_.is_open()) throw why;
            // Reading still works when writing does not. A new connection: the one whose
            // write just failed may be in SQLite's error state mid-transaction.
            Db src;
            try {
                src = Db::open(path_, Db::Mode::ReadOnly);
                src.scalar_int("SELECT count(*) FROM sqlite_master");
            } catch (const SqliteError&) {
                src = Db();
            }
            Db& from = src.is_open() ? src : disk_;
            copy_database(from, m);
            disk_fingerprint_ = fingerprint(from);
        } catch (const SqliteError&) {
            m = Db::open(QStringLiteral(":memory:"));  // unreadable too: start empty
            disk_fingerprint_.clear();
        }
        m.exec("PRAGMA foreign_keys = ON");
        migrate(m);  // a copy of an older file, or an empty database
        mem_ = std::move(m);
    }
    set_problem(describe(why));
}

bool ConversationStore::try_save_to_disk() {
    if (!mem_.is_open()) return true;
    if (path_ == QLatin1String(":memory:")) return false;
    try {
        Db d = Db::open(path_);
        d.set_busy_timeout(200);  // a retry, on the GUI thread: never wait long
        if (d.read_only()) throw SqliteError(SQLITE_READONLY, "read-only");
        if (fingerprint(d) != disk_fingerprint_) {
            // Someone else wrote to the file meanwhile: overwriting it would lose their
            // changes. Keep ours in memory (and in the rescue copy at exit).
            set_problem(
                QStringLiteral("The conversation database was changed by another program while Ember "
                               "could not write it. This session's new messages are kept in memory and "
                               "saved beside it when Ember closes."));
            return false;
        }
        copy_database(mem_, d);  // one write transaction: the file is old or new, never half
        d.exec("PRAGMA journal_mode = WAL");
        d.exec("PRAGMA foreign_keys = ON");
        d.set_busy_timeout(5000);
        disk_ = std::move(d);
        mem_.close();
        dirty_ = false;
        disk_fingerprint_.clear();
        set_problem({});
        return true;
    } catch (const SqliteError& e) {
        set_problem(describe(e));
        return false;
    }
}

Conversation ConversationStore::create_conversation(const QString& title, const QString& system_prompt,
                                                    const QString& sampling_json, const QString& model) {
    Conversation c;
    c.title = title;
    c.created_at = c.updated_at = now_ms();
    c.system_prompt = system_prompt;
    c.sampling_json = sampling_json.isEmpty() ? QStringLiteral("{}") : sampling_json;
    c.model = model;
    c.id = write([&](Db& db) {
        db.prepare(
              "INSERT INTO conversations (title, created_at, updated_at, system_prompt, sampling_json, model) "
              "VALUES (?, ?, ?, ?, ?, ?)")
            .bind(1, c.title)
            .bind(2, c.created_at)
            .bind(3, c.updated_at)
            .bind(4, c.system_prompt)
            .bind(5, c.sampling_json)
            .bind(6, c.model)
            .run();
        return db.last_insert_id();
    });
    return c;
}

std::optional<Conversation> ConversationStore::conversation(int64_t id) {
    Stmt s = db().prepare((std::string("SELECT ") + kConversationColumns + " FROM conversations WHERE id = ?").c_str());
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_conversation(s);
}

std::vector<Conversation> ConversationStore::conversations(const QString& filter) {
    const QString query = fts_query(filter);
    std::string sql = std::string("SELECT ") + kConversationColumns + " FROM conversations WHERE deleted_at IS NULL";
    if (!query.isEmpty())
        sql +=
            " AND (title LIKE ?1 ESCAPE '\\' OR id IN (SELECT conversation_id FROM messages WHERE id IN "
            "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?2)))";
    sql += " ORDER BY updated_at DESC, id DESC";
    Stmt s = db().prepare(sql.c_str());
    if (!query.isEmpty()) s.bind(1, like_pattern(filter.trimmed())).bind(2, query);
    std::vector<Conversation> out;
    while (s.step()) out.push_back(read_conversation(s));
    return out;
}

void ConversationStore::rename(int64_t id, const QString& title) {
    write([&](Db& db) {
        db.prepare("UPDATE conversations SET title = ? WHERE id = ?").bind(1, title).bind(2, id).run();
    });
}

void ConversationStore::set_system_prompt(int64_t id, const QString& prompt) {
    write([&](Db& db) {
        db.prepare("UPDATE conversations SET system_prompt = ? WHERE id = ?").bind(1, prompt).bind(2, id).run();
    });
}

void ConversationStore::set_sampling_json(int64_t id, const QString& json) {
    write([&](Db& db) {
        db.prepare("UPDATE conversations SET sampling_json = ? WHERE id = ?").bind(1, json).bind(2, id).run();
    });
}

void ConversationStore::set_model(int64_t id, const QString& model) {
    write([&](Db& db) {
        db.prepare("UPDATE conversations SET model = ? WHERE id = ?").bind(1, model).bind(2, id).run();
    });
}

void ConversationStore::soft_delete(int64_t id) {
    write([&](Db& db) {
        db.prepare("UPDATE conversations SET deleted_at = ? WHERE id = ?").bind(1, now_ms()).bind(2, id).run();
    });
}

void ConversationStore::restore(int64_t id) {
    write([&](Db& db) { db.prepare("UPDATE conversations SET deleted_at = NULL WHERE id = ?").bind(1, id).run(); });
}

int ConversationStore::purge_deleted() {
    // Reading first keeps a start-up with nothing to purge from needing the write lock.
    if (db().scalar_int("SELECT count(*) FROM conversations WHERE deleted_at IS NOT NULL") == 0) return 0;
    return write([](Db& db) {
        db.exec("DELETE FROM conversations WHERE deleted_at IS NOT NULL");  // messages cascade
        return db.changes();
    });
}

void ConversationStore::touch(Db& db, int64_t conversation_id) {
    db.prepare("UPDATE conversations SET updated_at = ? WHERE id = ?").bind(1, now_ms()).bind(2, conversation_id).run();
}

Message ConversationStore::add_message(int64_t conversation_id, const QString& role, const QString& content,
                                       MessageState state, const MessageStats& stats, const QString& reasoning) {
    Message m;
    m.conversation_id = conversation_id;
    m.role = role;
    m.content = content;
    m.reasoning = reasoning;
    m.created_at = now_ms();
    m.state = state;
    m.stats = stats;
    const QString writer = state == MessageState::Streaming ? writer_ : QString();
    m.id = write([&](Db& db) {
        Transaction tx(db);
        db.prepare(
              "INSERT INTO messages (conversation_id, role, content, created_at, state, ttft_ms, tok_s, n_tokens, "
              "model, stop_reason, writer, prompt_tokens, reused_tokens, energy_j, error, needed_ctx, "
              "dropped_messages, reasoning, thinking_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
              "?)")
            .bind(1, conversation_id)
            .bind(2, role)
            .bind(3, content)
            .bind(4, m.created_at)
            .bind(5, to_string(state))
            .bind(6, stats.ttft_ms)
            .bind(7, stats.tok_s)
            .bind(8, stats.n_tokens)
            .bind(9, stats.model)
            .bind(10, to_string(stats.stop_reason))
            .bind(11, writer)
            .bind(12, stats.prompt_tokens)
            .bind(13, stats.reused_tokens)
            .bind(14, stats.energy_j)
            .bind(15, stats.error)
            .bind(16, stats.needed_ctx)
            .bind(17, stats.dropped_messages)
            .bind(18, reasoning)
            .bind(19, stats.thinking_ms)
            .run();
        const int64_t id = db.last_insert_id();
        touch(db, conversation_id);
        tx.commit();
        return id;
    });
    return m;
}

std::optional<Message> ConversationStore::message(int64_t id) {
    Stmt s = db().prepare((std::string("SELECT ") + kMessageColumns + " FROM messages WHERE id = ?").c_str());
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_message(s);
}

std::vector<Message> ConversationStore::messages(int64_t conversation_id) {
    Stmt s = db().prepare(
        (std::string("SELECT ") + kMessageColumns + " FROM messages WHERE conversation_id = ? ORDER BY id").c_str());
    s.bind(1, conversation_id);
    std::vector<Message> out;
    while (s.step()) out.push_back(read_message(s));
    return out;
}

void ConversationStore::update_content(int64_t message_id, const QString& content, MessageState state) {
    write([&](Db& db) {
        db.prepare("UPDATE messages SET content = ?, state = ? WHERE id = ?")
            .bind(1, content)
            .bind(2, to_string(state))
            .bind(3, message_id)
            .run();
    });
}

void ConversationStore::update_answer(int64_t message_id, const QString& content, const QString& reasoning,
                                      MessageState state) {
    write([&](Db& db) {
        db.prepare("UPDATE messages SET content = ?, reasoning = ?, state = ? WHERE id = ?")
            .bind(1, content)
            .bind(2, reasoning)
            .bind(3, to_string(state))
            .bind(4, message_id)
            .run();
    });
}

void ConversationStore::finish_message(int64_t message_id, const QString& content, MessageState state,
                                       const MessageStats& stats, const QString& reasoning) {
    write([&](Db& db) {
        Transaction tx(db);
        db.prepare(
              "UPDATE messages SET content = ?, state = ?, ttft_ms = ?, tok_s = ?, n_tokens = ?, model = ?, "
              "stop_reason = ?, prompt_tokens = ?, reused_tokens = ?, energy_j = ?, error = ?, needed_ctx = ?, "
              "dropped_messages = ?, reasoning = ?, thinking_ms = ?, writer = '' WHERE id = ?")
            .bind(1, content)
            .bind(2, to_string(state))
            .bind(3, stats.ttft_ms)
            .bind(4, stats.tok_s)
            .bind(5, stats.n_tokens)
            .bind(6, stats.model)
            .bind(7, to_string(stats.stop_reason))
            .bind(8, stats.prompt_tokens)
            .bind(9, stats.reused_tokens)
            .bind(10, stats.energy_j)
            .bind(11, stats.error)
            .bind(12, stats.needed_ctx)
            .bind(13, stats.dropped_messages)
            .bind(14, reasoning)
            .bind(15, stats.thinking_ms)
            .bind(16, message_id)
            .run();
        db.prepare(
              "UPDATE conversations SET updated_at = ? WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)")
            .bind(1, now_ms())
            .bind(2, message_id)
            .run();
        tx.commit();
    });
}

void ConversationStore::set_message_content(int64_t message_id, const QString& content) {
    write([&](Db& db) {
        db.prepare("UPDATE messages SET content = ? WHERE id = ?").bind(1, content).bind(2, message_id).run();
    });
}

void ConversationStore::delete_from(int64_t message_id) {
    write([&](Db& db) {
        db.prepare(
              "DELETE FROM messages WHERE conversation_id = (SELECT conversation_id FROM messages WHERE id = ?1) "
              "AND id >= ?1")
            .bind(1, message_id)
            .run();
    });
}

int ConversationStore::mark_streaming_interrupted() {
    std::vector<int64_t> gone;
    {
        Stmt s = db().prepare("SELECT id, writer FROM messages WHERE state = 'streaming'");
        while (s.step())
            if (!writer_alive(s.text(1))) gone.push_back(s.int64(0));
    }
    if (gone.empty()) return 0;
    write([&](Db& db) {
        Transaction tx(db);
        for (const int64_t id : gone)
            db.prepare("UPDATE messages SET state = 'interrupted', writer = '' WHERE id = ? AND state = 'streaming'")
                .bind(1, id)
                .run();
        tx.commit();
    });
    return static_cast<int>(gone.size());
}

bool ConversationStore::ensure_search_index() {
    return write([](Db& db) {
        if (search_index_ok(db)) return false;
        rebuild_search_index(db);
        return true;
    });
}

int64_t ConversationStore::conversation_count() { return db().scalar_int("SELECT count(*) FROM conversations"); }

std::vector<SearchHit> ConversationStore::search(const QString& query, int limit) {
    std::vector<SearchHit> out;
    const QString q = fts_query(query);
    if (q.isEmpty()) return out;
    Stmt s = db().prepare(
        "SELECT m.conversation_id, m.id, snippet(messages_fts, 0, ?3, ?4, '…', 10) FROM messages_fts "
        "JOIN messages m ON m.id = messages_fts.rowid JOIN conversations c ON c.id = m.conversation_id "
        "WHERE messages_fts MATCH ?1 AND c.deleted_at IS NULL ORDER BY rank LIMIT ?2");
    s.bind(1, q).bind(2, limit).bind(3, QString(kHitOpen)).bind(4, QString(kHitClose));
    while (s.step()) out.push_back({s.int64(0), s.int64(1), s.text(2)});
    return out;
}

bool writer_alive(const QString& writer) {
    const QStringList parts = writer.split(':');
    if (parts.size() != 3) return false;  // written before v3, or not streaming
    bool ok = false;
    const qint64 pid = parts[0].toLongLong(&ok);
    if (!ok || pid <= 0) return false;
    if (pid == QCoreApplication::applicationPid()) {
        std::lock_guard lock(g_writers_mutex);
        return g_open_writers.contains(writer);
    }
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
    // Alive: the same process only if it started when the writer did (pids are reused).
    const QString start = process_start(pid);
    return start.isEmpty() || start == parts[1];
}

// ---- Token and energy totals -----------------------------------------------------------

namespace {

// The answers the totals count, with the columns totals_from reads (first 6 columns).
constexpr const char* kCountedAnswers =
    "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
    "WHERE c.deleted_at IS NULL AND m.role = 'assistant' "
    "AND (m.n_tokens IS NOT NULL OR m.prompt_tokens IS NOT NULL) ";
constexpr const char* kTotalsColumns =
    "count(*), coalesce(sum(m.prompt_tokens), 0), coalesce(sum(m.reused_tokens), 0), "
    "coalesce(sum(m.n_tokens), 0), coalesce(sum(m.energy_j), 0), count(m.energy_j)";

TokenTotals totals_from(const Stmt& s, int first) {
    TokenTotals t;
    t.answers = s.int64(first);
    t.prompt_tokens = s.int64(first + 1);
    t.reused_tokens = s.int64(first + 2);
    t.generated_tokens = s.int64(first + 3);
    t.energy_j = s.real(first + 4);
    t.measured_answers = s.int64(first + 5);
    return t;
}

}  // namespace

std::vector<ConversationTotals> totals_by_conversation(ConversationStore& store) {
    const std::string sql = std::string("SELECT c.id, c.title, ") + kTotalsColumns + " " + kCountedAnswers +
                            "GROUP BY c.id ORDER BY c.updated_at DESC, c.id DESC";
    Stmt s = store.db().prepare(sql.c_str());
    std::vector<ConversationTotals> out;
    while (s.step()) out.push_back({s.int64(0), s.text(1), totals_from(s, 2)});
    return out;
}

std::vector<DayTotals> totals_by_day(ConversationStore& store) {
    // SQLite's 'localtime' uses the C library's local time: $TZ, else /etc/localtime.
    const std::string sql = std::string("SELECT date(m.created_at / 1000, 'unixepoch', 'localtime') AS day, ") +
                            kTotalsColumns + " " + kCountedAnswers + "GROUP BY day ORDER BY day DESC";
    Stmt s = store.db().prepare(sql.c_str());
    std::vector<DayTotals> out;
    while (s.step()) out.push_back({s.text(0), totals_from(s, 1)});
    return out;
}

std::vector<UsagePoint> usage_over_time(ConversationStore& store) {
    const std::string sql = std::string(
                                "SELECT m.created_at, coalesce(m.prompt_tokens, 0) - coalesce(m.reused_tokens, 0), "
                                "coalesce(m.n_tokens, 0) ") +
                            kCountedAnswers + "ORDER BY m.created_at, m.id";
    Stmt s = store.db().prepare(sql.c_str());
    std::vector<UsagePoint> out;
    while (s.step()) out.push_back({s.int64(0), s.int64(1), s.int64(2)});
    return out;
}

}  // namespace ember::app
