// Read-only memory map of a whole file. Model weights are used in place from the map
// (zero-copy): no second copy in RAM. A CPU model load reads the whole map in (populate) when
// the file is at most half the available RAM; a larger one stays resident only where touched.
#pragma once
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ember {

// With huge_pages, the map starts on a 2 MiB boundary and is advised MADV_HUGEPAGE, so the
// kernel can map the weights with 2 MiB pages (FilePmdMapped in smaps) where the page cache
// holds 2 MiB folios: streaming decode then reads ~20 % faster (fewer TLB misses; see
// docs/BENCHMARKS.md). A fully cached file held mostly in 4 KiB folios (typically one just
// written, e.g. downloaded, or read back piecemeal) is dropped from the page cache once, so
// the first touches read it back in 2 MiB folios; that is tried on one 2 MiB probe first, so
// a filesystem without large folios is never re-read.
//
// Only regular files are mapped (a FIFO or device is refused at once, without blocking in
// open()). The file may change while mapped: a read of a page beyond a shrunk file's end
// raises SIGBUS, which a process-wide handler turns into zero pages over the rest of the map
// plus a flag, and changed_underneath() reports that (or a changed size, or changed bytes)
// so the engine can fail the request with a clear error instead of the process dying. A new
// mtime alone (`touch`, a copy that kept the bytes) is no change: the bytes that identify
// the file are compared then, its head (a GGUF's header and metadata) and its tail.
class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::string& path, bool huge_pages = false);  // throws ember::Error
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }
    // Bytes of this map the kernel currently maps with 2 MiB pages (0 where unknown).
    size_t huge_mapped_bytes() const;
    // Reads the whole file into the page cache and maps it now (MADV_POPULATE_READ, or a touch
    // per page before Linux 5.14), so the first forward pass does not pay for it: a restarted
    // server whose page cache lost the file (or held it in 4 KiB folios, see above) otherwise
    // read 2.45 GB of weights inside its first request. Skipped (false) when the file is
    // larger than `max_bytes` (e.g. what the machine has available: a MoE file larger than RAM
    // is read by the experts its tokens use, not all at once).
    bool populate(uint64_t max_bytes) const;
    // Whether the file was truncated (a read past its new end was caught), its size changed,
    // or, after a new modification time, its head or tail bytes differ from when it was
    // mapped. Cheap: one fstat (and two reads of 64 KiB the first time after a new mtime).
    bool changed_underneath() const;

private:
    void map(int fd, bool huge_pages);
    void refresh_page_cache(int fd);
    void release();
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
    int fd_ = -1;     // kept open to notice changes (fstat)
    int guard_ = -1;  // slot in the SIGBUS guard table, -1 when unguarded
    bool same_sample_bytes() const;
    // The mtime the file's bytes were last found unchanged at: a touch costs one comparison.
    mutable std::atomic<int64_t> mtime_ns_{0};
    std::vector<uint8_t> head_, tail_;  // the file's first and last bytes when mapped
};

// Tells the kernel this process no longer needs the whole pages inside [p, p + n) of a file
// map (a weight a backend has copied): they leave its resident set, and a later read faults
// them back in from the page cache. Only for pointers into a MappedFile.
void drop_mapped_pages(const void* p, size_t n);

}  // namespace ember
