// qwen35's linear attention on the GPU (kernels/backend.h states the math; RecurrentLayer the
// state's layout). A first, plain version: correct and graph-safe, not yet tuned.
//  * ssm_conv: one thread per (sequence, channel) walks the batch's tokens of its sequence;
//    reads conv_kernel weights and its state once, 8 bytes per token (x in, out).
//  * gated_delta_rule: one block per (sequence, value head), one thread per state row j (the
//    row stays in global memory: head_dim^2 floats read and written per token, the op's
//    floor); q and k of the token in shared memory, their L2 norms by one thread.
#include <cmath>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace ember::cuda {
namespace {

constexpr int kMaxConvKernel = 16;

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

__global__ void ssm_conv_kernel(ConvArgs a) {
    const int64_t s = blockIdx.y, c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= a.channels) return;
    const int keep = a.kernel - 1;
    float* st = a.state + static_cast<int64_t>(a.slot_of_seq[s]) * keep * a.channels;
    float win[kMaxConvKernel];
    for (int k = 0; k < keep; ++k) win[k] = st[k * a.channels + c];
    const float* w = a.w + c * a.kernel;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
        if (a.seq_of[t] != s) continue;
        win[keep] = a.x[t * a.channels + c];
        float sum = 0.0f;
        for (int k = 0; k < a.kernel; ++k) sum += win[k] * w[k];
        a.out[t * a.channels + c] = silu_f(sum);
        for (int k = 0; k < keep; ++k) win[k] = win[k + 1];
    }
    for (int k = 0; k < keep; ++k) st[k * a.channels + c] = win[k];
}

__global__ void gated_delta_kernel(DeltaArgs a) {
    extern __shared__ float shm[];
    const int D = a.head_dim, j = threadIdx.x;
    const int s = blockIdx.x / a.n_v_heads, h = blockIdx.x % a.n_v_heads;
    const int kh = a.grouped_heads ? h / (a.n_v_heads / a.n_k_heads) : h % a.n_k_heads;
    float* q = shm;
    float* k = shm + D;
    float* inv = shm + 2 * D;  // 1 / |q|, 1 / |k| (with eps)
    float* S = a.state + ((static_cast<int64_t>(a.slot_of_seq[s]) * a.n_v_heads + h) * D + j) * D;
    const float q_scale = 1.0f / sqrtf(static_cast<float>(D));
    for (int64_t t = 0; t < a.n_tokens; ++t) {
        if (a.seq_of[t] != s) continue;  // the same for every thread of the block
        q[j] = a.q[t * a.q_ld + static_cast<int64_t>(kh) * D + j];
        k[j] = a.k[t * a.k_ld + static_cast<int64_t>(kh) * D + j];
        __syncthreads();
        if (j == 0) {
            float qq = 0.0f, kk = 0.0f;
            for (int i = 0; i < D; ++i) qq += q[i] * q[i], kk += k[i] * k[i];
            inv[0] = 1.0f / sqrtf(qq + a.l2_eps);
            inv[1] = 1.0f / sqrtf(kk + a.l2_eps);
        }
        __syncthreads();
        const int64_t g = t * a.n_v_heads + h;
        const float x = a.alpha[g] + a.dt_bias[h];
        const float decay = expf((x > 20.0f ? x : log1pf(expf(x))) * a.a[h]);
        const float beta = 1.0f / (1.0f + expf(-a.beta[g]));
        float sk = 0.0f;
        for (int i = 0; i < D; ++i) {
            S[i] *= decay;
            sk += S[i] * (k[i] * inv[1]);
        }
        const float d = (a.v[t * a.v_ld + static_cast<int64_t>(h) * D + j] - sk) * beta;
        float o = 0.0f;
        for (int i = 0; i < D; ++i) {
            S[i] += d * (k[i] * inv[1]);
            o += S[i] * (q[i] * inv[0]);
        }
        a.out[t * static_cast<int64_t>(a.n_v_heads) * D + static_cast<int64_t>(h) * D + j] = o * q_scale;
        __syncthreads();  // q and k are rewritten for the next token
    }
}

}  // namespace

void ssm_conv(ConvArgs a, cudaStream_t stream) {
    if (a.n_tokens == 0 || a.channels == 0) return;
    const dim3 grid(blocks_for(a.channels, 128), static_cast<unsigned>(a.n_seqs));
    ssm_conv_kernel<<<grid, 128, 0, stream>>>(a);
    EMBER_CUDA_CHECK_LAUNCH("ssm_conv_kernel");
}

void gated_delta_rule(DeltaArgs a, cudaStream_t stream) {
    if (a.n_tokens == 0) return;
    const size_t shared = (2 * static_cast<size_t>(a.head_dim) + 2) * sizeof(float);
    gated_delta_kernel<<<static_cast<unsigned>(a.n_seqs * a.n_v_heads), static_cast<unsigned>(a.head_dim), shared,
                         stream>>>(a);
    EMBER_CUDA_CHECK_LAUNCH("gated_delta_kernel");
}

}  // namespace ember::cuda
