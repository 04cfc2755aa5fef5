// The op kernels (ops_kernels.inc) built for AVX-512, plus the attention tile kernel with
// 16-lane traits (16 query rows per tile). See CMakeLists.txt for the flags.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/ops_internal.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx512.h"

// GCC 12's AVX-512 headers warn on their own undefined-vector helpers (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define EMBER_OPS_TABLE_FN ops_table_avx512
#define EMBER_OPS_TILE_FN attention_tile_t<Simd512>
#define EMBER_OPS_TILE_ROWS 16

namespace {

struct Simd512 {
    static constexpr int W = 16;
    using F = __m512;
    using M = __mmask16;
    static F zero() { return _mm512_setzero_ps(); }
    static F set1(float x) { return _mm512_set1_ps(x); }
    static F load(const float* p) { return _mm512_loadu_ps(p); }
    static F load_f16(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    // The first n (<= W) of W halves, zeros in the other lanes (nothing read past n).
    static F load_f16_n(const uint16_t* p, int n) {
        if (n == W) return load_f16(p);
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), p));
    }
    static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F div(F a, F b) { return _mm512_div_ps(a, b); }
    static F max(F a, F b) { return _mm512_max_ps(a, b); }
    static float hsum(F a) { return ember::cpu::detail::hsum(a); }
    static float hmax(F a) { return ember::cpu::detail::hmax(a); }
    // rows r[0..15] -> columns, in place
    __attribute__((always_inline)) static void transpose(F* r) {
        ember::cpu::detail::transpose16x16(reinterpret_cast<__m512i*>(r));
    }
    static F select(M m, F a, F b) { return _mm512_mask_mov_ps(b, m, a); }
    static F maskz(M m, F a) { return _mm512_maskz_mov_ps(m, a); }
    static F div_or_zero(F a, F b) {
        return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(b, _mm512_setzero_ps(), _CMP_GT_OQ), a, b);
    }
    // start[lane] <= key < end[lane], all lanes off when !ok
    static M in_range(const int32_t* start, const int32_t* end, int32_t key, bool ok) {
        if (!ok) return 0;
        const __m512i k = _mm512_set1_epi32(key);
        return _mm512_cmp_epi32_mask(_mm512_load_si512(start), k, _MM_CMPINT_LE) &
               _mm512_cmp_epi32_mask(k, _mm512_load_si512(end), _MM_CMPINT_LT);
    }
    // exp(x), x clamped to [-87.3, 88.7]; the polynomial of exp_approx.
    static F exp(F x) {
        x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
        const F t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
        const F n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const F f = _mm512_mul_ps(_mm512_sub_ps(t, n), _mm512_set1_ps(0.693147180559945309f));
        F p = _mm512_set1_ps(1.0f / 720.0f);
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120.0f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24.0f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6.0f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
        const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
        return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    }
    static void f16_to_f32(const uint16_t* src, float* dst, int n) {
        int i = 0;
        for (; i + 16 <= n; i += 16) {
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
        }
        if (i < n) {
            const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
            _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
        }
    }
    static void q8_to_f32(const int8_t* q, float d, float* dst) {
        const __m512 dv = _mm512_set1_ps(d);
        for (int i = 0; i < 32; i += 16) {
            const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
            _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtepi32_ps(v), dv));
        }
    }
};

}  // namespace

#include "kernels/cpu/ops_kernels.inc"
