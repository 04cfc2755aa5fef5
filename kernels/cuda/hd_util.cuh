// Helpers usable both in CUDA kernels and in plain host C++ (g++), so that the per-block
// arithmetic of the kernels (kernels/cuda/quant_blocks.cuh) can be unit-tested on a machine
// without a GPU (tests/kernels/cuda/test_cuda_quant_host.cpp). Under nvcc the device path
// uses the hardware intrinsics; the host path is a literal emulation of them.
#pragma once
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD inline
#endif
#ifdef __CUDA_ARCH__
#define EMBER_UNROLL _Pragma("unroll")
#else
#define EMBER_UNROLL
#endif

namespace ember::cuda {

// IEEE half -> float, bit exact (host path: the same algorithm as kernels/common/fp16.h,
// without std::bit_cast so that it also compiles as C++17 under nvcc).
EMBER_HD float h2f(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            exp = 127 - 15 + 1;
            while ((mant & 0x400) == 0) {
                mant <<= 1;
                --exp;
            }
            mant &= 0x3ff;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
#endif
}

EMBER_HD float bf2f(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
#ifdef __CUDA_ARCH__
    return __uint_as_float(bits);
#else
    float f;
    memcpy(&f, &bits, 4);
    return f;
#endif
}

// Unaligned-safe little-endian loads. `a2`: the address is 2-byte aligned (GGUF blocks of
// 18/22/34/110/210 bytes are only that); `a4`: 4-byte aligned. On the device these are one
// or two plain loads; never a misaligned 32-bit load (that would fault).
EMBER_HD uint16_t ld_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint16_t*>(p);
#else
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
#endif
}
EMBER_HD uint32_t ld_u32_a2(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(q[0]) | (static_cast<uint32_t>(q[1]) << 16);
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}
EMBER_HD uint32_t ld_u32_a4(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t*>(p);
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}
EMBER_HD float ld_half(const uint8_t* p) { return h2f(ld_u16(p)); }

// Sum of the products of the four signed bytes of a and b, plus c (the dp4a instruction).
EMBER_HD int dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i) {
        c += static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
             static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i)));
    }
    return c;
#endif
}

// Per-byte subtraction a - b, each byte modulo 256 (no borrow between bytes).
EMBER_HD uint32_t vsub4(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __vsub4(a, b);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t d = ((a >> (8 * i)) - (b >> (8 * i))) & 0xFF;
        r |= d << (8 * i);
    }
    return r;
#endif
}

}  // namespace ember::cuda

namespace ember::cuda {

// Eight consecutive 32-bit words from a 16-byte aligned address (two 128-bit loads on the
// device).
EMBER_HD void ld_8u32_a16(const uint8_t* p, uint32_t out[8]) {
#ifdef __CUDA_ARCH__
    const uint4 a = reinterpret_cast<const uint4*>(p)[0];
    const uint4 b = reinterpret_cast<const uint4*>(p)[1];
    out[0] = a.x;
    out[1] = a.y;
    out[2] = a.z;
    out[3] = a.w;
    out[4] = b.x;
    out[5] = b.y;
    out[6] = b.z;
    out[7] = b.w;
#else
    memcpy(out, p, 32);
#endif
}

}  // namespace ember::cuda
