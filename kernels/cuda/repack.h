// Host-side repacking of Q4_0/Q5_0/Q8_0/Q4_K/Q6_K weights into the CUDA device layout, at upload.
//
// GGUF's 18/22/34-byte blocks are only 2-byte aligned, so a matvec reading them in place
// uses 2-byte loads (3-7x the 32-byte sectors it needs). The device layout, row tiles
// (quant_blocks.cuh, "Row tiles", documents it; matvec.cu's matvec_t_kernel reads it), keeps
// each tile of 8 rows in the bytes of those rows (memory accounting and the row stride are
// unchanged) with the quants in 16-byte-aligned planes and the scales and Q5_0's high bits
// apart, at any row width (a multiple of 32). Q4_K and Q6_K rows (144 / 210-byte super-blocks:
// headers and scales between the quants) are rearranged row by row in pairs / units of 8
// super-blocks, same bytes (decode_chunk<kQ4_KR> / <kQ6_KR>; matvec_kquant.cu reads them);
// K-quant rows of other widths stay in the file's blocks.
#pragma once
#include <stdint.h>

#include <cstring>

#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {

// Tensor::layout of a repacked weight (0: the file's rows).
constexpr uint8_t kLayoutGroups = 1;

// Whether weights of GGUF type `type` with rows of `cols` elements are repacked: Q4_0/Q5_0/Q8_0
// at any width; Q4_K in pairs of super-blocks and Q6_K in units of 8 (rows then start 32- and
// 16-byte aligned).
inline bool repackable(int type, int64_t cols) {
    if (cols <= 0) return false;
    if (type == kQ4_0 || type == kQ5_0 || type == kQ8_0) return cols % 32 == 0;
    if (type == kQ4_K) return cols % 512 == 0;
    if (type == kQ6_K) return cols % 2048 == 0;
    return false;
}

// The device type id the kernels dispatch on for a repacked weight.
inline int repacked_type(int type) {
    switch (type) {
        case kQ4_0:
            return kQ4_0R;
        case kQ5_0:
            return kQ5_0R;
        case kQ8_0:
            return kQ8_0R;
        case kQ4_K:
            return kQ4_KR;
        default:
            return kQ6_KR;
    }
}

// The 4-bit code of element e (0..31) of a Q4_0/Q5_0 block's qs[16] (the low 4 bits).
inline uint8_t q4_nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

// GGUF block `blk` (chunk c of row i of a tile) into the tile at `dst` (m rows, C chunks).
inline void repack_block(int gguf_type, const uint8_t* blk, int m, int64_t C, int i, int64_t c, uint8_t* dst) {
    const int t = repacked_type(gguf_type);
    std::memcpy(dst + tile_scale_offset(t, m, C, c, i), blk, 2);
    if (t == kQ5_0R) std::memcpy(dst + tile_high_offset(t, m, C, c, i), blk + 2, 4);
    uint8_t* q = dst + i * C * tile_quant_bytes(t);
    for (int h = 0; h < 2; ++h) {
        uint8_t* out = q + tile_half_offset(t, C, c, h);
        if (t == kQ8_0R) {
            std::memcpy(out, blk + 2 + 16 * h, 16);
            continue;
        }
        const uint8_t* qs = blk + (t == kQ5_0R ? 6 : 2);
        for (int b = 0; b < 8; ++b)
            out[b] = static_cast<uint8_t>(q4_nibble(qs, 16 * h + b) | (q4_nibble(qs, 16 * h + b + 8) << 4));
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

// One Q4_K/Q6_K row of `cols` elements (repackable(type, cols)); src and dst do not overlap.
inline void repack_kquant_row(int type, const uint8_t* src, int64_t cols, uint8_t* dst) {
    const bool q4 = type == kQ4_K;
    const int64_t units = cols / (q4 ? 512 : 2048), ub = q4 ? kPairBytesQ4_K : kUnitBytesQ6_K;
    for (int64_t u = 0; u < units; ++u) {
        if (q4) repack_pair_q4_k(src + u * ub, dst + u * ub);
        else repack_unit_q6_k(src + u * ub, dst + u * ub);
    }
}

// A whole matrix (repackable(type, cols)): `rows` GGUF rows of `row_bytes` at src into the
// same number of bytes at dst (src and dst do not overlap).
inline void repack_matrix(int type, const uint8_t* src, size_t row_bytes, int64_t rows, int64_t cols, uint8_t* dst) {
    if (type == kQ4_K || type == kQ6_K) {
        for (int64_t r = 0; r < rows; ++r) repack_kquant_row(type, src + r * row_bytes, cols, dst + r * row_bytes);
        return;
    }
    const int64_t C = cols / 32;
    const size_t block_bytes = row_bytes / static_cast<size_t>(C);
    for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
        const int m = static_cast<int>(rows - r0 < kTileRows ? rows - r0 : kTileRows);
        uint8_t* tile = dst + r0 * row_bytes;
        for (int i = 0; i < m; ++i)
            for (int64_t c = 0; c < C; ++c)
                repack_block(type, src + (r0 + i) * row_bytes + c * block_bytes, m, C, i, c, tile);
    }
}

}  // namespace ember::cuda
