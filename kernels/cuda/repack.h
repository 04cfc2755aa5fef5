// Host-side repacking of Q4_0/Q8_0 weight rows into the CUDA device layout, at upload.
//
// GGUF's 18/34-byte blocks are only 2-byte aligned, so the decode matvec read them with
// 2-byte loads (7x the 32-byte sectors it needed). The device layout keeps each row's bytes
// and size (memory accounting and row slicing are unchanged) but rearranges them in groups
// of 32 chunks (1024 elements): the 32 FP16 scales first, then the quants, so that a warp
// reads every weight byte with coalesced 16-byte loads (quant_blocks.cuh, decode_chunk<kQ4_0R>
// and <kQ8_0R>, documents the order; matvec.cu's matvec_r_kernel reads it).
#pragma once
#include <stdint.h>

#include <cstring>

#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {

// Tensor::layout of a repacked weight (0: the file's rows).
constexpr uint8_t kLayoutGroups = 1;

// Whether rows of `cols` elements of GGUF type `type` are repacked: Q4_0/Q8_0 in whole groups.
inline bool repackable(int type, int64_t cols) {
    return (type == kQ4_0 || type == kQ8_0) && cols > 0 && cols % (32 * kRepackChunks) == 0;
}

// The device type id the kernels dispatch on for a repacked weight.
inline int repacked_type(int type) { return type == kQ4_0 ? kQ4_0R : kQ8_0R; }

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

// One row of `cols` elements (repackable(type, cols)); src and dst do not overlap.
inline void repack_row(int type, const uint8_t* src, int64_t cols, uint8_t* dst) {
    const int64_t groups = cols / (32 * kRepackChunks);
    const int gb = type == kQ4_0 ? kGroupBytesQ4_0 : kGroupBytesQ8_0;
    for (int64_t g = 0; g < groups; ++g) {
        if (type == kQ4_0) repack_group_q4_0(src + g * gb, dst + g * gb);
        else repack_group_q8_0(src + g * gb, dst + g * gb);
    }
}

}  // namespace ember::cuda
