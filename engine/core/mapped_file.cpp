#include "engine/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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
        if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
            line.find(':') > line.find(' ')) {
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

}  // namespace

MappedFile::MappedFile(const std::string& path, bool huge_pages) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    try {
        huge_pages = huge_pages && size_ >= 2 * kHuge;
        if (size_ > 0) map(fd, huge_pages);
        if (huge_pages) refresh_page_cache(fd);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
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

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        path_ = std::move(o.path_);
    }
    return *this;
}

void MappedFile::release() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace ember
