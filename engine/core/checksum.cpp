#include "engine/core/checksum.h"

#include <bit>
#include <cstring>

namespace ember {
namespace {

constexpr uint64_t kMul1 = 0x9e3779b97f4a7c15ull, kMul2 = 0xd6e8feb86659fd93ull;

uint64_t load64(const uint8_t* p) {
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    return w;  // little-endian hosts only (x86-64, AArch64), as the rest of the engine
}

// One word into one lane: multiply, rotate, multiply (every input bit reaches many bits).
uint64_t step(uint64_t lane, uint64_t w) { return std::rotl(lane + w * kMul2, 29) * kMul1; }

// splitmix64's finalizer: every output bit depends on every input bit.
uint64_t avalanche(uint64_t h) {
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

}  // namespace

uint64_t checksum64(const void* data, size_t n, uint64_t seed) {
    const auto* p = static_cast<const uint8_t*>(data);
    // Four independent lanes over 32-byte strides: the multiplies' latency overlaps.
    uint64_t lane[4] = {seed ^ kMul1, seed + kMul2, std::rotl(seed, 17) ^ 0x2545f4914f6cdd1dull, ~seed};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k) lane[k] = step(lane[k], load64(p + i + 8 * k));
    uint64_t h = avalanche(static_cast<uint64_t>(n) ^ seed);
    for (const uint64_t l : lane) h = step(h, avalanche(l));
    for (; i + 8 <= n; i += 8) h = step(h, load64(p + i));
    if (i < n) {
        uint8_t tail[8] = {};
        std::memcpy(tail, p + i, n - i);
        h = step(h, load64(tail) ^ (static_cast<uint64_t>(n - i) << 56));
    }
    return avalanche(h);
}

}  // namespace ember
