// The op kernels (ops_kernels.inc) built for AVX2, plus the attention tile kernel with
// 8-lane traits (8 query rows per tile). See CMakeLists.txt for the flags.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/ops_internal.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"

#define EMBER_OPS_TABLE_FN ops_table_avx2
#define EMBER_OPS_TILE_FN attention_tile_t<Simd256>
#define EMBER_OPS_TILE_ROWS 8

namespace {

struct Simd256 {
    static constexpr int W = 8;
    using F = __m256;
    using M = __m256;  // all-ones lanes
    static F zero() { return _mm256_setzero_ps(); }
    static F set1(float x) { return _mm256_set1_ps(x); }
    static F load(const float* p) { return _mm256_loadu_ps(p); }
    static F load_f16(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    // The first n (<= W) of W halves, zeros in the other lanes (nothing read past n).
    static F load_f16_n(const uint16_t* p, int n) {
        if (n == W) return load_f16(p);
        alignas(16) uint16_t h[W] = {};
        for (int i = 0; i < n; ++i) h[i] = p[i];
        return load_f16(h);
    }
    static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static float hsum(F a) { return ember::cpu::detail::hsum(a); }
    static float hmax(F a) { return ember::cpu::detail::hmax(a); }
    __attribute__((always_inline)) static void transpose(F* r) {
        ember::cpu::detail::transpose8x8(r);
    }  // rows -> columns
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    static F max(F a, F b) { return _mm256_max_ps(a, b); }
    static F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
    static F maskz(M m, F a) { return _mm256_and_ps(m, a); }
    static F div_or_zero(F a, F b) {
        return _mm256_and_ps(_mm256_cmp_ps(b, _mm256_setzero_ps(), _CMP_GT_OQ), _mm256_div_ps(a, b));
    }
    static M in_range(const int32_t* start, const int32_t* end, int32_t key, bool ok) {
        if (!ok) return _mm256_setzero_ps();
        const __m256i k = _mm256_set1_epi32(key);
        const __m256i s = _mm256_load_si256(reinterpret_cast<const __m256i*>(start));
        const __m256i e = _mm256_load_si256(reinterpret_cast<const __m256i*>(end));
        // start <= key  <=>  !(start > key);  key < end  <=>  end > key
        const __m256i ge = _mm256_andnot_si256(_mm256_cmpgt_epi32(s, k), _mm256_cmpgt_epi32(e, k));
        return _mm256_castsi256_ps(ge);
    }
    static F exp(F x) {
        x = _mm256_min_ps(_mm256_set1_ps(88.7f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
        const F t = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f));
        const F n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const F f = _mm256_mul_ps(_mm256_sub_ps(t, n), _mm256_set1_ps(0.693147180559945309f));
        F p = _mm256_set1_ps(1.0f / 720.0f);
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120.0f));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24.0f));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6.0f));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
        const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    }
    static void f16_to_f32(const uint16_t* src, float* dst, int n) {
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
        }
        for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
    }
    static void q8_to_f32(const int8_t* q, float d, float* dst) {
        const __m256 dv = _mm256_set1_ps(d);
        for (int i = 0; i < 32; i += 8) {
            const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
            _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), dv));
        }
    }
};

}  // namespace

#include "kernels/cpu/ops_kernels.inc"
