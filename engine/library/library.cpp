// The model library's SQLite index (sqlite3 C API) and the files it points at.
#include "engine/library/library.h"

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_split.h"
#include "engine/hub/hub_names.h"
#include "engine/hub/pull_lock.h"
#include "engine/hub/sha256.h"
#include "engine/models/model_info.h"
#include "kernels/common/error.h"

namespace ember::library {
namespace fs = std::filesystem;
namespace {

// Why each column exists: name is what `ember rm`/the app show and accept; repo, revision and
// file say where a download came from (a re-pull replaces it); sha256 and size are what was
// verified, so a file changed behind the library's back is noticed; architecture, parameters,
// quantization and context_length are read from the GGUF once, so listing never maps a file.
// model_files holds every part of a split model in order (part 0 is the one the engine opens).
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS models(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  repo TEXT NOT NULL DEFAULT '',
  revision TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  architecture TEXT NOT NULL,
  parameters INTEGER NOT NULL,
  quantization TEXT NOT NULL,
  context_length INTEGER NOT NULL,
  source TEXT NOT NULL CHECK(source IN ('downloaded', 'imported')),
  path TEXT NOT NULL UNIQUE,
  added_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS model_files(
  model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
  part INTEGER NOT NULL,
  file TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY(model_id, part));
CREATE TABLE IF NOT EXISTS pending_pulls(
  repo TEXT NOT NULL,
  revision TEXT NOT NULL,
  quant TEXT NOT NULL,
  total INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  PRIMARY KEY(repo, revision, quant));
CREATE TABLE IF NOT EXISTS pending_files(
  repo TEXT NOT NULL,
  revision TEXT NOT NULL,
  quant TEXT NOT NULL,
  part INTEGER NOT NULL,
  file TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY(repo, revision, quant, part),
  FOREIGN KEY(repo, revision, quant) REFERENCES pending_pulls(repo, revision, quant) ON DELETE CASCADE);
)sql";

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
    throw Error("model library: " + what + ": " + (db ? sqlite3_errmsg(db) : "cannot open"));
}

class Stmt {
public:
    Stmt(sqlite3* db, const char* sql) : db_(db) {
        if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK) fail(db, "prepare");
    }
    ~Stmt() { sqlite3_finalize(st_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    Stmt& bind(int i, const std::string& v) {
        if (sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT) != SQLITE_OK)
            fail(db_, "bind");
        return *this;
    }
    Stmt& bind(int i, int64_t v) {
        if (sqlite3_bind_int64(st_, i, v) != SQLITE_OK) fail(db_, "bind");
        return *this;
    }
    Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
    bool step() {
        const int rc = sqlite3_step(st_);
        if (rc == SQLITE_ROW) return true;
        if (rc != SQLITE_DONE) fail(db_, "step");
        return false;
    }
    std::string text(int c) const {
        const auto* p = sqlite3_column_text(st_, c);
        return p ? reinterpret_cast<const char*>(p) : "";
    }
    int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }

private:
    sqlite3* db_;
    sqlite3_stmt* st_ = nullptr;
};

void exec(sqlite3* db, const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string msg = err ? err : "error";
        sqlite3_free(err);
        throw Error(std::string("model library: ") + msg);
    }
}

// Rolls back unless committed: a failed insert leaves no half-written model behind.
class Transaction {
public:
    explicit Transaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }
    ~Transaction() {
        if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    void commit() {
        exec(db_, "COMMIT");
        db_ = nullptr;
    }

private:
    sqlite3* db_;
};

int64_t now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Reads what the index keeps from the GGUF parts (each fully validated by GgufFile::open).
// The first part of a split model written by gguf-split opens and joins all of them; parts
// named as a split but without its metadata are each a model of their own.
void describe(LibraryModel& m) {
    m.size = 0;
    m.parameters = 0;
    const GgufFile first = GgufFile::open(m.parts.front().path);
    const bool joined = first.split_count() > 1;
    if (joined && first.split_count() != m.parts.size())
        throw Error(m.parts.front().path + ": a split model of " + std::to_string(first.split_count()) +
                    " parts, but " + std::to_string(m.parts.size()) + " are named");
    const ModelInfo info = describe_model(first);
    m.architecture = info.architecture;
    m.context_length = info.context_length.value_or(0);
    if (m.quantization.empty()) m.quantization = info.file_type;
    m.parameters = info.n_params;
    for (size_t i = 0; i < m.parts.size(); ++i) {
        m.size += m.parts[i].size;
        if (i > 0 && !joined) m.parameters += describe_model(GgufFile::open(m.parts[i].path)).n_params;
    }
    m.path = m.parts.front().path;
    m.file = m.parts.front().file;
    m.sha256 = m.parts.front().sha256;
}

bool on_disk(const ModelPart& p) {
    std::error_code ec;
    return fs::is_regular_file(p.path, ec) && fs::file_size(p.path, ec) == p.size && !ec;
}

// All parts of a split model from its first part's path, in order; one part otherwise.
std::vector<fs::path> parts_of(const fs::path& first) {
    const auto split = split_name_of(first.filename().string());
    if (!split) return {first};
    if (split->index != 1)
        throw Error(first.string() + ": part " + std::to_string(split->index) + " of a split model; import part 1 (" +
                    "its name ends in -00001-of-" +
                    first.filename().string().substr(first.filename().string().size() - 10) + ")");
    std::vector<fs::path> out;
    for (uint32_t i = 1; i <= split->count; ++i) {
        const fs::path p = first.parent_path() / split_part_name(split->stem, i, split->count);
        if (!fs::is_regular_file(p)) throw Error(first.string() + ": split model part " + p.string() + " is missing");
        out.push_back(p);
    }
    return out;
}

}  // namespace

std::string source_name(ModelSource s) { return s == ModelSource::Downloaded ? "downloaded" : "imported"; }

fs::path Library::default_dir() {
    if (const char* d = std::getenv("EMBER_MODELS_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x && fs::path(x).is_absolute())
        return fs::path(x) / "ember" / "models";
    const char* home = std::getenv("HOME");
    if (!home || !*home) throw Error("model library: neither EMBER_MODELS_DIR, XDG_DATA_HOME nor HOME is set");
    return fs::path(home) / ".local" / "share" / "ember" / "models";
}

Library::Library(fs::path dir) : dir_(std::move(dir)) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw Error("model library: cannot create " + dir_.string() + ": " + ec.message());
    dir_ = fs::absolute(dir_);
    const std::string db_path = (dir_ / "library.sqlite").string();
    if (sqlite3_open_v2(db_path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
        const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        throw Error("model library: cannot open " + db_path + ": " + msg);
    }
    sqlite3_busy_timeout(db_, 5000);  // the app and a CLI may write at the same moment
    exec(db_, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;");
    exec(db_, kSchema);
}

Library::~Library() { sqlite3_close(db_); }

fs::path Library::file_path(const std::string& repo, const std::string& revision, const std::string& file) const {
    hub::check_repo_id(repo);
    hub::check_revision(revision);
    hub::check_remote_path(file);
    return dir_ / repo / revision / file;
}

fs::path Library::part_path(const std::string& repo, const std::string& revision, const std::string& file) const {
    fs::path p = file_path(repo, revision, file);
    p += ".part";
    return p;
}

LibraryModel Library::insert(LibraryModel m) {
    std::lock_guard lock(mutex_);
    Transaction tx(db_);
    Stmt del(db_, "DELETE FROM models WHERE path = ?1");
    del.bind(1, m.path).step();
    Stmt ins(db_,
             "INSERT INTO models(name, repo, revision, file, sha256, size, architecture, parameters, quantization, "
             "context_length, source, path, added_at) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)");
    m.added_at = now_s();
    ins.bind(1, m.name).bind(2, m.repo).bind(3, m.revision).bind(4, m.file).bind(5, m.sha256).bind(6, m.size);
    ins.bind(7, m.architecture).bind(8, m.parameters).bind(9, m.quantization).bind(10, m.context_length);
    ins.bind(11, source_name(m.source)).bind(12, m.path).bind(13, m.added_at).step();
    m.id = sqlite3_last_insert_rowid(db_);
    for (size_t i = 0; i < m.parts.size(); ++i) {
        Stmt part(db_, "INSERT INTO model_files(model_id, part, file, path, size, sha256) VALUES(?1,?2,?3,?4,?5,?6)");
        const ModelPart& p = m.parts[i];
        part.bind(1, m.id).bind(2, static_cast<int64_t>(i)).bind(3, p.file).bind(4, p.path).bind(5, p.size);
        part.bind(6, p.sha256).step();
    }
    tx.commit();
    m.present = true;
    return m;
}

LibraryModel Library::add_download(const std::string& repo, const std::string& revision, const std::string& quant,
                                   const std::vector<ModelPart>& parts) {
    if (parts.empty()) throw Error("model library: a download with no files");
    LibraryModel m;
    m.repo = repo;
    m.revision = revision;
    m.quantization = quant;
    m.source = ModelSource::Downloaded;
    m.parts = parts;
    describe(m);
    m.name = repo + ":" + (quant.empty() ? m.quantization : quant);
    return insert(std::move(m));
}

LibraryModel Library::import_file(const fs::path& gguf) {
    std::error_code ec;
    const fs::path first = fs::canonical(gguf, ec);
    if (ec || !fs::is_regular_file(first)) throw Error(gguf.string() + ": not a readable file");
    LibraryModel m;
    m.source = ModelSource::Imported;
    for (const fs::path& p : parts_of(first))
        m.parts.push_back({p.filename().string(), p.string(), fs::file_size(p), hub::sha256_file(p.string())});
    describe(m);  // the full parse: a file that does not open is refused here
    const std::string stem = first.stem().string();
    const auto split = split_name_of(first.filename().string());
    m.name = split ? split->stem : stem;
    return insert(std::move(m));
}

std::vector<LibraryModel> Library::query(const std::string& where, const std::string& arg) const {
    std::lock_guard lock(mutex_);
    const std::string sql =
        "SELECT id, name, repo, revision, file, sha256, size, architecture, parameters, quantization, "
        "context_length, source, path, added_at FROM models " +
        where + " ORDER BY name, id";
    Stmt st(db_, sql.c_str());
    if (!arg.empty()) st.bind(1, arg);
    std::vector<LibraryModel> out;
    while (st.step()) {
        LibraryModel m;
        m.id = st.i64(0);
        m.name = st.text(1), m.repo = st.text(2), m.revision = st.text(3), m.file = st.text(4);
        m.sha256 = st.text(5), m.size = static_cast<uint64_t>(st.i64(6)), m.architecture = st.text(7);
        m.parameters = static_cast<uint64_t>(st.i64(8)), m.quantization = st.text(9);
        m.context_length = static_cast<uint64_t>(st.i64(10));
        m.source = st.text(11) == "imported" ? ModelSource::Imported : ModelSource::Downloaded;
        m.path = st.text(12), m.added_at = st.i64(13);
        out.push_back(std::move(m));
    }
    for (LibraryModel& m : out) {
        Stmt parts(db_, "SELECT file, path, size, sha256 FROM model_files WHERE model_id = ?1 ORDER BY part");
        parts.bind(1, m.id);
        while (parts.step())
            m.parts.push_back({parts.text(0), parts.text(1), static_cast<uint64_t>(parts.i64(2)), parts.text(3)});
        m.present = !m.parts.empty();
        for (const ModelPart& p : m.parts) m.present = m.present && on_disk(p);
    }
    return out;
}

std::vector<LibraryModel> Library::list() const { return query("", ""); }

std::optional<LibraryModel> Library::find(const std::string& key) const {
    if (!key.empty() && key.find_first_not_of("0123456789") == std::string::npos) {
        auto byid = query("WHERE id = ?1", key);
        if (!byid.empty()) return byid.front();
    }
    auto byname = query("WHERE name = ?1 COLLATE NOCASE", key);
    if (byname.size() == 1) return byname.front();
    auto byrepo = query("WHERE repo = ?1", key);
    if (byrepo.size() == 1) return byrepo.front();
    if (byrepo.size() > 1) {
        std::string names;
        for (const auto& m : byrepo) names += (names.empty() ? "" : ", ") + m.name;
        throw Error("'" + key + "' names several models: " + names);
    }
    return std::nullopt;
}

void Library::remove(int64_t id) {
    auto rows = query("WHERE id = ?1", std::to_string(id));
    if (rows.empty()) throw Error("model library: no model with id " + std::to_string(id));
    const LibraryModel& m = rows.front();
    {
        std::lock_guard lock(mutex_);
        Stmt del(db_, "DELETE FROM models WHERE id = ?1");
        del.bind(1, id).step();
    }
    // The row goes first: a crash between the two leaves a stray file, never a row without one.
    if (m.source != ModelSource::Downloaded) return;  // an import is the user's own file
    for (const ModelPart& p : m.parts) {
        std::error_code ec;
        fs::remove(p.path, ec);
        fs::remove(p.path + ".part", ec);
    }
}

size_t Library::remove_partials(const std::string& repo) {
    hub::check_repo_id(repo);
    size_t n = 0;
    const fs::path root = dir_ / repo;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return 0;
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->is_regular_file() && it->path().extension() == ".part") found.push_back(it->path());
    for (const fs::path& p : found) n += fs::remove(p, ec) ? 1 : 0;
    std::lock_guard lock(mutex_);
    Stmt forget(db_, "DELETE FROM pending_pulls WHERE repo = ?1");
    forget.bind(1, repo).step();
    return n;
}

std::vector<fs::path> Library::partial_downloads() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->is_regular_file() && it->path().extension() == ".part") out.push_back(it->path());
    return out;
}

void Library::begin_pull(const PendingPull& pull) {
    for (const ModelPart& f : pull.files) file_path(pull.repo, pull.revision, f.file);  // checks the names
    std::lock_guard lock(mutex_);
    Transaction tx(db_);
    Stmt del(db_, "DELETE FROM pending_pulls WHERE repo = ?1 AND revision = ?2 AND quant = ?3");
    del.bind(1, pull.repo).bind(2, pull.revision).bind(3, pull.quant).step();
    Stmt ins(db_, "INSERT INTO pending_pulls(repo, revision, quant, total, started_at) VALUES(?1,?2,?3,?4,?5)");
    ins.bind(1, pull.repo).bind(2, pull.revision).bind(3, pull.quant).bind(4, pull.total).bind(5, now_s()).step();
    for (size_t i = 0; i < pull.files.size(); ++i) {
        Stmt f(db_,
               "INSERT INTO pending_files(repo, revision, quant, part, file, size, sha256) "
               "VALUES(?1,?2,?3,?4,?5,?6,?7)");
        f.bind(1, pull.repo).bind(2, pull.revision).bind(3, pull.quant).bind(4, static_cast<int64_t>(i));
        f.bind(5, pull.files[i].file).bind(6, pull.files[i].size).bind(7, pull.files[i].sha256).step();
    }
    tx.commit();
}

void Library::end_pull(const std::string& repo, const std::string& revision, const std::string& quant) {
    std::lock_guard lock(mutex_);
    Stmt del(db_, "DELETE FROM pending_pulls WHERE repo = ?1 AND revision = ?2 AND quant = ?3");
    del.bind(1, repo).bind(2, revision).bind(3, quant).step();
}

std::vector<PendingPull> Library::pending_pulls() const {
    std::vector<PendingPull> out;
    {
        std::lock_guard lock(mutex_);
        Stmt st(db_, "SELECT repo, revision, quant, total, started_at FROM pending_pulls ORDER BY started_at, rowid");
        while (st.step()) {
            PendingPull p;
            p.repo = st.text(0), p.revision = st.text(1), p.quant = st.text(2);
            p.total = static_cast<uint64_t>(st.i64(3)), p.started_at = st.i64(4);
            out.push_back(std::move(p));
        }
        for (PendingPull& p : out) {
            Stmt f(db_,
                   "SELECT file, size, sha256 FROM pending_files WHERE repo = ?1 AND revision = ?2 AND quant = ?3 "
                   "ORDER BY part");
            f.bind(1, p.repo).bind(2, p.revision).bind(3, p.quant);
            while (f.step()) p.files.push_back({f.text(0), "", static_cast<uint64_t>(f.i64(1)), f.text(2)});
        }
    }
    for (PendingPull& p : out) {
        for (ModelPart& f : p.files) {
            f.path = file_path(p.repo, p.revision, f.file).string();
            std::error_code ec;
            const uint64_t done = fs::file_size(f.path, ec);
            if (!ec && done == f.size) {
                p.bytes_on_disk += done;
                continue;
            }
            const uint64_t partial = fs::file_size(f.path + ".part", ec);
            if (!ec) p.bytes_on_disk += std::min(partial, f.size);
        }
    }
    return out;
}

void Library::discard_pull(const std::string& repo, const std::string& revision, const std::string& quant) {
    for (const PendingPull& p : pending_pulls()) {
        if (p.repo != repo || p.revision != revision || p.quant != quant) continue;
        for (const ModelPart& f : p.files) {
            // Another pull of this file (another process) is writing it: its bytes are its own.
            const hub::PullLock held = hub::PullLock::try_take(f.path + ".part");
            if (!held.owns()) continue;
            std::error_code ec;
            fs::remove(f.path + ".part", ec);
            std::lock_guard lock(mutex_);
            Stmt used(db_, "SELECT 1 FROM model_files WHERE path = ?1");
            if (!used.bind(1, f.path).step()) fs::remove(f.path, ec);  // a finished part of this pull only
        }
    }
    end_pull(repo, revision, quant);
}

}  // namespace ember::library
