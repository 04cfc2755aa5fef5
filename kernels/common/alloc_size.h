// The bytes a backend really reserves for a buffer: its size rounded up to the backend's
// alignment, and never less than one aligned unit. Both backends allocate exactly this, and
// the fit planner (engine/fit) counts with the same function, so planned and allocated
// bytes cannot drift apart.
#pragma once
#include <algorithm>
#include <cstddef>

namespace ember {

constexpr size_t kCpuAllocAlign = 64;    // aligned_alloc for AVX-512 rows
constexpr size_t kCudaAllocAlign = 256;  // cudaMalloc granularity the kernels assume

inline size_t padded_alloc_bytes(size_t bytes, size_t align) {
    return std::max(align, (bytes + align - 1) / align * align);
}

}  // namespace ember
