// Quantized weight formats as GGUF files store them (ggml's block layouts), with reference
// (scalar, bit-exact) dequantization and quantization.
//
// Every block type covers a fixed number of consecutive elements of one row:
//   32-element blocks ("legacy" quants): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1
//   256-element super-blocks ("K-quants"): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K
//   32-element microscaling blocks: MXFP4 (OCP MX: E8M0 scale, E2M1 elements)
// All multi-byte fields are little-endian; `uint16_t d` fields hold IEEE half floats.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/common/error.h"

namespace ember::cpu {

inline constexpr int kQK = 32;     // elements per legacy block
inline constexpr int kQK_K = 256;  // elements per K-quant super-block

// x[i] = (q[i] - 8) * d; q[i] for i < 16 is the low nibble of qs[i], for i >= 16 the high
// nibble of qs[i - 16].
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[16];
};
// x[i] = q[i] * d + m, nibbles as Q4_0.
struct BlockQ4_1 {
    uint16_t d, m;
    uint8_t qs[16];
};
// x[i] = (q[i] - 16) * d with q = nibble | bit i of qh (a little-endian u32) << 4.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
// x[i] = q[i] * d + m, q as Q5_0.
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
// x[i] = qs[i] * d.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};
// x[i] = qs[i] * d; s = d * sum(qs) (used by dot products with Q4_1/Q5_1).
struct BlockQ8_1 {
    uint16_t d, s;
    int8_t qs[32];
};

// 16 sub-blocks of 16: scales[j] = scale (low nibble) | min (high nibble); 2-bit values in
// qs, 4 per byte. x = d * (sc & 15) * q - dmin * (sc >> 4).
struct BlockQ2_K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};
// 16 sub-blocks of 16 with 6-bit signed scales (offset 32) packed in 12 bytes; 2 low bits
// in qs, the third bit in hmask (a set bit means +0, a clear bit means -4).
struct BlockQ3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
// 8 sub-blocks of 32, each with a 6-bit scale and 6-bit min packed in scales[12];
// x = d * sc_j * q - dmin * m_j. qs: 4 chunks of 64 elements, each 32 bytes holding
// elements 0..31 of the chunk in low nibbles and 32..63 in high nibbles.
struct BlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
// As Q4_K plus a fifth bit: bit j of qh[l] is the high bit of element 32*j + l.
struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
// 16 sub-blocks of 16 with int8 scales; x = d * scales[j] * (q - 32), q 6-bit: low 4 bits in
// ql, high 2 bits in qh (see dequantize for the interleaving of each 128-element half).
struct BlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// OCP microscaling FP4 (gpt-oss experts): x[i] = kMxfp4Values[code i] * 2^(e - 128), codes
// as Q4_0's nibbles. The table holds the E2M1 values doubled (integers), so the scale is
// half of the E8M0 value 2^(e - 127): both exactly as ggml stores and reads them.
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[16];
};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as a float, exact for every e (e < 2 gives the subnormals 2^-128, 2^-127).
inline float e8m0_half_to_f32(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// Activations for K-quant dot products: x = qs * d, bsums = sums of 16 consecutive qs.
struct BlockQ8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockMXFP4) == 17);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K scales[12] array.
inline void unpack_scale_min_k4(const uint8_t* s, int j, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// Unpacks the 16 signed 6-bit scales of a Q3_K block (already minus 32).
void unpack_scales_q3_k(const uint8_t* packed, int8_t out[16]);

// True if dequantize_row / quantize_row handle this type.
bool can_dequantize(DType type);
bool can_quantize(DType type);

// Converts n elements (a multiple of the type's block size) of one row to float, exactly as
// ggml does (same float operation order, so results are bit-identical). Throws
// ember::Error for unsupported types or a bad n.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Reference quantization of n elements (a multiple of the block size) into `type`.
// Legacy types use ggml's reference rounding; K-quants search scales to minimise squared
// error; MXFP4 takes ggml's scale (2^(floor(log2 max|x|) - 2)) and nearest codes. Supported:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K, Q4_K, Q5_K, Q6_K, MXFP4. Throws
// ember::Error otherwise.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace ember::cpu
