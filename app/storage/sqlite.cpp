#include "app/storage/sqlite.h"

#include <sqlite3.h>

namespace ember::app {
namespace {

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
    const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw SqliteError(rc & 0xff, what + ": " + (msg ? msg : "unknown error") + " (SQLite code " + std::to_string(rc) + ")");
}

}  // namespace

bool SqliteError::is_corruption() const { return code_ == SQLITE_CORRUPT || code_ == SQLITE_NOTADB; }

Stmt::Stmt(sqlite3* db, const char* sql) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr);
    if (rc != SQLITE_OK) fail(db, rc, std::string("prepare \"") + sql + "\"");
}

Stmt::~Stmt() { sqlite3_finalize(st_); }

void Stmt::check(int rc, const char* what) const {
    if (rc != SQLITE_OK) fail(db_, rc, what);
}

Stmt& Stmt::bind(int i, int64_t v) {
    check(sqlite3_bind_int64(st_, i, v), "bind");
    return *this;
}

Stmt& Stmt::bind(int i, double v) {
    check(sqlite3_bind_double(st_, i, v), "bind");
    return *this;
}

Stmt& Stmt::bind(int i, const QString& v) {
    const QByteArray utf8 = v.toUtf8();
    check(sqlite3_bind_text(st_, i, utf8.constData(), static_cast<int>(utf8.size()), SQLITE_TRANSIENT), "bind");
    return *this;
}

Stmt& Stmt::bind(int i, const char* v) {
    check(sqlite3_bind_text(st_, i, v, -1, SQLITE_TRANSIENT), "bind");
    return *this;
}

Stmt& Stmt::bind_null(int i) {
    check(sqlite3_bind_null(st_, i), "bind");
    return *this;
}

bool Stmt::step() {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, rc, std::string("step \"") + sqlite3_sql(st_) + "\"");
}

void Stmt::run() {
    while (step()) {
    }
}

void Stmt::reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
}

int64_t Stmt::int64(int col) const { return sqlite3_column_int64(st_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(st_, col); }
bool Stmt::is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }

QString Stmt::text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
    return p ? QString::fromUtf8(p, sqlite3_column_bytes(st_, col)) : QString();
}

Db Db::open(const QString& path) {
    Db d;
    d.path_ = path;
    const QByteArray p = path.toUtf8();
    const int rc = sqlite3_open_v2(p.constData(), &d.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) fail(d.db_, rc, "open " + p.toStdString());
    sqlite3_extended_result_codes(d.db_, 1);
    // A second Ember (or a backup tool) holding a lock should make us wait, not fail.
    sqlite3_busy_timeout(d.db_, 5000);
    return d;
}

Db& Db::operator=(Db&& o) noexcept {
    if (this != &o) {
        close();
        db_ = o.db_;
        path_ = std::move(o.path_);
        o.db_ = nullptr;
    }
    return *this;
}

Db::~Db() { close(); }

void Db::close() {
    if (db_) sqlite3_close_v2(db_);
    db_ = nullptr;
}

void Db::exec(const char* sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        const std::string msg = err ? err : sqlite3_errstr(rc);
        sqlite3_free(err);
        throw SqliteError(rc & 0xff, std::string("exec \"") + sql + "\": " + msg);
    }
}

int64_t Db::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
int Db::changes() const { return sqlite3_changes(db_); }

QString Db::scalar_text(const char* sql) {
    Stmt s = prepare(sql);
    return s.step() ? s.text(0) : QString();
}

int64_t Db::scalar_int(const char* sql) {
    Stmt s = prepare(sql);
    return s.step() ? s.int64(0) : 0;
}

Transaction::Transaction(Db& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
    if (!done_) {
        try {
            db_.exec("ROLLBACK");
        } catch (...) {
            // The failed statement may already have rolled the transaction back.
        }
    }
}

void Transaction::commit() {
    db_.exec("COMMIT");
    done_ = true;
}

}  // namespace ember::app
