#include "engine/kv/disk_prefix_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "engine/core/checksum.h"
#include "engine/core/log.h"
#include "kernels/common/error.h"

namespace ember {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'K', 'V', 'B'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 8;

template <class T>
void put_le(std::vector<uint8_t>& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof v);
    std::memcpy(out.data() + at, &v, sizeof v);  // little-endian hosts (x86-64, AArch64)
}
template <class T>
T get_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

uint64_t body_checksum(std::span<const uint8_t> tokens, std::span<const uint8_t> payload) {
    return checksum64(payload.data(), payload.size(), checksum64(tokens.data(), tokens.size()));
}

std::string hex16(uint64_t x) {
    char s[17];
    std::snprintf(s, sizeof s, "%016" PRIx64, x);
    return s;
}

// A block file's name, "<16 hex digits>.kvb", as its hash; nothing for any other name.
std::optional<uint64_t> hash_of_name(const std::string& name) {
    if (name.size() != 20 || !name.ends_with(".kvb")) return std::nullopt;
    uint64_t h = 0;
    for (size_t i = 0; i < 16; ++i) {
        const char c = name[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return std::nullopt;
        h = h << 4 | static_cast<uint64_t>(d);
    }
    return h;
}

// What a read or write of a cache file found wrong ("" when nothing): the system's words, or
// one of these two.
using Problem = std::string;
const Problem kNotRegular = "not a regular file";
const Problem kGone = "no such file";  // deleted meanwhile (by another process): no damage

// Up to expected_size + 1 bytes of a regular file (one more: a longer file is noticed). Opened
// without blocking and without following a link: a FIFO or a device where a block or the seed
// should be is refused at once, never waited on (a FIFO once hung start-up in open()).
std::optional<std::vector<uint8_t>> read_whole(const fs::path& p, uint64_t expected_size, Problem* problem = nullptr) {
    const auto fail = [&](Problem why) -> std::optional<std::vector<uint8_t>> {
        if (problem) *problem = std::move(why);
        return std::nullopt;
    };
    const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(errno == ENOENT ? kGone : std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail(kNotRegular);
    }
    std::vector<uint8_t> bytes(expected_size + 1);
    size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const Problem why = std::strerror(errno);
            ::close(fd);
            return fail(why);
        }
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    ::close(fd);
    bytes.resize(got);
    return bytes;
}

// "No space left on device (disk full?)": the hint only where it is the cause.
std::string with_hint(int err) {
    return std::string(std::strerror(err)) + (err == ENOSPC || err == EDQUOT ? " (disk full?)" : "");
}

// Writes a new file (its name must be free); "" or what went wrong.
Problem write_whole(const fs::path& p, std::span<const uint8_t> bytes) {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return with_hint(errno);
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const Problem why = n < 0 ? with_hint(errno) : "short write";
            ::close(fd);
            return why;
        }
        done += static_cast<size_t>(n);
    }
    return ::close(fd) == 0 ? "" : with_hint(errno);
}

}  // namespace

std::vector<uint8_t> encode_block_file(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens,
                                       std::span<const uint8_t> payload) {
    std::vector<uint8_t> out(kMagic, kMagic + 8);
    out.reserve(kHeaderBytes + tokens.size_bytes() + payload.size());
    put_le(out, kVersion);
    put_le(out, static_cast<uint32_t>(tokens.size()));
    put_le(out, hash);
    put_le(out, parent);
    put_le(out, static_cast<uint64_t>(payload.size()));
    const std::span<const uint8_t> t(reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size_bytes());
    put_le(out, body_checksum(t, payload));
    out.insert(out.end(), t.begin(), t.end());
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

std::optional<BlockFile> parse_block_file(std::span<const uint8_t> bytes, uint32_t block_tokens, uint64_t payload_bytes,
                                          std::string* why) {
    const auto fail = [&](const char* what) -> std::optional<BlockFile> {
        if (why) *why = what;
        return std::nullopt;
    };
    if (bytes.size() < kHeaderBytes) return fail("shorter than the header");
    const uint8_t* p = bytes.data();
    if (std::memcmp(p, kMagic, 8) != 0) return fail("not a KV block file");
    if (get_le<uint32_t>(p + 8) != kVersion) return fail("another version");
    if (get_le<uint32_t>(p + 12) != block_tokens) return fail("another block size");
    if (get_le<uint64_t>(p + 32) != payload_bytes) return fail("another payload size");
    const size_t token_bytes = size_t{block_tokens} * 4;
    if (bytes.size() != kHeaderBytes + token_bytes + payload_bytes) return fail("truncated or too long");
    const std::span<const uint8_t> tokens = bytes.subspan(kHeaderBytes, token_bytes);
    const std::span<const uint8_t> payload = bytes.subspan(kHeaderBytes + token_bytes);
    if (get_le<uint64_t>(p + 40) != body_checksum(tokens, payload)) return fail("checksum mismatch");
    BlockFile f;
    f.hash = get_le<uint64_t>(p + 16);
    f.parent = get_le<uint64_t>(p + 24);
    f.tokens.resize(block_tokens);
    std::memcpy(f.tokens.data(), tokens.data(), token_bytes);
    f.payload = payload;
    return f;
}

fs::path default_disk_prefix_cache_root() {
    const auto absolute = [](const char* name) -> std::optional<fs::path> {
        const char* v = std::getenv(name);
        if (!v || !*v || !fs::path(v).is_absolute()) return std::nullopt;
        return fs::path(v);
    };
    if (const auto d = absolute("EMBER_KV_CACHE_DIR")) return *d;
    if (const auto d = absolute("XDG_CACHE_HOME")) return *d / "ember" / "kv";
    if (const auto d = absolute("HOME")) return *d / ".cache" / "ember" / "kv";
    throw Error("KV disk cache: neither EMBER_KV_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
}

DiskPrefixStore::DiskPrefixStore(const fs::path& root, uint64_t identity, uint32_t block_tokens, uint64_t block_bytes,
                                 uint64_t budget_bytes)
    : dir_(root / hex16(identity)), block_tokens_(block_tokens), block_bytes_(block_bytes), budget_(budget_bytes) {
    try {
        open_folder();
    } catch (const Error& e) {
        // A damaged folder (not a folder, a seed that is not a file, no way to write) is kept
        // for a look, out of the way, and a fresh one made; whatever fails then is thrown.
        if (!set_aside(e.what())) throw;
        open_folder();
    }
    writer_ = std::thread([this] { writer_main(); });
}

DiskPrefixStore::~DiskPrefixStore() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    writer_.join();
}

fs::path DiskPrefixStore::file_of(uint64_t hash) const { return dir_ / (hex16(hash) + ".kvb"); }

uint64_t DiskPrefixStore::file_bytes() const { return kHeaderBytes + uint64_t{block_tokens_} * 4 + block_bytes_; }

void DiskPrefixStore::open_folder() {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(dir_, ec);
    if (fs::exists(st) && !fs::is_directory(st)) throw Error("KV disk cache: " + dir_.string() + " is not a folder");
    fs::create_directories(dir_, ec);
    if (ec) throw Error("KV disk cache: cannot create " + dir_.string() + ": " + ec.message());
    read_seed();
    index_files();
}

// Renames the folder (whatever it is) to "<folder>.damaged-<unix time>"; false when it cannot.
bool DiskPrefixStore::set_aside(const std::string& why) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(dir_, ec))) return false;  // nothing there to move
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    fs::path aside = dir_;
    aside += ".damaged-" + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count());
    fs::rename(dir_, aside, ec);
    if (ec) {
        log_warn(why + "; cannot set it aside (" + ec.message() + ")");
        return false;
    }
    log_warn(why + "; set aside as " + aside.string() + ", a new cache starts empty");
    return true;
}

// The seed file holds 8 random bytes, made by whichever process comes first (link() fails
// for the second, which then reads the first's); one of another size is replaced. One that is
// not a regular file (a FIFO, a folder) makes the folder damaged (thrown).
void DiskPrefixStore::read_seed() {
    const fs::path path = dir_ / "seed";
    const auto read = [&] {
        Problem problem;
        const auto bytes = read_whole(path, 8, &problem);
        if (problem == kNotRegular) throw Error("KV disk cache: " + path.string() + " is not a regular file");
        if (bytes && bytes->size() == 8) seed_ = get_le<uint64_t>(bytes->data());
        return bytes && bytes->size() == 8;
    };
    if (read()) return;
    std::random_device rd;
    const uint64_t fresh = (uint64_t{rd()} << 32) ^ rd();
    std::vector<uint8_t> out;
    put_le(out, fresh);
    const fs::path tmp = dir_ / (".tmp-seed-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove(tmp, ec);
    if (const Problem p = write_whole(tmp, out); !p.empty())
        throw Error("KV disk cache: cannot write " + tmp.string() + ": " + p);
    if (::link(tmp.c_str(), path.c_str()) == 0) {
        seed_ = fresh;
    } else if (!read()) {
        fs::rename(tmp, path, ec);
        if (ec) throw Error("KV disk cache: cannot write " + path.string() + ": " + ec.message());
        seed_ = fresh;
    }
    fs::remove(tmp, ec);
}

// The block files already there, least recently used first; a temporary file a crashed
// process left behind (over an hour old) is removed. A block file of the wrong size (torn,
// sparse, another format) is deleted alone, before it can count against the budget; a name
// taken by something other than a file is left alone. Each is logged.
void DiskPrefixStore::index_files() {
    struct Found {
        fs::file_time_type used;
        uint64_t hash, bytes;
    };
    std::vector<Found> found;
    std::error_code ec;
    const auto now = fs::file_time_type::clock::now();
    for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
        const std::string name = e.path().filename().string();
        std::error_code fe;
        const auto mtime = e.last_write_time(fe);
        if (fe) continue;
        if (name.starts_with(".tmp-") && now - mtime > std::chrono::hours(1)) {
            fs::remove(e.path(), fe);
            log_info("KV disk cache: " + e.path().string() + ": a write left unfinished; deleted");
        }
        const auto hash = hash_of_name(name);
        if (!hash) continue;
        if (!e.is_regular_file(fe) || e.is_symlink(fe)) {
            log_warn("KV disk cache: " + e.path().string() + ": not a regular file; ignored");
            continue;
        }
        const uint64_t size = e.file_size(fe);
        if (fe) continue;
        if (size != file_bytes()) {
            fs::remove(e.path(), fe);
            log_warn("KV disk cache: " + e.path().string() + ": " + std::to_string(size) + " bytes, a block has " +
                     std::to_string(file_bytes()) + "; deleted");
            continue;
        }
        found.push_back({mtime, *hash, size});
    }
    if (ec) throw Error("KV disk cache: cannot read " + dir_.string() + ": " + ec.message());
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.used < b.used; });
    std::lock_guard lock(mutex_);
    for (const Found& f : found) {
        Stored& s = index_[f.hash];
        s.bytes = f.bytes;
        s.written = true;
        s.lru = lru_.insert(lru_.end(), f.hash);
        bytes_ += f.bytes;
    }
    evict_over_budget(true);
}

bool DiskPrefixStore::contains(uint64_t hash) const {
    std::lock_guard lock(mutex_);
    return index_.contains(hash);
}

void DiskPrefixStore::put(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, std::vector<uint8_t> bytes) {
    if (bytes.size() != block_bytes_ || tokens.size() != block_tokens_) return;
    const uint64_t file_bytes = kHeaderBytes + tokens.size_bytes() + bytes.size();
    {
        std::lock_guard lock(mutex_);
        // An empty queue takes any block: a state snapshot can be larger than the cap
        // (qwen3next's 36 linear-attention layers: 75 MiB), and would never be stored.
        const bool full = queued_bytes_ > 0 && queued_bytes_ + file_bytes > kMaxQueuedBytes;
        if (index_.contains(hash) || full || file_bytes > budget_) return;
        index_[hash] = Stored{file_bytes, false, {}};
        queued_bytes_ += file_bytes;
        queue_.push_back({hash, parent, std::vector<int32_t>(tokens.begin(), tokens.end()), std::move(bytes)});
    }
    wake_.notify_one();
}

void DiskPrefixStore::writer_main() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_, with everything written
        Pending p = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
        lock.unlock();
        write_one(p);
        lock.lock();
        queued_bytes_ -= kHeaderBytes + p.tokens.size() * sizeof(int32_t) + p.bytes.size();
        writing_ = false;
        idle_.notify_all();
    }
}

// Into a temporary file, renamed into place: a reader never sees half a block (a crash can
// still leave a torn file behind the name, without fsync; its checksum then fails).
void DiskPrefixStore::write_one(const Pending& p) {
    const fs::path tmp = dir_ / (".tmp-" + std::to_string(::getpid()) + "-" + hex16(p.hash));
    std::error_code ec;
    Problem problem = write_whole(tmp, encode_block_file(p.hash, p.parent, p.tokens, p.bytes));
    if (problem.empty() && ::rename(tmp.c_str(), file_of(p.hash).c_str()) != 0)
        problem = "cannot rename it to " + file_of(p.hash).filename().string() + ": " + with_hint(errno);
    std::lock_guard lock(mutex_);
    const auto it = index_.find(p.hash);
    if (!problem.empty()) {
        fs::remove(tmp, ec);
        if (it != index_.end()) index_.erase(it);
        // Once per store: a full disk fails every write.
        if (!warned_)
            log_warn("KV disk cache: cannot write a block to " + dir_.string() + ": " + problem + "; not kept");
        warned_ = true;
        return;
    }
    it->second.written = true;
    it->second.lru = lru_.insert(lru_.end(), p.hash);
    bytes_ += it->second.bytes;
    evict_over_budget(false);
}

// Every deletion is logged: at start-up as info, while serving as debug (then a block goes for
// almost every block written once the budget is full).
void DiskPrefixStore::evict_over_budget(bool starting) {
    size_t n = 0;
    uint64_t freed = 0;
    while (bytes_ > budget_ && !lru_.empty()) {
        const uint64_t hash = lru_.front();
        std::error_code ec;
        fs::remove(file_of(hash), ec);
        freed += index_[hash].bytes;
        ++n;
        forget(hash);
    }
    if (n == 0) return;
    log(starting ? LogLevel::Info : LogLevel::Debug,
        "KV disk cache: " + std::to_string(n) + " block" + (n == 1 ? "" : "s") + " (" + std::to_string(freed) +
            " bytes) used longest ago deleted, to stay within " + std::to_string(budget_) + " bytes");
}

void DiskPrefixStore::forget(uint64_t hash) {
    const auto it = index_.find(hash);
    if (it == index_.end() || !it->second.written) return;
    lru_.erase(it->second.lru);
    bytes_ -= it->second.bytes;
    index_.erase(it);
}

std::optional<HostPrefixStore::Entry> DiskPrefixStore::get(uint64_t hash, uint64_t parent,
                                                           std::span<const int32_t> tokens) {
    {
        std::lock_guard lock(mutex_);
        const auto it = index_.find(hash);
        if (it == index_.end() || !it->second.written) return std::nullopt;
    }
    const fs::path path = file_of(hash);
    Problem problem;
    auto bytes = read_whole(path, file_bytes(), &problem);
    std::string why = problem;
    const std::optional<BlockFile> f =
        bytes ? parse_block_file(*bytes, block_tokens_, block_bytes_, &why) : std::nullopt;
    if (!f || f->hash != hash) {
        // A vanished file was evicted by another process: a plain miss. Anything else costs
        // this block only: deleted (a name taken by no regular file is left alone), logged.
        if (bytes || problem != kGone) {
            std::error_code ec;
            const bool regular = problem != kNotRegular;
            if (regular) fs::remove(path, ec);
            log_warn("KV disk cache: " + path.string() + ": " + (f ? std::string("another block") : why) +
                     (regular ? "; deleted" : "; ignored"));
        }
        std::lock_guard lock(mutex_);
        forget(hash);
        return std::nullopt;
    }
    if (f->parent != parent || !std::equal(tokens.begin(), tokens.end(), f->tokens.begin(), f->tokens.end()))
        return std::nullopt;  // another prefix under the same hash: a collision, not damage
    std::error_code ec;
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // used now, in the next process too
    {
        std::lock_guard lock(mutex_);
        if (const auto it = index_.find(hash); it != index_.end() && it->second.written)
            lru_.splice(lru_.end(), lru_, it->second.lru);
    }
    // The payload is the file's tail: the read buffer becomes the entry's bytes (no second copy).
    std::vector<uint8_t> payload = std::move(*bytes);
    payload.erase(payload.begin(), payload.end() - static_cast<std::ptrdiff_t>(block_bytes_));
    return HostPrefixStore::Entry{parent, f->tokens, std::move(payload)};
}

void DiskPrefixStore::flush() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

uint64_t DiskPrefixStore::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

size_t DiskPrefixStore::size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
}

}  // namespace ember
