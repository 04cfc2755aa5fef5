// Register helpers shared by the AVX-512 kernels (matmul_avx512.cpp, ops_avx512.cpp):
// horizontal reductions and a 16 x 16 transpose. Include only from files built with
// AVX-512 flags.
#pragma once
#include <immintrin.h>

// GCC 12's AVX-512 headers warn on their own undefined-vector helpers (GCC bug 105593), at
// the inlined call site: here (transpose16x16), before the includer's own pragma takes effect.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ember::cpu::detail {

inline float hsum(__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
}

inline float hmax(__m512 v) {
    const __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_max_ss(s4, _mm_movehdup_ps(s4)));
}

// Transposes a 16 x 16 matrix of dwords held in 16 zmm (row i in v[i]) in place: 4 rounds
// of 16 shuffles (dword pairs, qword pairs, then 128-bit lanes twice).
inline __attribute__((always_inline)) void transpose16x16(__m512i* v) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; ++i) {
        a[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int q = 0; q < 4; ++q) {  // b[4q + c], lane L = rows 4q..4q+3 of dword 4L + c
        b[4 * q + 0] = _mm512_unpacklo_epi64(a[4 * q], a[4 * q + 2]);
        b[4 * q + 1] = _mm512_unpackhi_epi64(a[4 * q], a[4 * q + 2]);
        b[4 * q + 2] = _mm512_unpacklo_epi64(a[4 * q + 1], a[4 * q + 3]);
        b[4 * q + 3] = _mm512_unpackhi_epi64(a[4 * q + 1], a[4 * q + 3]);
    }
    for (int c = 0; c < 4; ++c) {  // 4 x 4 transpose of 128-bit lanes of b[c], b[4+c], ...
        const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);
        const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44),
                      e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);
        v[c] = _mm512_shuffle_i32x4(e0, e2, 0x88);
        v[4 + c] = _mm512_shuffle_i32x4(e0, e2, 0xDD);
        v[8 + c] = _mm512_shuffle_i32x4(e1, e3, 0x88);
        v[12 + c] = _mm512_shuffle_i32x4(e1, e3, 0xDD);
    }
}

}  // namespace ember::cpu::detail
