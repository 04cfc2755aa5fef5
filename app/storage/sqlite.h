// A thin RAII layer over the sqlite3 C API: a connection (Db) and a prepared statement
// (Stmt). Every failing call throws SqliteError carrying SQLite's primary result code, so
// callers can tell corruption (SQLITE_CORRUPT, SQLITE_NOTADB) from everything else.
#pragma once
#include <QByteArray>
#include <QString>
#include <QVariant>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace ember::app {

class SqliteError : public std::runtime_error {
public:
    SqliteError(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
    int code() const { return code_; }  // primary result code (SQLITE_CORRUPT, ...)
    bool is_corruption() const;
    // The disk, not the program: full, read-only, locked, I/O error, unopenable or damaged.
    // Such a failure says nothing about the data in memory, which can still be kept.
    bool is_storage_fault() const;

private:
    int code_;
};

class Stmt {
public:
    Stmt(sqlite3* db, const char* sql);
    ~Stmt();
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    Stmt(Stmt&& o) noexcept : db_(o.db_), st_(o.st_) { o.st_ = nullptr; }

    // Parameters are 1-based, as in SQLite.
    Stmt& bind(int i, int64_t v);
    Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
    Stmt& bind(int i, double v);
    Stmt& bind(int i, const QString& v);
    Stmt& bind(int i, const char* v);
    Stmt& bind_null(int i);
    Stmt& bind(int i, const QVariant& v);  // null, integer, real or text
    template <class T>
    Stmt& bind(int i, const std::optional<T>& v) {
        return v ? bind(i, *v) : bind_null(i);
    }

    bool step();  // true while a row is available
    void run();   // step to completion (statements without rows)
    void reset();

    // Columns are 0-based, as in SQLite.
    int64_t int64(int col) const;
    double real(int col) const;
    QString text(int col) const;
    bool is_null(int col) const;
    QVariant value(int col) const;  // the column as stored: null, integer, real or text

private:
    void check(int rc, const char* what) const;
    sqlite3* db_;
    sqlite3_stmt* st_ = nullptr;
};

class Db {
public:
    enum class Mode {
        ReadWrite,  // creating the file if needed (SQLite quietly falls back to read-only)
        ReadOnly,   // never writes; WAL readers still need the -shm file to be creatable
        Immutable,  // read-only media: no locks, no -shm (the file must not change meanwhile)
    };
    // Opens a database file; ":memory:" for a private in-memory DB.
    static Db open(const QString& path, Mode mode = Mode::ReadWrite);
    Db() = default;
    ~Db();
    Db(Db&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }
    Db& operator=(Db&& o) noexcept;
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    void exec(const char* sql);  // one or more statements, no results
    Stmt prepare(const char* sql) { return Stmt(db_, sql); }
    int64_t last_insert_id() const;
    int changes() const;
    // Runs `sql` and returns the first column of the first row as text (PRAGMAs, checks).
    QString scalar_text(const char* sql);
    int64_t scalar_int(const char* sql);

    sqlite3* handle() const { return db_; }
    bool is_open() const { return db_ != nullptr; }
    bool read_only() const;  // opened read-only, or SQLite fell back to it
    void set_busy_timeout(int ms);
    const QString& path() const { return path_; }
    void close();

private:
    sqlite3* db_ = nullptr;
    QString path_;
};

// Copies the whole database `from` into `to` with SQLite's online backup API, as one write
// transaction on `to` (all or nothing). Throws SqliteError.
void copy_database(Db& from, Db& to);

// BEGIN IMMEDIATE ... COMMIT, rolled back if destroyed without commit() (an exception).
class Transaction {
public:
    explicit Transaction(Db& db);
    ~Transaction();
    void commit();

private:
    Db& db_;
    bool done_ = false;
};

}  // namespace ember::app
