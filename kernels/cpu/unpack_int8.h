// Internal: expands quantized weight blocks into unsigned 8-bit codes in natural element order
// plus per-block float scale and min (x = scale * (q - offset) + min, see Int8Kind). Plain
// C++ written so the compiler vectorizes it (__restrict: byte pointers may alias anything); included by each per-ISA
// kernel file, so it is compiled with that file's instruction set. Header-only on purpose (internal linkage).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/common/fp16.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace ember::cpu::detail {
namespace {

// Half -> float: one instruction where F16C is available (exact either way).
inline float h2f(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return fp16_to_f32(h);
#endif
}

inline uint32_t u32_at(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Nibbles of a legacy block: q[j] = low nibble of qs[j], q[j + 16] = high nibble.
inline void nibbles32(const uint8_t* __restrict qs, uint8_t* __restrict q) {
    for (int j = 0; j < 16; ++j) {
        q[j] = qs[j] & 0xF;
        q[j + 16] = qs[j] >> 4;
    }
}

// The fifth bit of Q5_0/Q5_1: bit j of qh is the high bit of element j.
inline void high_bits32(uint32_t qh, uint8_t* __restrict q) {
    for (int j = 0; j < 32; ++j) q[j] |= static_cast<uint8_t>(((qh >> j) & 1) << 4);
}

inline void ub_q4_0(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict) {
    const auto& b = *reinterpret_cast<const BlockQ4_0*>(p);
    nibbles32(b.qs, q);
    s[0] = h2f(b.d);
}

inline void ub_q4_1(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict m) {
    const auto& b = *reinterpret_cast<const BlockQ4_1*>(p);
    nibbles32(b.qs, q);
    s[0] = h2f(b.d);
    m[0] = h2f(b.m);
}

inline void ub_q5_0(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict) {
    const auto& b = *reinterpret_cast<const BlockQ5_0*>(p);
    nibbles32(b.qs, q);
    high_bits32(u32_at(b.qh), q);
    s[0] = h2f(b.d);
}

inline void ub_q5_1(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict m) {
    const auto& b = *reinterpret_cast<const BlockQ5_1*>(p);
    nibbles32(b.qs, q);
    high_bits32(u32_at(b.qh), q);
    s[0] = h2f(b.d);
    m[0] = h2f(b.m);
}

inline void ub_q8_0(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict) {
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(b.qs[j] ^ 0x80);  // q + 128
    s[0] = h2f(b.d);
}

// MXFP4: the table's signed values shifted by 12 into unsigned codes (Int8Kind offset 12).
inline void ub_mxfp4(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict) {
    const auto& b = *reinterpret_cast<const BlockMXFP4*>(p);
    nibbles32(b.qs, q);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(kMxfp4Values[q[j]] + 12);
    s[0] = e8m0_half_to_f32(b.e);
}

inline void ub_q2_k(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict m) {
    const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    for (int half = 0; half < 2; ++half) {
        for (int shift = 0; shift < 4; ++shift) {
            uint8_t* out = q + 128 * half + 32 * shift;
            for (int l = 0; l < 32; ++l) out[l] = (b.qs[32 * half + l] >> (2 * shift)) & 3;
        }
    }
    for (int j = 0; j < 16; ++j) {
        s[j] = d * static_cast<float>(b.scales[j] & 0xF);
        m[j] = -(dmin * static_cast<float>(b.scales[j] >> 4));
    }
}

inline void ub_q3_k(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict) {
    const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
    const float d = h2f(b.d);
    for (int half = 0; half < 2; ++half) {
        for (int shift = 0; shift < 4; ++shift) {
            const int bit = 4 * half + shift;
            uint8_t* out = q + 128 * half + 32 * shift;
            for (int l = 0; l < 32; ++l) {
                out[l] =
                    static_cast<uint8_t>(((b.qs[32 * half + l] >> (2 * shift)) & 3) | (((b.hmask[l] >> bit) & 1) << 2));
            }
        }
    }
    int8_t sc[16];
    unpack_scales_q3_k(b.scales, sc);
    for (int j = 0; j < 16; ++j) s[j] = d * static_cast<float>(sc[j]);
}

inline void k4_scales(const uint8_t* packed, uint16_t d16, uint16_t dmin16, float* s, float* m) {
    const float d = h2f(d16), dmin = h2f(dmin16);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, mn;
        unpack_scale_min_k4(packed, j, sc, mn);
        s[j] = d * static_cast<float>(sc);
        m[j] = -(dmin * static_cast<float>(mn));
    }
}

inline void ub_q4_k(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict m) {
    const auto& b = *reinterpret_cast<const BlockQ4_K*>(p);
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            q[64 * c + l] = b.qs[32 * c + l] & 0xF;
            q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
        }
    }
    k4_scales(b.scales, b.d, b.dmin, s, m);
}

inline void ub_q5_k(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict m) {
    const auto& b = *reinterpret_cast<const BlockQ5_K*>(p);
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            q[64 * c + l] = static_cast<uint8_t>((b.qs[32 * c + l] & 0xF) | (((b.qh[l] >> (2 * c)) & 1) << 4));
            q[64 * c + 32 + l] = static_cast<uint8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
        }
    }
    k4_scales(b.scales, b.d, b.dmin, s, m);
}

inline void ub_q6_k(const uint8_t* __restrict p, uint8_t* __restrict q, float* __restrict s, float* __restrict) {
    const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
    for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = b.ql + 64 * half;
        const uint8_t* qh = b.qh + 32 * half;
        uint8_t* out = q + 128 * half;
        for (int l = 0; l < 32; ++l) {
            out[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
            out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            out[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            out[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
    }
    const float d = h2f(b.d);
    for (int j = 0; j < 16; ++j) s[j] = d * static_cast<float>(b.scales[j]);
}

// Unpacks chunk `chunk` (elements [512 chunk, 512 chunk + 512)) of one weight row into
// q[512], scale[512 / G], min[512 / G]; elements past `cols` read as zero.
using UnpackChunkFn = void (*)(const uint8_t* row, int64_t chunk, int64_t cols, uint8_t* q, float* scale, float* min);

template <int kBlockElems, int kBlockBytes, int kG, void (*Block)(const uint8_t*, uint8_t*, float*, float*)>
void unpack_chunk(const uint8_t* row, int64_t chunk, int64_t cols, uint8_t* q, float* scale, float* min) {
    constexpr int kScalesPerBlock = kBlockElems / kG;
    const int64_t e0 = chunk * kChunk;
    const int n = static_cast<int>(std::min<int64_t>(kChunk, cols - e0)) / kBlockElems;
    const uint8_t* p = row + e0 / kBlockElems * kBlockBytes;
    for (int i = 0; i < n; ++i) {
        Block(p + i * kBlockBytes, q + i * kBlockElems, scale + i * kScalesPerBlock, min + i * kScalesPerBlock);
    }
    const int done = n * kBlockElems;
    if (done < kChunk) {
        std::memset(q + done, 0, static_cast<size_t>(kChunk - done));
        for (int j = done / kG; j < kChunk / kG; ++j) scale[j] = min[j] = 0.0f;
    }
}

// The unpacker for a type the int8 path handles (see int8_kind), else nullptr.
inline UnpackChunkFn unpack_fn(DType type) {
    switch (type) {
        case DType::Q4_0:
            return unpack_chunk<32, 18, 32, ub_q4_0>;
        case DType::Q4_1:
            return unpack_chunk<32, 20, 32, ub_q4_1>;
        case DType::Q5_0:
            return unpack_chunk<32, 22, 32, ub_q5_0>;
        case DType::Q5_1:
            return unpack_chunk<32, 24, 32, ub_q5_1>;
        case DType::Q8_0:
            return unpack_chunk<32, 34, 32, ub_q8_0>;
        case DType::Q2_K:
            return unpack_chunk<256, 84, 16, ub_q2_k>;
        case DType::Q3_K:
            return unpack_chunk<256, 110, 16, ub_q3_k>;
        case DType::Q4_K:
            return unpack_chunk<256, 144, 32, ub_q4_k>;
        case DType::Q5_K:
            return unpack_chunk<256, 176, 32, ub_q5_k>;
        case DType::Q6_K:
            return unpack_chunk<256, 210, 16, ub_q6_k>;
        case DType::MXFP4:
            return unpack_chunk<32, 17, 32, ub_mxfp4>;
        default:
            return nullptr;
    }
}

}  // namespace
}  // namespace ember::cpu::detail
