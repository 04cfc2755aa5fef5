// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row; in place allowed (each thread reads
// its elements before writing them). One block per row. Bytes: 8 per element read (x twice:
// L1/L2 serve the second pass) + 4 written; FLOPs ~4 per element. add_rms_norm first adds the
// residual r to x (+8 bytes read, +4 written per element) in the same launch.
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace ember::cuda {
namespace {

// y = xr * k * w over a row, k from the row's sum of squares ss (block-reduced here).
__device__ __forceinline__ void scale_row(const float* xr, const float* __restrict__ w, int cols, float eps, float ss,
                                          float* scratch, float* yr) {
    ss = block_sum(ss, scratch);
    const float k = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = xr[i] * k * w[i];
}

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int cols, float eps, float* y) {
    __shared__ float scratch[32];
    const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
    scale_row(xr, w, cols, eps, ss, scratch, y + static_cast<int64_t>(blockIdx.x) * cols);
}

// The residual add folded into the first pass: each thread adds the elements it then squares
// (add_kernel's sums, rms_norm_kernel's order).
__global__ void add_rms_norm_kernel(float* x, const float* __restrict__ r, const float* __restrict__ w, int cols,
                                    float eps, float* y) {
    __shared__ float scratch[32];
    const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
    float* xr = x + row;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = xr[i] + r[row + i];
        xr[i] = v;
        ss += v * v;
    }
    scale_row(xr, w, cols, eps, ss, scratch, y + row);
}

// Enough threads for ~4 elements each, 32..256.
int row_threads(int64_t cols) {
    int threads = 32;
    while (threads < 256 && threads * 4 < cols) threads *= 2;
    return threads;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* y, cudaStream_t stream) {
    if (rows == 0) return;
    rms_norm_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, stream>>>(x, w, static_cast<int>(cols), eps,
                                                                                   y);
    EMBER_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void add_rms_norm(float* x, const float* r, const float* w, int64_t rows, int64_t cols, float eps, float* y,
                  cudaStream_t stream) {
    if (rows == 0) return;
    add_rms_norm_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, stream>>>(x, r, w, static_cast<int>(cols),
                                                                                       eps, y);
    EMBER_CUDA_CHECK_LAUNCH("add_rms_norm_kernel");
}

}  // namespace ember::cuda
