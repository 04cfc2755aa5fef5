// Decode matrix-vector products for the repacked K-quants, Q4_K and Q6_K (repack.h; layouts in
// quant_blocks.cuh, kQ4_KR and kQ6_KR): the 8B Q4_K_M path's weights.
//
// Same contract as matvec.cu's kernels (8-bit activations, dp4a, warp per row, NT tokens per
// pass), with every weight byte arriving in 16-byte loads that are contiguous across a warp:
// a warp step covers 4 super-blocks (1024 elements), lane l taking 16-byte word l%8 of
// super-block l/8, i.e. elements 16(l%8)..+15 and 128+16(l%8)..+15 of it. The activations of
// those elements are 128-byte runs (16-byte loads too), so each warp-instruction touches the
// fewest sectors its bytes need. Each lane issues all loads of a step (Q4_K: 4 super-block
// steps, 8 loads; Q6_K: a unit of 8 super-blocks, 6 loads) before decoding any.
// Bytes per call: rows * row_bytes weights once (+ n * cols * 1.125 activations from L1/L2).
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

constexpr int kWarps = 4;    // rows (warps) per block
constexpr int kStepsQ4 = 4;  // Q4_K super-block steps loaded before any is decoded

__device__ __forceinline__ int byte_of(uint32_t w, int i) { return static_cast<int>((w >> (8 * i)) & 0xFF); }

__device__ __forceinline__ int dot4x4(uint32_t q0, uint32_t q1, uint32_t q2, uint32_t q3, int4 x) {
    return dp4a(static_cast<int>(q3), x.w,
                dp4a(static_cast<int>(q2), x.z, dp4a(static_cast<int>(q1), x.y, dp4a(static_cast<int>(q0), x.x, 0))));
}

// Per token: the 16-byte activation words of a lane's low and high 16 elements and their
// chunks' (d, d*sum), at element offset e (low) and e + 128 (high).
struct XPair {
    int4 lo, hi;
    float2 dlo, dhi;
};

__device__ __forceinline__ XPair load_x(const int8_t* __restrict__ xq, const float2* __restrict__ ds, int64_t e) {
    const int4* xp = reinterpret_cast<const int4*>(xq + e);
    return XPair{__ldg(xp), __ldg(xp + 8), __ldg(ds + e / 32), __ldg(ds + e / 32 + 4)};
}

// The bias of this warp's row, from the aligned 16 bytes that hold it (biases are weights: the
// perf model holds every weight load to 16 bytes). Those 16 bytes lie inside the vector's
// allocation: allocations are 256-byte aligned multiples of 256 bytes (kernels/common/alloc_size.h).
__device__ __forceinline__ float row_bias(const float* __restrict__ bias, int row) {
    if (!bias) return 0.0f;
    const uintptr_t a = reinterpret_cast<uintptr_t>(bias + row);
    const float4 b = __ldg(reinterpret_cast<const float4*>(a & ~static_cast<uintptr_t>(15)));
    const int k = static_cast<int>((a >> 2) & 3);
    return k == 0 ? b.x : k == 1 ? b.y : k == 2 ? b.z : b.w;
}

// The row's sums over the warp, plus its bias, to y[t][row] for t < nt.
template <int NT>
__device__ __forceinline__ void store_row(const float acc[NT], float* __restrict__ y, int rows, int row, int nt,
                                          const float* __restrict__ bias) {
    const float b = row_bias(bias, row);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float v = warp_sum(acc[t]);
        if ((threadIdx.x & 31) == 0 && t < nt) y[static_cast<int64_t>(t) * rows + row] = v + b;
    }
}

// Q4_KR (T): warp per row, steps of 4 super-blocks (2 pairs), kStepsQ4 steps loaded before any
// is decoded.
template <int T, int NT>
__global__ void __launch_bounds__(128)
    matvec_q4kr_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_sb,
                       const int8_t* __restrict__ xq, const float2* __restrict__ ds, int n, float* __restrict__ y,
                       const float* __restrict__ bias) {
    static_assert(T == kQ4_KR, "Q4_KR rows");
    const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int t0 = blockIdx.y * NT, nt = min(NT, n - t0);
    const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
    const int lane = threadIdx.x & 31, lp = lane & 7, j = lp >> 1;
    const int64_t cols = static_cast<int64_t>(n_sb) * 256;
    xq += t0 * cols;
    ds += t0 * (cols / 32);
    float acc[NT] = {};
    for (int sb0 = 0; sb0 < n_sb; sb0 += 4 * kStepsQ4) {
        uint4 q[kStepsQ4], h[kStepsQ4];
#pragma unroll
        for (int u = 0; u < kStepsQ4; ++u) {
            const int sb = sb0 + 4 * u + (lane >> 3);
            if (sb < n_sb) {
                const uint8_t* pp = wr + static_cast<size_t>(sb >> 1) * kPairBytesQ4_K;
                h[u] = __ldg(reinterpret_cast<const uint4*>(pp) + (sb & 1));
                q[u] = __ldg(reinterpret_cast<const uint4*>(pp + 32 + 128 * (sb & 1)) + lp);
            } else {
                h[u] = q[u] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < kStepsQ4; ++u) {
            const int sb = sb0 + 4 * u + (lane >> 3);
            if (sb >= n_sb) continue;
            // Sub-blocks j (low part) and 4 + j (high): scale_min_k4 on bytes j of words y, z, w.
            const int b0 = byte_of(h[u].y, j), b1 = byte_of(h[u].z, j), b2 = byte_of(h[u].w, j);
            const float d = h2f(static_cast<uint16_t>(h[u].x)), dmin = h2f(static_cast<uint16_t>(h[u].x >> 16));
            const float alo = d * static_cast<float>(b0 & 63),
                        ahi = d * static_cast<float>((b2 & 0xF) | ((b0 >> 6) << 4));
            // The chunk's offset term -dmin*m*sx once per chunk: by the lane of its first half.
            const float half0 = (lp & 1) ? 0.0f : 1.0f;
            const float blo = -(dmin * static_cast<float>(b1 & 63)) * half0;
            const float bhi = -(dmin * static_cast<float>((b2 >> 4) | ((b1 >> 6) << 4))) * half0;
            const uint4 v = q[u];
            const uint32_t l0 = v.x & 0x0F0F0F0Fu, l1 = v.y & 0x0F0F0F0Fu, l2 = v.z & 0x0F0F0F0Fu,
                           l3 = v.w & 0x0F0F0F0Fu;
            const uint32_t h0 = (v.x >> 4) & 0x0F0F0F0Fu, h1 = (v.y >> 4) & 0x0F0F0F0Fu, h2 = (v.z >> 4) & 0x0F0F0F0Fu,
                           h3 = (v.w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (t < nt) {
                    const XPair x =
                        load_x(xq + t * cols, ds + t * (cols / 32), 256 * static_cast<int64_t>(sb) + 16 * lp);
                    acc[t] += x.dlo.x * (alo * static_cast<float>(dot4x4(l0, l1, l2, l3, x.lo))) + blo * x.dlo.y +
                              x.dhi.x * (ahi * static_cast<float>(dot4x4(h0, h1, h2, h3, x.hi))) + bhi * x.dhi.y;
                }
            }
        }
    }
    store_row<NT>(acc, y + static_cast<int64_t>(t0) * rows, rows, row, nt, bias);
}

// FP16 value k (0..7) of 16 bytes, by selects (an indexed register array would go to local
// memory).
__device__ __forceinline__ float half_of(uint4 s, int k) {
    const uint32_t w = (k & 4) ? ((k & 2) ? s.w : s.z) : ((k & 2) ? s.y : s.x);
    return h2f(static_cast<uint16_t>((k & 1) ? w >> 16 : w));
}

// Signed byte i (0..15) of 16 bytes, by selects.
__device__ __forceinline__ int sbyte_of(uint4 s, int i) {
    const uint32_t w = (i & 8) ? ((i & 4) ? s.w : s.z) : ((i & 4) ? s.y : s.x);
    return static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * (i & 3))));
}

// One Q6_KR ql word's 32 elements (low part: qh word lo, high part: hi) against one token.
__device__ __forceinline__ float q6kr_dot(uint4 ql, uint32_t qh_lo, uint32_t qh_hi, float slo, float shi,
                                          const XPair& x) {
    const int dlo = dot4x4(q6kr_codes(ql.x, qh_lo, 0, 0), q6kr_codes(ql.y, qh_lo, 0, 1), q6kr_codes(ql.z, qh_lo, 0, 2),
                           q6kr_codes(ql.w, qh_lo, 0, 3), x.lo);
    const int dhi = dot4x4(q6kr_codes(ql.x, qh_hi, 1, 0), q6kr_codes(ql.y, qh_hi, 1, 1), q6kr_codes(ql.z, qh_hi, 1, 2),
                           q6kr_codes(ql.w, qh_hi, 1, 3), x.hi);
    return x.dlo.x * (slo * static_cast<float>(dlo)) + x.dhi.x * (shi * static_cast<float>(dhi));
}

// Q6_KR (T): warp per row, one unit of 8 super-blocks per step; lane l's ql words are l (super-
// block l/8) and 32 + l (super-block 4 + l/8), its qh word l holds both words' top bits.
template <int T, int NT>
__global__ void __launch_bounds__(128)
    matvec_q6kr_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_units,
                       const int8_t* __restrict__ xq, const float2* __restrict__ ds, int n, float* __restrict__ y,
                       const float* __restrict__ bias) {
    static_assert(T == kQ6_KR, "Q6_KR rows");
    const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int t0 = blockIdx.y * NT, nt = min(NT, n - t0);
    const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
    const int lane = threadIdx.x & 31, lp = lane & 7, sub = lane >> 3;
    const int64_t cols = static_cast<int64_t>(n_units) * 2048;
    xq += t0 * cols;
    ds += t0 * (cols / 32);
    float acc[NT] = {};
    for (int un = 0; un < n_units; ++un) {
        const uint4* up = reinterpret_cast<const uint4*>(wr + static_cast<size_t>(un) * kUnitBytesQ6_K);
        const uint4 qa = __ldg(up + lane), qb = __ldg(up + 32 + lane), qh = __ldg(up + kQ6_KR_qh / 16 + lane);
        const uint4 sa = __ldg(up + kQ6_KR_scales / 16 + sub), sb = __ldg(up + kQ6_KR_scales / 16 + 4 + sub);
        const uint4 dd = __ldg(up + kQ6_KR_d / 16);
        const float da = half_of(dd, sub), db = half_of(dd, 4 + sub);
        const float salo = da * static_cast<float>(sbyte_of(sa, lp)),
                    sahi = da * static_cast<float>(sbyte_of(sa, 8 + lp));
        const float sblo = db * static_cast<float>(sbyte_of(sb, lp)),
                    sbhi = db * static_cast<float>(sbyte_of(sb, 8 + lp));
        const int64_t ea = 2048 * static_cast<int64_t>(un) + 256 * sub + 16 * lp, eb = ea + 1024;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t < nt) {
                const int8_t* xt = xq + t * cols;
                const float2* dt = ds + t * (cols / 32);
                acc[t] += q6kr_dot(qa, qh.x, qh.y, salo, sahi, load_x(xt, dt, ea)) +
                          q6kr_dot(qb, qh.z, qh.w, sblo, sbhi, load_x(xt, dt, eb));
            }
        }
    }
    store_row<NT>(acc, y + static_cast<int64_t>(t0) * rows, rows, row, nt, bias);
}

template <int T, int NT>
void launch(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq, const float2* ds, int64_t n,
            float* y, const float* bias, cudaStream_t stream) {
    const dim3 grid(blocks_for(rows, kWarps), static_cast<unsigned>((n + NT - 1) / NT));
    const auto* wp = static_cast<const uint8_t*>(w);
    if constexpr (T == kQ4_KR) {
        matvec_q4kr_kernel<T, NT><<<grid, 128, 0, stream>>>(
            wp, row_bytes, static_cast<int>(rows), static_cast<int>(cols / 256), xq, ds, static_cast<int>(n), y, bias);
        EMBER_CUDA_CHECK_LAUNCH("matvec_q4kr_kernel");
    } else {
        matvec_q6kr_kernel<T, NT><<<grid, 128, 0, stream>>>(
            wp, row_bytes, static_cast<int>(rows), static_cast<int>(cols / 2048), xq, ds, static_cast<int>(n), y, bias);
        EMBER_CUDA_CHECK_LAUNCH("matvec_q6kr_kernel");
    }
}

template <int T>
void dispatch(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq, const float2* ds,
              int64_t n, float* y, const float* bias, cudaStream_t stream) {
    by_tokens_per_block(
        n, [&](auto nt) { launch<T, decltype(nt)::value>(w, row_bytes, rows, cols, xq, ds, n, y, bias, stream); });
}

}  // namespace

void matvec_kquant_r(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq,
                     const float2* ds, int64_t n, float* y, const float* bias, cudaStream_t stream) {
    if (type == kQ4_KR) dispatch<kQ4_KR>(w, row_bytes, rows, cols, xq, ds, n, y, bias, stream);
    else dispatch<kQ6_KR>(w, row_bytes, rows, cols, xq, ds, n, y, bias, stream);
}

}  // namespace ember::cuda
