#include "engine/core/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/log.h"
#include "kernels/common/error.h"

namespace ember {

namespace {

constexpr size_t kHuge = size_t{2} << 20;

// The FilePmdMapped bytes of the mapping that starts at addr, from /proc/self/smaps.
size_t pmd_mapped_bytes(const void* addr) {
    std::ifstream smaps("/proc/self/smaps");
    char head[32];
    std::snprintf(head, sizeof head, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(addr)));
    std::string line;
    bool ours = false;
    while (std::getline(smaps, line)) {
        if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
            line.find('-') != std::string::npos && line.find(':') > line.find(' ')) {
            ours = line.rfind(head, 0) == 0;  // a mapping's header line
        } else if (ours && line.rfind("FilePmdMapped:", 0) == 0) {
            return static_cast<size_t>(std::strtoull(line.c_str() + 14, nullptr, 10)) * 1024;
        }
    }
    return 0;
}

// Whether every 4 KiB page of [p, p + n) is in the page cache.
bool resident(const uint8_t* p, size_t n) {
    std::vector<unsigned char> v((n + 4095) / 4096);
    if (::mincore(const_cast<uint8_t*>(p), n, v.data()) != 0) return false;
    return std::all_of(v.begin(), v.end(), [](unsigned char c) { return c & 1; });
}

void touch(const uint8_t* p, size_t n) {
    for (size_t o = 0; o < n; o += 4096) static_cast<void>(*static_cast<const volatile uint8_t*>(p + o));
}

// ---- SIGBUS guard ------------------------------------------------------------------------
// A read of a mapped page that lies wholly beyond the end of the file (it was truncated
// after mapping) raises SIGBUS, whose default action kills the process. The handler looks
// the address up in this table of live maps; when it lies in one, it maps anonymous zero
// pages from the faulting page to the end of that map (every later page is past the end of
// the file too), sets the map's flag and returns, so the read completes with zeros and the
// engine, checking the flag after each forward pass, fails the request. A fault elsewhere
// restores the previous action and lets the fault repeat under it (or re-raises a SIGBUS
// that was sent, not caused). Only async-signal-safe calls (mmap, sigaction, raise) and
// lock-free atomics are used in the handler.

struct GuardSlot {
    std::atomic<bool> used{false};
    std::atomic<uintptr_t> begin{0}, end{0};  // [begin, end), page-aligned end; 0, 0 = free
    std::atomic<bool> truncated{false};
};
constexpr size_t kGuardSlots = 64;  // live maps at once (a process holds one or two models)
std::array<GuardSlot, kGuardSlots> g_guard;
struct sigaction g_previous_sigbus {};
uintptr_t g_page = 4096;

void on_sigbus(int sig, siginfo_t* info, void* context) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (info->si_code > 0) {  // raised by a fault, not sent
        for (GuardSlot& s : g_guard) {
            const uintptr_t b = s.begin.load(std::memory_order_acquire), e = s.end.load(std::memory_order_acquire);
            if (addr < b || addr >= e) continue;
            const uintptr_t from = addr & ~(g_page - 1);
            void* p = ::mmap(reinterpret_cast<void*>(from), e - from, PROT_READ,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (p == MAP_FAILED) break;
            s.truncated.store(true, std::memory_order_release);
            return;
        }
    }
    ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
    if (info->si_code <= 0) {
        ::raise(sig);  // delivered under the previous action once this handler returns
    } else if (!(g_previous_sigbus.sa_flags & SA_SIGINFO) && g_previous_sigbus.sa_handler != SIG_DFL &&
               g_previous_sigbus.sa_handler != SIG_IGN) {
        g_previous_sigbus.sa_handler(sig);  // a plain handler: call it (the fault would repeat)
    } else if (g_previous_sigbus.sa_flags & SA_SIGINFO) {
        g_previous_sigbus.sa_sigaction(sig, info, context);
    }
    // SIG_DFL / SIG_IGN: returning re-executes the read, which faults again under it.
}

void install_sigbus_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
    });
}

// Registers [p, p + n) (page-aligned p); returns the slot, or -1 when the table is full.
int guard_map(const uint8_t* p, size_t n) {
    install_sigbus_handler();
    for (size_t i = 0; i < kGuardSlots; ++i) {
        bool expected = false;
        if (!g_guard[i].used.compare_exchange_strong(expected, true)) continue;
        const auto b = reinterpret_cast<uintptr_t>(p);
        g_guard[i].truncated.store(false);
        g_guard[i].begin.store(b, std::memory_order_release);
        g_guard[i].end.store((b + n + g_page - 1) & ~(g_page - 1), std::memory_order_release);
        return static_cast<int>(i);
    }
    log_warn("more than 64 files mapped at once: a truncated model file would crash this process");
    return -1;
}

void unguard_map(int slot) {
    if (slot < 0) return;
    GuardSlot& s = g_guard[static_cast<size_t>(slot)];
    s.end.store(0, std::memory_order_release);
    s.begin.store(0, std::memory_order_release);
    s.used.store(false, std::memory_order_release);
}

// "a FIFO", "a directory", ...: what a path that is not a regular file is.
std::string file_kind(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int64_t mtime_ns(const struct stat& st) { return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec; }

constexpr size_t kSampleBytes = size_t{64} << 10;  // a GGUF header and the start of its metadata

// `n` bytes of the file at `offset` as it is now (not through the map); empty on a short read.
std::vector<uint8_t> read_at(int fd, uint64_t offset, size_t n) {
    std::vector<uint8_t> b(n);
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd, b.data() + got, n - got, static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return {};
        got += static_cast<size_t>(r);
    }
    return b;
}

}  // namespace

MappedFile::MappedFile(const std::string& path, bool huge_pages) : path_(path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const std::string kind = file_kind(st.st_mode);
        ::close(fd);
        throw Error(path + ": cannot load: it is " + kind + ", not a regular file");
    }
    fd_ = fd;
    size_ = static_cast<size_t>(st.st_size);
    mtime_ns_ = mtime_ns(st);
    const size_t sample = std::min(size_, kSampleBytes);
    head_ = read_at(fd, 0, sample);
    tail_ = read_at(fd, size_ - sample, sample);
    try {
        huge_pages = huge_pages && size_ >= 2 * kHuge;
        if (size_ > 0) map(fd, huge_pages);
        if (data_) guard_ = guard_map(data_, size_);
        if (huge_pages) refresh_page_cache(fd);
    } catch (...) {
        release();
        throw;
    }
}

bool MappedFile::changed_underneath() const {
    if (guard_ >= 0 && g_guard[static_cast<size_t>(guard_)].truncated.load(std::memory_order_acquire)) return true;
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) return false;
    if (static_cast<size_t>(st.st_size) != size_) return true;
    const int64_t mtime = mtime_ns(st);
    if (mtime == mtime_ns_.load(std::memory_order_relaxed)) return false;
    if (!same_sample_bytes()) return true;
    mtime_ns_.store(mtime, std::memory_order_relaxed);  // touched only: compare again after the next change
    return false;
}

bool MappedFile::same_sample_bytes() const {
    return read_at(fd_, 0, head_.size()) == head_ && read_at(fd_, size_ - tail_.size(), tail_.size()) == tail_;
}

// Maps the whole file; with huge_pages at a 2 MiB-aligned address (file offset 0 on a
// boundary, so every aligned 2 MiB of the file can be one PMD) and advised MADV_HUGEPAGE
// (faults then read ahead in 2 MiB folios).
void MappedFile::map(int fd, bool huge_pages) {
    void* at = nullptr;
    int flags = MAP_PRIVATE;
    void* reserve = MAP_FAILED;
    if (huge_pages) {
        reserve = ::mmap(nullptr, size_ + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (reserve != MAP_FAILED) {
            at = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(reserve) + kHuge - 1) & ~(kHuge - 1));
            flags |= MAP_FIXED;
        }
    }
    void* p = ::mmap(at, size_, PROT_READ, flags, fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        if (reserve != MAP_FAILED) ::munmap(reserve, size_ + kHuge);
        throw Error(path_ + ": cannot map file: " + std::strerror(err));
    }
    if (reserve != MAP_FAILED) {  // give back the reservation around the map (page-aligned ends)
        const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
        const auto up = [page](uintptr_t a) { return (a + page - 1) & ~(page - 1); };
        const auto r = reinterpret_cast<uintptr_t>(reserve), m = reinterpret_cast<uintptr_t>(p);
        const uintptr_t map_end = up(m + size_), reserve_end = up(r + size_ + kHuge);
        if (m > r) ::munmap(reserve, m - r);
        if (reserve_end > map_end) ::munmap(reinterpret_cast<void*>(map_end), reserve_end - map_end);
    }
    data_ = static_cast<const uint8_t*>(p);
    if (huge_pages) ::madvise(p, size_, MADV_HUGEPAGE);
}

// If most of a fully cached file sits in 4 KiB folios (one fault per aligned 2 MiB tells:
// a 2 MiB folio is mapped whole), drop it from the page cache (POSIX_FADV_DONTNEED leaves
// pages that are mapped or dirty alone) so it is read back in 2 MiB folios. Tried on one
// 2 MiB range first: where that does not come back as a 2 MiB page (no large folios on this
// filesystem, THP off), nothing else is dropped. A file only partly cached is left as it is.
void MappedFile::refresh_page_cache(int fd) {
    const size_t aligned = size_ / kHuge * kHuge;
    if (!resident(data_, aligned)) return;
    for (size_t o = 0; o < aligned; o += kHuge) touch(data_ + o, 1);
    if (pmd_mapped_bytes(data_) * 10 >= aligned * 9) return;  // (nearly) all 2 MiB pages already
    auto* base = const_cast<uint8_t*>(data_);
    ::madvise(base, size_, MADV_DONTNEED);  // unmap what the check touched
    const size_t probe = aligned / 2 / kHuge * kHuge;
    ::posix_fadvise(fd, static_cast<off_t>(probe), static_cast<off_t>(kHuge), POSIX_FADV_DONTNEED);
    touch(data_ + probe, kHuge);
    if (pmd_mapped_bytes(data_) == 0) return;
    ::madvise(base, size_, MADV_DONTNEED);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    log_info(path_ + ": page cache held 4 KiB pages; dropped it so the weights map with 2 MiB pages");
}

size_t MappedFile::huge_mapped_bytes() const { return data_ ? pmd_mapped_bytes(data_) : 0; }

bool MappedFile::populate(uint64_t max_bytes) const {
    if (!data_ || size_ > max_bytes) return false;
#ifndef MADV_POPULATE_READ
    constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14's value (older headers lack it)
#endif
    auto* base = const_cast<uint8_t*>(data_);
    if (::madvise(base, size_, MADV_POPULATE_READ) != 0) touch(data_, size_);  // EINVAL before 5.14
    return true;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      guard_(std::exchange(o.guard_, -1)),
      mtime_ns_(o.mtime_ns_.load()),
      head_(std::move(o.head_)),
      tail_(std::move(o.tail_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        path_ = std::move(o.path_);
        fd_ = std::exchange(o.fd_, -1);
        guard_ = std::exchange(o.guard_, -1);
        mtime_ns_ = o.mtime_ns_.load();
        head_ = std::move(o.head_);
        tail_ = std::move(o.tail_);
    }
    return *this;
}

void MappedFile::release() {
    unguard_map(guard_);  // before munmap: the range may be reused by the next mmap
    guard_ = -1;
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    data_ = nullptr;
    size_ = 0;
}

void drop_mapped_pages(const void* p, size_t n) {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace ember
