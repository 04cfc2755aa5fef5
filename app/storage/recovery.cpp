#include "app/storage/recovery.h"

#include <QFileInfo>
#include <QStringList>
#include <QVariant>
#include <algorithm>
#include <limits>
#include <sqlite3.h>
#include <string>
#include <vector>

#include "app/storage/sqlite.h"

namespace ember::app {
namespace {

struct IdRange {
    int64_t lo, hi;
};

constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max() - 1;  // +1 never overflows

bool unreadable(const SqliteError& e) { return e.is_corruption() || e.code() == SQLITE_IOERR; }

QStringList columns(Db& db, const char* table) {
    QStringList out;
    Stmt s = db.prepare((std::string("PRAGMA table_info(") + table + ")").c_str());
    while (s.step()) out << s.text(1);
    return out;
}

void add_bad(std::vector<IdRange>& bad, int64_t lo, int64_t hi) {
    if (!bad.empty() && bad.back().hi + 1 == lo) bad.back().hi = hi;
    else bad.push_back({lo, hi});
}

// One table of a source database (the damaged file or a backup) and how to copy its rows
// into the fresh one. Two connections, never one with the source ATTACHed: a read that
// hits damage puts that connection's pager in its error state, which would also fail the
// fresh database's COMMIT.
struct TableCopy {
    Db& src;
    Db& dst;
    const char* table;
    std::string select_one, select_range, insert;
    int ncols = 0;

    TableCopy(Db& s, Db& d, const char* t) : src(s), dst(d), table(t) {
        const QStringList theirs = columns(src, table);
        QStringList both;
        for (const QString& c : columns(dst, table))
            if (theirs.contains(c)) both << c;  // an older file may lack some
        ncols = static_cast<int>(both.size());
        const std::string cols = both.join(", ").toStdString();
        select_one = "SELECT " + cols + " FROM " + table + " WHERE id = ?1";
        select_range = "SELECT " + cols + " FROM " + table + " WHERE id BETWEEN ?1 AND ?2 ORDER BY id";
        QStringList marks;
        for (int i = 0; i < ncols; ++i) marks << QStringLiteral("?");
        insert = std::string("INSERT OR IGNORE INTO ") + table + " (" + cols + ") VALUES (" +
                 marks.join(", ").toStdString() + ")";
    }

    // Copies the current row of `from`; returns 1 if it was new.
    int put(const Stmt& from) {
        Stmt in = dst.prepare(insert.c_str());
        for (int i = 0; i < ncols; ++i) in.bind(i + 1, from.value(i));
        in.run();
        return dst.changes();
    }

    bool seekable(int64_t at) {
        try {
            Stmt s =
                src.prepare((std::string("SELECT id FROM ") + table + " WHERE id >= ?1 ORDER BY id LIMIT 1").c_str());
            s.bind(1, at);
            s.step();
            return true;
        } catch (const SqliteError& e) {
            if (!unreadable(e)) throw;
            return false;
        }
    }

    // The smallest id in (after, limit] from which the table reads again, or limit + 1:
    // doubling steps find a readable point, then bisection finds where the damage ends.
    int64_t next_readable(int64_t after, int64_t limit) {
        int64_t lo = after, hi = -1;  // a seek at lo fails, at hi it works
        for (int64_t step = 1; step <= limit - after; step *= 2) {
            if (seekable(after + step)) {
                hi = after + step;
                break;
            }
            lo = after + step;
            if (step > kMaxId / 4) break;
        }
        if (hi < 0) return seekable(limit) ? limit : limit + 1;
        while (hi - lo > 1) {
            const int64_t mid = lo + (hi - lo) / 2;
            (seekable(mid) ? hi : lo) = mid;
        }
        return hi;
    }

    // The highest id worth scanning: the table's own max (its rightmost pages), else what
    // AUTOINCREMENT handed out, else a bound no chat history reaches.
    int64_t id_bound() {
        for (const std::string& sql : {std::string("SELECT max(id) FROM ") + table,
                                       std::string("SELECT seq FROM sqlite_sequence WHERE name = '") + table + "'"}) {
            try {
                const int64_t v = src.scalar_int(sql.c_str());
                if (v > 0) return v;
            } catch (const SqliteError&) {}
        }
        return 1 << 20;
    }

    // Walks the table in id order, copying each row; where the walk breaks on damage, skips
    // to the next id it can read from and records the ids in between as unreadable.
    int64_t scan(std::vector<IdRange>& bad) {
        const std::string walk_sql = std::string("SELECT id FROM ") + table + " WHERE id >= ?1 ORDER BY id";
        const int64_t bound = id_bound();
        int64_t copied = 0, next = 0, last_ok = -1;
        while (next <= kMaxId) {
            try {
                Stmt walk = src.prepare(walk_sql.c_str());
                walk.bind(1, next);
                while (walk.step()) {
                    const int64_t id = walk.int64(0);
                    try {
                        Stmt row = src.prepare(select_one.c_str());
                        row.bind(1, id);
                        if (row.step()) copied += put(row);
                    } catch (const SqliteError& e) {
                        if (!unreadable(e)) throw;
                        add_bad(bad, id, id);  // this row's own (overflow) pages are damaged
                    }
                    last_ok = id;
                }
                break;  // the walk reached the end
            } catch (const SqliteError& e) {
                if (!unreadable(e)) throw;
                const int64_t from_id = std::max(next, last_ok + 1);
                const int64_t resume = next_readable(from_id, std::max(bound, from_id + 1));
                add_bad(bad, from_id, std::min(resume - 1, kMaxId));
                // Past the bound only while a seek there works (a damaged rightmost page can
                // hide the true maximum from max(id)).
                if (resume > bound + 1 && !seekable(resume)) break;
                next = resume;
                last_ok = resume - 1;
            }
        }
        return copied;
    }

    // Copies ids lo..hi from a source that should be sound (a backup).
    int64_t copy_range(int64_t lo, int64_t hi) {
        try {
            Stmt s = src.prepare(select_range.c_str());
            s.bind(1, lo).bind(2, hi);
            int64_t n = 0;
            while (s.step()) n += put(s);
            return n;
        } catch (const SqliteError& e) {
            if (!unreadable(e)) throw;
            return 0;  // the backup is damaged there too
        }
    }
};

}  // namespace

QString RecoveryReport::summary() const {
    QString s = schema_unreadable
                    ? QStringLiteral("Nothing could be read from the damaged file")
                    : QStringLiteral("%1 conversation(s) and %2 message(s) were recovered from the damaged file")
                          .arg(conversations)
                          .arg(messages);
    if (!schema_unreadable && unreadable_ranges > 0)
        s += QStringLiteral("; %1 damaged stretch(es) of it could not be read").arg(unreadable_ranges);
    if (!backup_used.isEmpty() && (schema_unreadable || unreadable_ranges > 0))
        s += QStringLiteral("; %1 conversation(s) and %2 message(s) from those came back from the backup %3")
                 .arg(from_backup_conversations)
                 .arg(from_backup_messages)
                 .arg(QFileInfo(backup_used).fileName());
    else if (schema_unreadable || unreadable_ranges > 0)
        s += QStringLiteral(", and there was no backup to fill the gap");
    else s += QStringLiteral(". Nothing was lost");
    return s + '.';
}

RecoveryReport recover_rows(Db& fresh, const QString& damaged, const QString& backup) {
    RecoveryReport rep;
    // Orphans (a message whose conversation row is unreadable) are copied too and given a
    // placeholder conversation below, so the foreign key waits until the end.
    fresh.exec("PRAGMA foreign_keys = OFF");
    std::vector<IdRange> bad_conv, bad_msg;
    {
        Transaction tx(fresh);
        try {
            Db old = Db::open(damaged);
            if (columns(old, "conversations").isEmpty() || columns(old, "messages").isEmpty())
                throw SqliteError(SQLITE_CORRUPT, "the table list is unreadable");
            TableCopy conv(old, fresh, "conversations");
            TableCopy msg(old, fresh, "messages");
            rep.conversations = conv.scan(bad_conv);
            rep.messages = msg.scan(bad_msg);
        } catch (const SqliteError& e) {
            if (!unreadable(e)) throw;
            rep.schema_unreadable = true;
            bad_conv = bad_msg = {{0, kMaxId}};
        }
        tx.commit();
    }
    rep.unreadable_ranges = static_cast<int64_t>(bad_conv.size() + bad_msg.size());

    if (!backup.isEmpty() && rep.unreadable_ranges > 0) {
        try {
            Db bak = Db::open(backup, Db::Mode::ReadOnly);
            TableCopy conv(bak, fresh, "conversations");
            TableCopy msg(bak, fresh, "messages");
            Transaction tx(fresh);
            for (const IdRange& r : bad_conv) rep.from_backup_conversations += conv.copy_range(r.lo, r.hi);
            for (const IdRange& r : bad_msg) rep.from_backup_messages += msg.copy_range(r.lo, r.hi);
            tx.commit();
            rep.backup_used = backup;
        } catch (const SqliteError& e) {
            if (!unreadable(e) && e.code() != SQLITE_CANTOPEN) throw;
        }
    }

    Transaction tx(fresh);
    fresh.exec(
        "INSERT INTO conversations (id, title, created_at, updated_at) "
        "SELECT conversation_id, 'Recovered conversation', min(created_at), max(created_at) FROM messages "
        "WHERE conversation_id NOT IN (SELECT id FROM conversations) GROUP BY conversation_id");
    tx.commit();
    fresh.exec("PRAGMA foreign_keys = ON");
    return rep;
}

}  // namespace ember::app
