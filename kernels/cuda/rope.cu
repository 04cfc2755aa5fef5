// Rotary position embedding, in place, normal (pairs 2i, 2i+1) or NeoX (pairs i, i + n/2)
// ordering. As the CPU does (kernels/cpu/ops.cpp), the angle is formed in double so that
// positions up to ~1e6 keep full float accuracy: freq[i] = freq_scale * base^(-2i/n_rot) /
// freq_factors[i] is computed once on the host in double and cached on the device;
// theta = pos * freq[i] and its sine/cosine are double (times YaRN's magnitude factor
// mscale, 1 without YaRN), the rotation float. A reverse rotation (RopeParams::reverse) is
// the same kernel over a table of negated frequencies.
// One thread per rotated pair: 16 bytes of x moved, one double sincos (cheap on sm_90; the
// op is small next to the matmuls even at consumer GPUs' FP64 rate).
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace ember::cuda {
namespace {

__global__ void rope_kernel(float* __restrict__ x, int64_t total, int n_heads, int head_dim, int half, bool neox,
                            const int32_t* __restrict__ positions, const double* __restrict__ freq, double mscale) {
    const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int64_t row = idx / half;  // token * n_heads + head
    rope_pair(x + row * head_dim, static_cast<int>(idx % half), half, neox, positions[row / n_heads], freq, mscale);
}

}  // namespace

void rope(float* x, int64_t n_tokens, int n_heads, int head_dim, int n_rot, bool neox, const int32_t* positions,
          const double* freq, double mscale, cudaStream_t stream) {
    const int half = n_rot / 2;
    const int64_t total = n_tokens * n_heads * half;
    if (total == 0) return;
    rope_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(x, total, n_heads, head_dim, half, neox, positions, freq,
                                                            mscale);
    EMBER_CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace ember::cuda
