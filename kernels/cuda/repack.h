// Host-side repacking of Q4_0/Q8_0/Q4_K/Q6_K weight rows into the CUDA device layout, at upload.
//
// GGUF's 18/34-byte blocks are only 2-byte aligned, so the decode matvec read them with
// 2-byte loads (7x the 32-byte sectors it needed). The device layout keeps each row's bytes
// and size (memory accounting and row slicing are unchanged) but rearranges them in groups
// of 32 chunks (1024 elements): the 32 FP16 scales first, then the quants, so that a warp
// reads every weight byte with coalesced 16-byte loads (quant_blocks.cuh, decode_chunk<kQ4_0R>
// and <kQ8_0R>, documents the order; matvec.cu's matvec_r_kernel reads it). Q4_K and Q6_K
// rows (144 / 210-byte super-blocks: headers and scales between the quants) are rearranged
// the same way in pairs / units of 8 super-blocks (decode_chunk<kQ4_KR> / <kQ6_KR>;
// matvec_kquant.cu reads them). Rows of other widths stay in the file's blocks.
#pragma once
#include <stdint.h>

#include <cstring>

#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {

// Tensor::layout of a repacked weight (0: the file's rows).
constexpr uint8_t kLayoutGroups = 1;

// Whether rows of `cols` elements of GGUF type `type` are repacked: Q4_0/Q8_0 in whole groups;
// Q4_K in pairs of super-blocks and Q6_K in units of 8 (rows then start 32- and 16-byte aligned).
inline bool repackable(int type, int64_t cols) {
    if (cols <= 0) return false;
    if (type == kQ4_0 || type == kQ8_0) return cols % (32 * kRepackChunks) == 0;
    if (type == kQ4_K) return cols % 512 == 0;
    if (type == kQ6_K) return cols % 2048 == 0;
    return false;
}

// The device type id the kernels dispatch on for a repacked weight.
inline int repacked_type(int type) {
    switch (type) {
        case kQ4_0:
            return kQ4_0R;
        case kQ8_0:
            return kQ8_0R;
        case kQ4_K:
            return kQ4_KR;
        default:
            return kQ6_KR;
    }
}

// The 4-bit code of element e (0..31) of a Q4_0 block's qs[16].
inline uint8_t q4_nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

// One group of 32 Q4_0 blocks (576 B in, 576 B out).
inline void repack_group_q4_0(const uint8_t* src, uint8_t* dst) {
    for (int j = 0; j < kRepackChunks; ++j) std::memcpy(dst + 2 * j, src + 18 * j, 2);
    for (int l = 0; l < 32; ++l) {
        const int h = l % 2;
        for (int part = 0; part < 2; ++part) {
            const uint8_t* qs = src + 18 * (l / 2 + 16 * part) + 2;
            uint8_t* out = dst + kRepackScaleBytes + 16 * l + 8 * part;
            for (int b = 0; b < 8; ++b)
                out[b] = static_cast<uint8_t>(q4_nibble(qs, 16 * h + b) | (q4_nibble(qs, 16 * h + b + 8) << 4));
        }
    }
}

// One group of 32 Q8_0 blocks (1088 B in, 1088 B out).
inline void repack_group_q8_0(const uint8_t* src, uint8_t* dst) {
    for (int j = 0; j < kRepackChunks; ++j) {
        std::memcpy(dst + 2 * j, src + 34 * j, 2);
        std::memcpy(dst + kRepackScaleBytes + 32 * j, src + 34 * j + 2, 32);
    }
}

// The 4-bit code of element e (0..255) of a Q4_K super-block (qs: its 128 quant bytes).
inline uint8_t q4_k_code(const uint8_t* qs, int e) {
    const uint8_t b = qs[32 * (e / 64) + e % 32];
    return (e % 64) < 32 ? b & 0xF : b >> 4;
}

// The 6-bit code of element e (0..255) of a Q6_K super-block (ql[128], qh[64] first).
inline uint8_t q6_k_code(const uint8_t* blk, int e) {
    const int h = e / 128, r = (e % 128) / 32, l = e % 32;
    const int lo = (blk[64 * h + 32 * (r & 1) + l] >> (4 * (r >> 1))) & 0xF;
    const int hi = (blk[128 + 32 * h + l] >> (2 * r)) & 3;
    return static_cast<uint8_t>(lo | (hi << 4));
}

// One pair of Q4_K super-blocks (288 B in, 288 B out; quant_blocks.cuh, kQ4_KR).
inline void repack_pair_q4_k(const uint8_t* src, uint8_t* dst) {
    for (int s = 0; s < 2; ++s) {
        const uint8_t* blk = src + 144 * s;
        std::memcpy(dst + 16 * s, blk, 16);
        uint8_t* q = dst + 32 + 128 * s;
        for (int b = 0; b < 128; ++b)
            q[b] = static_cast<uint8_t>(q4_k_code(blk + 16, b) | (q4_k_code(blk + 16, 128 + b) << 4));
    }
}

// One unit of 8 Q6_K super-blocks (1680 B in, 1680 B out; quant_blocks.cuh, kQ6_KR).
inline void repack_unit_q6_k(const uint8_t* src, uint8_t* dst) {
    std::memset(dst + kQ6_KR_qh, 0, kQ6_KR_scales - kQ6_KR_qh);
    for (int w = 0; w < 64; ++w) {
        const uint8_t* blk = src + 210 * (w / 8);
        const int l = w % 8;
        uint8_t* qh = dst + kQ6_KR_qh + 16 * (w % 32) + 8 * (w / 32);
        for (int i = 0; i < 16; ++i) {
            const uint8_t lo = q6_k_code(blk, 16 * l + i), hi = q6_k_code(blk, 128 + 16 * l + i);
            dst[16 * w + i] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
            const int a = i / 4, b = i % 4;  // element 16l + 4a + b: bit pair a of byte b
            qh[b] = static_cast<uint8_t>(qh[b] | ((lo >> 4) << (2 * a)));
            qh[4 + b] = static_cast<uint8_t>(qh[4 + b] | ((hi >> 4) << (2 * a)));
        }
    }
    for (int s = 0; s < 8; ++s) {
        std::memcpy(dst + kQ6_KR_scales + 16 * s, src + 210 * s + 192, 16);
        std::memcpy(dst + kQ6_KR_d + 2 * s, src + 210 * s + 208, 2);
    }
}

// One row of `cols` elements (repackable(type, cols)); src and dst do not overlap.
inline void repack_row(int type, const uint8_t* src, int64_t cols, uint8_t* dst) {
    if (type == kQ4_K || type == kQ6_K) {
        const bool q4 = type == kQ4_K;
        const int64_t units = cols / (q4 ? 512 : 2048), ub = q4 ? kPairBytesQ4_K : kUnitBytesQ6_K;
        for (int64_t u = 0; u < units; ++u) {
            if (q4) repack_pair_q4_k(src + u * ub, dst + u * ub);
            else repack_unit_q6_k(src + u * ub, dst + u * ub);
        }
        return;
    }
    const int64_t groups = cols / (32 * kRepackChunks);
    const int gb = type == kQ4_0 ? kGroupBytesQ4_0 : kGroupBytesQ8_0;
    for (int64_t g = 0; g < groups; ++g) {
        if (type == kQ4_0) repack_group_q4_0(src + g * gb, dst + g * gb);
        else repack_group_q8_0(src + g * gb, dst + g * gb);
    }
}

}  // namespace ember::cuda
