// The model library: GGUF files in one folder, indexed in SQLite, shared by the app and the
// CLI (each opens the same database; WAL and a busy timeout let both write).
//
// Folder: $EMBER_MODELS_DIR, else $XDG_DATA_HOME/ember/models, else ~/.local/share/ember/models.
// Downloads land in <folder>/<owner>/<name>/<revision>/<file>; the index is
// <folder>/library.sqlite. A row exists only for a verified model: a download whose SHA-256
// matched what the hub published, or an imported file that the GGUF reader parsed in full.
// Imports are referenced where they are, not copied: models are gigabytes and the user chose
// where to keep them; removing an imported model therefore removes only its row.
//
// Thread-safe: one connection per Library, calls serialised by a mutex.
#pragma once
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace ember::library {

enum class ModelSource { Downloaded, Imported };

struct ModelPart {
    std::string file;  // name in the repository (downloads) or the file name (imports)
    std::string path;  // absolute local path
    uint64_t size = 0;
    std::string sha256;  // 64 hex digits
};

struct LibraryModel {
    int64_t id = 0;
    std::string name;            // "owner/name:Q4_K_M" for downloads, the file stem for imports
    std::string repo, revision;  // "" for imports
    std::string file;            // the first part's name
    std::string sha256;          // the first part's
    uint64_t size = 0;           // all parts
    std::string architecture;
    uint64_t parameters = 0;
    std::string quantization;  // from the file name when it says, else the dominant weight type
    uint64_t context_length = 0;
    ModelSource source = ModelSource::Downloaded;
    std::string path;  // the first part: what the engine opens
    std::vector<ModelPart> parts;
    int64_t added_at = 0;  // Unix seconds
    // Every part is on disk at its recorded size (checked when listed; a file removed or
    // truncated behind the library's back shows as not present, never as ready).
    bool present = false;
};

std::string source_name(ModelSource s);  // "downloaded" / "imported"

// A pull that started and has not ended (paused, failed, or its process stopped): recorded
// before its first byte is asked for, forgotten once the model is registered or the pull is
// cancelled. The model manager lists these after a restart, with the bytes already on disk,
// to resume (Range from each partial file's size) or discard.
struct PendingPull {
    std::string repo, revision, quant;
    std::vector<ModelPart> files;  // file, size and published SHA-256; path: where it lands
    uint64_t total = 0;            // all files
    uint64_t bytes_on_disk = 0;    // finished files + partial ones (pending_pulls() measures)
    int64_t started_at = 0;        // Unix seconds
};

class Library {
public:
    // $EMBER_MODELS_DIR, $XDG_DATA_HOME/ember/models or ~/.local/share/ember/models.
    static std::filesystem::path default_dir();

    // Creates the folder and the index when missing. Throws ember::Error naming the path.
    explicit Library(std::filesystem::path dir = default_dir());
    ~Library();
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;

    const std::filesystem::path& dir() const { return dir_; }

    // Where a downloaded file lives, and its partial download (".part"). Names are checked
    // (engine/hub/hub_names.h): nothing can point outside the folder.
    std::filesystem::path file_path(const std::string& repo, const std::string& revision,
                                    const std::string& file) const;
    std::filesystem::path part_path(const std::string& repo, const std::string& revision,
                                    const std::string& file) const;

    // Registers verified downloaded files (one, or a split model's parts in order) under
    // "repo:quant". Reads each part with the GGUF reader; replaces an earlier row of the same
    // model. The caller has checked each part's SHA-256 against the hub's.
    LibraryModel add_download(const std::string& repo, const std::string& revision, const std::string& quant,
                              const std::vector<ModelPart>& parts);
    // Validates a GGUF file with a full parse (every part, for a split model's first part)
    // and references it in place. Throws ember::Error saying why a file is refused.
    LibraryModel import_file(const std::filesystem::path& gguf);

    std::vector<LibraryModel> list() const;
    // By id ("3"), exact name ("owner/name:Q8_0"), or repository when it has one model.
    std::optional<LibraryModel> find(const std::string& key) const;
    // Deletes a model's row, and for downloads its files and any ".part" beside them.
    void remove(int64_t id);
    // Deletes the partial downloads of a repository (all revisions); returns how many.
    size_t remove_partials(const std::string& repo);
    // Partial downloads on disk (".part" files under the folder), for `ember ls`.
    std::vector<std::filesystem::path> partial_downloads() const;

    // Pending pulls (see PendingPull): record one (replacing an earlier record of the same
    // repo, revision and quant), forget it, list them oldest first, or discard one: its
    // partial files, and its finished files that no registered model uses, are deleted.
    void begin_pull(const PendingPull& pull);
    void end_pull(const std::string& repo, const std::string& revision, const std::string& quant);
    std::vector<PendingPull> pending_pulls() const;
    void discard_pull(const std::string& repo, const std::string& revision, const std::string& quant);

private:
    LibraryModel insert(LibraryModel m);
    std::vector<LibraryModel> query(const std::string& where, const std::string& arg) const;
    std::filesystem::path dir_;
    sqlite3* db_ = nullptr;
    mutable std::mutex mutex_;
};

}  // namespace ember::library
