// Shadows NVIDIA's <mma.h> in emulated builds (kernels/cuda/emu/README.md): the subset of
// nvcuda::wmma the kernels use, 16x16x16 tiles of __half with float accumulators (loaded from
// and stored to float memory).
//
// On a GPU a fragment is spread over the warp's 32 lanes in an unspecified layout and the
// *_sync functions are warp collectives ("wait until all warp lanes have arrived"). Here
// every thread holds the whole tile and does the whole operation itself: the results through
// load / mma / store are the same (each lane stores identical values), and a kernel that reads
// a fragment's elements (x[], num_elements, whose layout NVIDIA leaves unspecified) does not
// compile. load / mma / store still begin with a __syncwarp, as on the GPU: without it lane 0
// would load, add to and store back an accumulator tile in memory (O += P V) before lane 1
// loaded it, and every lane would add its product again.
// mma_sync accumulates each output in k order in float: the GPU's tensor cores add the
// products in an unspecified order (and may keep fewer bits in between), so tests compare
// against bounds, never bits.
#pragma once
#include <cuda_fp16.h>

#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment;

// A (M x K) or B (K x N) operand: 16 x 16 halves as (row, col) of the operand.
template <class Use, class Layout>
class fragment<Use, 16, 16, 16, __half, Layout> {
public:
    __half v[16][16];
};

template <>
class fragment<accumulator, 16, 16, 16, float, void> {
public:
    float v[16][16];
};

template <class Use, class Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __half, Layout>& f, const __half* p, unsigned ldm,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    __syncwarp(0xffffffffu, file, line);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.v[r][c] = std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r];
}

// An accumulator from floats (FlashAttention's O tile, rescaled in shared memory between uses).
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float, void>& f, const float* p, unsigned ldm,
                             layout_t layout, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    __syncwarp(0xffffffffu, file, line);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.v[r][c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float, void>& f, float value) {
    for (auto& row : f.v)
        for (float& x : row) x = value;
}

// d = a b + c, each output a float sum over k in order (products of halves are exact in float).
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float, void>& d,
                     const fragment<matrix_a, 16, 16, 16, __half, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __half, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float, void>& c, const char* file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
    __syncwarp(0xffffffffu, file, line);
    // Operands converted once (the host's __half2float is a software conversion: per product
    // it was most of the emulated tensor-core kernels' time); the sums are unchanged.
    float fa[16][16], fb[16][16], out[16][16];
    for (int i = 0; i < 16; ++i)
        for (int k = 0; k < 16; ++k) {
            fa[i][k] = __half2float(a.v[i][k]);
            fb[i][k] = __half2float(b.v[i][k]);
        }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
            float acc = c.v[i][j];
            for (int k = 0; k < 16; ++k) acc += fa[i][k] * fb[k][j];
            out[i][j] = acc;
        }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) d.v[i][j] = out[i][j];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float, void>& f, unsigned ldm,
                              layout_t layout, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    __syncwarp(0xffffffffu, file, line);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.v[r][c];
}

}  // namespace nvcuda::wmma
