// Host-side repacking of Q4_0/Q5_0/Q8_0 weights into the CUDA device layout, at upload.
//
// GGUF's 18/22/34-byte blocks are only 2-byte aligned, so a matvec reading them in place
// uses 2-byte loads (3-7x the 32-byte sectors it needs). The device layout, row tiles
// (quant_blocks.cuh, "Row tiles", documents it; matvec.cu's matvec_t_kernel reads it), keeps
// each tile of 8 rows in the bytes of those rows (memory accounting and the row stride are
// unchanged) with the quants in 16-byte-aligned planes and the scales and Q5_0's high bits
// apart, at any row width (a multiple of 32).
#pragma once
#include <stdint.h>

#include <cstring>

#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {

// Tensor::layout of a repacked weight (0: the file's rows).
constexpr uint8_t kLayoutGroups = 1;

// Whether weights of GGUF type `type` with rows of `cols` elements are repacked.
inline bool repackable(int type, int64_t cols) {
    return (type == kQ4_0 || type == kQ5_0 || type == kQ8_0) && cols > 0 && cols % 32 == 0;
}

// The device type id the kernels dispatch on for a repacked weight.
inline int repacked_type(int type) {
    if (type == kQ4_0) return kQ4_0R;
    return type == kQ5_0 ? kQ5_0R : kQ8_0R;
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

// A whole matrix (repackable(type, cols)): `rows` GGUF rows of `row_bytes` at src into the
// same number of bytes at dst (src and dst do not overlap).
inline void repack_matrix(int type, const uint8_t* src, size_t row_bytes, int64_t rows, int64_t cols, uint8_t* dst) {
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
