// Device-only helpers shared by the kernels (nvcc only).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

namespace ember::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats of shared memory; the function may be called repeatedly.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by an earlier call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < n_warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

// The 8-bit activations the quantized matvecs read (quantize_q8 in matvec.cu, and the ops
// that write them as they produce x: norm.cu, elementwise.cu), one place so every writer
// gives the same bits: lane l of a warp holds element l of a 32-element chunk;
// d = max|x| / 127, xq = round(x / d), ds = (d, d * sum(xq)).
__device__ __forceinline__ void quantize_chunk_q8(float v, int8_t* __restrict__ xq_chunk, float2* __restrict__ ds) {
    const int lane = threadIdx.x & 31;
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = static_cast<int>(roundf(v * id));
    xq_chunk[lane] = static_cast<int8_t>(q);
    const int sum = warp_sum_int(q);
    if (lane == 0) *ds = make_float2(d, d * static_cast<float>(sum));
}

// One RoPE pair (i, i + half) or (2i, 2i + 1) of a head's row, rotated in place by pos * freq[i]
// (angle and sine/cosine in double, scaled by mscale; rope.cu's header says why).
__device__ __forceinline__ void rope_pair(float* head, int i, int half, bool neox, int32_t pos,
                                          const double* __restrict__ freq, double mscale) {
    const double theta = static_cast<double>(pos) * freq[i];
    double sd, cd;
    sincos(theta, &sd, &cd);
    const float s = static_cast<float>(sd * mscale), c = static_cast<float>(cd * mscale);
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
}

inline unsigned blocks_for(int64_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

// Calls f(std::integral_constant<int, NT>{}) with NT the fewest of 1, 2, 4, 8 tokens per block
// that hold n (8 above: more blocks in y): the decode matvecs' tokens-per-block argument.
template <class F>
void by_tokens_per_block(int64_t n, F&& f) {
    if (n <= 1) f(std::integral_constant<int, 1>{});
    else if (n <= 2) f(std::integral_constant<int, 2>{});
    else if (n <= 4) f(std::integral_constant<int, 4>{});
    else f(std::integral_constant<int, 8>{});
}

}  // namespace ember::cuda
