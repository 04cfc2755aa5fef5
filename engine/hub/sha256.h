// SHA-256 (FIPS 180-4), written here so the engine needs no crypto library: the hub checks
// every downloaded file against the hash the server published before the file is ready.
// Incremental: feed bytes as they arrive, read the digest once at the end.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::hub {

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t n);
    void update(std::string_view s) { update(s.data(), s.size()); }
    // The digest of everything fed so far; the object must not be fed afterwards.
    std::array<uint8_t, 32> finish();
    std::string finish_hex();  // 64 lowercase hex digits

    uint64_t bytes_fed() const { return total_; }

private:
    void compress(const uint8_t* block);
    std::array<uint32_t, 8> h_;
    std::array<uint8_t, 64> buf_{};
    size_t buf_len_ = 0;
    uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view bytes);
// Hashes a whole file; throws ember::Error naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace ember::hub
