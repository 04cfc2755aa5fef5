// AVX-512 matmul kernels (F, BW, VL, VNNI; compiled with those flags only for this file and
// used only where cpu_isa.cpp detected them).
//
// Quantized weights take one of two routes:
//  * gemv (decode, <= 8 tokens): per weight row, each 512-element chunk is unpacked to u8
//    codes in registers, then one vpdpbusd per 64 codes and token; the 16 lanes of 8
//    accumulators are reduced to per-block sums with 21 shuffle/add ops (instead of a
//    horizontal sum per block), scaled, and accumulated. Every weight byte is read from
//    memory once. Q4_0 has its own gemv over activations quantized in a permuted order, so
//    4 blocks unpack from one zmm and a single 4-way reduction gives the block sums.
//  * gemm (prefill): 32 rows are repacked into a panel where each 64-byte vector holds 4
//    codes of 16 rows, so one broadcast of 4 activation codes feeds a vpdpbusd over 16 rows.
//    A 32-row x 6-token register tile does 12 vpdpbusd per 4 codes and converts to float
//    once per block; the panel (~40 bytes per column) stays in L2 while all tokens stream by.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/weight_panels.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/unpack_int8.h"

// GCC 12's AVX-512 headers build _mm512_undefined_* from self-initialised locals, so every
// cast/extract that uses them warns at the call site (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ember::cpu::detail {
namespace {

constexpr int kPanelRows = 32;     // 2 zmm of 16 int32/float lanes
constexpr int kTileTokens = 6;     // 2 x 6 int + 2 x 6 float accumulators + 2 weights = 26 zmm
constexpr int kGemvMaxTokens = 8;  // 8 code + 8 accumulator zmm

// ---------------------------------------------------------------------------------------
// Horizontal reductions.

inline int32_t hsum_epi32(__m512i v) {
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_maskz_extracti64x4_epi64(0xF, v, 1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s4);
}

// ---------------------------------------------------------------------------------------
// Activation quantization.

// One G-block: d = max|x| / 127, q = round-to-nearest-even(x * 127 / max|x|), the same
// arithmetic as the scalar kernel so every ISA produces identical codes.
template <int G>
inline void quantize_block(const float* x, int8_t* q, float& d, int32_t& init, float& dsum, int offset) {
    const __m512 v0 = _mm512_loadu_ps(x);
    const __m512 v1 = G == 32 ? _mm512_loadu_ps(x + 16) : _mm512_setzero_ps();
    const float amax = hmax(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q0));
    __m512i sum = q0;
    if constexpr (G == 32) {
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q1));
        sum = _mm512_add_epi32(sum, q1);
    }
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
        for (int64_t b = nb_data; b < nb; ++b) a.d[t * nb + b] = a.dsum[t * nb + b] = 0.0f, a.init[t * nb + b] = 0;
    }
}

// Q4_0 layout (offset 8, only Q4_0 has it): per 128-element group of 4 blocks a..d, the
// codes are ordered [a 0-15, b 0-15, c 0-15, d 0-15, a 16-31, b 16-31, c 16-31, d 16-31],
// so one zmm of the 4 blocks' nibble bytes gives two code vectors with one shift and two
// ANDs (see gemv_q4_0). d / init stay in natural block order.
inline int64_t q4_0_pos(int64_t e) {  // position of element e (e % 32 < 16: low half)
    const int64_t g = e / 128, k = (e / 32) % 4, h = (e % 32) / 16;
    return g * 128 + h * 64 + k * 16 + e % 16;
}

void quantize_q4_0_order(const float* X, int64_t t0, int64_t t1, ActQ8& a) {
    const int64_t nb = a.nb(), nb_data = a.cols / 32;
    for (int64_t t = t0; t < t1; ++t) {
        int8_t* q = a.qs + t * a.kpad;
        std::memset(q + nb_data * 32 / kChunk * kChunk, 0,
                    static_cast<size_t>(a.kpad - nb_data * 32 / kChunk * kChunk));
        for (int64_t b = 0; b < nb_data; ++b) {
            const int64_t i = t * nb + b;
            int8_t tmp[32];
            quantize_block<32>(X + t * a.cols + b * 32, tmp, a.d[i], a.init[i], a.dsum[i], 8);
            std::memcpy(q + q4_0_pos(b * 32), tmp, 16);
            std::memcpy(q + q4_0_pos(b * 32 + 16), tmp + 16, 16);
        }
        for (int64_t b = nb_data; b < nb; ++b) a.d[t * nb + b] = a.dsum[t * nb + b] = 0.0f, a.init[t * nb + b] = 0;
    }
}

// Tiled layout (see ActQ8): quantize one block of one token, then scatter its codes in
// groups of 4 into the tile record.
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

// From a[0..3], u with u[4k + j] = op over the 4 lanes of 128-bit lane k of a[j] (op: exact
// and commutative, an integer sum or a float max): two levels of unpack + op.
template <class Op>
inline __attribute__((always_inline)) __m512i reduce4_by(const __m512i* a, Op op) {
    const __m512i x0 = op(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
    const __m512i x1 = op(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
    return op(_mm512_unpacklo_epi64(x0, x1), _mm512_unpackhi_epi64(x0, x1));
}

// Lane i < 8 of the result: op over the 16 lanes of v[i]: reduce4_by on each half, then the
// 128-bit lanes combined twice (13 shuffles and 11 ops for 8 reductions).
template <class Op>
inline __attribute__((always_inline)) __m256i reduce8(const __m512i (&v)[8], Op op) {
    const __m512i y[2] = {reduce4_by(v, op), reduce4_by(v + 4, op)};
    const __m512i z = op(_mm512_shuffle_i32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_i32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i w = op(z, _mm512_shuffle_i32x4(z, z, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(w, w, _MM_SHUFFLE(2, 0, 2, 0)));
}

// Dword o of a 32-block tile record's codes is group o / 6 of token o % 6 (ActQ8's tiled
// layout); as a source index into 6 tokens' codes held token after token (8 dwords each).
constexpr std::array<int32_t, 16> record_source(int k) {
    std::array<int32_t, 16> idx{};
    for (int e = 0; e < 16; ++e) {
        const int o = 16 * k + e;
        idx[static_cast<size_t>(e)] = o % kTileTokens * 8 + o / kTileTokens;
    }
    return idx;
}

// A whole tile of kTileTokens tokens, 32-blocks: per block, the tokens' maxima and code sums
// are reduced together (reduce8) and their codes transposed into the record's order in
// registers, written as three vectors, instead of each token's block reduced alone and its
// codes copied 4 bytes at a time. The same arithmetic per element as quantize_block: the
// same codes, scales and sums. Tokens past ntok are zeros.
void quantize_tile32(const float* X, int64_t cols, int ntok, int offset, const ActQ8& a, uint8_t* tile) {
    static_assert(kTileTokens == 6, "the record transpose below is written for 6 tokens");
    static constexpr std::array<int32_t, 16> kSrc[3] = {record_source(0), record_source(1), record_source(2)};
    const auto max_ps = [](__m512i u, __m512i v) {
        return _mm512_castps_si512(_mm512_max_ps(_mm512_castsi512_ps(u), _mm512_castsi512_ps(v)));
    };
    const auto add_epi32 = [](__m512i u, __m512i v) { return _mm512_add_epi32(u, v); };
    const int64_t nb_data = cols / 32;
    for (int64_t b = 0; b < nb_data; ++b) {
        __m512 v[kTileTokens][2];
        __m512i m[8], sums[8];
        for (int t = 0; t < 8; ++t) m[t] = sums[t] = _mm512_setzero_si512();
        for (int t = 0; t < kTileTokens; ++t) {
            const float* x = X + t * cols + b * 32;
            v[t][0] = t < ntok ? _mm512_loadu_ps(x) : _mm512_setzero_ps();
            v[t][1] = t < ntok ? _mm512_loadu_ps(x + 16) : _mm512_setzero_ps();
            m[t] = _mm512_castps_si512(_mm512_max_ps(_mm512_abs_ps(v[t][0]), _mm512_abs_ps(v[t][1])));
        }
        const __m256 amax = _mm256_castsi256_ps(reduce8(m, max_ps));
        const __m256 d = _mm256_div_ps(amax, _mm256_set1_ps(127.0f));
        alignas(32) float id[8];
        _mm256_store_ps(id, _mm256_maskz_div_ps(_mm256_cmp_ps_mask(amax, _mm256_setzero_ps(), _CMP_GT_OQ),
                                                _mm256_set1_ps(127.0f), amax));
        __m256i codes[kTileTokens];
        for (int t = 0; t < kTileTokens; ++t) {
            const __m512 s = _mm512_set1_ps(id[t]);
            const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v[t][0], s));
            const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v[t][1], s));
            sums[t] = _mm512_add_epi32(q0, q1);
            codes[t] = _mm256_set_m128i(_mm512_cvtsepi32_epi8(q1), _mm512_cvtsepi32_epi8(q0));
        }
        const __m256i sum = reduce8(sums, add_epi32);
        uint8_t* rec = tile + b * a.rec_bytes();
        __m512i z[3];
        for (int p = 0; p < 3; ++p)
            z[p] = _mm512_inserti64x4(_mm512_castsi256_si512(codes[2 * p]), codes[2 * p + 1], 1);
        for (int k = 0; k < 3; ++k) {
            const __m512i idx = _mm512_loadu_si512(kSrc[k].data());
            __m512i out = _mm512_permutex2var_epi32(z[0], idx, z[1]);  // sources 0 .. 31
            const __mmask16 from_z2 = _mm512_cmpge_epi32_mask(idx, _mm512_set1_epi32(32));
            out = _mm512_mask_permutexvar_epi32(out, from_z2, _mm512_sub_epi32(idx, _mm512_set1_epi32(32)), z[2]);
            _mm512_storeu_si512(rec + 64 * k, out);
        }
        auto* dp = reinterpret_cast<float*>(rec + 32 * kTileTokens);  // d[6], init[6], dsum[6]
        constexpr __mmask8 kTok = (1u << kTileTokens) - 1;
        _mm256_mask_storeu_ps(dp, kTok, d);
        _mm256_mask_storeu_epi32(dp + kTileTokens, kTok, _mm256_mullo_epi32(sum, _mm256_set1_epi32(-offset)));
        _mm256_mask_storeu_ps(dp + 2 * kTileTokens, kTok, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sum)));
    }
}

// t0 is a tile's first token when a.tile > 0 (quantize_activations splits the call by tiles).
void quantize_act(const float* X, int64_t t0, int64_t t1, const Int8Kind& kind, ActQ8& a) {
    if (a.tile > 0 && kind.G == 32) {  // a.tile is this table's gemm_tile, kTileTokens
        for (int64_t t = t0; t < t1; t += kTileTokens) {
            const int ntok = static_cast<int>(std::min<int64_t>(kTileTokens, t1 - t));
            quantize_tile32(X + t * a.cols, a.cols, ntok, kind.offset, a, a.tiled + t / kTileTokens * a.tile_bytes());
        }
        return;
    }
    if (a.tile > 0) {
        quantize_tiled<16>(X, t0, t1, kind.offset, a);
    } else {
        // Q4_0 is the only kind with offset 8 (int8_kind); its gemv reads the permuted order.
        if (kind.G == 32 && kind.offset == 8) quantize_q4_0_order(X, t0, t1, a);
        else if (kind.G == 32) quantize_natural<32>(X, t0, t1, kind.offset, a);
        else quantize_natural<16>(X, t0, t1, kind.offset, a);
    }
}

// ---------------------------------------------------------------------------------------
// Per-type extraction of the codes of one full 512-element chunk straight into registers
// (natural element order, 64 codes per zmm) and of its per-block scales/mins. Reading the
// blocks directly (instead of via a byte buffer) keeps decode close to memory speed.

// vpsrlvw counts: shift the 16-bit words of 128-bit lanes 1 and 3 (or of the upper 256 bits)
// right by 4 so one AND with 0x0F yields the high nibbles there and the low ones elsewhere.
inline __m512i shift_lanes_1_3(int n) {
    const int v = n | (n << 16);
    return _mm512_setr_epi32(0, 0, 0, 0, v, v, v, v, 0, 0, 0, 0, v, v, v, v);
}
inline __m512i shift_upper(int lo, int hi) {
    const int a = lo | (lo << 16), b = hi | (hi << 16);
    return _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
}

// Two legacy blocks' 16 nibble bytes -> 64 codes: [lo(a), hi(a), lo(b), hi(b)].
inline __attribute__((always_inline)) __m512i nibbles_2x16(const uint8_t* a, const uint8_t* b) {
    const __m512i x = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(x, shift_lanes_1_3(4)), _mm512_set1_epi8(0x0F));
}

// 32 K-quant nibble bytes -> 64 codes: [lo(32 bytes), hi(32 bytes)].
inline __attribute__((always_inline)) __m512i nibbles_32(const uint8_t* a) {
    const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
    return _mm512_and_si512(_mm512_srlv_epi16(x, shift_upper(0, 4)), _mm512_set1_epi8(0x0F));
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline __attribute__((always_inline)) uint64_t u32_pair(const uint8_t* a, const uint8_t* b) {
    uint32_t x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return x | (static_cast<uint64_t>(y) << 32);
}

// Half-float fields of 16 consecutive blocks (kStride bytes each, the field kOff words into
// the block) as 16 floats. Each 128-byte window holds the fields of several blocks; one
// vpermt2w per window picks them out (masked loads never touch bytes past the last field).
template <int kStride, int kOff>
struct HalfWindows {
    static constexpr int kWords = kStride / 2;
    static constexpr int kPer = (63 - kOff) / kWords + 1;  // blocks per 64-word window
    static constexpr int kWindows = (16 + kPer - 1) / kPer;
    struct Table {
        alignas(64) uint16_t idx[kWindows][32];
        uint32_t lo_mask[kWindows], hi_mask[kWindows], lanes[kWindows];
    };
    static constexpr Table make() {
        Table t{};
        for (int w = 0; w < kWindows; ++w) {
            const int i0 = w * kPer, n = std::min(kPer, 16 - i0);
            const int last = (n - 1) * kWords + kOff;  // last word read
            for (int j = 0; j < 32; ++j) t.idx[w][j] = 0;
            for (int j = 0; j < n; ++j) t.idx[w][i0 + j] = static_cast<uint16_t>(j * kWords + kOff);
            t.lo_mask[w] = last >= 31 ? 0xFFFFFFFFu : (1u << (last + 1)) - 1;
            t.hi_mask[w] = last < 32 ? 0u : last >= 63 ? 0xFFFFFFFFu : (1u << (last - 31)) - 1;
            t.lanes[w] = ((1u << n) - 1) << i0;
        }
        return t;
    }
    static constexpr Table kTable = make();
};

template <int kStride, int kOff>
inline __attribute__((always_inline)) __m512 block_halves(const uint8_t* p) {
    using H = HalfWindows<kStride, kOff>;
    __m512i out = _mm512_setzero_si512();
    for (int w = 0; w < H::kWindows; ++w) {
        const uint8_t* q = p + w * H::kPer * kStride;
        const __m512i lo = _mm512_maskz_loadu_epi16(H::kTable.lo_mask[w], q);
        const __m512i hi = _mm512_maskz_loadu_epi16(H::kTable.hi_mask[w], q + 64);
        const __m512i sel = _mm512_permutex2var_epi16(lo, _mm512_load_si512(H::kTable.idx[w]), hi);
        out = _mm512_mask_mov_epi16(out, H::kTable.lanes[w], sel);
    }
    return _mm512_cvtph_ps(_mm512_castsi512_si256(out));
}

struct UQ4_0 {
    static constexpr int kBE = 32, kBB = 18;
    static constexpr int kQsOff = 2;  // nibble bytes: gemm panels built by build_panel_q4
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int j = 0; j < 8; ++j) w[j] = nibbles_2x16(p + 36 * j + 2, p + 36 * j + 20);
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512*) {
        s[0] = block_halves<kBB, 0>(p);
    }
};

struct UQ4_1 {
    static constexpr int kBE = 32, kBB = 20;
    static constexpr int kQsOff = 4;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int j = 0; j < 8; ++j) w[j] = nibbles_2x16(p + 40 * j + 4, p + 40 * j + 24);
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512* m) {
        s[0] = block_halves<kBB, 0>(p);
        m[0] = block_halves<kBB, 1>(p);
    }
};

struct UQ5_0 {
    static constexpr int kBE = 32, kBB = 22;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int j = 0; j < 8; ++j) {
            const uint8_t* b = p + 44 * j;
            const __m512i c = nibbles_2x16(b + 6, b + 28);
            w[j] = _mm512_mask_add_epi8(c, u32_pair(b + 2, b + 24), c, _mm512_set1_epi8(16));
        }
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512*) {
        s[0] = block_halves<kBB, 0>(p);
    }
};

struct UQ5_1 {
    static constexpr int kBE = 32, kBB = 24;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int j = 0; j < 8; ++j) {
            const uint8_t* b = p + 48 * j;
            const __m512i c = nibbles_2x16(b + 8, b + 32);
            w[j] = _mm512_mask_add_epi8(c, u32_pair(b + 4, b + 28), c, _mm512_set1_epi8(16));
        }
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512* m) {
        s[0] = block_halves<kBB, 0>(p);
        m[0] = block_halves<kBB, 1>(p);
    }
};

struct UQ8_0 {
    static constexpr int kBE = 32, kBB = 34;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int j = 0; j < 8; ++j) {
            const uint8_t* b = p + 68 * j;
            const __m512i x =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2))),
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 36)), 1);
            w[j] = _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));  // q + 128
        }
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512*) {
        s[0] = block_halves<kBB, 0>(p);
    }
};

// MXFP4: nibbles through a byte table (vpshufb, per 128-bit lane) to unsigned codes
// kMxfp4Values + 12 (Int8Kind offset 12); the 16 blocks' E8M0 bytes come with one gather
// (dwords at 17-byte steps: the last reads 3 bytes into the chunk's last block) and become
// 2^(e - 128) as float bits (e < 2: the subnormals).
struct UMXFP4 {
    static constexpr int kBE = 32, kBB = 17;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        const __m512i lut =
            _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
        for (int j = 0; j < 8; ++j) w[j] = _mm512_shuffle_epi8(lut, nibbles_2x16(p + 34 * j + 1, p + 34 * j + 18));
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512*) {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(kBB));
        const __m512i e = _mm512_and_si512(_mm512_i32gather_epi32(idx, p, 1), _mm512_set1_epi32(0xFF));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        s[0] =
            _mm512_castsi512_ps(_mm512_mask_mov_epi32(normal, _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2)), sub));
    }
};

// Scales and mins of two consecutive Q4_K/Q5_K super-blocks (stride bytes apart), as 16
// scales d * sc_j and 16 mins -dmin * m_j. The 12 bytes b[0..11] of 6-bit fields hold
//   sc_j = b[j] & 63,                 m_j = b[j + 4] & 63              (j < 4)
//   sc_j = b[j + 4] & 15 | b[j - 4] >> 6 << 4,  m_j = b[j + 4] >> 4 | b[j] >> 6 << 4  (j >= 4)
// unpacked for both super-blocks at once with byte shuffles (one 128-bit lane each), so no
// scalar bit fiddling competes with the vector work.
inline __attribute__((always_inline)) void k4_scales_x2(const uint8_t* p, int stride, __m512* s, __m512* m) {
    const __m256i b =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride + 4)), 1);
    // per lane: [sc 0-3 | sc 4-7 | m 0-3 | m 4-7] low parts, and the bytes holding their top 2 bits
    const __m256i low = _mm256_shuffle_epi8(b, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11, 0,
                                                                1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m256i top =
        _mm256_shuffle_epi8(b, _mm256_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1,
                                                0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m256i lo_mask = _mm256_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0, 63, 63, 63, 63,
                                             15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0);
    const __m256i hi_mask = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 15, 15, 15, 15);
    __m256i f = _mm256_and_si256(low, lo_mask);
    f = _mm256_or_si256(f, _mm256_and_si256(_mm256_srli_epi16(low, 4), hi_mask));
    f = _mm256_or_si256(f, _mm256_and_si256(_mm256_srli_epi16(top, 2), _mm256_set1_epi8(0x30)));  // bits 6-7 -> 4-5
    // qwords [sc_a, m_a, sc_b, m_b] -> [sc_a, sc_b] and [m_a, m_b]
    const __m128i sc = _mm256_castsi256_si128(_mm256_permute4x64_epi64(f, _MM_SHUFFLE(3, 1, 2, 0)));
    const __m128i mn = _mm256_extracti128_si256(_mm256_permute4x64_epi64(f, _MM_SHUFFLE(3, 1, 2, 0)), 1);
    // [d0, dmin0, d1, dmin1] as floats, spread to 8 lanes per super-block
    uint32_t da, db;
    std::memcpy(&da, p, 4);
    std::memcpy(&db, p + stride, 4);
    const __m128i dd = _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(da)), static_cast<int>(db), 1);
    const __m512 h = _mm512_castps128_ps512(_mm_cvtph_ps(dd));
    const __m512 dv = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), h);
    const __m512 mv = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), h);
    s[0] = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
    m[0] = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(mv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn))));
}

struct UQ4_K {
    static constexpr int kBE = 256, kBB = 144;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int sb = 0; sb < 2; ++sb) {
            for (int c = 0; c < 4; ++c) w[4 * sb + c] = nibbles_32(p + kBB * sb + 16 + 32 * c);
        }
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512* m) {
        k4_scales_x2(p, kBB, s, m);
    }
};

struct UQ5_K {
    static constexpr int kBE = 256, kBB = 176;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int sb = 0; sb < 2; ++sb) {
            const uint8_t* b = p + kBB * sb;
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
            for (int c = 0; c < 4; ++c) {
                // fifth bit of codes 64c + l: bit 2c of qh[l] (l < 32), bit 2c + 1 (l >= 32)
                const __m512i bit =
                    _mm512_mask_mov_epi8(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))), 0xFFFFFFFF00000000ull,
                                         _mm512_set1_epi8(static_cast<char>(2 << (2 * c))));
                const __m512i lo = nibbles_32(b + 48 + 32 * c);
                w[4 * sb + c] = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, bit), lo, _mm512_set1_epi8(16));
            }
        }
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512* m) {
        k4_scales_x2(p, kBB, s, m);
    }
};

struct UQ6_K {
    static constexpr int kBE = 256, kBB = 210;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
        for (int sb = 0; sb < 2; ++sb) {
            const uint8_t* b = p + kBB * sb;
            for (int h = 0; h < 2; ++h) {
                const __m512i ql = _mm512_loadu_si512(b + 64 * h);
                const __m512i qh =
                    _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h)));
                const __m512i lo = _mm512_and_si512(ql, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
                w[4 * sb + 2 * h] =
                    _mm512_or_si512(lo, _mm512_and_si512(_mm512_sllv_epi16(qh, shift_upper(4, 2)), m30));
                w[4 * sb + 2 * h + 1] =
                    _mm512_or_si512(hi, _mm512_and_si512(_mm512_srlv_epi16(qh, shift_upper(0, 2)), m30));
            }
        }
    }
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512*) {
        for (int sb = 0; sb < 2; ++sb) {
            const uint8_t* b = p + kBB * sb;
            const __m512 sc =
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
            uint16_t d;
            std::memcpy(&d, b + 208, 2);
            s[sb] = _mm512_mul_ps(_mm512_set1_ps(h2f(d)), sc);
        }
    }
};

// Q2_K / Q3_K 2-bit fields: super-block element 128 h + 32 g + l is (qs[32 h + l] >> 2g) & 3.
// zmm k (elements 64k .. 64k + 63) has h = k / 2 and g = 2 (k % 2) + {0, 1} for its halves.
inline __attribute__((always_inline)) __m512i crumbs(const uint8_t* qs, int k) {
    const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (k / 2))));
    const int g0 = 2 * (k % 2);
    return _mm512_and_si512(_mm512_srlv_epi16(x, shift_upper(2 * g0, 2 * g0 + 2)), _mm512_set1_epi8(3));
}

struct UQ2_K {
    static constexpr int kBE = 256, kBB = 84;
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int sb = 0; sb < 2; ++sb) {
            for (int k = 0; k < 4; ++k) w[4 * sb + k] = crumbs(p + kBB * sb + 16, k);
        }
    }
    // 16 sub-blocks of 16: scale d * (sc & 15), min -dmin * (sc >> 4).
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512* m) {
        for (int sb = 0; sb < 2; ++sb) {
            const uint8_t* b = p + kBB * sb;
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
            const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15)));
            const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4));
            s[sb] = _mm512_mul_ps(_mm512_set1_ps(half_at(b + 80)), lo);
            m[sb] = _mm512_mul_ps(_mm512_set1_ps(-half_at(b + 82)), hi);
        }
    }
};

struct UQ3_K {
    static constexpr int kBE = 256, kBB = 110;
    // code = 2-bit field + 4 * (bit 4h + g of hmask[l]); the weight is code - 4.
    __attribute__((always_inline)) static void codes(const uint8_t* p, __m512i* w) {
        for (int sb = 0; sb < 2; ++sb) {
            const uint8_t* b = p + kBB * sb;
            const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
            for (int k = 0; k < 4; ++k) {
                const int bit0 = 4 * (k / 2) + 2 * (k % 2);
                const __m512i bit =
                    _mm512_mask_mov_epi8(_mm512_set1_epi8(static_cast<char>(1 << bit0)), 0xFFFFFFFF00000000ull,
                                         _mm512_set1_epi8(static_cast<char>(1 << (bit0 + 1))));
                const __m512i c = crumbs(b + 32, k);
                w[4 * sb + k] = _mm512_mask_add_epi8(c, _mm512_test_epi8_mask(hm, bit), c, _mm512_set1_epi8(4));
            }
        }
    }
    // 16 signed 6-bit scales (minus 32): low nibbles in bytes 0..7 (scales 0..7 low, 8..15
    // high nibble), high 2 bits in bytes 8..11 (scale j: byte 8 + j % 4, bits 2 (j / 4)).
    __attribute__((always_inline)) static void scales(const uint8_t* p, __m512* s, __m512*) {
        for (int sb = 0; sb < 2; ++sb) {
            const uint8_t* b = p + kBB * sb;
            uint64_t L;
            uint32_t H;
            std::memcpy(&L, b + 96, 8);
            std::memcpy(&H, b + 104, 4);
            const uint64_t h_lo = (H & 0x03030303u) | static_cast<uint64_t>((H >> 2) & 0x03030303u) << 32;
            const uint64_t h_hi = ((H >> 4) & 0x03030303u) | static_cast<uint64_t>((H >> 6) & 0x03030303u) << 32;
            const uint64_t lo = (L & 0x0F0F0F0F0F0F0F0Full) | h_lo << 4;
            const uint64_t hi = ((L >> 4) & 0x0F0F0F0F0F0F0F0Full) | h_hi << 4;
            const __m128i v =
                _mm_insert_epi64(_mm_cvtsi64_si128(static_cast<int64_t>(lo)), static_cast<int64_t>(hi), 1);
            const __m512i sc = _mm512_sub_epi32(_mm512_cvtepu8_epi32(v), _mm512_set1_epi32(32));
            s[sb] = _mm512_mul_ps(_mm512_set1_ps(half_at(b + 108)), _mm512_cvtepi32_ps(sc));
        }
    }
};

// A row's last, partial chunk (576-wide rows: 64 of its 512 columns) for the whole-chunk
// loaders: its `n` bytes of blocks copied into `tail`, zeros after. Padding blocks have scale 0
// and meet zero activations, so they add exactly nothing (the portable unpacker's zero fill,
// per element, took most of SmolLM2's decode). `tail` holds a chunk's bytes + 128: the scale
// loaders' masked 64-byte windows may start past the last block.
template <size_t N>
inline const uint8_t* zero_padded_tail(const uint8_t* p, size_t n, uint8_t (&tail)[N]) {
    std::memcpy(tail, p, n);
    std::memset(tail + n, 0, N - n);
    return tail;
}

// Codes and scales of chunk c of a row, in registers (a partial last chunk through
// zero_padded_tail). Scales (and mins) of the chunk's blocks come back in registers,
// sv[0..1] / mv[0..1] (16 blocks each; [1] only for G = 16): a store and reload through memory
// would put a store-forwarding delay in front of every block's scaling.
template <class U>
inline __attribute__((always_inline)) void load_chunk(const WeightMatrix& W, const uint8_t* row, int64_t c, __m512i* w,
                                                      __m512* sv, __m512* mv) {
    constexpr int kBytes = kChunk / U::kBE * U::kBB;
    const uint8_t* p = row + c * kBytes;
    alignas(64) uint8_t tail[kBytes + 128];
    if ((c + 1) * kChunk > W.cols)
        p = zero_padded_tail(p, static_cast<size_t>((W.cols - c * kChunk) / U::kBE * U::kBB), tail);
    U::codes(p, w);
    U::scales(p, sv, mv);
}

// ---------------------------------------------------------------------------------------
// gemv: codes of a chunk in registers, dotted with each token.

// From accumulators a[0..3], returns u with u[4k + j] = sum of the 4 lanes of 128-bit lane
// k of a[j] (reduce4_by above).
inline __attribute__((always_inline)) __m512i reduce4(const __m512i* a) {
    return reduce4_by(a, [](__m512i u, __m512i v) { return _mm512_add_epi32(u, v); });
}

// 512 codes against one token's 512 activation codes: per-block integer sums.
// G = 32: accumulator j covers blocks 2j (128-bit lanes 0, 1) and 2j + 1 (lanes 2, 3);
// returns the 16 block sums in natural order.
inline __attribute__((always_inline)) __m512i block_sums32(const __m512i* w, const int8_t* x) {
    __m512i a[8];
    for (int j = 0; j < 8; ++j)
        a[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], _mm512_loadu_si512(x + 64 * j));
    const __m512i u0 = reduce4(a), u1 = reduce4(a + 4);
    // adding 128-bit lane pairs gives blocks [0,2,4,6 | 1,3,5,7 | 8,10,12,14 | 9,11,13,15]
    const __m512i v = _mm512_add_epi32(_mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i to_natural = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    return _mm512_permutexvar_epi32(to_natural, v);
}

// G = 16: accumulator j covers blocks 4j .. 4j + 3 (one per 128-bit lane); 32 block sums.
inline __attribute__((always_inline)) void block_sums16(const __m512i* w, const int8_t* x, __m512i& lo, __m512i& hi) {
    __m512i a[8];
    for (int j = 0; j < 8; ++j)
        a[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], _mm512_loadu_si512(x + 64 * j));
    const __m512i to_natural = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    lo = _mm512_permutexvar_epi32(to_natural, reduce4(a));
    hi = _mm512_permutexvar_epi32(to_natural, reduce4(a + 4));
}

// acc += per block: weight scale * d * (integer sum + init) [+ weight min * dsum].
template <bool kMin>
inline __attribute__((always_inline)) __m512 scale_blocks(__m512 acc, __m512i sums, __m512 scale, __m512 min,
                                                          const float* d, const int32_t* init, const float* dsum) {
    if constexpr (!kMin) sums = _mm512_add_epi32(sums, _mm512_loadu_si512(init));
    const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_loadu_ps(d));
    acc = _mm512_fmadd_ps(f, scale, acc);
    if constexpr (kMin) acc = _mm512_fmadd_ps(min, _mm512_loadu_ps(dsum), acc);
    return acc;
}

// One pass over rows [r0, r1) for NT tokens (compile-time, so the accumulators stay in
// registers). The K-quants' weights are prefetched into L2 only: their chunks take more
// loads (packed scales) and compute per byte, and the 8 KiB run ahead in L1 evicted the
// activations, more so the longer the row. ember-bench-matmul, 2 threads, --best, median
// of 3 interleaved pairs: Q6_K 4096x14336 26.9 -> 40.9 GB/s, 2048x8192 40.9 -> 46.6,
// 2048x2048 44.1 -> 53.0, Q4_K 4096x14336 31.2 -> 42.3, shorter Q4_K rows unchanged; with
// L2 for every type Q4_0 and Q8_0 gained nothing (0.91-1.11, noise), so they keep L1.
template <class U, int G, bool kMin, int NT>
void gemv_q8_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    constexpr int nbc = kChunk / G;
    constexpr int64_t kStep = kChunk / U::kBE * U::kBB;  // weight bytes per chunk
    constexpr int kLocality = WeightPrefetch::locality_for(U::kBE);
    const int64_t nb = a.nb(), nchunks = a.kpad / kChunk;
    WeightPrefetch::start(W, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const auto* row = static_cast<const uint8_t*>(W.data) + r * W.row_bytes;
        __m512 acc[NT];
        for (auto& v : acc) v = _mm512_setzero_ps();
        for (int64_t c = 0; c < nchunks; ++c) {
            __m512i w[8];
            WeightPrefetch::step_fixed<kStep, kLocality>(row + c * kStep);
            __m512 sv[2], mv[2];
            load_chunk<U>(W, row, c, w, sv, mv);
            for (int t = 0; t < NT; ++t) {
                const int8_t* x = a.qs + t * a.kpad + c * kChunk;
                const int64_t bi = t * nb + c * nbc;
                if constexpr (G == 32) {
                    acc[t] = scale_blocks<kMin>(acc[t], block_sums32(w, x), sv[0], mv[0], a.d + bi, a.init + bi,
                                                a.dsum + bi);
                } else {
                    __m512i lo, hi;
                    block_sums16(w, x, lo, hi);
                    acc[t] = scale_blocks<kMin>(acc[t], lo, sv[0], mv[0], a.d + bi, a.init + bi, a.dsum + bi);
                    acc[t] =
                        scale_blocks<kMin>(acc[t], hi, sv[1], mv[1], a.d + bi + 16, a.init + bi + 16, a.dsum + bi + 16);
                }
            }
        }
        for (int t = 0; t < NT; ++t) Y[t * W.rows + r] = hsum(acc[t]);
    }
}

// Q4_0 gemv over the permuted activation order (quantize_q4_0_order): per group of 4
// blocks, one zmm of their 64 nibble bytes -> low-nibble and high-nibble code vectors whose
// 128-bit lanes are the 4 blocks; two vpdpbusd per group leave one block per lane, and one
// 4-way reduction gives the chunk's 16 block sums.
template <int NT>
void gemv_q4_0_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    constexpr int kCB = 16 * 18;  // bytes per chunk
    const int64_t nb = a.nb(), nfull = W.cols / kChunk, nchunks = a.kpad / kChunk;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i to_natural = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    alignas(64) uint8_t tail[kCB + 128];  // see zero_padded_tail
    WeightPrefetch::start(W, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const auto* row = static_cast<const uint8_t*>(W.data) + r * W.row_bytes;
        __m512 acc[NT];
        for (auto& v : acc) v = _mm512_setzero_ps();
        for (int64_t c = 0; c < nchunks; ++c) {
            const uint8_t* p = row + c * kCB;
            if (c < nfull) {
                WeightPrefetch::step_fixed<kCB>(p);
            } else {
                p = zero_padded_tail(p, static_cast<size_t>((W.cols - c * kChunk) / 32 * 18), tail);
            }
            __m512i w[8];
            for (int g = 0; g < 4; ++g) {
                const uint8_t* b = p + 72 * g + 2;
                __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
                q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18)), 1);
                q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 36)), 2);
                q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 54)), 3);
                w[2 * g] = _mm512_and_si512(q, m4);
                w[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            }
            const __m512 sc = block_halves<18, 0>(p);
            for (int t = 0; t < NT; ++t) {
                const int8_t* x = a.qs + t * a.kpad + c * kChunk;
                __m512i s4[4];
                for (int g = 0; g < 4; ++g) {
                    const __m512i lo =
                        _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[2 * g], _mm512_loadu_si512(x + 128 * g));
                    s4[g] = _mm512_dpbusd_epi32(lo, w[2 * g + 1], _mm512_loadu_si512(x + 128 * g + 64));
                }
                const int64_t bi = t * nb + c * 16;
                const __m512i sums = _mm512_add_epi32(_mm512_permutexvar_epi32(to_natural, reduce4(s4)),
                                                      _mm512_loadu_si512(a.init + bi));
                acc[t] =
                    _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_loadu_ps(a.d + bi)), sc, acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) Y[t * W.rows + r] = hsum(acc[t]);
    }
}

inline void gemv_q4_0(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    switch (a.n_tokens) {
        case 1:
            return gemv_q4_0_t<1>(W, a, r0, r1, Y);
        case 2:
            return gemv_q4_0_t<2>(W, a, r0, r1, Y);
        case 3:
            return gemv_q4_0_t<3>(W, a, r0, r1, Y);
        case 4:
            return gemv_q4_0_t<4>(W, a, r0, r1, Y);
        case 5:
            return gemv_q4_0_t<5>(W, a, r0, r1, Y);
        case 6:
            return gemv_q4_0_t<6>(W, a, r0, r1, Y);
        case 7:
            return gemv_q4_0_t<7>(W, a, r0, r1, Y);
        default:
            return gemv_q4_0_t<kGemvMaxTokens>(W, a, r0, r1, Y);
    }
}

template <class U, int G, bool kMin>
void gemv_q8_n(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y) {
    switch (a.n_tokens) {
        case 1:
            return gemv_q8_t<U, G, kMin, 1>(W, a, r0, r1, Y);
        case 2:
            return gemv_q8_t<U, G, kMin, 2>(W, a, r0, r1, Y);
        case 3:
            return gemv_q8_t<U, G, kMin, 3>(W, a, r0, r1, Y);
        case 4:
            return gemv_q8_t<U, G, kMin, 4>(W, a, r0, r1, Y);
        case 5:
            return gemv_q8_t<U, G, kMin, 5>(W, a, r0, r1, Y);
        case 6:
            return gemv_q8_t<U, G, kMin, 6>(W, a, r0, r1, Y);
        case 7:
            return gemv_q8_t<U, G, kMin, 7>(W, a, r0, r1, Y);
        default:
            return gemv_q8_t<U, G, kMin, kGemvMaxTokens>(W, a, r0, r1, Y);
    }
}

void gemv_q8(const WeightMatrix& W, const Int8Kind&, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch&) {
    switch (W.type) {
        case DType::Q4_0:
            return gemv_q4_0(W, a, r0, r1, Y);
        case DType::Q4_1:
            return gemv_q8_n<UQ4_1, 32, true>(W, a, r0, r1, Y);
        case DType::Q5_0:
            return gemv_q8_n<UQ5_0, 32, false>(W, a, r0, r1, Y);
        case DType::Q5_1:
            return gemv_q8_n<UQ5_1, 32, true>(W, a, r0, r1, Y);
        case DType::Q8_0:
            return gemv_q8_n<UQ8_0, 32, false>(W, a, r0, r1, Y);
        case DType::Q4_K:
            return gemv_q8_n<UQ4_K, 32, true>(W, a, r0, r1, Y);
        case DType::Q5_K:
            return gemv_q8_n<UQ5_K, 32, true>(W, a, r0, r1, Y);
        case DType::Q6_K:
            return gemv_q8_n<UQ6_K, 16, false>(W, a, r0, r1, Y);
        case DType::Q2_K:
            return gemv_q8_n<UQ2_K, 16, true>(W, a, r0, r1, Y);
        case DType::Q3_K:
            return gemv_q8_n<UQ3_K, 16, false>(W, a, r0, r1, Y);
        case DType::MXFP4:
            return gemv_q8_n<UMXFP4, 32, false>(W, a, r0, r1, Y);
        default:
            return;
    }
}

// ---------------------------------------------------------------------------------------
// gemm: panels of 32 rows, register tiles of 32 rows x kTileTokens tokens.

// Panel block record for block b: codes [G/4][32 rows][4], then scale[32], then min[32]
// (has_min only).
template <int G, bool kMin>
constexpr int panel_block_bytes() {
    return G * kPanelRows + 4 * kPanelRows * (kMin ? 2 : 1);
}

// Repacks rows [r0, r0 + nrows) into the panel, 16 rows at a time: each row's chunk is
// unpacked to a row buffer, then 16 x 16 dword transposes turn 4-code groups (and scales,
// mins) of 16 rows into one 64-byte panel vector each. nb: the blocks holding columns
// (W.cols / G); the padding of a short row's last chunk is not transposed (never read).
template <class U, int G, bool kMin>
void build_panel(const WeightMatrix& W, int64_t r0, int nrows, int64_t nb, uint8_t* panel) {
    constexpr int PB = panel_block_bytes<G, kMin>();
    constexpr int nbc = kChunk / G;
    alignas(64) uint8_t rows[16][kChunk];
    alignas(64) float scale[16][32], min[16][32];  // rows past nrows zeroed below; G = 32 uses [r][0..15]
    // 32 rows are 32 streams, too many for the hardware prefetchers: each row chunk is
    // requested kAhead row chunks before it is unpacked, in the order the loops below read
    // them (half, chunk, row). 24 (7-10 KiB) measured best on Zen 4 (8 and 48-96: 10-25 % slower).
    constexpr int kAhead = 24;
    constexpr int64_t kBytes = kChunk / U::kBE * U::kBB;
    const int64_t nch = (nb + nbc - 1) / nbc;
    int64_t ahead_c = 0;
    int ahead_half = 0, ahead_r = 0;  // the row chunk to request next
    const auto prefetch_next = [&] {
        const int r = 16 * ahead_half + ahead_r;
        if (ahead_half < 2 && r < nrows)
            prefetch_l2(static_cast<const uint8_t*>(W.data) + (r0 + r) * W.row_bytes + ahead_c * kBytes, kBytes);
        if (++ahead_r == 16 && (ahead_r = 0, ++ahead_c == nch)) ahead_c = 0, ++ahead_half;
    };
    for (int i = 0; i < kAhead; ++i) prefetch_next();
    for (int half = 0; half < 2; ++half) {
        const int nr = std::clamp(nrows - 16 * half, 0, 16);
        if (nr < 16) {
            std::memset(rows[nr], 0, sizeof(rows[0]) * static_cast<size_t>(16 - nr));
            std::memset(scale[nr], 0, sizeof(scale[0]) * static_cast<size_t>(16 - nr));
            std::memset(min[nr], 0, sizeof(min[0]) * static_cast<size_t>(16 - nr));
        }
        for (int64_t c = 0; c * nbc < nb; ++c) {
            const int blocks = static_cast<int>(std::min<int64_t>(nbc, nb - c * nbc));
            for (int r = 0; r < nr; ++r) {
                prefetch_next();  // (a partial half skips rows: the hint drifts, harmlessly)
                const auto* row = static_cast<const uint8_t*>(W.data) + (r0 + 16 * half + r) * W.row_bytes;
                __m512i w[8];
                __m512 sv[2], mv[2];
                load_chunk<U>(W, row, c, w, sv, mv);
                for (int j = 0; j < nbc / 16; ++j) {
                    _mm512_store_ps(scale[r] + 16 * j, sv[j]);
                    if constexpr (kMin) _mm512_store_ps(min[r] + 16 * j, mv[j]);
                }
                for (int j = 0; j < 8; ++j) _mm512_store_si512(rows[r] + 64 * j, w[j]);
            }
            uint8_t* pc = panel + c * nbc * PB + 64 * half;
            __m512i v[16];
            for (int j = 0; j < (blocks * G + 63) / 64; ++j) {  // codes 64j .. 64j + 63 of 16 rows
                for (int r = 0; r < 16; ++r) v[r] = _mm512_load_si512(rows[r] + 64 * j);
                transpose16x16(v);
                for (int k = 0; k < 16; ++k) {
                    const int e = 64 * j + 4 * k;
                    _mm512_store_si512(pc + (e / G) * PB + (e % G) / 4 * 4 * kPanelRows, v[k]);
                }
            }
            for (int sj = 0; sj < (blocks + 15) / 16; ++sj) {
                for (int r = 0; r < 16; ++r) v[r] = _mm512_castps_si512(_mm512_load_ps(scale[r] + 16 * sj));
                transpose16x16(v);
                for (int k = 0; k < 16; ++k) _mm512_store_si512(pc + (16 * sj + k) * PB + G * kPanelRows, v[k]);
                if constexpr (kMin) {
                    for (int r = 0; r < 16; ++r) v[r] = _mm512_castps_si512(_mm512_load_ps(min[r] + 16 * sj));
                    transpose16x16(v);
                    for (int k = 0; k < 16; ++k)
                        _mm512_store_si512(pc + (16 * sj + k) * PB + G * kPanelRows + 4 * kPanelRows, v[k]);
                }
            }
        }
    }
}

// Q4_0 / Q4_1 panels straight from the nibble bytes, transposed before they are unpacked:
// byte j of a block holds codes j (low nibble) and j + 16 (high), so dword k of the 16 nibble
// bytes is codes 4k..4k+3 and 16+4k..16+4k+3 of the row -- the panel's groups k and 4 + k.
// Per block and 16 rows: 16 row loads into 4 zmm (zmm q holds rows q, q+4, q+8, q+12, one
// per 128-bit lane), one in-lane 4 x 4 dword transpose (8 unpacks) leaves dword k of all 16
// rows in natural row order in vector k, then AND / shift+AND give 8 panel vectors. Scales
// (and Q4_1's mins) of the 16 rows come with one gather. Half the shuffles of build_panel,
// whose 16 x 16 transposes run on codes already unpacked to bytes. Whole 32-row panels only
// (a matrix's last, partial panel takes build_panel).
template <class U, bool kMin>
void build_panel_q4(const WeightMatrix& W, int64_t r0, int64_t nb, uint8_t* panel) {  // 32 whole rows
    constexpr int PB = panel_block_bytes<32, kMin>();
    constexpr int64_t kAheadBytes = 512;  // per row (32 rows: 16 KiB in flight)
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const int64_t rb = static_cast<int64_t>(W.row_bytes), rb4 = 4 * rb, rb8 = 8 * rb, rb12 = 12 * rb;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int>(rb)));
    const auto* base = static_cast<const uint8_t*>(W.data) + r0 * rb;
    for (int r = 0; r < kPanelRows; ++r) prefetch_l2(base + r * rb, kAheadBytes);
    for (int64_t b = 0; b < nb; ++b) {
        if (b % 4 == 0)  // 4 blocks >= one line per row
            for (int r = 0; r < kPanelRows; ++r) prefetch_l2(base + r * rb + b * U::kBB + kAheadBytes);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* blk = base + 16 * half * rb + b * U::kBB;
            const auto qs = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
            __m512i z[4];
            for (int q = 0; q < 4; ++q) {
                const uint8_t* p = blk + q * rb + U::kQsOff;
                z[q] = _mm512_inserti32x4(_mm512_castsi128_si512(qs(p)), qs(p + rb4), 1);
                z[q] = _mm512_inserti32x4(_mm512_inserti32x4(z[q], qs(p + rb8), 2), qs(p + rb12), 3);
            }
            const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
            const __m512i o[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                  _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            uint8_t* pb = panel + b * PB + 64 * half;
            for (int k = 0; k < 4; ++k) {
                _mm512_store_si512(pb + k * 4 * kPanelRows, _mm512_and_si512(o[k], m4));
                _mm512_store_si512(pb + (4 + k) * 4 * kPanelRows, _mm512_and_si512(_mm512_srli_epi16(o[k], 4), m4));
            }
            // d (and m) of the 16 rows: the block's first dword
            const __m512i dm = _mm512_i32gather_epi32(idx, blk, 1);
            _mm512_store_ps(pb + 32 * kPanelRows, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
            if constexpr (kMin)
                _mm512_store_ps(pb + 32 * kPanelRows + 4 * kPanelRows,
                                _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))));
        }
    }
}

// A tile's products for 4-code group g: 32 rows' codes (w0, w1) against NT tokens' 4 codes
// each (activation record xb of NR tokens).
template <int NT>
inline __attribute__((always_inline)) void dot_group(__m512i (&ia)[NT][2], __m512i w0, __m512i w1, const uint8_t* xb,
                                                     int g, int NR) {
    for (int t = 0; t < NT; ++t) {
        int32_t x4;
        std::memcpy(&x4, xb + (g * NR + t) * 4, 4);
        const __m512i xv = _mm512_set1_epi32(x4);
        ia[t][0] = _mm512_dpbusd_epi32(ia[t][0], w0, xv);
        ia[t][1] = _mm512_dpbusd_epi32(ia[t][1], w1, xv);
    }
}

// A tile's block epilogue (canonical order): per token, acc += float(isum) * d_x * scale
// [then acc += min * dsum_x]; dx: the activation record's d[NR], init[NR], dsum[NR].
template <bool kMin, int NT>
inline __attribute__((always_inline)) void scale_tile(__m512 (&acc)[NT][2], const __m512i (&ia)[NT][2], const float* dx,
                                                      int NR, __m512 s0, __m512 s1, __m512 m0, __m512 m1) {
    for (int t = 0; t < NT; ++t) {
        const __m512 d = _mm512_set1_ps(dx[t]);
        acc[t][0] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ia[t][0]), d), s0, acc[t][0]);
        acc[t][1] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ia[t][1]), d), s1, acc[t][1]);
    }
    if constexpr (kMin) {
        const float* dsum = dx + 2 * NR;
        for (int t = 0; t < NT; ++t) {
            const __m512 ds = _mm512_set1_ps(dsum[t]);
            acc[t][0] = _mm512_fmadd_ps(m0, ds, acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(m1, ds, acc[t][1]);
        }
    }
}

// reduce16 of a tile's 16 lane sums per row and token, stored for the first nrows rows and
// ntok tokens.
template <int NT>
inline void store_tile(__m512 (&part)[kLanes][NT][2], float* Y, int64_t ldy, int nrows, int ntok = NT) {
    const __mmask16 k0 = static_cast<__mmask16>(nrows >= 16 ? 0xFFFF : (1u << nrows) - 1);
    const __mmask16 k1 = static_cast<__mmask16>(nrows >= 32 ? 0xFFFF : nrows <= 16 ? 0 : (1u << (nrows - 16)) - 1);
    const auto add = [](__m512 u, __m512 v) { return _mm512_add_ps(u, v); };
    for (int t = 0; t < ntok; ++t) {
        __m512 p0[kLanes], p1[kLanes];
        for (int lane = 0; lane < kLanes; ++lane) p0[lane] = part[lane][t][0], p1[lane] = part[lane][t][1];
        _mm512_mask_storeu_ps(Y + t * ldy, k0, reduce16(p0, add));
        _mm512_mask_storeu_ps(Y + t * ldy + 16, k1, reduce16(p1, add));
    }
}

// One 32-row x NT-token tile over all blocks, in the canonical order: lane j's chain runs
// over blocks j, j + 16, ... (the partial sums of the tile's 32 rows in two registers per
// token), then reduce16 over the lanes. `act` points at the tile's first record (NR tokens
// per record; a last tile holding fewer computes only its NT <= NR tokens).
template <int G, bool kMin, int NR, int NT>
void micro_q8(const uint8_t* panel, const uint8_t* act, int64_t nb, float* Y, int64_t ldy, int nrows) {
    constexpr int PB = panel_block_bytes<G, kMin>();
    constexpr int RB = NR * (G + 12);  // activation record bytes
    __m512 part[kLanes][NT][2];
    for (int lane = 0; lane < kLanes; ++lane) {
        __m512 acc[NT][2];
        for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
        for (int64_t b = lane; b < nb; b += kLanes) {
            const uint8_t* pb = panel + b * PB;
            const uint8_t* xb = act + b * RB;
            const float* dx = reinterpret_cast<const float*>(xb + G * NR);
            const int32_t* init = reinterpret_cast<const int32_t*>(dx + NR);
            __m512i ia[NT][2];
            for (int t = 0; t < NT; ++t) {
                ia[t][0] = ia[t][1] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(init[t]);
            }
            for (int g = 0; g < G / 4; ++g) {
                const __m512i w0 = _mm512_load_si512(pb + g * 128);
                const __m512i w1 = _mm512_load_si512(pb + g * 128 + 64);
                dot_group<NT>(ia, w0, w1, xb, g, NR);
            }
            const auto* sm = reinterpret_cast<const float*>(pb + G * kPanelRows);  // scales, then mins
            const __m512 zero = _mm512_setzero_ps();
            scale_tile<kMin, NT>(acc, ia, dx, NR, _mm512_load_ps(sm), _mm512_load_ps(sm + 16),
                                 kMin ? _mm512_load_ps(sm + 32) : zero, kMin ? _mm512_load_ps(sm + 48) : zero);
        }
        for (int t = 0; t < NT; ++t) part[lane][t][0] = acc[t][0], part[lane][t][1] = acc[t][1];
    }
    store_tile<NT>(part, Y, ldy, nrows);
}

// micro_q8 for a tile of ntok tokens (a last tile short of kTileTokens skips the padding).
template <int G, bool kMin>
void micro_tile(int ntok, const uint8_t* panel, const uint8_t* x, int64_t nb, float* y, int64_t ldy, int nrows) {
    constexpr int NR = kTileTokens;
    switch (ntok) {
        case 1:
            return micro_q8<G, kMin, NR, 1>(panel, x, nb, y, ldy, nrows);
        case 2:
            return micro_q8<G, kMin, NR, 2>(panel, x, nb, y, ldy, nrows);
        case 3:
            return micro_q8<G, kMin, NR, 3>(panel, x, nb, y, ldy, nrows);
        case 4:
            return micro_q8<G, kMin, NR, 4>(panel, x, nb, y, ldy, nrows);
        case 5:
            return micro_q8<G, kMin, NR, 5>(panel, x, nb, y, ldy, nrows);
        default:
            return micro_q8<G, kMin, NR, NR>(panel, x, nb, y, ldy, nrows);
    }
}

template <class U, int G, bool kMin>
void gemm_q8_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    uint8_t* panel = s.data;
    const int64_t nb_data = W.cols / G;  // blocks holding columns: the padding is skipped
    for (int64_t p = r0; p < r1; p += kPanelRows) {
        const int nrows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
        if constexpr (requires { U::kQsOff; }) {
            if (nrows == kPanelRows) build_panel_q4<U, kMin>(W, p, nb_data, panel);
            else build_panel<U, G, kMin>(W, p, nrows, nb_data, panel);
        } else {
            build_panel<U, G, kMin>(W, p, nrows, nb_data, panel);
        }
        for (int64_t tile = 0; tile < a.n_tiles(); ++tile) {
            const int64_t t0 = tile * kTileTokens;
            const int ntok = static_cast<int>(std::min<int64_t>(kTileTokens, a.n_tokens - t0));
            const uint8_t* x = a.tiled + tile * a.tile_bytes();
            float* y = Y + t0 * W.rows + p;
            micro_tile<G, kMin>(ntok, panel, x, nb_data, y, W.rows, nrows);
        }
    }
}

void gemm_q8(const WeightMatrix& W, const Int8Kind&, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    switch (W.type) {
        case DType::Q4_0:
            return gemm_q8_t<UQ4_0, 32, false>(W, a, r0, r1, Y, s);
        case DType::Q4_1:
            return gemm_q8_t<UQ4_1, 32, true>(W, a, r0, r1, Y, s);
        case DType::Q5_0:
            return gemm_q8_t<UQ5_0, 32, false>(W, a, r0, r1, Y, s);
        case DType::Q5_1:
            return gemm_q8_t<UQ5_1, 32, true>(W, a, r0, r1, Y, s);
        case DType::Q8_0:
            return gemm_q8_t<UQ8_0, 32, false>(W, a, r0, r1, Y, s);
        case DType::Q4_K:
            return gemm_q8_t<UQ4_K, 32, true>(W, a, r0, r1, Y, s);
        case DType::Q5_K:
            return gemm_q8_t<UQ5_K, 32, true>(W, a, r0, r1, Y, s);
        case DType::Q6_K:
            return gemm_q8_t<UQ6_K, 16, false>(W, a, r0, r1, Y, s);
        case DType::Q2_K:
            return gemm_q8_t<UQ2_K, 16, true>(W, a, r0, r1, Y, s);
        case DType::Q3_K:
            return gemm_q8_t<UQ3_K, 16, false>(W, a, r0, r1, Y, s);
        case DType::MXFP4:
            return gemm_q8_t<UMXFP4, 32, false>(W, a, r0, r1, Y, s);
        default:
            return;
    }
}

// ---------------------------------------------------------------------------------------
// Q4_0 / Q4_1 / Q8_0 in the panel layout (weight_panels.h): micro_q8's register tile fed
// straight from the records, so no panel is built per call. Per record (block b of 32 rows),
// Q8_0's 16 code vectors are loaded as they are; Q4's 8 loads and an AND or shift+AND each
// give them. The arithmetic, and so every bit of the result, is micro_q8's.

namespace wp = weight_panels;

// One whole panel x NT tokens of one activation tile. The records come in lane order, so the
// panel is read front to back; each record requests the bytes kPrefetchAhead further on
// (decode streams the weights from DRAM, like gemv).
template <DType T, int NT>
void micro_panel(const uint8_t* panel, const uint8_t* act, int64_t nb, float* Y, int64_t ldy) {
    constexpr bool kMin = T == DType::Q4_1;
    constexpr int RB = kTileTokens * (32 + 12);  // activation record bytes
    constexpr int kCodes = wp::code_bytes(T), kRec = kCodes + (kMin ? 128 : 64);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const auto load = [](const uint8_t* p) { return _mm512_loadu_si512(p); };
    const auto halves = [](const uint8_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    };
    __m512 part[kLanes][NT][2];
    const uint8_t* rec = panel;
    for (int lane = 0; lane < kLanes; ++lane) {
        __m512 acc[NT][2];
        for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
        for (int64_t b = lane; b < nb; b += kLanes, rec += kRec) {
            prefetch_l2(rec + kPrefetchAhead, kRec);
            const uint8_t* xb = act + b * RB;
            const float* dx = reinterpret_cast<const float*>(xb + 32 * kTileTokens);
            const int32_t* init = reinterpret_cast<const int32_t*>(dx + kTileTokens);
            __m512i ia[NT][2];
            for (int t = 0; t < NT; ++t)
                ia[t][0] = ia[t][1] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(init[t]);
            if constexpr (T == DType::Q8_0) {
                for (int g = 0; g < 8; ++g)
                    dot_group<NT>(ia, load(rec + 128 * g), load(rec + 128 * g + 64), xb, g, kTileTokens);
            } else {
                for (int k = 0; k < 4; ++k) {
                    const __m512i o0 = load(rec + 64 * k), o1 = load(rec + 256 + 64 * k);
                    dot_group<NT>(ia, _mm512_and_si512(o0, m4), _mm512_and_si512(o1, m4), xb, k, kTileTokens);
                    dot_group<NT>(ia, _mm512_and_si512(_mm512_srli_epi16(o0, 4), m4),
                                  _mm512_and_si512(_mm512_srli_epi16(o1, 4), m4), xb, 4 + k, kTileTokens);
                }
            }
            const __m512 zero = _mm512_setzero_ps();
            scale_tile<kMin, NT>(acc, ia, dx, kTileTokens, halves(rec + kCodes), halves(rec + kCodes + 32),
                                 kMin ? halves(rec + kCodes + 64) : zero, kMin ? halves(rec + kCodes + 96) : zero);
        }
        for (int t = 0; t < NT; ++t) part[lane][t][0] = acc[t][0], part[lane][t][1] = acc[t][1];
    }
    store_tile<NT>(part, Y, ldy, kPanelRows);
}

template <DType T>
void micro_panel_tile(int ntok, const uint8_t* panel, const uint8_t* x, int64_t nb, float* y, int64_t ldy) {
    switch (ntok) {
        case 1:
            return micro_panel<T, 1>(panel, x, nb, y, ldy);
        case 2:
            return micro_panel<T, 2>(panel, x, nb, y, ldy);
        case 3:
            return micro_panel<T, 3>(panel, x, nb, y, ldy);
        case 4:
            return micro_panel<T, 4>(panel, x, nb, y, ldy);
        case 5:
            return micro_panel<T, 5>(panel, x, nb, y, ldy);
        default:
            return micro_panel<T, kTileTokens>(panel, x, nb, y, ldy);
    }
}

// Rows [r0, r1): whole panels from their records; the GGUF rows past the last whole panel
// (a partial panel) through build_panel and micro_q8.
template <DType T, class U>
void gemm_panels_t(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    constexpr bool kMin = T == DType::Q4_1;
    const int64_t nb = W.cols / 32, whole_rows = W.rows / kPanelRows * kPanelRows;
    const auto* base = static_cast<const uint8_t*>(W.data);
    for (int64_t p = r0; p < r1; p += kPanelRows) {
        const int nrows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
        if (p >= whole_rows) build_panel<U, 32, kMin>(W, p, nrows, nb, s.data);
        for (int64_t tile = 0; tile < a.n_tiles(); ++tile) {
            const int64_t t0 = tile * kTileTokens;
            const int ntok = static_cast<int>(std::min<int64_t>(kTileTokens, a.n_tokens - t0));
            const uint8_t* x = a.tiled + tile * a.tile_bytes();
            float* y = Y + t0 * W.rows + p;
            if (p < whole_rows) micro_panel_tile<T>(ntok, base + p * W.row_bytes, x, nb, y, W.rows);
            else micro_tile<32, kMin>(ntok, s.data, x, nb, y, W.rows, nrows);
        }
    }
}

void gemm_panels(const WeightMatrix& W, const ActQ8& a, int64_t r0, int64_t r1, float* Y, Scratch& s) {
    switch (W.type) {
        case DType::Q4_1:
            return gemm_panels_t<DType::Q4_1, UQ4_1>(W, a, r0, r1, Y, s);
        case DType::Q8_0:
            return gemm_panels_t<DType::Q8_0, UQ8_0>(W, a, r0, r1, Y, s);
        default:
            return gemm_panels_t<DType::Q4_0, UQ4_0>(W, a, r0, r1, Y, s);
    }
}

// ---------------------------------------------------------------------------------------
// Float weights.

// 16 weights of row `w` from element i as f32 (masked for the row tail).
template <DType T>
inline __m512 load_w(const void* w, int64_t i, __mmask16 m) {
    if constexpr (T == DType::F32) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i);
    } else if constexpr (T == DType::F16) {
        return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i));
    } else {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
}

inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// R rows from r, each streamed once for NT tokens, in the canonical order: one accumulator
// per row and token holds the 16 lanes (column c in lane c % 16; the last step masked, its
// missing columns zeros). The R x NT independent chains hide the FMA latency.
template <DType T, int NT, int R>
inline void gemv_f32_rows(const WeightMatrix& W, const float* X, int64_t r, float* Y, const WeightPrefetch& pf) {
    const int64_t K = W.cols;
    const uint8_t* w[R];
    __m512 acc[R][NT];
    for (int i = 0; i < R; ++i) {
        w[i] = static_cast<const uint8_t*>(W.data) + (r + i) * W.row_bytes;
        for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_setzero_ps();
    }
    for (int64_t c = 0; c < K; c += 16) {
        if (c % 64 == 0)
            for (int i = 0; i < R; ++i) pf.step(w[i] + c * pf.step_bytes / 64);
        const __mmask16 m = tail_mask(K - c);
        __m512 x[NT];
        for (int t = 0; t < NT; ++t) x[t] = _mm512_maskz_loadu_ps(m, X + t * K + c);
        for (int i = 0; i < R; ++i) {
            const __m512 wv = load_w<T>(w[i], c, m);
            for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_fmadd_ps(wv, x[t], acc[i][t]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int t = 0; t < NT; ++t) Y[t * W.rows + r + i] = hsum(acc[i][t]);
}

template <DType T, int NT>
void gemv_f32_t(const WeightMatrix& W, const float* X, int64_t r0, int64_t r1, float* Y) {
    const WeightPrefetch pf(W, 64);
    WeightPrefetch::start(W, r0, r1);
    int64_t r = r0;
    for (; r + 2 <= r1; r += 2) gemv_f32_rows<T, NT, 2>(W, X, r, Y, pf);
    if (r < r1) gemv_f32_rows<T, NT, 1>(W, X, r, Y, pf);
}

template <DType T>
void gemv_f32_type(const WeightMatrix& W, const float* X, int64_t n, int64_t r0, int64_t r1, float* Y) {
    for (int64_t t = 0; t < n; t += 4) {
        const float* x = X + t * W.cols;
        float* y = Y + t * W.rows;
        switch (std::min<int64_t>(4, n - t)) {
            case 1:
                gemv_f32_t<T, 1>(W, x, r0, r1, y);
                break;
            case 2:
                gemv_f32_t<T, 2>(W, x, r0, r1, y);
                break;
            case 3:
                gemv_f32_t<T, 3>(W, x, r0, r1, y);
                break;
            default:
                gemv_f32_t<T, 4>(W, x, r0, r1, y);
                break;
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

// gemm for float weights: the 32-row panel is converted to f32 in the canonical column
// order ([16 kq positions][32 rows], lane_pos; ~128 bytes per column, in L2) and multiplied
// with every 12-token tile of the pre-packed X: per lane, one chain over its kq columns in a
// 32 x 12 register tile (24 FMAs per 2 weight loads and 12 broadcasts); reduce16 over lanes.
constexpr int kF32Tile = 12;

template <DType T>
void pack_panel_f32(const WeightMatrix& W, int64_t r0, int nrows, float* out) {
    const int64_t K = W.cols, kq = lane_cols(K);
    std::memset(out, 0, static_cast<size_t>(kLanes * kq * kPanelRows) * 4);
    alignas(64) float tmp[16];
    for (int r = 0; r < nrows; ++r) {
        const void* w = static_cast<const uint8_t*>(W.data) + (r0 + r) * W.row_bytes;
        for (int64_t c = 0; c < K; c += 16) {
            _mm512_store_ps(tmp, load_w<T>(w, c, tail_mask(K - c)));
            const int n = static_cast<int>(std::min<int64_t>(16, K - c));
            for (int j = 0; j < n; ++j) out[(j * kq + c / 16) * kPanelRows + r] = tmp[j];  // lane_pos(c + j)
        }
    }
}

void micro_f32(const float* wp, const float* xp, int64_t kq, float* Y, int64_t ldy, int nrows, int ntok) {
    __m512 part[kLanes][kF32Tile][2];
    for (int lane = 0; lane < kLanes; ++lane) {
        __m512 acc[kF32Tile][2];
        for (int t = 0; t < kF32Tile; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
        const float* w = wp + lane * kq * kPanelRows;
        const float* x = xp + lane * kq * kF32Tile;
        for (int64_t k = 0; k < kq; ++k) {
            const __m512 w0 = _mm512_load_ps(w + k * kPanelRows), w1 = _mm512_load_ps(w + k * kPanelRows + 16);
            for (int t = 0; t < kF32Tile; ++t) {
                const __m512 xv = _mm512_set1_ps(x[k * kF32Tile + t]);
                acc[t][0] = _mm512_fmadd_ps(w0, xv, acc[t][0]);
                acc[t][1] = _mm512_fmadd_ps(w1, xv, acc[t][1]);
            }
        }
        for (int t = 0; t < kF32Tile; ++t) part[lane][t][0] = acc[t][0], part[lane][t][1] = acc[t][1];
    }
    store_tile<kF32Tile>(part, Y, ldy, nrows, ntok);
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
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
    }
    return hsum(_mm512_add_ps(acc0, acc1));
}

size_t scratch_bytes(const WeightMatrix& W, int64_t) {
    const int64_t kpad = (W.cols + kChunk - 1) / kChunk * kChunk;
    // Largest panel: G = 16 blocks of 16 x 32 codes + 32 scales = 48 bytes per column;
    // G = 32 with mins: 40. Float path: 32 floats per column (padded to 16 columns).
    const size_t q8 = static_cast<size_t>(kpad) * 48;
    const size_t f32 = static_cast<size_t>(kLanes * lane_cols(W.cols)) * kPanelRows * 4;
    return std::max(q8, f32) + 64;
}

}  // namespace

const KernelTable* kernels_avx512() {
    static const KernelTable t{quantize_act, gemv_q8,     gemm_q8,  gemv_f32,       gemm_f32,      dot_f32,
                               kPanelRows,   kTileTokens, kF32Tile, kGemvMaxTokens, scratch_bytes, gemm_panels};
    return &t;
}

}  // namespace ember::cpu::detail
