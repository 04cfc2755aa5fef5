// The prefix cache's third tier, on disk: published KV blocks (kv_cache.h) written to files so
// that a prompt that begins like one seen before — a chat's earlier turns, a long system
// prompt, a document — is read back instead of computed again, after a restart too.
//
// Folder: <root>/<identity>/, where the identity (16 hex digits) fingerprints everything the
// bytes depend on: the model file, the KV-cache shape and type, and each layer's backend
// layout (Model::open_disk_prefix_cache). Inside it: `seed`, the key of the chain hashes
// (blocks are named by hash, so the hashes must be the same in the next process), and one
// file per block, `<hash>.kvb` (format below). Files are opened without blocking or following
// links, and only regular files are read (a FIFO there once hung start-up). Writes happen on a
// thread of the store's own (the engine thread only copies the block's bytes), into a
// temporary file renamed into place; a file that fails any check when read (a torn write after
// a crash, a flipped bit, a wrong size at start-up) is deleted alone, logged, and counts as a
// miss. Bounded by a byte budget: the block used longest ago goes first (use times are the
// files' modification times, so they survive a restart). Two processes may share a folder (the
// app and `ember serve` on one model): the seed is made once, writes are renames, a block the
// other deleted is a miss; each keeps the budget over the blocks it knows of.
//
// Block file, little-endian: "EMBERKVB", u32 version (1), u32 tokens, u64 hash, u64 parent
// hash, u64 payload bytes, u64 checksum64 of tokens and payload, i32 tokens[], payload (every
// layer's K and V rows of the block, as the backend holds them: KvCache::for_each_half).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/kv/host_prefix_store.h"

namespace ember {

// A block file's fields; parse_block_file checks every one against what the caller expects.
struct BlockFile {
    uint64_t hash = 0, parent = 0;
    std::vector<int32_t> tokens;
    std::span<const uint8_t> payload;  // within the parsed bytes
};
std::vector<uint8_t> encode_block_file(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens,
                                       std::span<const uint8_t> payload);
// The file's fields, or nothing with `why` set: wrong magic or version, a size other than
// `block_tokens` tokens and `payload_bytes` bytes, extra or missing bytes, a bad checksum.
std::optional<BlockFile> parse_block_file(std::span<const uint8_t> bytes, uint32_t block_tokens, uint64_t payload_bytes,
                                          std::string* why);

// Where disk tiers live unless told: $EMBER_KV_CACHE_DIR, else $XDG_CACHE_HOME/ember/kv, else
// ~/.cache/ember/kv (relative or empty variables are ignored, as XDG says).
std::filesystem::path default_disk_prefix_cache_root();

class DiskPrefixStore {
public:
    // Opens (creating) <root>/<identity as 16 hex digits>/ for blocks of `block_tokens` tokens
    // and `block_bytes` bytes. A damaged folder (a file in its place, a seed that is not a
    // regular file, a folder that cannot be written or read) is renamed to
    // "<folder>.damaged-<unix time>" (logged) and a fresh one made. Throws ember::Error when
    // that fails too (the caller then runs without a disk tier).
    DiskPrefixStore(const std::filesystem::path& root, uint64_t identity, uint32_t block_tokens, uint64_t block_bytes,
                    uint64_t budget_bytes);
    ~DiskPrefixStore();  // writes what is queued first
    DiskPrefixStore(const DiskPrefixStore&) = delete;
    DiskPrefixStore& operator=(const DiskPrefixStore&) = delete;

    uint64_t seed() const { return seed_; }  // the chain hashes' key, the same in every process
    const std::filesystem::path& folder() const { return dir_; }

    // Whether the block is stored or queued for writing.
    bool contains(uint64_t hash) const;
    // Queues a block for writing (a copy of its bytes) unless it is stored or queued already,
    // or the queue already holds kMaxQueuedBytes (the disk is slower than the engine: the
    // block is then not kept). Never waits for the disk.
    void put(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, std::vector<uint8_t> bytes);
    // This block of this prefix read back (it stays stored, now the most recently used);
    // nothing on a miss, a queued block, or a file that fails a check (then deleted).
    std::optional<HostPrefixStore::Entry> get(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
    void flush();  // waits until every queued block is written (or failed)

    uint64_t bytes() const;  // the stored files' bytes
    size_t size() const;     // stored blocks
    uint64_t budget() const { return budget_; }

    static constexpr uint64_t kMaxQueuedBytes = 64ull << 20;

private:
    struct Stored {
        uint64_t bytes = 0;
        bool written = false;               // false while queued
        std::list<uint64_t>::iterator lru;  // in lru_ once written
    };
    struct Pending {  // encoded by the writer thread, off the engine thread
        uint64_t hash = 0, parent = 0;
        std::vector<int32_t> tokens;
        std::vector<uint8_t> bytes;
    };
    std::filesystem::path file_of(uint64_t hash) const;
    uint64_t file_bytes() const;  // of every block file
    void open_folder();
    bool set_aside(const std::string& why);
    void read_seed();
    void index_files();
    void writer_main();
    void write_one(const Pending& p);
    void evict_over_budget(bool starting);  // mutex_ held
    void forget(uint64_t hash);             // mutex_ held

    std::filesystem::path dir_;
    uint32_t block_tokens_ = 0;
    uint64_t block_bytes_ = 0, budget_ = 0, seed_ = 0;

    mutable std::mutex mutex_;
    std::condition_variable wake_, idle_;
    std::unordered_map<uint64_t, Stored> index_;
    std::list<uint64_t> lru_;  // written blocks, least recently used first
    uint64_t bytes_ = 0;       // written files
    std::deque<Pending> queue_;
    uint64_t queued_bytes_ = 0;
    bool writing_ = false, stop_ = false;
    bool warned_ = false;  // a failed write was logged (once: a full disk fails every one)
    std::thread writer_;
};

}  // namespace ember
