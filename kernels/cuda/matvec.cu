// Decode matrix-vector products: y = x W^T for a handful of tokens (n <= 8 per launch).
//
// Memory-bound by design. Per call the floor is the weight matrix read once:
//   bytes = rows * row_bytes (+ n * cols * 1.125 activation bytes, + n * rows * 4 output),
//   FLOPs = 2 * n * rows * cols.
// E.g. Llama-3-8B ffn_up in Q4_K (14336 x 4096): 33 MB -> ~7.7 us at 4.3 TB/s, while
// 2 * 58.7 M = 117 MFLOP is nothing. So the kernels only have to keep enough loads in
// flight: one warp per weight row, the 32 lanes striding over the row's 32-element chunks,
// every chunk decoded once and applied to all n tokens (weights are read exactly once).
//
// Quantized weights: activations are first quantized to 8 bits per 32 elements
// (quantize_q8: d = max|x|/127), then each chunk is 8 dp4a (quant_blocks.cuh), like the CPU's
// integer path. The activation chunk (36 B per 32 elements) is re-read by every row's warp
// and served from L1/L2 (cols * 1.125 bytes: 4.6 KB for 4096 columns).
// Float weights (F32/F16/BF16): 16-byte loads of 8 elements, FP32 FMA with F32 activations.
//
// Q4_0/Q5_0/Q8_0 weights are repacked at upload into row tiles (repack.h) and read by
// matvec_t_kernel with coalesced 16-byte loads, any width; Q4_K/Q6_K rows that repack.h
// repacks (whole super-block pairs / units of 8) go to matvec_kquant.cu. The others still
// read GGUF blocks in place (2- or 4-byte aligned: Q6_K 210 B at other widths).
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// One warp per 32-element chunk: d = max|x| / 127, xq = round(x / d), s = d * sum(xq).
// Moves n*cols*4 bytes in, n*cols*1.125 out.
__global__ void __launch_bounds__(128) quantize_q8_kernel(const float* __restrict__ x, int64_t n_chunks,
                                                          int8_t* __restrict__ xq, float2* __restrict__ ds) {
    const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (chunk >= n_chunks) return;  // whole warp leaves together
    quantize_chunk_q8(x[chunk * 32 + (threadIdx.x & 31)], xq + chunk * 32, ds + chunk);
}

// Quantized weights: warp per row, lanes over chunks, NT tokens per launch row (grid.y).
template <int T, int NT>
__global__ void __launch_bounds__(128)
    matvec_q_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_chunks,
                    const int8_t* __restrict__ xq, const float2* __restrict__ ds, int n, float* __restrict__ y,
                    const float* __restrict__ bias) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int t0 = blockIdx.y * NT;
    const int nt = min(NT, n - t0);
    const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
    const int64_t cols = static_cast<int64_t>(n_chunks) * 32;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int c = lane; c < n_chunks; c += 32) {
        Chunk ch;
        decode_chunk<T>(wr, c, ch);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t < nt) {
                const int4* xp = reinterpret_cast<const int4*>(xq + (t0 + t) * cols + 32 * static_cast<int64_t>(c));
                const int4 a = __ldg(xp), b = __ldg(xp + 1);
                const int xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
                const float2 s = __ldg(ds + (t0 + t) * static_cast<int64_t>(n_chunks) + c);
                acc[t] += dot_decoded<T>(ch, xv, s.x, s.y);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float v = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[static_cast<int64_t>(t0 + t) * rows + row] = v + (bias ? bias[row] : 0.0f);
    }
}

// FP16 scale k (0..7) of 16 bytes, by selects (an indexed register array would go to local
// memory).
__device__ __forceinline__ float half_at(uint4 s, int k) {
    const uint32_t w = (k & 4) ? ((k & 2) ? s.w : s.z) : ((k & 2) ? s.y : s.x);
    return h2f(static_cast<uint16_t>((k & 1) ? w >> 16 : w));
}

__device__ __forceinline__ int dot16(const uint32_t q[4], int4 x) {
    return dp4a(
        static_cast<int>(q[3]), x.w,
        dp4a(static_cast<int>(q[2]), x.z, dp4a(static_cast<int>(q[1]), x.y, dp4a(static_cast<int>(q[0]), x.x, 0))));
}

// Every weight byte of a row tile is read by this one load (one line: the offline model
// finds the weight loads in the SASS by this line, tools/perf_model).
__device__ __forceinline__ uint4 ld_weight16(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// The 16-byte word of a row tile that holds its byte `off` (tiles start 16-byte aligned):
// the scales and high bits load 16 bytes wide too, each lane picking its values by selects.
// The last word may reach 14 bytes past the tensor: allocations are whole 256-byte units
// (kernels/common/alloc_size.h).
__device__ __forceinline__ uint4 tile_word(const uint8_t* tile, int64_t off) {
    return ld_weight16(tile + (off & ~int64_t{15}));
}

__device__ __forceinline__ uint32_t u32_at(uint4 s, int k) {
    return (k & 2) ? ((k & 1) ? s.w : s.z) : ((k & 1) ? s.y : s.x);
}

// The scales of chunk c for tile rows i0 and i1 (a pair, or i1 = i0): one 16-byte word (the
// pair's 4 bytes are 4-byte aligned in the tile).
template <int T>
__device__ __forceinline__ float2 tile_scales(const uint8_t* tile, int m, int64_t C, int64_t c, int i0, int i1) {
    const int64_t o0 = tile_scale_offset(T, m, C, c, i0), o1 = tile_scale_offset(T, m, C, c, i1);
    const uint4 w = tile_word(tile, o0);
    return make_float2(half_at(w, static_cast<int>(o0 & 15) >> 1), half_at(w, static_cast<int>(o1 & 15) >> 1));
}

// Q5_0's 32 high bits of chunk c for tile rows i0 and i1: one word (the pair's 8 bytes are
// 8-byte aligned).
__device__ __forceinline__ uint2 tile_highs(const uint8_t* tile, int m, int64_t C, int64_t c, int i0, int i1) {
    const int64_t o0 = tile_high_offset(kQ5_0R, m, C, c, i0), o1 = tile_high_offset(kQ5_0R, m, C, c, i1);
    const uint4 w = tile_word(tile, o0);
    return make_uint2(u32_at(w, static_cast<int>(o0 & 15) >> 2), u32_at(w, static_cast<int>(o1 & 15) >> 2));
}

// The signed codes of one lane's two half-chunks (a, b) of one row: Q8_0 two 16-byte units,
// Q4_0/Q5_0 one (half a in its first 8 bytes, b in its last), Q5_0's high bits beside.
template <int T>
__device__ __forceinline__ void tile_codes(uint4 ua, uint4 ub, uint32_t high_a, uint32_t high_b, uint32_t qa[4],
                                           uint32_t qb[4]) {
    if constexpr (T == kQ8_0R) {
        const uint32_t a[4] = {ua.x, ua.y, ua.z, ua.w}, b[4] = {ub.x, ub.y, ub.z, ub.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            qa[w] = a[w];
            qb[w] = b[w];
        }
    } else {
        unpack_nibble_half<T>(ua.x, ua.y, high_a, qa);
        unpack_nibble_half<T>(ua.z, ua.w, high_b, qb);
    }
}

// Row tiles (Q4_0/Q5_0/Q8_0 repacked at upload: repack.h, quant_blocks.cuh "Row tiles"), any
// width: a block per tile of 8 rows, each warp two rows, one group of 32 chunks per step.
// Lane l takes half-chunks l and l + k of the group (k chunks: 32, or fewer in the last), so
// every load of the warp (quants, scale and high-bit words, activations) is 16 bytes wide
// and contiguous across the lanes; both rows' weight loads are issued before any decoding.
template <int T, int NT>
__global__ void __launch_bounds__(128)
    matvec_t_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_chunks,
                    const int8_t* __restrict__ xq, const float2* __restrict__ ds, int n, float* __restrict__ y,
                    const float* __restrict__ bias) {
    const int lane = threadIdx.x & 31;
    const int r0 = blockIdx.x * kTileRows;
    const int m = min(kTileRows, rows - r0);
    const int i0 = 2 * (threadIdx.x >> 5);
    if (i0 >= m) return;                // whole warp leaves together
    const int i1 = min(i0 + 1, m - 1);  // an odd last row is read twice, written once
    const int t0 = blockIdx.y * NT;
    const int nt = min(NT, n - t0);
    const int64_t C = n_chunks, cols = C * 32;
    const int qb_bytes = tile_quant_bytes(T);
    const uint8_t* tile = w + static_cast<size_t>(r0) * row_bytes;
    const uint8_t* q0 = tile + static_cast<int64_t>(i0) * C * qb_bytes;
    const uint8_t* q1 = tile + static_cast<int64_t>(i1) * C * qb_bytes;
    float acc[2][NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = 0.0f;
    for (int g = 0; g < n_chunks; g += kRepackChunks) {
        const int k = min(kRepackChunks, n_chunks - g);
        if (lane >= k) break;  // only the last group has fewer chunks than lanes
        const int ha = lane, hb = lane + k;
        const int64_t ca = g + ha / 2, cb = g + hb / 2;
        const uint8_t* p0 = q0 + static_cast<int64_t>(g) * qb_bytes;
        const uint8_t* p1 = q1 + static_cast<int64_t>(g) * qb_bytes;
        const uint4 u0a = ld_weight16(p0 + 16 * ha), u1a = ld_weight16(p1 + 16 * ha);
        uint4 u0b = u0a, u1b = u1a;
        if constexpr (T == kQ8_0R) {
            u0b = ld_weight16(p0 + 16 * hb);
            u1b = ld_weight16(p1 + 16 * hb);
        }
        const float2 sa = tile_scales<T>(tile, m, C, ca, i0, i1), sb = tile_scales<T>(tile, m, C, cb, i0, i1);
        uint2 hia = make_uint2(0, 0), hib = hia;
        if constexpr (T == kQ5_0R) {
            hia = tile_highs(tile, m, C, ca, i0, i1);
            hib = tile_highs(tile, m, C, cb, i0, i1);
        }
        const int sha = 16 * (ha & 1), shb = 16 * (hb & 1);
        uint32_t qa0[4], qb0[4], qa1[4], qb1[4];
        tile_codes<T>(u0a, u0b, hia.x >> sha, hib.x >> shb, qa0, qb0);
        tile_codes<T>(u1a, u1b, hia.y >> sha, hib.y >> shb, qa1, qb1);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t < nt) {
                const int4* xp = reinterpret_cast<const int4*>(xq + (t0 + t) * cols + 32 * static_cast<int64_t>(g));
                const int4 xa = __ldg(xp + ha), xb = __ldg(xp + hb);
                const float2* dp = ds + (t0 + t) * C;
                const float da = __ldg(dp + ca).x, db = __ldg(dp + cb).x;
                acc[0][t] +=
                    sa.x * da * static_cast<float>(dot16(qa0, xa)) + sb.x * db * static_cast<float>(dot16(qb0, xb));
                acc[1][t] +=
                    sa.y * da * static_cast<float>(dot16(qa1, xa)) + sb.y * db * static_cast<float>(dot16(qb1, xb));
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float v0 = warp_sum(acc[0][t]), v1 = warp_sum(acc[1][t]);
        if (lane != 0 || t >= nt) continue;
        float* yt = y + static_cast<int64_t>(t0 + t) * rows + r0;
        yt[i0] = v0 + (bias ? bias[r0 + i0] : 0.0f);
        if (i1 != i0) yt[i1] = v1 + (bias ? bias[r0 + i1] : 0.0f);
    }
}

template <int T>
__device__ __forceinline__ float load1(const uint8_t* row, int e) {
    if constexpr (T == kF32) return reinterpret_cast<const float*>(row)[e];
    else if constexpr (T == kF16) return h2f(reinterpret_cast<const uint16_t*>(row)[e]);
    else return bf2f(reinterpret_cast<const uint16_t*>(row)[e]);
}

// 8 consecutive elements from element e (a multiple of 8; rows 16-byte aligned).
template <int T>
__device__ __forceinline__ void load8(const uint8_t* row, int e, float v[8]) {
    if constexpr (T == kF32) {
        const float4* p = reinterpret_cast<const float4*>(row + 4 * static_cast<size_t>(e));
        const float4 a = __ldg(p), b = __ldg(p + 1);
        v[0] = a.x;
        v[1] = a.y;
        v[2] = a.z;
        v[3] = a.w;
        v[4] = b.x;
        v[5] = b.y;
        v[6] = b.z;
        v[7] = b.w;
    } else {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(row + 2 * static_cast<size_t>(e)));
        const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint16_t lo = static_cast<uint16_t>(words[i]), hi = static_cast<uint16_t>(words[i] >> 16);
            v[2 * i] = T == kF16 ? h2f(lo) : bf2f(lo);
            v[2 * i + 1] = T == kF16 ? h2f(hi) : bf2f(hi);
        }
    }
}

// Float weights: warp per row; VEC: cols % 8 == 0, 16-byte loads of 8 elements per lane.
template <int T, int NT, bool VEC>
__global__ void __launch_bounds__(128)
    matvec_f_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int cols, const float* __restrict__ x,
                    int n, float* __restrict__ y, const float* __restrict__ bias) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int t0 = blockIdx.y * NT;
    const int nt = min(NT, n - t0);
    const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    if constexpr (VEC) {
        for (int e = lane * 8; e < cols; e += 256) {
            float wv[8];
            load8<T>(wr, e, wv);
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (t < nt) {
                    const float4* xp = reinterpret_cast<const float4*>(x + static_cast<int64_t>(t0 + t) * cols + e);
                    const float4 a = __ldg(xp), b = __ldg(xp + 1);
                    acc[t] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y +
                              wv[6] * b.z + wv[7] * b.w;
                }
            }
        }
    } else {
        for (int e = lane; e < cols; e += 32) {
            const float wv = load1<T>(wr, e);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                if (t < nt) acc[t] += wv * __ldg(x + static_cast<int64_t>(t0 + t) * cols + e);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float v = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[static_cast<int64_t>(t0 + t) * rows + row] = v + (bias ? bias[row] : 0.0f);
    }
}

template <int T, int NT>
void launch_q(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq, const float2* ds,
              int64_t n, float* y, const float* bias, cudaStream_t stream) {
    const dim3 grid(blocks_for(rows, kWarpsPerBlock), static_cast<unsigned>((n + NT - 1) / NT));
    matvec_q_kernel<T, NT><<<grid, 128, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows),
                                                     static_cast<int>(cols / 32), xq, ds, static_cast<int>(n), y, bias);
    EMBER_CUDA_CHECK_LAUNCH("matvec_q_kernel");
}

template <int T, int NT>
void launch_t(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq, const float2* ds,
              int64_t n, float* y, const float* bias, cudaStream_t stream) {
    const dim3 grid(blocks_for(rows, kTileRows), static_cast<unsigned>((n + NT - 1) / NT));
    matvec_t_kernel<T, NT><<<grid, 128, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows),
                                                     static_cast<int>(cols / 32), xq, ds, static_cast<int>(n), y, bias);
    EMBER_CUDA_CHECK_LAUNCH("matvec_t_kernel");
}

template <int T>
void dispatch_t(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq, const float2* ds,
                int64_t n, float* y, const float* bias, cudaStream_t stream) {
    by_tokens_per_block(
        n, [&](auto nt) { launch_t<T, decltype(nt)::value>(w, row_bytes, rows, cols, xq, ds, n, y, bias, stream); });
}

template <int T>
void dispatch_q(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq, const float2* ds,
                int64_t n, float* y, const float* bias, cudaStream_t stream) {
    by_tokens_per_block(
        n, [&](auto nt) { launch_q<T, decltype(nt)::value>(w, row_bytes, rows, cols, xq, ds, n, y, bias, stream); });
}

template <int T, int NT>
void launch_f(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
              const float* bias, cudaStream_t stream) {
    const dim3 grid(blocks_for(rows, kWarpsPerBlock), static_cast<unsigned>((n + NT - 1) / NT));
    const auto* wp = static_cast<const uint8_t*>(w);
    if (cols % 8 == 0 && row_bytes % 16 == 0)
        matvec_f_kernel<T, NT, true><<<grid, 128, 0, stream>>>(wp, row_bytes, static_cast<int>(rows),
                                                               static_cast<int>(cols), x, static_cast<int>(n), y, bias);
    else
        matvec_f_kernel<T, NT, false><<<grid, 128, 0, stream>>>(
            wp, row_bytes, static_cast<int>(rows), static_cast<int>(cols), x, static_cast<int>(n), y, bias);
    EMBER_CUDA_CHECK_LAUNCH("matvec_f_kernel");
}

template <int T>
void dispatch_f(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
                const float* bias, cudaStream_t stream) {
    by_tokens_per_block(
        n, [&](auto nt) { launch_f<T, decltype(nt)::value>(w, row_bytes, rows, cols, x, n, y, bias, stream); });
}

}  // namespace

bool is_block_type(int type) {
    switch (type) {
        case kQ4_0:
        case kQ4_1:
        case kQ5_0:
        case kQ5_1:
        case kQ8_0:
        case kQ4_0R:
        case kQ5_0R:
        case kQ8_0R:
        case kQ4_KR:
        case kQ6_KR:
        case kQ2_K:
        case kQ3_K:
        case kQ4_K:
        case kQ5_K:
        case kQ6_K:
        case kMXFP4:
            return true;
        default:
            return false;
    }
}

bool is_float_type(int type) { return type == kF32 || type == kF16 || type == kBF16; }

void quantize_q8(const float* x, int64_t n, int64_t cols, int8_t* xq, float2* ds, cudaStream_t stream) {
    const int64_t n_chunks = n * (cols / 32);
    if (n_chunks == 0) return;
    quantize_q8_kernel<<<blocks_for(n_chunks, kWarpsPerBlock), 128, 0, stream>>>(x, n_chunks, xq, ds);
    EMBER_CUDA_CHECK_LAUNCH("quantize_q8_kernel");
}

void matvec_quant(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq,
                  const float2* ds, int64_t n, float* y, const float* bias, cudaStream_t stream) {
    // Token groups of up to 8 share one pass over the weights; larger n loops over groups.
    for (int64_t t0 = 0; t0 < n; t0 += kMatvecMaxTokens) {
        const int64_t nt = n - t0 < kMatvecMaxTokens ? n - t0 : kMatvecMaxTokens;
        const int8_t* xq_t = xq + t0 * cols;
        const float2* ds_t = ds + t0 * (cols / 32);
        float* y_t = y + t0 * rows;
        switch (type) {
            case kQ4_0:
                dispatch_q<kQ4_0>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ4_0R:
                dispatch_t<kQ4_0R>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ5_0R:
                dispatch_t<kQ5_0R>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ8_0R:
                dispatch_t<kQ8_0R>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ4_KR:
            case kQ6_KR:
                matvec_kquant_r(type, w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ4_1:
                dispatch_q<kQ4_1>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ5_0:
                dispatch_q<kQ5_0>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ5_1:
                dispatch_q<kQ5_1>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ8_0:
                dispatch_q<kQ8_0>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ2_K:
                dispatch_q<kQ2_K>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ3_K:
                dispatch_q<kQ3_K>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ4_K:
                dispatch_q<kQ4_K>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ5_K:
                dispatch_q<kQ5_K>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kQ6_K:
                dispatch_q<kQ6_K>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            case kMXFP4:
                dispatch_q<kMXFP4>(w, row_bytes, rows, cols, xq_t, ds_t, nt, y_t, bias, stream);
                break;
            default:
                break;  // the backend checks types before calling
        }
    }
}

void matvec_float(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n,
                  float* y, const float* bias, cudaStream_t stream) {
    for (int64_t t0 = 0; t0 < n; t0 += kMatvecMaxTokens) {
        const int64_t nt = n - t0 < kMatvecMaxTokens ? n - t0 : kMatvecMaxTokens;
        const float* x_t = x + t0 * cols;
        float* y_t = y + t0 * rows;
        switch (type) {
            case kF32:
                dispatch_f<kF32>(w, row_bytes, rows, cols, x_t, nt, y_t, bias, stream);
                break;
            case kF16:
                dispatch_f<kF16>(w, row_bytes, rows, cols, x_t, nt, y_t, bias, stream);
                break;
            case kBF16:
                dispatch_f<kBF16>(w, row_bytes, rows, cols, x_t, nt, y_t, bias, stream);
                break;
            default:
                break;
        }
    }
}

}  // namespace ember::cuda
