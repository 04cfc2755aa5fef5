#include "app/storage/sqlite.h"

#include <sqlite3.h>

#include <QUrl>

namespace ember::app {
namespace {

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
    const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw SqliteError(rc & 0xff,
                      what + ": " + (msg ? msg : "unknown error") + " (SQLite code " + std::to_string(rc) + ")");
}

}  // namespace

bool SqliteError::is_corruption() const { return code_ == SQLITE_CORRUPT || code_ == SQLITE_NOTADB; }

bool SqliteError::is_storage_fault() const {
    switch (code_) {
        case SQLITE_FULL:
        case SQLITE_READONLY:
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
        case SQLITE_IOERR:
        case SQLITE_CANTOPEN:
        case SQLITE_PERM:
        case SQLITE_PROTOCOL:
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
            return true;
        default:
            return false;
    }
}

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

Stmt& Stmt::bind(int i, const QVariant& v) {
    switch (v.typeId()) {
        case QMetaType::UnknownType:
            return bind_null(i);
        case QMetaType::LongLong:
        case QMetaType::Int:
            return bind(i, static_cast<int64_t>(v.toLongLong()));
        case QMetaType::Double:
            return bind(i, v.toDouble());
        case QMetaType::QByteArray: {
            const QByteArray b = v.toByteArray();
            check(sqlite3_bind_blob(st_, i, b.constData(), static_cast<int>(b.size()), SQLITE_TRANSIENT), "bind");
            return *this;
        }
        default:
            return v.isNull() ? bind_null(i) : bind(i, v.toString());
    }
}

QVariant Stmt::value(int col) const {
    switch (sqlite3_column_type(st_, col)) {
        case SQLITE_NULL:
            return {};
        case SQLITE_INTEGER:
            return QVariant::fromValue<qlonglong>(sqlite3_column_int64(st_, col));
        case SQLITE_FLOAT:
            return sqlite3_column_double(st_, col);
        case SQLITE_BLOB: {
            const void* p = sqlite3_column_blob(st_, col);
            return QByteArray(static_cast<const char*>(p), sqlite3_column_bytes(st_, col));
        }
        default:
            return text(col);
    }
}

bool Stmt::step() {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, rc, std::string("step \"") + sqlite3_sql(st_) + "\"");
}

void Stmt::run() {
    while (step()) {}
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

Db Db::open(const QString& path, Mode mode) {
    Db d;
    d.path_ = path;
    QByteArray p = path.toUtf8();
    // URI filenames on: ATTACH of a read-only file needs them (our paths never start "file:").
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
    if (mode != Mode::ReadWrite && path != QLatin1String(":memory:")) {
        // A URI: the only way to ask for immutable; '?' and '#' in the path are escaped.
        QByteArray uri = "file:" + QUrl::toPercentEncoding(path, "/");
        uri += mode == Mode::Immutable ? "?immutable=1" : "?mode=ro";
        p = uri;
        flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    }
    const int rc = sqlite3_open_v2(p.constData(), &d.db_, flags, nullptr);
    if (rc != SQLITE_OK) fail(d.db_, rc, "open " + path.toStdString());
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

bool Db::read_only() const { return db_ && sqlite3_db_readonly(db_, "main") == 1; }

void Db::set_busy_timeout(int ms) {
    if (db_) sqlite3_busy_timeout(db_, ms);
}

void copy_database(Db& from, Db& to) {
    sqlite3_backup* b = sqlite3_backup_init(to.handle(), "main", from.handle(), "main");
    if (!b) fail(to.handle(), sqlite3_errcode(to.handle()), "backup " + from.path().toStdString());
    const int step = sqlite3_backup_step(b, -1);
    const int rc = sqlite3_backup_finish(b);
    if (step != SQLITE_DONE)
        fail(nullptr, step, "backup " + from.path().toStdString() + " to " + to.path().toStdString());
    if (rc != SQLITE_OK) fail(to.handle(), rc, "backup " + from.path().toStdString());
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
