// The GGUF block formats as the CUDA kernels read them, in 32-element "chunks".
//
// Every quantized row is a sequence of 32-element chunks (a legacy block is one chunk; a
// 256-element K-quant super-block is eight). decode_chunk<T>() turns chunk c of a row into
//   q[8]  : 32 signed 8-bit codes packed 4 per word, in element order
//   a[2]  : scale of elements 0..15 and 16..31
//   b[2]  : offset of elements 0..15 and 16..31
// so that element i = a[i/16] * q[i] + b[i/16]. With that one form:
//   - dequantization (embeddings, FP16 weight tiles for the prefill GEMM) is a multiply-add;
//   - the decode matrix-vector product against 8-bit activations (x = dx * xq, per 32
//     elements; sx = dx * sum(xq)) is two dp4a sums and a few float operations.
// Formulas follow kernels/cpu/quant.cpp (ggml's layouts) term by term, so dequantized values
// equal the CPU's up to fused multiply-add rounding.
//
// This header compiles under nvcc (device + host) and under g++ alone (host), so the block
// decoding is unit-tested on the CPU: tests/kernels/cuda/test_cuda_quant_host.cpp.
#pragma once
#include <stdint.h>

#include "kernels/cuda/hd_util.cuh"

namespace ember::cuda {

// Type ids as in kernels/common/dtype.h (GGUF numbering); kept numeric here so that this
// header needs nothing C++20.
enum QType : int {
    kF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ5_0 = 6,
    kQ5_1 = 7,
    kQ8_0 = 8,
    kQ2_K = 10,
    kQ3_K = 11,
    kQ4_K = 12,
    kQ5_K = 13,
    kQ6_K = 14,
    kBF16 = 30,
    kMXFP4 = 39,
    // Device layouts of the same bytes (repack.h; the backend passes these ids for weights
    // it repacked at upload, Tensor::layout == kLayoutGroups): no GGUF numbering.
    kQ4_0R = 1002,
    kQ5_0R = 1006,
    kQ8_0R = 1008,
    kQ4_KR = 1012,
    kQ6_KR = 1014,
};

enum class Offset { None, PerChunk, PerHalf };  // which b[] terms a type has

template <int T>
struct QTraits;
template <>
struct QTraits<kQ4_0> {
    static constexpr int bytes = 18, chunks = 1;
    static constexpr Offset off = Offset::None;
};
template <>
struct QTraits<kQ4_1> {
    static constexpr int bytes = 20, chunks = 1;
    static constexpr Offset off = Offset::PerChunk;
};
template <>
struct QTraits<kQ5_0> {
    static constexpr int bytes = 22, chunks = 1;
    static constexpr Offset off = Offset::None;
};
template <>
struct QTraits<kQ5_1> {
    static constexpr int bytes = 24, chunks = 1;
    static constexpr Offset off = Offset::PerChunk;
};
template <>
struct QTraits<kQ8_0> {
    static constexpr int bytes = 34, chunks = 1;
    static constexpr Offset off = Offset::None;
};
template <>
struct QTraits<kQ2_K> {
    static constexpr int bytes = 84, chunks = 8;
    static constexpr Offset off = Offset::PerHalf;
};
template <>
struct QTraits<kQ3_K> {
    static constexpr int bytes = 110, chunks = 8;
    static constexpr Offset off = Offset::None;
};
template <>
struct QTraits<kQ4_K> {
    static constexpr int bytes = 144, chunks = 8;
    static constexpr Offset off = Offset::PerChunk;
};
template <>
struct QTraits<kQ5_K> {
    static constexpr int bytes = 176, chunks = 8;
    static constexpr Offset off = Offset::PerChunk;
};
template <>
struct QTraits<kQ6_K> {
    static constexpr int bytes = 210, chunks = 8;
    static constexpr Offset off = Offset::None;
};

template <>
struct QTraits<kQ4_0R> {
    static constexpr int bytes = 18, chunks = 1;
    static constexpr Offset off = Offset::None;
};
template <>
struct QTraits<kQ5_0R> {
    static constexpr int bytes = 22, chunks = 1;
    static constexpr Offset off = Offset::None;
};
template <>
struct QTraits<kQ8_0R> {
    static constexpr int bytes = 34, chunks = 1;
    static constexpr Offset off = Offset::None;
};

template <>
struct QTraits<kQ4_KR> {
    static constexpr int bytes = 144, chunks = 8;
    static constexpr Offset off = Offset::PerChunk;
};
template <>
struct QTraits<kQ6_KR> {
    static constexpr int bytes = 210, chunks = 8;
    static constexpr Offset off = Offset::None;
};

template <>
struct QTraits<kMXFP4> {
    static constexpr int bytes = 17, chunks = 1;
    static constexpr Offset off = Offset::None;
};

struct Chunk {
    uint32_t q[8];
    float a[2];
    float b[2];
};

// Spreads bits 0..3 of t to bit 4 of bytes 0..3 (the fifth bit of four 5-bit codes).
EMBER_HD uint32_t spread_bit4(uint32_t t) {
    return ((t & 1u) << 4) | ((t & 2u) << 11) | ((t & 4u) << 18) | ((t & 8u) << 25);
}

// 6-bit scale and min of sub-block j of a Q4_K/Q5_K scales[12] (as unpack_scale_min_k4).
EMBER_HD void scale_min_k4(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Signed 6-bit scale j (0..15) of a Q3_K block (as unpack_scales_q3_k).
EMBER_HD int scale_q3_k(const uint8_t* packed, int j) {
    const int low = (packed[j % 8] >> (4 * (j / 8))) & 0xF;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

template <int T>
EMBER_HD void decode_chunk(const uint8_t* row, int64_t c, Chunk& ch);

// Q4_0 (18 B: d, qs[16]): element j = (nibble - 8) * d; low nibbles are elements 0..15.
template <>
EMBER_HD void decode_chunk<kQ4_0>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + c * 18;
    ch.a[0] = ch.a[1] = ld_half(b);
    ch.b[0] = ch.b[1] = 0.0f;
    for (int w = 0; w < 4; ++w) {
        const uint32_t q = ld_u32_a2(b + 2 + 4 * w);
        ch.q[w] = vsub4(q & 0x0F0F0F0Fu, 0x08080808u);
        ch.q[w + 4] = vsub4((q >> 4) & 0x0F0F0F0Fu, 0x08080808u);
    }
}

// Q4_1 (20 B: d, m, qs[16]): element j = nibble * d + m.
template <>
EMBER_HD void decode_chunk<kQ4_1>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + c * 20;
    ch.a[0] = ch.a[1] = ld_half(b);
    ch.b[0] = ch.b[1] = ld_half(b + 2);
    for (int w = 0; w < 4; ++w) {
        const uint32_t q = ld_u32_a4(b + 4 + 4 * w);
        ch.q[w] = q & 0x0F0F0F0Fu;
        ch.q[w + 4] = (q >> 4) & 0x0F0F0F0Fu;
    }
}

// Q5_0 (22 B: d, qh[4], qs[16]): element j = (nibble | bit j of qh << 4) - 16, times d.
template <>
EMBER_HD void decode_chunk<kQ5_0>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + c * 22;
    ch.a[0] = ch.a[1] = ld_half(b);
    ch.b[0] = ch.b[1] = 0.0f;
    const uint32_t qh = ld_u32_a2(b + 2);
    for (int w = 0; w < 4; ++w) {
        const uint32_t q = ld_u32_a2(b + 6 + 4 * w);
        ch.q[w] = vsub4((q & 0x0F0F0F0Fu) | spread_bit4(qh >> (4 * w)), 0x10101010u);
        ch.q[w + 4] = vsub4(((q >> 4) & 0x0F0F0F0Fu) | spread_bit4(qh >> (16 + 4 * w)), 0x10101010u);
    }
}

// Q5_1 (24 B: d, m, qh[4], qs[16]): element j = (nibble | bit j of qh << 4) * d + m.
template <>
EMBER_HD void decode_chunk<kQ5_1>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + c * 24;
    ch.a[0] = ch.a[1] = ld_half(b);
    ch.b[0] = ch.b[1] = ld_half(b + 2);
    const uint32_t qh = ld_u32_a4(b + 4);
    for (int w = 0; w < 4; ++w) {
        const uint32_t q = ld_u32_a4(b + 8 + 4 * w);
        ch.q[w] = (q & 0x0F0F0F0Fu) | spread_bit4(qh >> (4 * w));
        ch.q[w + 4] = ((q >> 4) & 0x0F0F0F0Fu) | spread_bit4(qh >> (16 + 4 * w));
    }
}

// Q8_0 (34 B: d, qs[32]): element j = qs[j] * d.
template <>
EMBER_HD void decode_chunk<kQ8_0>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + c * 34;
    ch.a[0] = ch.a[1] = ld_half(b);
    ch.b[0] = ch.b[1] = 0.0f;
    for (int w = 0; w < 8; ++w) ch.q[w] = ld_u32_a2(b + 2 + 4 * w);
}

// Q2_K (84 B: scales[16], qs[64], d, dmin). Chunk k of a super-block: half h = k/4 (128
// elements, qs[32h..32h+31]), 2-bit field s = k%4; element l = (qs[32h+l] >> 2s) & 3.
// Sub-blocks of 16 use scales[2k] and scales[2k+1]: x = d*(sc&15)*q - dmin*(sc>>4).
template <>
EMBER_HD void decode_chunk<kQ2_K>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + (c >> 3) * 84;
    const int k = static_cast<int>(c & 7), h = k >> 2, s = k & 3;
    const float d = ld_half(b + 80), dmin = ld_half(b + 82);
    const int sa = b[2 * k], sb = b[2 * k + 1];
    ch.a[0] = d * static_cast<float>(sa & 0xF);
    ch.a[1] = d * static_cast<float>(sb & 0xF);
    ch.b[0] = -(dmin * static_cast<float>(sa >> 4));
    ch.b[1] = -(dmin * static_cast<float>(sb >> 4));
    for (int w = 0; w < 8; ++w) ch.q[w] = (ld_u32_a4(b + 16 + 32 * h + 4 * w) >> (2 * s)) & 0x03030303u;
}

// Q3_K (110 B: hmask[32], qs[64], scales[12], d). Chunk k: h = k/4, s = k%4; element l =
// ((qs[32h+l] >> 2s) & 3) - (bit k of hmask[l] ? 0 : 4), scales 2k and 2k+1 (signed 6-bit).
template <>
EMBER_HD void decode_chunk<kQ3_K>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + (c >> 3) * 110;
    const int k = static_cast<int>(c & 7), h = k >> 2, s = k & 3;
    const float d = ld_half(b + 108);
    ch.a[0] = d * static_cast<float>(scale_q3_k(b + 96, 2 * k));
    ch.a[1] = d * static_cast<float>(scale_q3_k(b + 96, 2 * k + 1));
    ch.b[0] = ch.b[1] = 0.0f;
    for (int w = 0; w < 8; ++w) {
        const uint32_t lo = (ld_u32_a2(b + 32 + 32 * h + 4 * w) >> (2 * s)) & 0x03030303u;
        const uint32_t hi = (ld_u32_a2(b + 4 * w) >> k) & 0x01010101u;
        ch.q[w] = vsub4(lo, (hi ^ 0x01010101u) << 2);
    }
}

// Q4_K (144 B: d, dmin, scales[12], qs[128]). Chunk k: 64-element group g = k/2 reads
// qs[32g..32g+31], low nibbles for even k, high for odd; x = d*sc_k*q - dmin*m_k.
template <>
EMBER_HD void decode_chunk<kQ4_K>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + (c >> 3) * 144;
    const int k = static_cast<int>(c & 7);
    int sc, m;
    scale_min_k4(b + 4, k, sc, m);
    ch.a[0] = ch.a[1] = ld_half(b) * static_cast<float>(sc);
    ch.b[0] = ch.b[1] = -(ld_half(b + 2) * static_cast<float>(m));
    uint32_t q[8];
    ld_8u32_a16(b + 16 + 32 * (k >> 1), q);
    const int shift = 4 * (k & 1);
    for (int w = 0; w < 8; ++w) ch.q[w] = (q[w] >> shift) & 0x0F0F0F0Fu;
}

// Q5_K (176 B: d, dmin, scales[12], qh[32], qs[128]): Q4_K plus a fifth bit, bit k of qh[l].
template <>
EMBER_HD void decode_chunk<kQ5_K>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + (c >> 3) * 176;
    const int k = static_cast<int>(c & 7);
    int sc, m;
    scale_min_k4(b + 4, k, sc, m);
    ch.a[0] = ch.a[1] = ld_half(b) * static_cast<float>(sc);
    ch.b[0] = ch.b[1] = -(ld_half(b + 2) * static_cast<float>(m));
    uint32_t q[8], qh[8];
    ld_8u32_a16(b + 48 + 32 * (k >> 1), q);
    ld_8u32_a16(b + 16, qh);
    const int shift = 4 * (k & 1);
    for (int w = 0; w < 8; ++w) ch.q[w] = ((q[w] >> shift) & 0x0F0F0F0Fu) | (((qh[w] >> k) & 0x01010101u) << 4);
}

// Q6_K (210 B: ql[128], qh[64], scales[16] int8, d). Chunk k: half h = k/4, quarter r = k%4:
// low 4 bits from ql[64h + 32(r&1) + l] (high nibble when r >= 2), high 2 bits from
// (qh[32h + l] >> 2r) & 3; x = d * scales[8h + 2r (+1 for l >= 16)] * (q - 32).
template <>
EMBER_HD void decode_chunk<kQ6_K>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + (c >> 3) * 210;
    const int k = static_cast<int>(c & 7), h = k >> 2, r = k & 3;
    const float d = ld_half(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h + 2 * r);
    ch.a[0] = d * static_cast<float>(sc[0]);
    ch.a[1] = d * static_cast<float>(sc[1]);
    ch.b[0] = ch.b[1] = 0.0f;
    const uint8_t* ql = b + 64 * h + 32 * (r & 1);
    const uint8_t* qh = b + 128 + 32 * h;
    for (int w = 0; w < 8; ++w) {
        const uint32_t lo = (ld_u32_a2(ql + 4 * w) >> (4 * (r >> 1))) & 0x0F0F0F0Fu;
        const uint32_t hi = (ld_u32_a2(qh + 4 * w) >> (2 * r)) & 0x03030303u;
        ch.q[w] = vsub4(lo | (hi << 4), 0x20202020u);
    }
}

// The repacked K-quant rows (repack.h; matvec_kquant.cu reads them 16 bytes per lane).
// Q4_KR: pairs of super-blocks (288 B): the two 16-byte headers (d, dmin, scales[12] as in
// the file), then each super-block's 128 quant bytes, byte b = element b | element 128+b << 4.
// Q6_KR: units of 8 super-blocks (1680 B): ql (1024 B), qh (512 B), the 8 x 16 int8 scales,
// the 8 FP16 d. ql word w (16 B) is 16-element half l = w%8 of super-block w/8: byte i =
// low 4 bits of element 16l+i | those of element 128+16l+i << 4. qh word v: its first 8
// bytes are ql word v's top 2 bits, the last 8 ql word 32+v's; of those 8, bytes 0..3 hold
// elements 16l+4a+b (a = bit pair a of byte b), bytes 4..7 elements 128+16l+4a+b.
constexpr int kPairBytesQ4_K = 288;
constexpr int kUnitBytesQ6_K = 1680;
constexpr int kQ6_KR_qh = 1024, kQ6_KR_scales = 1536, kQ6_KR_d = 1664;  // offsets in a unit

template <>
EMBER_HD void decode_chunk<kQ4_KR>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* p = row + (c >> 4) * kPairBytesQ4_K;
    const int s = static_cast<int>((c >> 3) & 1), k = static_cast<int>(c & 7);
    const uint8_t* h = p + 16 * s;
    int sc, m;
    scale_min_k4(h + 4, k, sc, m);
    ch.a[0] = ch.a[1] = ld_half(h) * static_cast<float>(sc);
    ch.b[0] = ch.b[1] = -(ld_half(h + 2) * static_cast<float>(m));
    uint32_t q[8];
    ld_8u32_a16(p + 32 + 128 * s + 32 * (k & 3), q);
    const int shift = 4 * (k >> 2);
    for (int w = 0; w < 8; ++w) ch.q[w] = (q[w] >> shift) & 0x0F0F0F0Fu;
}

// Signed codes of 4 elements from a Q6_KR ql word and its qh word (part hp: 0 low, 1 high;
// bit pair a).
EMBER_HD uint32_t q6kr_codes(uint32_t ql, uint32_t qh, int hp, int a) {
    return vsub4(((ql >> (4 * hp)) & 0x0F0F0F0Fu) | (((qh >> (2 * a)) & 0x03030303u) << 4), 0x20202020u);
}

template <>
EMBER_HD void decode_chunk<kQ6_KR>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* u = row + (c >> 6) * kUnitBytesQ6_K;
    const int s = static_cast<int>((c >> 3) & 7), k = static_cast<int>(c & 7), hp = k >> 2;
    const float d = ld_half(u + kQ6_KR_d + 2 * s);
    const int8_t* sc = reinterpret_cast<const int8_t*>(u + kQ6_KR_scales + 16 * s + 2 * k);
    ch.a[0] = d * static_cast<float>(sc[0]);
    ch.a[1] = d * static_cast<float>(sc[1]);
    ch.b[0] = ch.b[1] = 0.0f;
    for (int i = 0; i < 2; ++i) {
        const int w = 8 * s + 2 * (k & 3) + i;  // ql word of elements 32k+16i.. of the part
        const uint8_t* ql = u + 16 * w;
        const uint32_t qh = ld_u32_a4(u + kQ6_KR_qh + 16 * (w % 32) + 8 * (w / 32) + 4 * hp);
        for (int a = 0; a < 4; ++a) ch.q[4 * i + a] = q6kr_codes(ld_u32_a4(ql + 4 * a), qh, hp, a);
    }
}

// MXFP4 (17 B: e, qs[16]): element j = kMxfp4Values[nibble] * 2^(e - 128), nibbles as Q4_0.
// The doubled E2M1 magnitudes 0, 1, 2, 3, 4, 6, 8, 12 are the bytes of one 64-bit constant
// (no table in device memory); bit 3 of a code is the sign.
EMBER_HD uint32_t mxfp4_byte(uint32_t code) {
    const uint32_t mag = static_cast<uint32_t>((0x0C08060403020100ull >> (8 * (code & 7))) & 0xFF);
    return (code & 8 ? 0u - mag : mag) & 0xFF;
}

EMBER_HD float e8m0_half(uint32_t e) {  // 2^(e - 128), exact (e < 2: the subnormals)
    const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

template <>
EMBER_HD void decode_chunk<kMXFP4>(const uint8_t* row, int64_t c, Chunk& ch) {
    const uint8_t* b = row + c * 17;
    ch.a[0] = ch.a[1] = e8m0_half(b[0]);
    ch.b[0] = ch.b[1] = 0.0f;
    for (int w = 0; w < 4; ++w) {
        uint32_t lo = 0, hi = 0;
        for (int i = 0; i < 4; ++i) {
            const uint32_t q = b[1 + 4 * w + i];
            lo |= mxfp4_byte(q & 0xF) << (8 * i);
            hi |= mxfp4_byte(q >> 4) << (8 * i);
        }
        ch.q[w] = lo;
        ch.q[w + 4] = hi;
    }
}

EMBER_HD int byte_at(uint32_t w, int i) { return static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * i))); }

// Chunk c of a row as 32 floats.
template <int T>
EMBER_HD void dequant_chunk(const uint8_t* row, int64_t c, float out[32]) {
    Chunk ch;
    decode_chunk<T>(row, c, ch);
    for (int i = 0; i < 32; ++i) {
        const float q = static_cast<float>(byte_at(ch.q[i / 4], i % 4));
        out[i] = QTraits<T>::off == Offset::None ? q * ch.a[i / 16] : q * ch.a[i / 16] + ch.b[i / 16];
    }
}

// Row tiles: the device layout of repacked Q4_0/Q5_0/Q8_0 weights (repack.h writes it,
// matvec.cu's matvec_t_kernel streams it). GGUF blocks are 18/22/34 bytes, only 2-byte
// aligned; a tile moves the quants into 16-byte-aligned planes and the scales (and Q5_0's
// high bits) apart, keeping every row's bytes and the row stride:
//   - rows in tiles of 8 (the last tile of a tensor may hold fewer, m); a tile is the bytes
//     of its m GGUF rows, so it starts 16-byte aligned (8 * row_bytes: row_bytes is even);
//   - in a tile, with C = cols / 32 chunks a row: the quants, row-major (row i at
//     i * C * QB, QB = 16 nibble bytes for Q4_0/Q5_0, 32 codes for Q8_0: 16-byte aligned),
//     then Q5_0's high bits (4 bytes per row and chunk), then the FP16 scales (2 bytes),
//     both "pair-major": rows 2p and 2p + 1 (a warp's two rows) take C * 2 values together,
//     chunk by chunk, so (c, 2p) and (c, 2p + 1) are adjacent and share one 16-byte word
//     (an odd last row of a tile is a pair of one);
//   - a row's quants in groups of 32 chunks (the last group has k = C % 32, or 32): its
//     half-chunks (16 elements) h = 0..2k-1, 16-byte unit l < k holds half-chunks l and
//     l + k, so that lane l of a warp reads unit l with activations 16 * l and 16 * (l + k)
//     (all loads contiguous across the lanes). Q4_0/Q5_0: 8 bytes a half-chunk, byte b =
//     element b | element b + 8 << 4 (the low nibbles); Q8_0: the 16 codes (so the group's
//     codes stay in element order).
constexpr int kRepackChunks = 32;  // chunks per group
constexpr int kTileRows = 8;

// Quant bytes per chunk (QB) and side bytes per chunk (high bits + scale) of a tiled type.
EMBER_HD int tile_quant_bytes(int t) { return t == kQ8_0R ? 32 : 16; }
EMBER_HD int tile_high_bytes(int t) { return t == kQ5_0R ? 4 : 0; }

// Where row r of a tiled matrix lives: its tile, the tile's row count and the row in it.
// `w` is the first row of a range of `rows` rows that starts on a tile boundary.
struct TiledRow {
    const uint8_t* tile;
    int m, i;
    int64_t chunks;
};
EMBER_HD TiledRow tiled_row(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t r, int64_t chunks) {
    const int64_t r0 = r / kTileRows * kTileRows;
    const int64_t left = rows - r0;
    return {w + r0 * row_bytes, static_cast<int>(left < kTileRows ? left : kTileRows), static_cast<int>(r - r0),
            chunks};
}

// Byte offsets in a tile (m rows, C chunks a row) of type t: value (c, i) of a side plane.
EMBER_HD int64_t tile_pair_index(int m, int64_t C, int64_t c, int i) {
    const int p0 = i & ~1;                   // the first row of i's pair
    const int np = m - p0 < 2 ? m - p0 : 2;  // rows in the pair
    return p0 * C + c * np + (i - p0);
}
EMBER_HD int64_t tile_high_offset(int t, int m, int64_t C, int64_t c, int i) {
    return m * C * tile_quant_bytes(t) + 4 * tile_pair_index(m, C, c, i);
}
EMBER_HD int64_t tile_scale_offset(int t, int m, int64_t C, int64_t c, int i) {
    return m * C * (tile_quant_bytes(t) + tile_high_bytes(t)) + 2 * tile_pair_index(m, C, c, i);
}
// Half-chunk h (0, 1) of chunk c in its row's quants.
EMBER_HD int64_t tile_half_offset(int t, int64_t C, int64_t c, int h) {
    const int64_t g = c / kRepackChunks;
    const int64_t k = C - g * kRepackChunks < kRepackChunks ? C - g * kRepackChunks : kRepackChunks;
    const int64_t hj = 2 * (c % kRepackChunks) + h;
    if (t == kQ8_0R) return g * 32 * kRepackChunks + 16 * hj;
    return g * 16 * kRepackChunks + 16 * (hj % k) + 8 * (hj / k);
}

// Signed codes of one 16-element half from its 8 nibble bytes (lo, hi) and, for Q5_0, the
// half's 16 high bits: 4 words of 4 codes, element order.
template <int T>
EMBER_HD void unpack_nibble_half(uint32_t lo, uint32_t hi, uint32_t high16, uint32_t q[4]) {
    const uint32_t n[4] = {lo & 0x0F0F0F0Fu, hi & 0x0F0F0F0Fu, (lo >> 4) & 0x0F0F0F0Fu, (hi >> 4) & 0x0F0F0F0Fu};
    EMBER_UNROLL
    for (int w = 0; w < 4; ++w) {
        if constexpr (T == kQ5_0R) q[w] = vsub4(n[w] | spread_bit4(high16 >> (4 * w)), 0x10101010u);
        else q[w] = vsub4(n[w], 0x08080808u);
    }
}

// Chunk c of a tiled row, in the common form (dequantization: the GEMM's tiles, embeddings).
template <int T>
EMBER_HD void decode_tiled_chunk(const TiledRow& row, int64_t c, Chunk& ch) {
    const int64_t C = row.chunks;
    ch.a[0] = ch.a[1] = ld_half(row.tile + tile_scale_offset(T, row.m, C, c, row.i));
    ch.b[0] = ch.b[1] = 0.0f;
    const uint8_t* q = row.tile + row.i * C * tile_quant_bytes(T);
    const uint32_t high = T == kQ5_0R ? ld_u32_a2(row.tile + tile_high_offset(T, row.m, C, c, row.i)) : 0u;
    for (int h = 0; h < 2; ++h) {
        const uint8_t* p = q + tile_half_offset(T, C, c, h);
        if constexpr (T == kQ8_0R) {
            for (int w = 0; w < 4; ++w) ch.q[4 * h + w] = ld_u32_a2(p + 4 * w);
        } else {
            unpack_nibble_half<T>(ld_u32_a2(p), ld_u32_a2(p + 4), high >> (16 * h), ch.q + 4 * h);
        }
    }
}

template <int T>
EMBER_HD void dequant_tiled_chunk(const TiledRow& row, int64_t c, float out[32]) {
    Chunk ch;
    decode_tiled_chunk<T>(row, c, ch);
    for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(byte_at(ch.q[i / 4], i % 4)) * ch.a[i / 16];
}

// Whether a type id is a row-tile layout (read with a TiledRow, not a row pointer).
EMBER_HD constexpr bool is_tiled_type(int t) { return t == kQ4_0R || t == kQ5_0R || t == kQ8_0R; }

// Dot product of a decoded weight chunk with 32 activations x = dx * xq (xq: 8 words of
// 4 int8, element order), sx = dx * sum(xq). 8 dp4a (+8 for Q2_K's per-half offsets).
template <int T>
EMBER_HD float dot_decoded(const Chunk& ch, const int xq[8], float dx, float sx) {
    int s0 = 0, s1 = 0;
    EMBER_UNROLL
    for (int w = 0; w < 4; ++w) s0 = dp4a(static_cast<int>(ch.q[w]), xq[w], s0);
    EMBER_UNROLL
    for (int w = 4; w < 8; ++w) s1 = dp4a(static_cast<int>(ch.q[w]), xq[w], s1);
    float r = dx * (ch.a[0] * static_cast<float>(s0) + ch.a[1] * static_cast<float>(s1));
    if constexpr (QTraits<T>::off == Offset::PerChunk) r += ch.b[0] * sx;
    if constexpr (QTraits<T>::off == Offset::PerHalf) {
        int x0 = 0, x1 = 0;
        EMBER_UNROLL
        for (int w = 0; w < 4; ++w) x0 = dp4a(0x01010101, xq[w], x0);
        EMBER_UNROLL
        for (int w = 4; w < 8; ++w) x1 = dp4a(0x01010101, xq[w], x1);
        r += dx * (ch.b[0] * static_cast<float>(x0) + ch.b[1] * static_cast<float>(x1));
    }
    return r;
}

// The same for chunk c of a weight row.
template <int T>
EMBER_HD float dot_chunk(const uint8_t* row, int64_t c, const int xq[8], float dx, float sx) {
    Chunk ch;
    decode_chunk<T>(row, c, ch);
    return dot_decoded<T>(ch, xq, dx, sx);
}

// 8-bit quantization of 32 activations as the decode kernels use it (host reference of the
// device kernel quantize_q8 in matvec.cu): d = max|x| / 127, xq = round(x / d),
// s = d * sum(xq).
EMBER_HD void quantize_chunk_q8(const float* x, int8_t* xq, float& d, float& s) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = amax > (x[i] < 0 ? -x[i] : x[i]) ? amax : (x[i] < 0 ? -x[i] : x[i]);
    d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
        const float v = x[i] * id;
        const int q = static_cast<int>(v < 0 ? v - 0.5f : v + 0.5f);  // round half away from zero
        xq[i] = static_cast<int8_t>(q);
        sum += q;
    }
    s = d * static_cast<float>(sum);
}

}  // namespace ember::cuda
