// Writes this batch's K and V rows into their cache slots (slot-major rows, see
// kernels/cpu/attention.h), converting F32 to the cache type exactly as the CPU does:
//   F16 : round to nearest even;
//   Q8_0: per 32 values d = max|x|/127 stored as half, q = round(x / d) (half away from 0).
// Bytes: 4 read per element, 2 (F16) or 34/32 (Q8_0) written. And back (load_kv): the same
// bytes read, 4 per element written, every value exact (q * d is a float product of an 8-bit
// integer and a half). rope_store_kv: rope() of q and k, then store_kv(), per token in one block.
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

// grid.y: 0 = K, 1 = V. One thread per element.
__global__ void store_kv_f16_kernel(uint8_t* __restrict__ kc, uint8_t* __restrict__ vc, size_t row_bytes,
                                    int64_t kv_dim, const float* __restrict__ k, const float* __restrict__ v,
                                    const int32_t* __restrict__ slots, int64_t total) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t t = i / kv_dim, e = i % kv_dim;
    const float* src = blockIdx.y == 0 ? k : v;
    uint8_t* dst = (blockIdx.y == 0 ? kc : vc) + static_cast<size_t>(slots[t]) * row_bytes;
    reinterpret_cast<__half*>(dst)[e] = __float2half_rn(src[i]);
}

// Lane l's value x into byte l of a Q8_0 block (34 bytes: half d, 32 quants), the warp's 32
// lanes together.
__device__ __forceinline__ void store_q8_lane(float x, uint8_t* __restrict__ dst) {
    const int lane = threadIdx.x & 31;
    const float amax = warp_max(fabsf(x));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(roundf(x * id)));
    if (lane == 0) *reinterpret_cast<__half*>(dst) = __float2half_rn(d);
}

// One warp per 32-element Q8_0 block (4 warps per thread block).
__global__ void __launch_bounds__(128)
    store_kv_q8_kernel(uint8_t* __restrict__ kc, uint8_t* __restrict__ vc, size_t row_bytes, int64_t kv_dim,
                       const float* __restrict__ k, const float* __restrict__ v, const int32_t* __restrict__ slots,
                       int64_t n_blocks) {
    const int64_t blk = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
    if (blk >= n_blocks) return;
    const int64_t per_row = kv_dim / 32;
    const int64_t t = blk / per_row, b = blk % per_row;
    const float x = (blockIdx.y == 0 ? k : v)[t * kv_dim + b * 32 + (threadIdx.x & 31)];
    store_q8_lane(x, (blockIdx.y == 0 ? kc : vc) + static_cast<size_t>(slots[t]) * row_bytes + b * 34);
}

// rope() of a token's q and k heads, then store_kv() of its K and V rows: one block per token.
// The barrier between makes the rotated keys (global memory, written by other threads of the
// block) visible to the threads that store them. Same arithmetic as rope_kernel and the
// store kernels above, so the same bits.
__global__ void __launch_bounds__(256) rope_store_kv_kernel(RopeStoreArgs a) {
    const int64_t t = blockIdx.x;
    const int half = a.n_rot / 2, n_heads = a.n_q_heads + a.n_k_heads;
    const int32_t pos = a.positions[t];
    for (int p = threadIdx.x; p < n_heads * half; p += blockDim.x) {
        const int h = p / half;
        float* head = h < a.n_q_heads ? a.q + (t * a.n_q_heads + h) * a.head_dim
                                      : a.k + (t * a.n_k_heads + h - a.n_q_heads) * a.head_dim;
        rope_pair(head, p % half, half, a.neox != 0, pos, a.freq, a.mscale);
    }
    __syncthreads();
    const int64_t kv_dim = int64_t{a.n_k_heads} * a.head_dim;
    const size_t slot_at = static_cast<size_t>(a.slots[t]) * a.row_bytes;
    const float* k = a.k + t * kv_dim;
    const float* v = a.v + t * kv_dim;
    auto* kc = static_cast<uint8_t*>(a.k_cache) + slot_at;
    auto* vc = static_cast<uint8_t*>(a.v_cache) + slot_at;
    if (a.kv_type == kQ8_0) {  // warp per 32-value block, K's blocks then V's
        const int64_t per_row = kv_dim / 32;
        for (int64_t b = threadIdx.x >> 5; b < 2 * per_row; b += blockDim.x >> 5) {
            const bool is_k = b < per_row;
            const int64_t bb = is_k ? b : b - per_row;
            store_q8_lane((is_k ? k : v)[bb * 32 + (threadIdx.x & 31)], (is_k ? kc : vc) + bb * 34);
        }
        return;
    }
    for (int64_t e = threadIdx.x; e < 2 * kv_dim; e += blockDim.x) {
        const bool is_k = e < kv_dim;
        const int64_t i = is_k ? e : e - kv_dim;
        reinterpret_cast<__half*>(is_k ? kc : vc)[i] = __float2half_rn((is_k ? k : v)[i]);
    }
}

// grid.y: 0 = K, 1 = V. One thread per element.
__global__ void load_kv_f16_kernel(const uint8_t* __restrict__ kc, const uint8_t* __restrict__ vc, size_t row_bytes,
                                   int64_t kv_dim, float* __restrict__ k, float* __restrict__ v,
                                   const int32_t* __restrict__ slots, int64_t total) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t t = i / kv_dim, e = i % kv_dim;
    const uint8_t* src = (blockIdx.y == 0 ? kc : vc) + static_cast<size_t>(slots[t]) * row_bytes;
    (blockIdx.y == 0 ? k : v)[i] = __half2float(reinterpret_cast<const __half*>(src)[e]);
}

// One thread per element: q * d of its 32-element block.
__global__ void load_kv_q8_kernel(const uint8_t* __restrict__ kc, const uint8_t* __restrict__ vc, size_t row_bytes,
                                  int64_t kv_dim, float* __restrict__ k, float* __restrict__ v,
                                  const int32_t* __restrict__ slots, int64_t total) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t t = i / kv_dim, e = i % kv_dim;
    const uint8_t* block = (blockIdx.y == 0 ? kc : vc) + static_cast<size_t>(slots[t]) * row_bytes + (e / 32) * 34;
    const float d = __half2float(*reinterpret_cast<const __half*>(block));
    (blockIdx.y == 0 ? k : v)[i] = static_cast<float>(static_cast<int8_t>(block[2 + e % 32])) * d;
}

}  // namespace

void load_kv(int kv_type, const void* k_cache, const void* v_cache, size_t row_bytes, int64_t kv_dim, float* k,
             float* v, const int32_t* slots, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const auto* kc = static_cast<const uint8_t*>(k_cache);
    const auto* vc = static_cast<const uint8_t*>(v_cache);
    const int64_t total = n * kv_dim;
    if (kv_type == kQ8_0) {
        load_kv_q8_kernel<<<dim3(blocks_for(total, 256), 2), 256, 0, stream>>>(kc, vc, row_bytes, kv_dim, k, v, slots,
                                                                               total);
        EMBER_CUDA_CHECK_LAUNCH("load_kv_q8_kernel");
    } else {
        load_kv_f16_kernel<<<dim3(blocks_for(total, 256), 2), 256, 0, stream>>>(kc, vc, row_bytes, kv_dim, k, v, slots,
                                                                                total);
        EMBER_CUDA_CHECK_LAUNCH("load_kv_f16_kernel");
    }
}

void rope_store_kv(const RopeStoreArgs& a, cudaStream_t stream) {
    if (a.n_tokens == 0) return;
    rope_store_kv_kernel<<<static_cast<unsigned>(a.n_tokens), 256, 0, stream>>>(a);
    EMBER_CUDA_CHECK_LAUNCH("rope_store_kv_kernel");
}

void store_kv(int kv_type, void* k_cache, void* v_cache, size_t row_bytes, int64_t kv_dim, const float* k,
              const float* v, const int32_t* slots, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    auto* kc = static_cast<uint8_t*>(k_cache);
    auto* vc = static_cast<uint8_t*>(v_cache);
    if (kv_type == kQ8_0) {
        const int64_t n_blocks = n * (kv_dim / 32);
        store_kv_q8_kernel<<<dim3(blocks_for(n_blocks, 4), 2), 128, 0, stream>>>(kc, vc, row_bytes, kv_dim, k, v, slots,
                                                                                 n_blocks);
        EMBER_CUDA_CHECK_LAUNCH("store_kv_q8_kernel");
    } else {
        const int64_t total = n * kv_dim;
        store_kv_f16_kernel<<<dim3(blocks_for(total, 256), 2), 256, 0, stream>>>(kc, vc, row_bytes, kv_dim, k, v, slots,
                                                                                 total);
        EMBER_CUDA_CHECK_LAUNCH("store_kv_f16_kernel");
    }
}

}  // namespace ember::cuda
