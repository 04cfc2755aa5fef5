// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row; in place allowed (each thread reads
// its elements before writing them). One block per row. Bytes: 8 per element read (x twice:
// L1/L2 serve the second pass) + 4 written; FLOPs ~4 per element. add_rms_norm first adds the
// residual r to x (+8 bytes read, +4 written per element) in the same launch. Either may also
// write y quantized for the next quantized matvec (+1.125 bytes per element), which then needs
// no quantize_q8 launch of its own (cuda_backend.cpp, the q8 activations it keeps).
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace ember::cuda {
namespace {

// y = xr * k * w over row `row` (its first element's index), k from the row's sum of squares
// ss (block-reduced here). Q8: y also as the matvecs' 8-bit activations (xq, ds), quantize_q8's
// bits; cols % 32 == 0, so a warp's 32 lanes always hold one whole chunk (blockDim is a
// multiple of 32).
template <bool Q8>
__device__ __forceinline__ void scale_row(const float* xr, const float* __restrict__ w, int cols, float eps, float ss,
                                          float* scratch, float* y, int64_t row, int8_t* xq, float2* ds) {
    ss = block_sum(ss, scratch);
    const float k = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = xr[i] * k * w[i];
        y[row + i] = v;
        if constexpr (Q8) quantize_chunk_q8(v, xq + row + (i & ~31), ds + (row + i) / 32);
    }
}

template <bool Q8>
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int cols, float eps, float* y, int8_t* xq,
                                float2* ds) {
    __shared__ float scratch[32];
    const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
    const float* xr = x + row;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
    scale_row<Q8>(xr, w, cols, eps, ss, scratch, y, row, xq, ds);
}

// The residual add folded into the first pass: each thread adds the elements it then squares
// (add_kernel's sums, rms_norm_kernel's order).
template <bool Q8>
__global__ void add_rms_norm_kernel(float* x, const float* __restrict__ r, const float* __restrict__ w, int cols,
                                    float eps, float* y, int8_t* xq, float2* ds) {
    __shared__ float scratch[32];
    const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
    float* xr = x + row;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = xr[i] + r[row + i];
        xr[i] = v;
        ss += v * v;
    }
    scale_row<Q8>(xr, w, cols, eps, ss, scratch, y, row, xq, ds);
}

// rms_norm_kernel of y in place, then add_rms_norm_kernel of x and y into out, one block per
// row: each thread writes the normed y elements it then adds, so no barrier is needed between,
// and the sums run in the two kernels' order (the same blockDim): their bits.
template <bool Q8>
__global__ void norm_add_rms_norm_kernel(float* x, float* y, const float* __restrict__ wy, const float* __restrict__ w,
                                         int cols, float eps, float* out, int8_t* xq, float2* ds) {
    __shared__ float scratch[32];
    const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
    float* yr = y + row;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += yr[i] * yr[i];
    scale_row<false>(yr, wy, cols, eps, ss, scratch, y, row, xq, ds);
    float* xr = x + row;
    ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = xr[i] + yr[i];
        xr[i] = v;
        ss += v * v;
    }
    scale_row<Q8>(xr, w, cols, eps, ss, scratch, out, row, xq, ds);
}

// Enough threads for ~4 elements each, 32..256.
int row_threads(int64_t cols) {
    int threads = 32;
    while (threads < 256 && threads * 4 < cols) threads *= 2;
    return threads;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* y, int8_t* xq, float2* ds,
              cudaStream_t stream) {
    if (rows == 0) return;
    const auto grid = static_cast<unsigned>(rows);
    if (xq) rms_norm_kernel<true><<<grid, row_threads(cols), 0, stream>>>(x, w, static_cast<int>(cols), eps, y, xq, ds);
    else rms_norm_kernel<false><<<grid, row_threads(cols), 0, stream>>>(x, w, static_cast<int>(cols), eps, y, xq, ds);
    EMBER_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void add_rms_norm(float* x, const float* r, const float* w, int64_t rows, int64_t cols, float eps, float* y, int8_t* xq,
                  float2* ds, cudaStream_t stream) {
    if (rows == 0) return;
    const auto grid = static_cast<unsigned>(rows);
    const int c = static_cast<int>(cols), threads = row_threads(cols);
    if (xq) add_rms_norm_kernel<true><<<grid, threads, 0, stream>>>(x, r, w, c, eps, y, xq, ds);
    else add_rms_norm_kernel<false><<<grid, threads, 0, stream>>>(x, r, w, c, eps, y, xq, ds);
    EMBER_CUDA_CHECK_LAUNCH("add_rms_norm_kernel");
}

void norm_add_rms_norm(float* x, float* y, const float* wy, const float* w, int64_t rows, int64_t cols, float eps,
                       float* out, int8_t* xq, float2* ds, cudaStream_t stream) {
    if (rows == 0) return;
    const auto grid = static_cast<unsigned>(rows);
    const int c = static_cast<int>(cols), threads = row_threads(cols);
    if (xq) norm_add_rms_norm_kernel<true><<<grid, threads, 0, stream>>>(x, y, wy, w, c, eps, out, xq, ds);
    else norm_add_rms_norm_kernel<false><<<grid, threads, 0, stream>>>(x, y, wy, w, c, eps, out, xq, ds);
    EMBER_CUDA_CHECK_LAUNCH("norm_add_rms_norm_kernel");
}

}  // namespace ember::cuda
