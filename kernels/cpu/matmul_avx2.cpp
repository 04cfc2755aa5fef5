// AVX2 + FMA + F16C matmul kernels (compiled with those flags only for this file, used
// where cpu_isa.cpp detected them). Same algorithms as the AVX-512 file with 256-bit
// vectors; the u8 x s8 dot product is vpmaddubsw + vpmaddwd (no VNNI here).
//
// vpmaddubsw saturates pair sums at 32767: fine for codes < 128 (worst Q6_K: 2*63*127),
// but Q8_0's offset codes reach 255, so Q8_0 uses the sign trick instead:
// |w| * (x * sign(w)) with |w| <= 128 (2*128*127 = 32512 fits).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/unpack_int8.h"

namespace ember::cpu::detail {
namespace {

constexpr int kPanelRows = 8;       // 1 ymm of 8 int32/float lanes
constexpr int kTileTokens = 4;      // 4 int + 4 float accumulators + weights + temps < 16 ymm
constexpr int kF32Tile = 8;         // 8 float accumulators for an 8-row x 8-token f32 tile
constexpr int kGemvGroup = 4;       // tokens per gemv pass (their accumulators in registers)
constexpr int kGemvMaxTokens = 12;  // up to this many, gemv in groups (see gemv_q8)
constexpr int kGemvRowBlock = 16;   // rows per block of the grouped gemv

// ---------------------------------------------------------------------------------------
// Horizontal reductions.

inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

// ---------------------------------------------------------------------------------------
// Activation quantization (same arithmetic as the scalar kernel: identical codes).

template <int G>
inline void quantize_block(const float* x, int8_t* q, float& d, int32_t& init, float& dsum, int offset) {
    __m256 v[4];
    __m256 amaxv = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < G / 8; ++i) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        amaxv = _mm256_max_ps(amaxv, _mm256_andnot_ps(sign, v[i]));
    }
    const float amax = hmax(amaxv);
    d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i qi[4];
    __m256i sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
        qi[i] = i < G / 8 ? _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id)) : _mm256_setzero_si256();
        sum = _mm256_add_epi32(sum, qi[i]);
    }
    // packs interleave 128-bit lanes; the permute restores element order
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if constexpr (G == 32) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm256_castsi256_si128(ordered));
    const int32_t s = hsum_epi32(sum);
    init = -offset * s;
    dsum = d * static_cast<float>(s);
}

template <int G>
void quantize_natural(const float* X, int64_t t0, int64_t t1, int offset, ActQ8& a) {
    const int64_t nb = a.nb(), nb_data = a.cols / G;
    for (int64_t t = t0; t < t1; ++t) {
        int8_t* q = a.qs + t * a.kpad;
        for (int64_t b = 0; b < nb_data; ++b) {
            const int64_t i = t * nb + b;
            quantize_block<G>(X + t * a.cols + b * G, q + b * G, a.d[i], a.init[i], a.dsum[i], offset);
        }
        std::memset(q + a.cols, 0, static_cast<size_t>(a.kpad - a.cols));
        for (int64_t b = nb_data; b < nb; ++b) {
            a.d[t * nb + b] = a.dsum[t * nb + b] = 0.0f;
            a.init[t * nb + b] = 0;
        }
    }
}

template <int G>
void quantize_tiled(const float* X, int64_t t0, int64_t t1, int offset, ActQ8& a) {
    const int NR = a.tile;
    const int64_t nb_data = a.cols / G;
    zero_partial_tile(a, t1);
    for (int64_t t = t0; t < t1; ++t) {
        uint8_t* tile = a.tiled + (t / NR) * a.tile_bytes();
        const int j = static_cast<int>(t % NR);
        for (int64_t b = 0; b < nb_data; ++b) {
            uint8_t* rec = tile + b * a.rec_bytes();
            int8_t q[G];
            float* dp = reinterpret_cast<float*>(rec + G * NR);
            quantize_block<G>(X + t * a.cols + b * G, q, dp[j], reinterpret_cast<int32_t*>(dp + NR)[j], dp[2 * NR + j],
                              offset);
            for (int g = 0; g < G / 4; ++g) std::memcpy(rec + (g * NR + j) * 4, q + 4 * g, 4);
        }
    }
}

void quantize_act(const float* X, int64_t t0, int64_t t1, const Int8Kind& kind, ActQ8& a) {
    if (a.tile > 0) {
        if (kind.G == 32) quantize_tiled<32>(X, t0, t1, kind.offset, a);
        else quantize_tiled<16>(X, t0, t1, kind.offset, a);
    } else {
        if (kind.G == 32) quantize_natural<32>(X, t0, t1, kind.offset, a);
        else quantize_natural<16>(X, t0, t1, kind.offset, a);
    }
}

// ---------------------------------------------------------------------------------------
// Per-type unpackers to u8 codes (natural order) + per-block scales/mins, explicit AVX2:
// one block (legacy) or super-block (K-quants) per call. The compiler's own vectorization
// of the portable unpackers is poor (byte inserts through the stack).

inline __m256i nibbles_lo_hi(__m128i q) {  // 16 bytes -> [low nibbles, high nibbles]
    const __m128i m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store32(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// Bit j of qh -> 0x10 in byte j (the fifth bit of Q5_0/Q5_1 codes).
inline __m256i qh_bits(uint32_t qh) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                                2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline uint32_t u32_at_(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Legacy 32-element types: codes() gives a block's 32 u8 codes in natural order (the fused
// gemv reads them straight into registers), block() stores them with the scale (and min).
struct AQ4_0 {
    static constexpr DType kType = DType::Q4_0;
    static constexpr int kBE = 32, kBB = 18;
    static __m256i codes(const uint8_t* p) { return nibbles_lo_hi(load16(p + 2)); }
    static void block(const uint8_t* p, uint8_t* q, float* s, float*) {
        store32(q, codes(p));
        s[0] = half_at(p);
    }
};
struct AQ4_1 {
    static constexpr DType kType = DType::Q4_1;
    static constexpr int kBE = 32, kBB = 20;
    static __m256i codes(const uint8_t* p) { return nibbles_lo_hi(load16(p + 4)); }
    static void block(const uint8_t* p, uint8_t* q, float* s, float* m) {
        store32(q, codes(p));
        s[0] = half_at(p);
        m[0] = half_at(p + 2);
    }
};
struct AQ5_0 {
    static constexpr DType kType = DType::Q5_0;
    static constexpr int kBE = 32, kBB = 22;
    static __m256i codes(const uint8_t* p) {
        return _mm256_or_si256(nibbles_lo_hi(load16(p + 6)), qh_bits(u32_at_(p + 2)));
    }
    static void block(const uint8_t* p, uint8_t* q, float* s, float*) {
        store32(q, codes(p));
        s[0] = half_at(p);
    }
};
struct AQ5_1 {
    static constexpr DType kType = DType::Q5_1;
    static constexpr int kBE = 32, kBB = 24;
    static __m256i codes(const uint8_t* p) {
        return _mm256_or_si256(nibbles_lo_hi(load16(p + 8)), qh_bits(u32_at_(p + 4)));
    }
    static void block(const uint8_t* p, uint8_t* q, float* s, float* m) {
        store32(q, codes(p));
        s[0] = half_at(p);
        m[0] = half_at(p + 2);
    }
};
struct AQ8_0 {
    static constexpr DType kType = DType::Q8_0;
    static constexpr int kBE = 32, kBB = 34;
    static __m256i codes(const uint8_t* p) {
        return _mm256_xor_si256(load32(p + 2), _mm256_set1_epi8(static_cast<char>(0x80)));
    }
    static void block(const uint8_t* p, uint8_t* q, float* s, float*) {
        store32(q, codes(p));
        s[0] = half_at(p);
    }
};

// MXFP4: nibbles through a byte table to unsigned codes kMxfp4Values + 12 (Int8Kind offset
// 12); scales are E8M0 bytes, 2^(e - 128), built as float bits (e < 2: the subnormals).
inline __m256 e8m0_half_ps(__m256i e) {
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}
struct AMXFP4 {
    static constexpr DType kType = DType::MXFP4;
    static constexpr int kBE = 32, kBB = 17;
    static __m256i codes(const uint8_t* p) {
        const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14, 15,
                                             16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
        return _mm256_shuffle_epi8(lut, nibbles_lo_hi(load16(p + 1)));
    }
    static void block(const uint8_t* p, uint8_t* q, float* s, float*) {
        store32(q, codes(p));
        s[0] = e8m0_half_to_f32(p[0]);
    }
    static float scale_at(const uint8_t* p) { return e8m0_half_to_f32(p[0]); }
    static __m256 scales8(const uint8_t* p) {
        return e8m0_half_ps(_mm256_setr_epi32(p[0], p[17], p[34], p[51], p[68], p[85], p[102], p[119]));
    }
};

// 8 scales d * sc_j and mins -dmin * m_j of a Q4_K/Q5_K super-block (6-bit fields unpacked
// four at a time with 32-bit masks).
inline void k4_scales8(const uint8_t* b, float* s, float* m) {
    const uint32_t w0 = u32_at_(b + 4), w1 = u32_at_(b + 8), w2 = u32_at_(b + 12);
    const uint32_t sc_hi = (w2 & 0x0F0F0F0Fu) | ((w0 >> 2) & 0x30303030u);
    const uint32_t m_hi = ((w2 >> 4) & 0x0F0F0F0Fu) | ((w1 >> 2) & 0x30303030u);
    const __m128i sc =
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(w0 & 0x3F3F3F3Fu)), static_cast<int>(sc_hi), 1);
    const __m128i mn =
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(w1 & 0x3F3F3F3Fu)), static_cast<int>(m_hi), 1);
    _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(half_at(b)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
    _mm256_storeu_ps(m, _mm256_mul_ps(_mm256_set1_ps(-half_at(b + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
}

struct AQ4_K {
    static constexpr DType kType = DType::Q4_K;
    static constexpr int kBE = 256, kBB = 144;
    static void block(const uint8_t* p, uint8_t* q, float* s, float* m) {
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int c = 0; c < 4; ++c) {
            const __m256i x = load32(p + 16 + 32 * c);
            store32(q + 64 * c, _mm256_and_si256(x, m4));
            store32(q + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(x, 4), m4));
        }
        k4_scales8(p, s, m);
    }
};
struct AQ5_K {
    static constexpr DType kType = DType::Q5_K;
    static constexpr int kBE = 256, kBB = 176;
    static void block(const uint8_t* p, uint8_t* q, float* s, float* m) {
        const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
        const __m256i qh = load32(p + 16);
        for (int c = 0; c < 4; ++c) {
            const __m256i x = load32(p + 48 + 32 * c);
            const __m256i b0 = _mm256_set1_epi8(static_cast<char>(1 << (2 * c))),
                          b1 = _mm256_set1_epi8(static_cast<char>(2 << (2 * c)));
            const __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), b16);
            const __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), b16);
            store32(q + 64 * c, _mm256_or_si256(_mm256_and_si256(x, m4), h0));
            store32(q + 64 * c + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4), h1));
        }
        k4_scales8(p, s, m);
    }
};
struct AQ6_K {
    static constexpr DType kType = DType::Q6_K;
    static constexpr int kBE = 256, kBB = 210;
    static void block(const uint8_t* p, uint8_t* q, float* s, float*) {
        const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = load32(p + 64 * h), l1 = load32(p + 64 * h + 32), qh = load32(p + 128 + 32 * h);
            uint8_t* o = q + 128 * h;
            store32(o, _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
            store32(o + 32, _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
            store32(o + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30)));
            store32(o + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
        }
        const __m256 d = _mm256_set1_ps(half_at(p + 208));
        for (int i = 0; i < 2; ++i) {
            const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 192 + 8 * i)));
            _mm256_storeu_ps(s + 8 * i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc)));
        }
    }
};

// Q2_K / Q3_K: element 128 h + 32 g + l is (qs[32 h + l] >> 2g) & 3 (+ 4 * hmask bit 4h + g).
struct AQ2_K {
    static constexpr DType kType = DType::Q2_K;
    static constexpr int kBE = 256, kBB = 84;
    static void block(const uint8_t* p, uint8_t* q, float* s, float* m) {
        for (int h = 0; h < 2; ++h) {
            const __m256i x = load32(p + 16 + 32 * h);
            for (int g = 0; g < 4; ++g)
                store32(q + 128 * h + 32 * g, _mm256_and_si256(_mm256_srli_epi16(x, 2 * g), _mm256_set1_epi8(3)));
        }
        const __m256 d = _mm256_set1_ps(half_at(p + 80)), dmin = _mm256_set1_ps(-half_at(p + 82));
        for (int i = 0; i < 2; ++i) {
            const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * i)));
            _mm256_storeu_ps(s + 8 * i,
                             _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(sc, _mm256_set1_epi32(15)))));
            _mm256_storeu_ps(m + 8 * i, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_srli_epi32(sc, 4))));
        }
    }
};
struct AQ3_K {
    static constexpr DType kType = DType::Q3_K;
    static constexpr int kBE = 256, kBB = 110;
    static void block(const uint8_t* p, uint8_t* q, float* s, float*) {
        const __m256i hm = load32(p), four = _mm256_set1_epi8(4);
        for (int h = 0; h < 2; ++h) {
            const __m256i x = load32(p + 32 + 32 * h);
            for (int g = 0; g < 4; ++g) {
                const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + g)));
                const __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
                store32(q + 128 * h + 32 * g,
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 2 * g), _mm256_set1_epi8(3)), hb));
            }
        }
        // 16 signed 6-bit scales (see unpack_scales_q3_k), unpacked with 32-bit masks.
        uint64_t L;
        std::memcpy(&L, p + 96, 8);
        const uint32_t H = u32_at_(p + 104);
        const uint64_t lo = (L & 0x0F0F0F0F0F0F0F0Full) |
                            ((H & 0x03030303u) | static_cast<uint64_t>((H >> 2) & 0x03030303u) << 32) << 4;
        const uint64_t hi = ((L >> 4) & 0x0F0F0F0F0F0F0F0Full) |
                            (((H >> 4) & 0x03030303u) | static_cast<uint64_t>((H >> 6) & 0x03030303u) << 32) << 4;
        const __m256 d = _mm256_set1_ps(half_at(p + 108));
        const __m256i v32 = _mm256_set1_epi32(32);
        _mm256_storeu_ps(
            s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(
                                    _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(lo))), v32))));
        _mm256_storeu_ps(
            s + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(
                                        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(hi))), v32))));
    }
};

// Chunk unpacker: the explicit block unpacker for the row's blocks; past the row end (its
// last chunk) codes, scales and mins are zero, as the portable unpacker leaves them.
template <class A>
void unpack_chunk_avx2(const uint8_t* row, int64_t chunk, int64_t cols, uint8_t* q, float* scale, float* min) {
    constexpr int kBlocks = kChunk / A::kBE;
    constexpr int kScales = A::kBE == 32 ? 1 : (A::kType == DType::Q4_K || A::kType == DType::Q5_K) ? 8 : 16;
    const int n = static_cast<int>(std::min<int64_t>(kBlocks, (cols - chunk * kChunk) / A::kBE));
    const uint8_t* p = row + chunk * kBlocks * A::kBB;
    for (int i = 0; i < n; ++i) A::block(p + i * A::kBB, q + i * A::kBE, scale + i * kScales, min + i * kScales);
    if (n == kBlocks) return;
    std::memset(q + n * A::kBE, 0, static_cast<size_t>((kBlocks - n) * A::kBE));
    std::fill(scale + n * kScales, scale + kBlocks * kScales, 0.0f);
    std::fill(min + n * kScales, min + kBlocks * kScales, 0.0f);
}

inline UnpackChunkFn unpack_fn_avx2(DType type) {
    switch (type) {
        case DType::Q4_0:
            return unpack_chunk_avx2<AQ4_0>;
        case DType::Q4_1:
            return unpack_chunk_avx2<AQ4_1>;
        case DType::Q5_0:
            return unpack_chunk_avx2<AQ5_0>;
        case DType::Q5_1:
            return unpack_chunk_avx2<AQ5_1>;
        case DType::Q8_0:
            return unpack_chunk_avx2<AQ8_0>;
        case DType::Q4_K:
            return unpack_chunk_avx2<AQ4_K>;
        case DType::Q5_K:
            return unpack_chunk_avx2<AQ5_K>;
        case DType::Q6_K:
            return unpack_chunk_avx2<AQ6_K>;
        case DType::Q2_K:
            return unpack_chunk_avx2<AQ2_K>;
        case DType::Q3_K:
            return unpack_chunk_avx2<AQ3_K>;
        case DType::MXFP4:
            return unpack_chunk_avx2<AMXFP4>;
        default:
            return unpack_fn(type);
    }
}

// ---------------------------------------------------------------------------------------
// u8 x s8 dot products into 8 int32 lanes (each lane sums 4 products, like vpdpbusd).

template <bool kSigned>
inline __m256i dot4(__m256i acc, __m256i w, __m256i x) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p;
    if constexpr (kSigned) {
        // Q8_0: w holds q + 128; back to signed, then |w| * (x * sign(w)).
        const __m256i ws = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
        p = _mm256_maddubs_epi16(_mm256_sign_epi8(ws, ws), _mm256_sign_epi8(x, ws));
    } else {
        p = _mm256_maddubs_epi16(w, x);
    }
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
}

inline __m256i pair_sum32(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
inline __m256i pair_sum64(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}
// u[4k + j] = sum of the 4 lanes of 128-bit lane k of a[j], j < 4.
inline __m256i reduce4(const __m256i* a) { return pair_sum64(pair_sum32(a[0], a[1]), pair_sum32(a[2], a[3])); }

// 8 blocks of G codes -> 8 block sums, natural order. G = 32: one ymm per block; G = 16:
// two blocks per ymm (one per 128-bit lane).
template <int G, bool kSigned>
inline __m256i block_sums8(const __m256i* w, const int8_t* x) {
    constexpr int nv = G / 4;  // vectors for 8 blocks
    __m256i a[8];
    for (int j = 0; j < nv; ++j)
        a[j] = dot4<kSigned>(_mm256_setzero_si256(), w[j],
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * j)));
    if constexpr (G == 32) {
        const __m256i u0 = reduce4(a), u1 = reduce4(a + 4);
        return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
    } else {
        return _mm256_permutevar8x32_epi32(reduce4(a), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
}

template <bool kMin, bool kSigned>
inline __m256 scale_blocks(__m256 acc, __m256i sums, __m256 scale, __m256 min, const float* d, const int32_t* init,
                           const float* dsum) {
    if constexpr (!kMin && !kSigned)
        sums = _mm256_add_epi32(sums, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(init)));
    const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), _mm256_loadu_ps(d));
    acc = _mm256_fmadd_ps(f, scale, acc);
    if constexpr (kMin) acc = _mm256_fmadd_ps(min, _mm256_loadu_ps(dsum), acc);
    return acc;
}

// ---------------------------------------------------------------------------------------
// gemv: each row chunk unpacked once to an L1 buffer, then dotted with each token.

// A: the type's block unpacker (inlined: a call per chunk cost more than the short rows'
// work); NT tokens at compile time, so the 2 x NT lane accumulators stay in registers.
// Weights prefetched per WeightPrefetch::locality_for (K-quants into L2 only).
template <class A, int G, bool kMin, bool kSigned, int NT>
void gemv_q8_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    constexpr int nbc = kChunk / G;
    alignas(64) uint8_t q[kChunk];
    alignas(64) float scale[32], min[32];
    const int64_t nb = a.nb(), nb_data = W.cols / G, nchunks = a.kpad / kChunk;
    const WeightPrefetch pf(W, kChunk);
    WeightPrefetch::start(W, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const auto* row = static_cast<const uint8_t*>(W.data) + r * W.row_bytes;
        // Per token the 16 canonical lanes: acc[t][0] blocks 16i + 0..7, acc[t][1] 16i + 8..15.
        __m256 acc[NT][2];
        for (auto& v : acc) v[0] = v[1] = _mm256_setzero_ps();
        for (int64_t c = 0; c < nchunks; ++c) {
            pf.step<WeightPrefetch::locality_for(A::kBE)>(row + c * pf.step_bytes);
            unpack_chunk_avx2<A>(row, c, W.cols, q, scale, min);
            // groups of 8 blocks holding columns (a short row's last chunk: padding skipped)
            const int groups = static_cast<int>(std::min<int64_t>(nbc, nb_data - c * nbc) + 7) / 8;
            for (int g = 0; g < groups; ++g) {
                const int o = 8 * g;
                for (int t = 0; t < NT; ++t) {
                    const int8_t* x = a.qs + t * a.kpad + c * kChunk;
                    const int64_t bi = t * nb + c * nbc + o;
                    acc[t][g % 2] = scale_blocks<kMin, kSigned>(
                        acc[t][g % 2], block_sums8<G, kSigned>(reinterpret_cast<const __m256i*>(q + o * G), x + o * G),
                        _mm256_load_ps(scale + o), kMin ? _mm256_load_ps(min + o) : _mm256_setzero_ps(), a.d + bi,
                        a.init + bi, a.dsum + bi);
                }
            }
        }
        for (int t = 0; t < NT; ++t) Y[t * W.rows + r] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
    }
}

// The 8 fp16 values at p, p + stride, ... (a scale or min of 8 consecutive blocks) as f32.
template <int kStride>
inline __m256 halves8(const uint8_t* p) {
    uint16_t h[8];
    for (int j = 0; j < 8; ++j) std::memcpy(&h[j], p + j * kStride, 2);
    return _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(h[0]), static_cast<short>(h[1]), static_cast<short>(h[2]),
                                          static_cast<short>(h[3]), static_cast<short>(h[4]), static_cast<short>(h[5]),
                                          static_cast<short>(h[6]), static_cast<short>(h[7])));
}

// The scale of one block, and of 8 consecutive blocks, of a 32-element type: half floats at
// the block's start, or the type's own (MXFP4's E8M0 bytes).
template <class A>
inline float block_scale(const uint8_t* p) {
    if constexpr (requires { A::scale_at(p); }) return A::scale_at(p);
    else return half_at(p);
}
template <class A>
inline __m256 block_scales8(const uint8_t* p) {
    if constexpr (requires { A::scales8(p); }) return A::scales8(p);
    else return halves8<A::kBB>(p);
}

// gemv for the legacy 32-element types without the L1 round trip: each group of 8 blocks
// goes from the row into registers (codes, scales, mins) and is dotted with every token.
// The blocks of a short row's last group past its end count as zeros.
template <class A, bool kMin, bool kSigned, int NT>
void gemv_legacy_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    constexpr int nbc = kChunk / 32;
    const int64_t nb = a.nb(), nb_data = W.cols / 32;
    const WeightPrefetch pf(W, 256);
    WeightPrefetch::start(W, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const auto* row = static_cast<const uint8_t*>(W.data) + r * W.row_bytes;
        __m256 acc[NT][2];  // per token the 16 canonical lanes
        for (auto& v : acc) v[0] = v[1] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb_data; b0 += 8) {
            const uint8_t* p = row + b0 * A::kBB;
            pf.step(p);
            __m256i w[8];
            __m256 sc, mn = _mm256_setzero_ps();
            if (b0 + 8 <= nb_data) {
                for (int j = 0; j < 8; ++j) w[j] = A::codes(p + j * A::kBB);
                sc = block_scales8<A>(p);
                if constexpr (kMin) mn = halves8<A::kBB>(p + 2);
            } else {  // the row's last blocks: the rest of the group is zeros
                alignas(32) float s8[8] = {}, m8[8] = {};
                for (int j = 0; j < 8; ++j) {
                    const bool in = b0 + j < nb_data;
                    w[j] = in ? A::codes(p + j * A::kBB) : _mm256_setzero_si256();
                    if (in) s8[j] = block_scale<A>(p + j * A::kBB), m8[j] = kMin ? half_at(p + j * A::kBB + 2) : 0.0f;
                }
                sc = _mm256_load_ps(s8);
                mn = _mm256_load_ps(m8);
            }
            const int g = static_cast<int>(b0 % nbc) / 8;  // lanes 8g .. 8g + 7 of the chunk's 16
            for (int t = 0; t < NT; ++t) {
                const int64_t bi = t * nb + b0;
                const __m256i sums = block_sums8<32, kSigned>(w, a.qs + t * a.kpad + b0 * 32);
                acc[t][g] = scale_blocks<kMin, kSigned>(acc[t][g], sums, sc, mn, a.d + bi, a.init + bi, a.dsum + bi);
            }
        }
        for (int t = 0; t < NT; ++t) Y[t * W.rows + r] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
    }
}

template <class A, int G, bool kMin, bool kSigned, int NT>
void gemv_q8_one(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    if constexpr (A::kBE == 32) gemv_legacy_t<A, kMin, kSigned, NT>(W, a, r0, r1, Y);
    else gemv_q8_t<A, G, kMin, kSigned, NT>(W, a, r0, r1, Y);
}

template <class A, int G, bool kMin, bool kSigned = false>
void gemv_q8_n(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    static_assert(kGemvGroup == 4);
    switch (a.n_tokens) {
        case 1:
            return gemv_q8_one<A, G, kMin, kSigned, 1>(W, a, r0, r1, Y);
        case 2:
            return gemv_q8_one<A, G, kMin, kSigned, 2>(W, a, r0, r1, Y);
        case 3:
            return gemv_q8_one<A, G, kMin, kSigned, 3>(W, a, r0, r1, Y);
        default:
            return gemv_q8_one<A, G, kMin, kSigned, 4>(W, a, r0, r1, Y);
    }
}

void gemv_q8_group(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    switch (W.type) {
        case DType::Q4_0:
            return gemv_q8_n<AQ4_0, 32, false>(W, a, r0, r1, Y);
        case DType::Q4_1:
            return gemv_q8_n<AQ4_1, 32, true>(W, a, r0, r1, Y);
        case DType::Q5_0:
            return gemv_q8_n<AQ5_0, 32, false>(W, a, r0, r1, Y);
        case DType::Q5_1:
            return gemv_q8_n<AQ5_1, 32, true>(W, a, r0, r1, Y);
        case DType::Q8_0:
            return gemv_q8_n<AQ8_0, 32, false, true>(W, a, r0, r1, Y);
        case DType::Q4_K:
            return gemv_q8_n<AQ4_K, 32, true>(W, a, r0, r1, Y);
        case DType::Q5_K:
            return gemv_q8_n<AQ5_K, 32, true>(W, a, r0, r1, Y);
        case DType::Q6_K:
            return gemv_q8_n<AQ6_K, 16, false>(W, a, r0, r1, Y);
        case DType::Q2_K:
            return gemv_q8_n<AQ2_K, 16, true>(W, a, r0, r1, Y);
        case DType::Q3_K:
            return gemv_q8_n<AQ3_K, 16, false>(W, a, r0, r1, Y);
        case DType::MXFP4:
            return gemv_q8_n<AMXFP4, 32, false>(W, a, r0, r1, Y);
        default:
            return;
    }
}

// More than kGemvGroup tokens: groups of kGemvGroup over blocks of kGemvRowBlock rows, so each
// block's weights come from DRAM once and from L1/L2 for the other groups. Up to
// kGemvMaxTokens this beats repacking panels for the gemm on AVX2 (no VNNI: the int8 gemm
// gains little over the gemv per multiply, and its panels cost a pass of their own).
void gemv_q8(const WeightMatrix& W, const Int8Kind&, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch&) {
    if (a.n_tokens <= kGemvGroup) return gemv_q8_group(W, a, r0, r1, Y);
    for (int64_t r = r0; r < r1; r += kGemvRowBlock) {
        for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kGemvGroup) {
            ActQ8 g = a;  // tokens [t0, t0 + kGemvGroup) of the natural layout
            g.n_tokens = std::min<int64_t>(kGemvGroup, a.n_tokens - t0);
            g.qs += t0 * a.kpad;
            g.d += t0 * a.nb(), g.init += t0 * a.nb(), g.dsum += t0 * a.nb();
            gemv_q8_group(W, g, r, std::min(r1, r + kGemvRowBlock), Y + t0 * W.rows);
        }
    }
}

// ---------------------------------------------------------------------------------------
// gemm: 8-row panels ([G/4][8 rows][4] codes, scale[8], min[8] per block), 8 x 4 tiles.

template <int G, bool kMin>
constexpr int panel_block_bytes() {
    return G * kPanelRows + 4 * kPanelRows * (kMin ? 2 : 1);
}

// Repacks rows [r0, r0 + nrows) into the panel: per chunk, the 8 rows are unpacked to row
// buffers, then 8 x 8 dword transposes turn each 32 codes of the 8 rows into the panel's
// [8 rows][4 codes] vectors (and 8 blocks' scales, mins into [8 rows] vectors). The panel holds
// the row's nb blocks of data (W.cols / G): padding past the row's end is never multiplied
// (see the canonical order in matmul_internal.h).
template <int G, bool kMin>
void build_panel(const WeightMatrix& W, int64_t r0, int nrows, int64_t nb, uint8_t* panel) {
    constexpr int PB = panel_block_bytes<G, kMin>();
    constexpr int nbc = kChunk / G;
    const UnpackChunkFn unpack = unpack_fn_avx2(W.type);
    alignas(64) uint8_t q[kPanelRows][kChunk];
    alignas(64) float scale[kPanelRows][32], min[kPanelRows][32];
    for (int r = nrows; r < kPanelRows; ++r) {  // missing rows: zeros (unpack never writes them)
        std::memset(q[r], 0, sizeof(q[r]));
        std::fill(scale[r], scale[r] + 32, 0.0f);
        std::fill(min[r], min[r] + 32, 0.0f);
    }
    // The 8 rows are 8 interleaved streams, too many for the hardware prefetchers: each row's
    // bytes kAhead chunks ahead are requested before a chunk is unpacked.
    constexpr int kAhead = 2;
    const auto* rows = static_cast<const uint8_t*>(W.data) + r0 * W.row_bytes;
    const int64_t chunk_bytes = static_cast<int64_t>(W.row_bytes) * kChunk / W.cols;
    const auto prefetch_chunk = [&](int64_t c) {
        for (int r = 0; r < nrows; ++r) prefetch_l2(rows + r * W.row_bytes + c * chunk_bytes, chunk_bytes);
    };
    for (int c = 0; c < kAhead; ++c) prefetch_chunk(c);
    __m256 v[kPanelRows];
    for (int64_t c = 0; c * nbc < nb; ++c) {
        const int blocks = static_cast<int>(std::min<int64_t>(nbc, nb - c * nbc));
        if ((c + kAhead) * nbc < nb) prefetch_chunk(c + kAhead);
        for (int r = 0; r < nrows; ++r) unpack(rows + r * W.row_bytes, c, W.cols, q[r], scale[r], min[r]);
        uint8_t* pc = panel + c * nbc * PB;
        for (int j = 0; j < blocks * G / 32; ++j) {  // codes 32j .. 32j + 31 of the 8 rows
            for (int r = 0; r < kPanelRows; ++r) v[r] = _mm256_castsi256_ps(load32(q[r] + 32 * j));
            transpose8x8(v);
            for (int k = 0; k < 8; ++k) {
                const int e = 32 * j + 4 * k;
                _mm256_store_ps(reinterpret_cast<float*>(pc + e / G * PB + e % G / 4 * 4 * kPanelRows), v[k]);
            }
        }
        const auto put = [&](float(*src)[32], int offset) {  // 8 blocks' scales (or mins) at a time
            for (int sj = 0; sj < (blocks + 7) / 8; ++sj) {
                for (int r = 0; r < kPanelRows; ++r) v[r] = _mm256_load_ps(src[r] + 8 * sj);
                transpose8x8(v);
                for (int k = 0; k < 8; ++k)
                    _mm256_store_ps(reinterpret_cast<float*>(pc + (8 * sj + k) * PB + offset), v[k]);
            }
        };
        put(scale, G * kPanelRows);
        if constexpr (kMin) put(min, G * kPanelRows + 4 * kPanelRows);
    }
}

// How many vpmaddubsw results (each at most 2 * 127 * max_code in magnitude, codes below 128)
// can be summed in int16 lanes before one vpmaddwd widens them: 8 for 4-bit codes (a whole
// G = 32 block), 4 for 5-bit, 2 for 6-bit, 1 for Q8_0's sign trick. Integer sums are exact,
// so the result is the same bits; the inner loop loses a multiply-add and an add per token.
constexpr int int16_steps(int max_code) { return 32767 / (2 * 127 * max_code); }

inline int max_code(DType type) {
    switch (type) {
        case DType::Q2_K:
            return 3;
        case DType::Q3_K:
            return 7;
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q4_K:
            return 15;
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q5_K:
            return 31;
        case DType::MXFP4:
            return 24;
        case DType::Q6_K:
            return 63;
        default:
            return 128;  // Q8_0 (|w| after the sign trick)
    }
}

// One 8-row x 4-token tile in the canonical order: lane j's chain runs over blocks j, j + 16,
// ... (its partial sums for the tile's 8 rows in one register), then reduce16 over lanes.
// kSteps: 4-code steps summed in int16 before widening (int16_steps).
template <int G, bool kMin, bool kSigned, int kSteps>
void micro_q8(const uint8_t* panel, const uint8_t* act, int64_t nb, float* Y, int64_t ldy, int nrows, int ntok) {
    constexpr int NR = kTileTokens;
    constexpr int PB = panel_block_bytes<G, kMin>();
    constexpr int RB = NR * (G + 12);
    __m256 part[kLanes][NR];
    for (int lane = 0; lane < kLanes; ++lane) {
        __m256 acc[NR];
        for (int t = 0; t < NR; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t b = lane; b < nb; b += kLanes) {
            const uint8_t* pb = panel + b * PB;
            const uint8_t* xb = act + b * RB;
            const float* dx = reinterpret_cast<const float*>(xb + G * NR);
            const int32_t* init = reinterpret_cast<const int32_t*>(dx + NR);
            __m256i ia[NR];
            for (int t = 0; t < NR; ++t)
                ia[t] = (kMin || kSigned) ? _mm256_setzero_si256() : _mm256_set1_epi32(init[t]);
            if constexpr (kSteps == 1) {
                for (int g = 0; g < G / 4; ++g) {
                    const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + g * 4 * kPanelRows));
                    for (int t = 0; t < NR; ++t) {
                        int32_t x4;
                        std::memcpy(&x4, xb + (g * NR + t) * 4, 4);
                        ia[t] = dot4<kSigned>(ia[t], w, _mm256_set1_epi32(x4));
                    }
                }
            } else {
                for (int g0 = 0; g0 < G / 4; g0 += kSteps) {
                    __m256i s16[NR];
                    for (int t = 0; t < NR; ++t) s16[t] = _mm256_setzero_si256();
                    for (int g = g0; g < std::min(G / 4, g0 + kSteps); ++g) {
                        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + g * 4 * kPanelRows));
                        for (int t = 0; t < NR; ++t) {
                            int32_t x4;
                            std::memcpy(&x4, xb + (g * NR + t) * 4, 4);
                            s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4)));
                        }
                    }
                    for (int t = 0; t < NR; ++t)
                        ia[t] = _mm256_add_epi32(ia[t], _mm256_madd_epi16(s16[t], _mm256_set1_epi16(1)));
                }
            }
            const __m256 s = _mm256_load_ps(reinterpret_cast<const float*>(pb + G * kPanelRows));
            for (int t = 0; t < NR; ++t)
                acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ia[t]), _mm256_set1_ps(dx[t])), s, acc[t]);
            if constexpr (kMin) {
                const float* dsum = dx + 2 * NR;
                const __m256 m = _mm256_load_ps(reinterpret_cast<const float*>(pb + G * kPanelRows + 4 * kPanelRows));
                for (int t = 0; t < NR; ++t) acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(dsum[t]), acc[t]);
            }
        }
        for (int t = 0; t < NR; ++t) part[lane][t] = acc[t];
    }
    for (int t = 0; t < ntok; ++t) {
        __m256 p[kLanes];
        for (int lane = 0; lane < kLanes; ++lane) p[lane] = part[lane][t];
        alignas(32) float out[8];
        _mm256_store_ps(out, reduce16(p, [](__m256 u, __m256 v) { return _mm256_add_ps(u, v); }));
        std::memcpy(Y + t * ldy, out, static_cast<size_t>(nrows) * 4);
    }
}

template <int G, bool kMin, bool kSigned, int kSteps>
void gemm_q8_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    uint8_t* panel = s.data;
    const int64_t nb = W.cols / G;  // blocks holding columns: the padding is skipped
    for (int64_t p = r0; p < r1; p += kPanelRows) {
        const int nrows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
        build_panel<G, kMin>(W, p, nrows, nb, panel);
        for (int64_t tile = 0; tile < a.n_tiles(); ++tile) {
            const int64_t t0 = tile * kTileTokens;
            const int ntok = static_cast<int>(std::min<int64_t>(kTileTokens, a.n_tokens - t0));
            micro_q8<G, kMin, kSigned, kSteps>(panel, a.tiled + tile * a.tile_bytes(), nb, Y + t0 * W.rows + p, W.rows,
                                               nrows, ntok);
        }
    }
}

// Per type: block size, min term, sign trick, int16 steps (G / 4 steps cover a whole block).
template <int G, bool kMin>
void gemm_q8_steps(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    // The largest compiled step count within the type's bound (MXFP4's 24: 5 allowed, 4 run).
    const int steps = int16_steps(max_code(W.type));
    if (steps >= G / 4) return gemm_q8_t<G, kMin, false, G / 4>(W, a, r0, r1, Y, s);
    if (steps >= 4) return gemm_q8_t<G, kMin, false, 4>(W, a, r0, r1, Y, s);
    if (steps >= 2) return gemm_q8_t<G, kMin, false, 2>(W, a, r0, r1, Y, s);
    return gemm_q8_t<G, kMin, false, 1>(W, a, r0, r1, Y, s);
}

void gemm_q8(const WeightMatrix& W, const Int8Kind& kind, const ActQ8& a, int64_t r0, int64_t r1, float* Y,
             Scratch& s) {
    if (W.type == DType::Q8_0) return gemm_q8_t<32, false, true, 1>(W, a, r0, r1, Y, s);
    if (kind.G == 32) {
        if (kind.has_min) gemm_q8_steps<32, true>(W, a, r0, r1, Y, s);
        else gemm_q8_steps<32, false>(W, a, r0, r1, Y, s);
    } else {
        if (kind.has_min) gemm_q8_steps<16, true>(W, a, r0, r1, Y, s);
        else gemm_q8_steps<16, false>(W, a, r0, r1, Y, s);
    }
}

// ---------------------------------------------------------------------------------------
// Float weights.

template <DType T>
inline __m256 load_w8(const void* w, int64_t i) {
    if constexpr (T == DType::F32) {
        return _mm256_loadu_ps(static_cast<const float*>(w) + i);
    } else if constexpr (T == DType::F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
    } else {
        const __m256i h = _mm256_cvtepu16_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
}

template <DType T>
inline float load_w1(const void* w, int64_t i) {
    if constexpr (T == DType::F32) return static_cast<const float*>(w)[i];
    else if constexpr (T == DType::F16) return _cvtsh_ss(static_cast<const uint16_t*>(w)[i]);
    else return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
}

template <DType T, int NT>
void gemv_f32_t(const WeightMatrix& W, const float* X, int64_t r0, int64_t r1, float* Y) {
    const int64_t K = W.cols;
    const WeightPrefetch pf(W, 64);
    WeightPrefetch::start(W, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const void* w = static_cast<const uint8_t*>(W.data) + r * W.row_bytes;
        __m256 acc[NT][2];
        for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= K; i += 16) {
            if (i % 64 == 0) pf.step(static_cast<const uint8_t*>(w) + i * pf.step_bytes / 64);
            for (int u = 0; u < 2; ++u) {
                const __m256 wv = load_w8<T>(w, i + 8 * u);
                for (int t = 0; t < NT; ++t)
                    acc[t][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(X + t * K + i + 8 * u), acc[t][u]);
            }
        }
        if (i < K) {  // the last columns, zero-padded to 16: the same lanes as whole steps
            alignas(32) float wt[16] = {};
            for (int64_t j = i; j < K; ++j) wt[j - i] = load_w1<T>(w, j);
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            for (int u = 0; u < 2; ++u) {
                const __m256 wv = _mm256_load_ps(wt + 8 * u);
                const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(K - i - 8 * u)), lane);
                for (int t = 0; t < NT; ++t)
                    acc[t][u] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(X + t * K + i + 8 * u, m), acc[t][u]);
            }
        }
        for (int t = 0; t < NT; ++t) Y[t * W.rows + r] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
    }
}

template <DType T>
void gemv_f32_type(const WeightMatrix& W, const float* X, int64_t n, int64_t r0, int64_t r1, float* Y) {
    // groups of 4 tokens over blocks of rows, as gemv_q8: the weights come from DRAM once
    const int64_t block = n <= kGemvGroup ? r1 - r0 : kGemvRowBlock;
    for (int64_t r = r0; r < r1; r += block) {
        const int64_t re = std::min(r1, r + block);
        for (int64_t t = 0; t < n; t += kGemvGroup) {
            const float* x = X + t * W.cols;
            float* y = Y + t * W.rows;
            switch (std::min<int64_t>(kGemvGroup, n - t)) {
                case 1:
                    gemv_f32_t<T, 1>(W, x, r, re, y);
                    break;
                case 2:
                    gemv_f32_t<T, 2>(W, x, r, re, y);
                    break;
                case 3:
                    gemv_f32_t<T, 3>(W, x, r, re, y);
                    break;
                default:
                    gemv_f32_t<T, 4>(W, x, r, re, y);
                    break;
            }
        }
    }
}

void gemv_f32(const WeightMatrix& W, const float* X, int64_t n, int64_t r0, int64_t r1, float* Y, Scratch&) {
    switch (W.type) {
        case DType::F32:
            return gemv_f32_type<DType::F32>(W, X, n, r0, r1, Y);
        case DType::F16:
            return gemv_f32_type<DType::F16>(W, X, n, r0, r1, Y);
        default:
            return gemv_f32_type<DType::BF16>(W, X, n, r0, r1, Y);
    }
}

// gemm for float weights: an 8-row panel converted to f32 in the canonical column order
// ([16 kq positions][8 rows], lane_pos), then 8 x 8 register tiles over the pre-packed X:
// per lane, one chain over its kq columns; reduce16 over the lanes.
template <DType T>
void pack_panel_f32(const WeightMatrix& W, int64_t r0, int nrows, float* out) {
    const int64_t K = W.cols, kq = lane_cols(K);
    std::fill(out, out + kLanes * kq * kPanelRows, 0.0f);
    for (int r = 0; r < nrows; ++r) {
        const void* w = static_cast<const uint8_t*>(W.data) + (r0 + r) * W.row_bytes;
        for (int64_t k = 0; k < K; ++k) out[lane_pos(k, kq) * kPanelRows + r] = load_w1<T>(w, k);
    }
}

void micro_f32(const float* wp, const float* xp, int64_t kq, float* Y, int64_t ldy, int nrows, int ntok) {
    __m256 part[kLanes][kF32Tile];
    for (int lane = 0; lane < kLanes; ++lane) {
        __m256 acc[kF32Tile];
        for (int t = 0; t < kF32Tile; ++t) acc[t] = _mm256_setzero_ps();
        const float* w = wp + lane * kq * kPanelRows;
        const float* x = xp + lane * kq * kF32Tile;
        for (int64_t k = 0; k < kq; ++k) {
            const __m256 wv = _mm256_load_ps(w + k * kPanelRows);
            for (int t = 0; t < kF32Tile; ++t)
                acc[t] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(x + k * kF32Tile + t), acc[t]);
        }
        for (int t = 0; t < kF32Tile; ++t) part[lane][t] = acc[t];
    }
    for (int t = 0; t < ntok; ++t) {
        __m256 p[kLanes];
        for (int lane = 0; lane < kLanes; ++lane) p[lane] = part[lane][t];
        alignas(32) float out[8];
        _mm256_store_ps(out, reduce16(p, [](__m256 u, __m256 v) { return _mm256_add_ps(u, v); }));
        std::memcpy(Y + t * ldy, out, static_cast<size_t>(nrows) * 4);
    }
}

template <DType T>
void gemm_f32_t(const WeightMatrix& W, const float* xt, int64_t n, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    float* wp = reinterpret_cast<float*>(s.data);
    const int64_t kq = lane_cols(W.cols);
    for (int64_t p = r0; p < r1; p += kPanelRows) {
        const int nrows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
        pack_panel_f32<T>(W, p, nrows, wp);
        for (int64_t t0 = 0; t0 < n; t0 += kF32Tile) {
            const int ntok = static_cast<int>(std::min<int64_t>(kF32Tile, n - t0));
            micro_f32(wp, xt + t0 * kLanes * kq, kq, Y + t0 * W.rows + p, W.rows, nrows, ntok);
        }
    }
}

void gemm_f32(const WeightMatrix& W, const float* xt, int64_t n, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    switch (W.type) {
        case DType::F32:
            return gemm_f32_t<DType::F32>(W, xt, n, r0, r1, Y, s);
        case DType::F16:
            return gemm_f32_t<DType::F16>(W, xt, n, r0, r1, Y, s);
        default:
            return gemm_f32_t<DType::BF16>(W, xt, n, r0, r1, Y, s);
    }
}

float dot_f32(const float* a, const float* b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    float s = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

size_t scratch_bytes(const WeightMatrix& W, int64_t) {
    const int64_t kpad = (W.cols + kChunk - 1) / kChunk * kChunk;
    const size_t q8 = static_cast<size_t>(kpad) * 48 / 4;  // panels of 8 rows
    const size_t f32 = static_cast<size_t>(kLanes * lane_cols(W.cols)) * kPanelRows * 4;
    return std::max(q8, f32) + 64;
}

}  // namespace

const KernelTable* kernels_avx2() {
    static const KernelTable t{quantize_act, gemv_q8,     gemm_q8,  gemv_f32,       gemm_f32,      dot_f32,
                               kPanelRows,   kTileTokens, kF32Tile, kGemvMaxTokens, scratch_bytes, nullptr};
    return &t;
}

}  // namespace ember::cpu::detail
