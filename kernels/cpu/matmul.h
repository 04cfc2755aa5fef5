// Matrix multiplication of a (possibly quantized) weight matrix with f32 activations, plus the
// small vector helpers that go with it (dot product, embedding row gather).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/common/error.h"
#include "kernels/cpu/thread_pool.h"

namespace ember::cpu {

// How a weight matrix's bytes are arranged.
enum class WeightLayout : uint8_t {
    Rows = 0,    // as GGUF stores it: row after row
    Panels = 1,  // Q4_0 / Q4_1 / Q8_0 only, 32-row panels for the AVX-512 kernels (weight_panels.h)
};

// A weight matrix: `rows` rows of `cols` elements each, every row `row_bytes` long (dims[0] =
// cols is the contiguous dimension), row-major unless `layout` says otherwise. `data` must
// stay valid and unchanged during matmul. cols must be a multiple of the type's block size.
struct WeightMatrix {
    DType type = DType::F32;
    int64_t rows = 0;
    int64_t cols = 0;
    const void* data = nullptr;
    size_t row_bytes = 0;
    WeightLayout layout = WeightLayout::Rows;
};

// The layout matmul runs fastest from for this weight on this CPU's kernels (Rows unless a
// rearrangement pays: Q4_0 / Q4_1 / Q8_0 matrices of 32 rows or more under AVX-512). The same
// size in bytes.
WeightLayout preferred_layout(DType type, int64_t rows, int64_t cols);

// Writes W (in the Rows layout) to dst in `layout` (W.rows * W.row_bytes bytes, no overlap).
void repack_weight(const WeightMatrix& W, WeightLayout layout, void* dst, ThreadPool& pool);

// Builds a WeightMatrix with the natural row size for `type`.
WeightMatrix make_weight_matrix(DType type, int64_t rows, int64_t cols, const void* data);

// True if matmul accepts weights of this type. Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4.
bool matmul_supports(DType type);

// Y[t][r] = sum_c W[r][c] * X[t][c] for t < n_tokens, r < W.rows.
// X: n_tokens x W.cols f32, row stride W.cols. Y: n_tokens x W.rows f32, row stride W.rows.
//
// Quantized weights: X is quantized once per call into 8-bit blocks (per 32 elements, or 16
// for Q2_K/Q3_K/Q6_K) and the products are integer dot products (AVX-512 VNNI or AVX2), so
// results differ from an f32 reference by the activation rounding (~0.4% of each block's
// largest |x|, see tests/kernels). Float weights use f32 FMA. Rows are split over the pool.
// Small n_tokens streams each weight row once for all tokens (memory-bound decode); larger
// n_tokens repacks 32-row panels and runs register-tiled kernels (compute-bound prefill).
// Throws ember::Error for an unsupported type or inconsistent sizes.
void matmul(const WeightMatrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool);

// One output of matmul_shared: Y = X * W^T, Y with W.rows floats per token.
struct SharedOut {
    WeightMatrix W;
    float* Y = nullptr;
};

// matmul() of one X with several matrices of X's width (q/k/v, gate/up). Where they all use
// the panel kernels with the same activation blocks, X is quantized once and every
// matrix's panels share one pool dispatch; otherwise one matmul() each. Either way each Y
// holds matmul()'s bits.
void matmul_shared(const SharedOut* outs, int n_outs, const float* X, int64_t n_tokens, ThreadPool& pool);

// Several independent products Y = X * W^T (each its own W, X and token count): matmul() of
// each, the same bits, but the groups that take the decode path (quantized rows-layout
// weights of one type, at most a few tokens) share one pool dispatch over all their rows,
// each group's X quantized once. The experts a decode step chose (moe.h) are one call.
struct GroupedMatmul {
    WeightMatrix W;
    const float* X = nullptr;
    int64_t n_tokens = 0;
    float* Y = nullptr;
};
void matmul_grouped(const GroupedMatmul* groups, int n_groups, ThreadPool& pool);

// sum a[i] * b[i] in f32 (vectorized; summation order differs from a serial loop).
float vec_dot_f32(const float* a, const float* b, int64_t n);

// Embedding lookup: out[i][0..cols) = dequantized row ids[i] of `table` (ids < table.rows),
// in either layout. Any type dequantize_row accepts.
void get_rows(const WeightMatrix& table, const int32_t* ids, int n, float* out);

}  // namespace ember::cpu
