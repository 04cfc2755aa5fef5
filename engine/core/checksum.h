// A fast 64-bit checksum of bytes, to notice corruption (a torn or truncated file, a flipped
// bit) and to fingerprint data; not a cryptographic hash. Chain calls through `seed` to cover
// several ranges: checksum64(b, nb, checksum64(a, na)).
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember {

uint64_t checksum64(const void* data, size_t n, uint64_t seed = 0);

}  // namespace ember
