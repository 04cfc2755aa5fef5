// Read-only memory map of a whole file. Model weights are used in place from the map
// (zero-copy), so resident memory stays close to what inference actually touches.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::string& path);  // throws ember::Error
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    void release();
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

}  // namespace ember
