// Software prefetch that the compiler keeps. GCC 12 deleted __builtin_prefetch from loops
// that do nothing else (both gemm panel builders' prefetch loops compiled to no instruction
// at all); an asm statement cannot be dropped. Prefetches never fault.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::cpu {

// One cache line into L2 (and L3).
inline void prefetch_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p, 0, 2);
#endif
}

// Every cache line of [p, p + bytes).
inline void prefetch_l2(const void* p, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(p);
    const auto* first = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(b) & ~uintptr_t{63});
    for (const uint8_t* q = first; q < b + bytes; q += 64) prefetch_l2(q);
}

}  // namespace ember::cpu
