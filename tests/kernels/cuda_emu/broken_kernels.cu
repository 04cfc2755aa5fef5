// Kernels with the bugs the emulator exists to catch (test_emu_harness.cpp). Never built
// with nvcc: on a GPU these hang, return garbage or fault.
#include <cuda_runtime.h>

#include "tests/kernels/cuda_emu/broken_kernels.h"

namespace ember::test::broken {
namespace {

__global__ void block_sum_kernel(const float* x, float* out, bool missing_barrier) {
    __shared__ float s[128];
    s[threadIdx.x] = x[threadIdx.x];
    if (!missing_barrier) __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int i = 0; i < 128; ++i) sum += s[i];
        *out = sum;
    }
}

__global__ void divergent_barrier_kernel() {
    if (threadIdx.x < 64) __syncthreads();
}

__global__ void split_barrier_kernel() {
    if (threadIdx.x < 64) {
        __syncthreads();
    } else {
        __syncthreads();
    }
}

__global__ void shuffle_under_branch_kernel(float* out) {
    float v = static_cast<float>(threadIdx.x);
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

__global__ void shuffle_outside_mask_kernel(float* out) {
    float v = static_cast<float>(threadIdx.x);
    if (threadIdx.x < 16) v = __shfl_sync(0x0000ffffu, v, 20);
    out[threadIdx.x] = v;
}

__global__ void out_of_bounds_kernel(const float* x, float* out, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = x[i + 1];
}

__global__ void copy_kernel(const float* x, float* out, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = x[i];
}

__global__ void big_shared_kernel(float* out) {
    extern __shared__ float big[];
    big[threadIdx.x] = 1.0f;
    out[threadIdx.x] = big[threadIdx.x];
}

}  // namespace

void block_sum(const float* x, float* out, bool missing_barrier) {
    block_sum_kernel<<<1, 128>>>(x, out, missing_barrier);
}
void divergent_barrier() { divergent_barrier_kernel<<<1, 128>>>(); }
void split_barrier() { split_barrier_kernel<<<1, 128>>>(); }
void shuffle_under_branch(float* out) { shuffle_under_branch_kernel<<<1, 32>>>(out); }
void shuffle_outside_mask(float* out) { shuffle_outside_mask_kernel<<<1, 32>>>(out); }
void out_of_bounds(const float* x, float* out, int n) { out_of_bounds_kernel<<<(n + 63) / 64, 64>>>(x, out, n); }
void copy(const float* x, float* out, int n) { copy_kernel<<<(n + 63) / 64, 64>>>(x, out, n); }
void too_much_shared_memory(float* out) { big_shared_kernel<<<1, 32, 64 * 1024>>>(out); }

}  // namespace ember::test::broken
