// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row; in place allowed (each thread reads
// its elements before writing them). One block per row. Bytes: 8 per element read
// (x twice: L1/L2 serve the second pass) + 4 written; FLOPs ~4 per element.
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace ember::cuda {
namespace {

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int cols, float eps, float* y) {
    __shared__ float scratch[32];
    const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
    float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, scratch);
    const float k = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = xr[i] * k * w[i];
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* y, cudaStream_t stream) {
    if (rows == 0) return;
    // Enough threads for ~4 elements each, 32..256.
    int threads = 32;
    while (threads < 256 && threads * 4 < cols) threads *= 2;
    rms_norm_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, w, static_cast<int>(cols), eps, y);
    EMBER_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

}  // namespace ember::cuda
