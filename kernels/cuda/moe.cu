// Mixture-of-experts kernels (Backend::moe_route, moe_matmul, moe_combine; shapes in
// kernels/backend.h).
//
// moe_matmul takes one of three paths, chosen from the numbers of slots and experts
// (cuda_backend.cpp: kMoeMatvecMaxSlots; moe_grouped_tensor_cores here):
//   - per slot (decode, <= 64 slots): the matrix-vector product of matvec.cu with the weight
//     rows chosen per slot: grid.y is the slot, its expert id read on the device. Per call it
//     moves, per slot, its expert's rows * row_bytes; slots that share an expert re-read them.
//   - grouped by expert (prefill, large scheduler batches): moe_group_kernel (one block)
//     counts the slots of each expert, prefix-sums the counts into n_expert + 1 offsets,
//     scatters the slot indices into expert order (shared-memory atomics: the order within
//     an expert is arbitrary, no result depends on it) and lists the work tiles (expert,
//     first sorted slot) of kGroupSlots = 16 slots. Then one launch over (tile x row block)
//     reads the tile's x rows by index (no gathered copy) and writes each result to its
//     slot's row of y, so each expert's weights are read once per 16 of its slots: Qwen3-30B-A3B, T = 512, k = 8 (4096
//     slots, 32 per expert on average): 2 reads of each expert's 0.9 MB of Q4_K gate rows instead of 32. The GEMM is
//       * on tensor cores (moe_grouped_tc_kernel: wmma 16x16x16, FP16 x FP16 -> FP32, the
//         dense prefill GEMM's arithmetic; 64 rows x 16 slots per block) when the tiles are
//         full on average (n_slots >= 16 * n_expert) and the weights are not F32;
//       * else with the per-slot arithmetic (moe_grouped_q_kernel: a warp per row decodes
//         each chunk once for the tile's 16 slots, dp4a with the q8 activations;
//         moe_grouped_f_kernel: FP32 FMA), in the same order as the per-slot kernels, so the
//         two agree bit for bit. Few slots per expert leave this bandwidth-bound anyway, and
//         F32 weights keep true FP32 as the dense F32 GEMM does.
//     Everything (counts, offsets, order, tiles, the tile count) stays on the device in
//     fixed-size buffers sized from n_slots and n_expert (moe_group_bytes): no host round
//     trip, no per-call value in the launch arguments, so the launches can be captured in a
//     CUDA graph like every other. A tile list (at most n_slots / 16 + n_expert + 1 tiles)
//     rather than an expert x slot-tile grid keeps the grid small: sized for the worst case
//     (one expert taking every slot) such a grid would be n_expert times larger, almost all
//     of it blocks with nothing to do.
// Slots whose expert id lies outside [0, n_expert) get NaN rows on every path (visible).
#include <mma.h>  // nvcuda::wmma; in emulated builds kernels/cuda/emu/include/mma.h

#include <algorithm>
#include <type_traits>

#include "kernels/common/moe_route.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

constexpr int kWarps = 4;             // one weight row per warp
constexpr int64_t kMaxGridY = 65535;  // slots per launch (grid.y's limit)

__global__ void __launch_bounds__(128)
    moe_route_kernel(const float* __restrict__ logits, int n_tokens, int n_expert, int k, int gating, bool normalize,
                     float scale, const float* __restrict__ expert_scale, int32_t* __restrict__ ids,
                     float* __restrict__ weights) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tokens) return;
    moe::route_row(logits + static_cast<int64_t>(t) * n_expert, n_expert, k, gating, normalize, scale, expert_scale,
                   ids + static_cast<int64_t>(t) * k, weights + static_cast<int64_t>(t) * k);
}

// This warp's output: row `row` of slot `slot` (grid: x = row groups, y = slots from slot0).
struct SlotRow {
    int lane, row, slot, expert;  // expert -1: no work (past the rows, or a bad id)
    float* out;
};
// An expert id outside [0, n_expert) makes the row NaN (visible) and the warp idle.
__device__ __forceinline__ SlotRow slot_row(const int32_t* ids, int slot0, int rows, int n_expert, float* y) {
    SlotRow s;
    s.lane = threadIdx.x & 31;
    s.row = blockIdx.x * kWarps + (threadIdx.x >> 5);
    s.slot = slot0 + static_cast<int>(blockIdx.y);
    s.expert = -1;
    s.out = y + static_cast<int64_t>(s.slot) * rows + s.row;
    if (s.row >= rows) return s;
    const int e = ids[s.slot];
    if (e >= 0 && e < n_expert) s.expert = e;
    else if (s.lane == 0) *s.out = NAN;
    return s;
}

// Quantized experts: warp per row of the slot's expert; x quantized per row (quantize_q8).
template <int T>
__global__ void __launch_bounds__(128)
    moe_matvec_q_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_expert, int n_chunks,
                        const int8_t* __restrict__ xq, const float2* __restrict__ ds, int x_div,
                        const int32_t* __restrict__ ids, int slot0, float* __restrict__ y,
                        const float* __restrict__ bias) {
    const SlotRow sr = slot_row(ids, slot0, rows, n_expert, y);
    if (sr.expert < 0) return;
    const int lane = sr.lane, row = sr.row, slot = sr.slot, e = sr.expert;
    float* out = sr.out;
    const int64_t xr = slot / x_div, cols = static_cast<int64_t>(n_chunks) * 32;
    const uint8_t* wr = w + (static_cast<size_t>(e) * rows + row) * row_bytes;
    float acc = 0.0f;
    for (int c = lane; c < n_chunks; c += 32) {
        Chunk ch;
        decode_chunk<T>(wr, c, ch);
        const int4* xp = reinterpret_cast<const int4*>(xq + xr * cols + 32 * static_cast<int64_t>(c));
        const int4 a = __ldg(xp), b = __ldg(xp + 1);
        const int xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        const float2 s = __ldg(ds + xr * n_chunks + c);
        acc += dot_decoded<T>(ch, xv, s.x, s.y);
    }
    acc = warp_sum(acc);
    if (lane == 0) *out = acc + (bias ? bias[static_cast<int64_t>(e) * rows + row] : 0.0f);
}

template <int T>
__device__ __forceinline__ float load_float(const uint8_t* row, int i) {
    if constexpr (T == kF32) return reinterpret_cast<const float*>(row)[i];
    else if constexpr (T == kF16) return h2f(reinterpret_cast<const uint16_t*>(row)[i]);
    else return bf2f(reinterpret_cast<const uint16_t*>(row)[i]);
}

// Float experts (F32/F16/BF16): warp per row, FP32 FMA with the F32 activations.
template <int T>
__global__ void __launch_bounds__(128)
    moe_matvec_f_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_expert, int cols,
                        const float* __restrict__ x, int x_div, const int32_t* __restrict__ ids, int slot0,
                        float* __restrict__ y, const float* __restrict__ bias) {
    const SlotRow sr = slot_row(ids, slot0, rows, n_expert, y);
    if (sr.expert < 0) return;
    const int lane = sr.lane, row = sr.row, slot = sr.slot, e = sr.expert;
    float* out = sr.out;
    const float* xr = x + static_cast<int64_t>(slot / x_div) * cols;
    const uint8_t* wr = w + (static_cast<size_t>(e) * rows + row) * row_bytes;
    float acc = 0.0f;
    for (int i = lane; i < cols; i += 32) acc += load_float<T>(wr, i) * __ldg(xr + i);
    acc = warp_sum(acc);
    if (lane == 0) *out = acc + (bias ? bias[static_cast<int64_t>(e) * rows + row] : 0.0f);
}

// ---- grouped by expert --------------------------------------------------------------------
constexpr int kGroupSlots = 16;     // slots per tile: an expert's weights are read once per 16 slots
constexpr int kGroupThreads = 256;  // moe_group_kernel's one block

// An expert id, or n_expert (the group of bad ids) when it lies outside [0, n_expert).
__device__ __forceinline__ int expert_or_bad(int e, int n_expert) { return e >= 0 && e < n_expert ? e : n_expert; }

// The grouping buffer (moe_group_bytes): order[n_slots], offsets[n_expert + 1], the tile
// count, tiles[max_tiles] as (expert, first sorted slot). Group n_expert (after offsets[n_expert])
// holds the slots with a bad id.
struct GroupLayout {
    size_t order = 0, offsets = 0, n_tiles = 0, tiles = 0, total = 0;
    int64_t max_tiles = 0;
};
GroupLayout group_layout(int64_t n_slots, int64_t n_expert) {
    GroupLayout L;
    L.max_tiles = (n_slots + kGroupSlots - 1) / kGroupSlots + std::min(n_expert + 1, n_slots);
    L.offsets = static_cast<size_t>(n_slots) * 4;
    L.n_tiles = L.offsets + static_cast<size_t>(n_expert + 1) * 4;
    L.tiles = (L.n_tiles + 4 + 7) / 8 * 8;
    L.total = L.tiles + static_cast<size_t>(L.max_tiles) * sizeof(int2);
    return L;
}

// One block: a histogram of the ids (shared-memory atomics, n_slots / 256 per thread), the
// offsets and tiles (thread 0, n_expert + 1 steps), then the scatter (an atomic per slot on
// its expert's next position). Within an expert the slots' order thus varies from run to
// run on a GPU; no result depends on it (each (slot, row) is computed from that slot's x
// alone on every path), only which tile a slot lands in.
__global__ void __launch_bounds__(kGroupThreads)
    moe_group_kernel(const int32_t* __restrict__ ids, int n_slots, int n_expert, int32_t* __restrict__ order,
                     int32_t* __restrict__ offsets, int32_t* __restrict__ n_tiles, int2* __restrict__ tiles) {
    extern __shared__ int32_t cnt[];  // n_expert + 1 counters: slots per expert, then next positions
    for (int e = threadIdx.x; e <= n_expert; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int s = threadIdx.x; s < n_slots; s += blockDim.x) atomicAdd(&cnt[expert_or_bad(ids[s], n_expert)], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int at = 0, nt = 0;
        for (int e = 0; e <= n_expert; ++e) {
            const int c = cnt[e];
            cnt[e] = at;
            offsets[e] = at;
            for (int s = at; s < at + c; s += kGroupSlots) tiles[nt++] = make_int2(e, s);
            at += c;
        }
        *n_tiles = nt;
    }
    __syncthreads();
    for (int s = threadIdx.x; s < n_slots; s += blockDim.x)
        order[atomicAdd(&cnt[expert_or_bad(ids[s], n_expert)], 1)] = s;
}

// This warp's share of a grouped launch (grid: x = tiles, y = row blocks from row0): one
// weight row of the tile's expert, the tile's slots (their x rows and y rows).
struct GroupTile {
    int lane, row, expert, ns;  // ns 0: no work (past the tiles or the rows)
    int slot[kGroupSlots];
};
__device__ __forceinline__ GroupTile group_tile(const int32_t* order, const int32_t* offsets, const int32_t* n_tiles,
                                                const int2* tiles, int n_slots, int n_expert, int rows, int row0) {
    GroupTile g;
    g.lane = threadIdx.x & 31;
    g.row = row0 + static_cast<int>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
    g.ns = 0;
    g.expert = 0;
    if (static_cast<int>(blockIdx.x) >= *n_tiles || g.row >= rows) return g;
    const int2 t = tiles[blockIdx.x];
    const int end = t.x < n_expert ? offsets[t.x + 1] : n_slots;
    g.expert = t.x;
    g.ns = min(kGroupSlots, end - t.y);
#pragma unroll
    for (int j = 0; j < kGroupSlots; ++j) g.slot[j] = j < g.ns ? order[t.y + j] : 0;
    return g;
}

// The slots of a bad-id tile get NaN rows, as on the per-slot path.
__device__ __forceinline__ bool bad_tile(const GroupTile& g, int n_expert, int rows, float* y) {
    if (g.expert < n_expert) return false;
    if (g.lane == 0) {
#pragma unroll
        for (int j = 0; j < kGroupSlots; ++j)  // unrolled: slot[] stays in registers
            if (j < g.ns) y[static_cast<int64_t>(g.slot[j]) * rows + g.row] = NAN;
    }
    return true;
}

// Writes warp_sum(acc[j]) (+ bias) to slot j's row: the per-slot kernels' last step.
__device__ __forceinline__ void group_store(const GroupTile& g, float (&acc)[kGroupSlots], int rows, const float* bias,
                                            float* y) {
    const float b = bias ? bias[static_cast<int64_t>(g.expert) * rows + g.row] : 0.0f;
#pragma unroll
    for (int j = 0; j < kGroupSlots; ++j) {
        const float v = warp_sum(acc[j]);
        if (g.lane == 0 && j < g.ns) y[static_cast<int64_t>(g.slot[j]) * rows + g.row] = v + b;
    }
}

// Quantized experts, grouped: each chunk decoded once for the tile's slots, the q8 dot
// product of moe_matvec_q_kernel per slot.
template <int T>
__global__ void __launch_bounds__(128)
    moe_grouped_q_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_expert, int n_chunks,
                         const int8_t* __restrict__ xq, const float2* __restrict__ ds, int x_div,
                         const int32_t* __restrict__ order, const int32_t* __restrict__ offsets,
                         const int32_t* __restrict__ n_tiles, const int2* __restrict__ tiles, int n_slots, int row0,
                         float* __restrict__ y, const float* __restrict__ bias) {
    const GroupTile g = group_tile(order, offsets, n_tiles, tiles, n_slots, n_expert, rows, row0);
    if (g.ns == 0 || bad_tile(g, n_expert, rows, y)) return;  // whole warp
    const int64_t cols = static_cast<int64_t>(n_chunks) * 32;
    const uint8_t* wr = w + (static_cast<size_t>(g.expert) * rows + g.row) * row_bytes;
    int64_t xr[kGroupSlots];
    float acc[kGroupSlots];
#pragma unroll
    for (int j = 0; j < kGroupSlots; ++j) {
        xr[j] = g.slot[j] / x_div;
        acc[j] = 0.0f;
    }
    for (int c = g.lane; c < n_chunks; c += 32) {
        Chunk ch;
        decode_chunk<T>(wr, c, ch);
#pragma unroll
        for (int j = 0; j < kGroupSlots; ++j) {
            if (j < g.ns) {
                const int4* xp = reinterpret_cast<const int4*>(xq + xr[j] * cols + 32 * static_cast<int64_t>(c));
                const int4 a = __ldg(xp), b = __ldg(xp + 1);
                const int xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
                const float2 s = __ldg(ds + xr[j] * n_chunks + c);
                acc[j] += dot_decoded<T>(ch, xv, s.x, s.y);
            }
        }
    }
    group_store(g, acc, rows, bias, y);
}

// Float experts (F32/F16/BF16), grouped: moe_matvec_f_kernel's FP32 FMA per slot.
template <int T>
__global__ void __launch_bounds__(128)
    moe_grouped_f_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_expert, int cols,
                         const float* __restrict__ x, int x_div, const int32_t* __restrict__ order,
                         const int32_t* __restrict__ offsets, const int32_t* __restrict__ n_tiles,
                         const int2* __restrict__ tiles, int n_slots, int row0, float* __restrict__ y,
                         const float* __restrict__ bias) {
    const GroupTile g = group_tile(order, offsets, n_tiles, tiles, n_slots, n_expert, rows, row0);
    if (g.ns == 0 || bad_tile(g, n_expert, rows, y)) return;
    const uint8_t* wr = w + (static_cast<size_t>(g.expert) * rows + g.row) * row_bytes;
    const float* xr[kGroupSlots];
    float acc[kGroupSlots];
#pragma unroll
    for (int j = 0; j < kGroupSlots; ++j) {
        xr[j] = x + static_cast<int64_t>(g.slot[j] / x_div) * cols;
        acc[j] = 0.0f;
    }
    for (int i = g.lane; i < cols; i += 32) {
        const float wv = load_float<T>(wr, i);
#pragma unroll
        for (int j = 0; j < kGroupSlots; ++j)
            if (j < g.ns) acc[j] += wv * __ldg(xr[j] + i);
    }
    group_store(g, acc, rows, bias, y);
}

// ---- grouped by expert, tensor cores ------------------------------------------------------
constexpr int kTcRows = 64;  // weight rows per block: 4 warps x 16
constexpr int kTcK = 64;     // columns per step: two 32-element chunks (past cols: zeros)

// Row chunk c (32 elements) as FP16 into dst: quantized blocks decoded as gemm.cu's
// dequant_f16 does (float, then rounded to FP16), F16 as is, BF16 rounded to FP16.
template <int T>
__device__ __forceinline__ void stage_weight_chunk(const uint8_t* wr, int c, __half* dst) {
    float v[32];
    if constexpr (T == kF16 || T == kBF16) {
        const uint16_t* p = reinterpret_cast<const uint16_t*>(wr) + 32 * c;
#pragma unroll
        for (int i = 0; i < 32; ++i) v[i] = T == kF16 ? h2f(p[i]) : bf2f(p[i]);
    } else {
        dequant_chunk<T>(wr, c, v);
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) dst[i] = __float2half_rn(v[i]);
}

// A tile's 16 slots x 64 rows of the expert as FP16 x FP16 -> FP32 products on tensor cores
// (wmma 16x16x16), the prefill GEMM's arithmetic (cuBLAS FP16 in cuda_backend.cpp): per
// 64-column step, each of the 128 threads decodes one 32-element chunk of a row into shared
// memory and converts 8 of the slots' x values (F32, read by index) to FP16; each warp then
// multiplies its 16 rows by the 16 slots (4 mma). Grid: x = tiles, y = 64-row blocks from
// row0; 128 threads.
template <int T>
__global__ void __launch_bounds__(128)
    moe_grouped_tc_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int rows, int n_expert, int cols,
                          const float* __restrict__ x, int x_div, const int32_t* __restrict__ order,
                          const int32_t* __restrict__ offsets, const int32_t* __restrict__ n_tiles,
                          const int2* __restrict__ tiles, int n_slots, int row0, float* __restrict__ y,
                          const float* __restrict__ bias) {
    namespace wmma = nvcuda::wmma;
    __shared__ __align__(32) __half ws[kTcRows * kTcK];
    __shared__ __align__(32) __half xs[kGroupSlots * kTcK];
    __shared__ __align__(32) float out[kTcRows * kGroupSlots];
    __shared__ int slot_s[kGroupSlots];
    if (static_cast<int>(blockIdx.x) >= *n_tiles) return;  // the whole block
    const int2 t = tiles[blockIdx.x];
    const int end = t.x < n_expert ? offsets[t.x + 1] : n_slots;
    const int ns = min(kGroupSlots, end - t.y), r0 = row0 + static_cast<int>(blockIdx.y) * kTcRows;
    const int tid = threadIdx.x, warp = tid >> 5;
    if (tid < kGroupSlots) slot_s[tid] = tid < ns ? order[t.y + tid] : 0;
    __syncthreads();
    if (t.x >= n_expert) {  // bad ids: NaN rows, as the other paths
        for (int i = tid; i < kTcRows * kGroupSlots; i += blockDim.x) {
            const int r = r0 + i / kGroupSlots, j = i % kGroupSlots;
            if (r < rows && j < ns) y[static_cast<int64_t>(slot_s[j]) * rows + r] = NAN;
        }
        return;
    }
    const uint8_t* we = w + static_cast<size_t>(t.x) * rows * row_bytes;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < cols; k0 += kTcK) {
        __syncthreads();  // the previous step's tiles have been read
        {
            const int r = tid % kTcRows, part = tid / kTcRows, c = k0 / 32 + part;  // 128 = 64 rows x 2 chunks
            __half* dst = ws + r * kTcK + 32 * part;
            if (r0 + r < rows && 32 * c < cols)
                stage_weight_chunk<T>(we + static_cast<size_t>(r0 + r) * row_bytes, c, dst);
            else
                for (int i = 0; i < 32; ++i) dst[i] = __float2half_rn(0.0f);
        }
        for (int i = tid; i < kGroupSlots * kTcK; i += blockDim.x) {
            const int j = i / kTcK, col = k0 + i % kTcK;
            const float v = j < ns && col < cols ? x[static_cast<int64_t>(slot_s[j] / x_div) * cols + col] : 0.0f;
            xs[i] = __float2half_rn(v);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTcK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;  // 16 rows x 16 columns
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;  // 16 columns x 16 slots
            wmma::load_matrix_sync(a, ws + warp * 16 * kTcK + kk, kTcK);
            wmma::load_matrix_sync(b, xs + kk, kTcK);
            wmma::mma_sync(acc, a, b, acc);
        }
    }
    wmma::store_matrix_sync(out + warp * 16 * kGroupSlots, acc, kGroupSlots, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < kTcRows * kGroupSlots; i += blockDim.x) {
        const int r = r0 + i / kGroupSlots, j = i % kGroupSlots;
        if (r < rows && j < ns)
            y[static_cast<int64_t>(slot_s[j]) * rows + r] =
                out[i] + (bias ? bias[static_cast<int64_t>(t.x) * rows + r] : 0.0f);
    }
}

// out[t] = sum_j w[t, j] y[t*k + j], j ascending, explicitly rounded like the CPU's loop.
__global__ void __launch_bounds__(256)
    moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ wts, int64_t n_tokens, int k,
                       int64_t cols, float* __restrict__ out) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n_tokens * cols) return;
    const int64_t t = i / cols, c = i % cols;
    const float* w = wts + t * k;
    const float* yt = y + t * k * cols + c;
    float acc = __fmul_rn(w[0], yt[0]);
    for (int j = 1; j < k; ++j) acc = __fadd_rn(acc, __fmul_rn(w[j], yt[static_cast<int64_t>(j) * cols]));
    out[i] = acc;
}

template <int T>
using TypeTag = std::integral_constant<int, T>;

// Calls fn(TypeTag<type>) for a supported weight type.
template <class F>
void with_type(int type, F&& fn) {
    switch (type) {
        case kQ4_0:
            return fn(TypeTag<kQ4_0>{});
        case kQ4_1:
            return fn(TypeTag<kQ4_1>{});
        case kQ5_0:
            return fn(TypeTag<kQ5_0>{});
        case kQ5_1:
            return fn(TypeTag<kQ5_1>{});
        case kQ8_0:
            return fn(TypeTag<kQ8_0>{});
        case kQ2_K:
            return fn(TypeTag<kQ2_K>{});
        case kQ3_K:
            return fn(TypeTag<kQ3_K>{});
        case kQ4_K:
            return fn(TypeTag<kQ4_K>{});
        case kQ5_K:
            return fn(TypeTag<kQ5_K>{});
        case kQ6_K:
            return fn(TypeTag<kQ6_K>{});
        case kMXFP4:
            return fn(TypeTag<kMXFP4>{});
        case kF32:
            return fn(TypeTag<kF32>{});
        case kF16:
            return fn(TypeTag<kF16>{});
        case kBF16:
            return fn(TypeTag<kBF16>{});
        default:
            return;  // the backend checks types before calling
    }
}

}  // namespace

void moe_route(const float* logits, int64_t n_tokens, int n_expert, int k, int gating, bool normalize, float scale,
               const float* expert_scale, int32_t* ids, float* weights, cudaStream_t stream) {
    if (n_tokens == 0) return;
    moe_route_kernel<<<blocks_for(n_tokens, 128), 128, 0, stream>>>(
        logits, static_cast<int>(n_tokens), n_expert, k, gating, normalize, scale, expert_scale, ids, weights);
    EMBER_CUDA_CHECK_LAUNCH("moe_route_kernel");
}

void moe_matvec_quant(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                      const int8_t* xq, const float2* ds, int x_div, const int32_t* ids, int64_t n_slots, float* y,
                      const float* bias, cudaStream_t stream) {
    for (int64_t s0 = 0; s0 < n_slots; s0 += kMaxGridY) {
        const dim3 grid(blocks_for(rows, kWarps), static_cast<unsigned>(std::min(kMaxGridY, n_slots - s0)));
        with_type(type, [&](auto tag) {
            constexpr int T = decltype(tag)::value;
            if constexpr (T != kF32 && T != kF16 && T != kBF16) {
                moe_matvec_q_kernel<T><<<grid, 128, 0, stream>>>(
                    static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows), static_cast<int>(n_expert),
                    static_cast<int>(cols / 32), xq, ds, x_div, ids, static_cast<int>(s0), y, bias);
                EMBER_CUDA_CHECK_LAUNCH("moe_matvec_q_kernel");
            }
        });
    }
}

void moe_matvec_float(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                      const float* x, int x_div, const int32_t* ids, int64_t n_slots, float* y, const float* bias,
                      cudaStream_t stream) {
    for (int64_t s0 = 0; s0 < n_slots; s0 += kMaxGridY) {
        const dim3 grid(blocks_for(rows, kWarps), static_cast<unsigned>(std::min(kMaxGridY, n_slots - s0)));
        with_type(type, [&](auto tag) {
            constexpr int T = decltype(tag)::value;
            if constexpr (T == kF32 || T == kF16 || T == kBF16) {
                moe_matvec_f_kernel<T><<<grid, 128, 0, stream>>>(
                    static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows), static_cast<int>(n_expert),
                    static_cast<int>(cols), x, x_div, ids, static_cast<int>(s0), y, bias);
                EMBER_CUDA_CHECK_LAUNCH("moe_matvec_f_kernel");
            }
        });
    }
}

size_t moe_group_bytes(int64_t n_slots, int64_t n_expert) { return group_layout(n_slots, n_expert).total; }

namespace {

// Pointers into the grouping buffer; launches moe_group_kernel to fill it.
struct Groups {
    const int32_t *order, *offsets, *n_tiles;
    const int2* tiles;
    int64_t max_tiles;
};
Groups group_slots(const int32_t* ids, int64_t n_slots, int64_t n_expert, void* buf, cudaStream_t stream) {
    const GroupLayout L = group_layout(n_slots, n_expert);
    auto* base = static_cast<uint8_t*>(buf);
    auto* order = reinterpret_cast<int32_t*>(base + L.order);
    auto* offsets = reinterpret_cast<int32_t*>(base + L.offsets);
    auto* n_tiles = reinterpret_cast<int32_t*>(base + L.n_tiles);
    auto* tiles = reinterpret_cast<int2*>(base + L.tiles);
    const size_t smem = static_cast<size_t>(n_expert + 1) * sizeof(int32_t);
    moe_group_kernel<<<1, kGroupThreads, smem, stream>>>(ids, static_cast<int>(n_slots), static_cast<int>(n_expert),
                                                         order, offsets, n_tiles, tiles);
    EMBER_CUDA_CHECK_LAUNCH("moe_group_kernel");
    return {order, offsets, n_tiles, tiles, L.max_tiles};
}

// Calls fn(grid, row0) per chunk of grid.y's row blocks.
template <class F>
void for_row_blocks(int64_t rows, int64_t max_tiles, F&& fn) {
    const int64_t blocks = blocks_for(rows, kWarps);
    for (int64_t b0 = 0; b0 < blocks; b0 += kMaxGridY)
        fn(dim3(static_cast<unsigned>(max_tiles), static_cast<unsigned>(std::min(kMaxGridY, blocks - b0))),
           static_cast<int>(b0 * kWarps));
}

}  // namespace

void moe_grouped_quant(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                       const int8_t* xq, const float2* ds, int x_div, const int32_t* ids, int64_t n_slots, float* y,
                       const float* bias, void* groups, cudaStream_t stream) {
    if (n_slots == 0 || rows == 0) return;
    const Groups g = group_slots(ids, n_slots, n_expert, groups, stream);
    with_type(type, [&](auto tag) {
        constexpr int T = decltype(tag)::value;
        if constexpr (T != kF32 && T != kF16 && T != kBF16) {
            for_row_blocks(rows, g.max_tiles, [&](dim3 grid, int row0) {
                moe_grouped_q_kernel<T><<<grid, 128, 0, stream>>>(
                    static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows), static_cast<int>(n_expert),
                    static_cast<int>(cols / 32), xq, ds, x_div, g.order, g.offsets, g.n_tiles, g.tiles,
                    static_cast<int>(n_slots), row0, y, bias);
                EMBER_CUDA_CHECK_LAUNCH("moe_grouped_q_kernel");
            });
        }
    });
}

bool moe_grouped_tensor_cores(int type, int64_t cols, int64_t n_slots, int64_t n_expert) {
    return type != kF32 && cols % 32 == 0 && n_slots >= kGroupSlots * n_expert;
}

void moe_grouped_tc(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                    const float* x, int x_div, const int32_t* ids, int64_t n_slots, float* y, const float* bias,
                    void* groups, cudaStream_t stream) {
    if (n_slots == 0 || rows == 0) return;
    const Groups g = group_slots(ids, n_slots, n_expert, groups, stream);
    const int64_t blocks = (rows + kTcRows - 1) / kTcRows;
    with_type(type, [&](auto tag) {
        constexpr int T = decltype(tag)::value;
        if constexpr (T != kF32) {
            for (int64_t b0 = 0; b0 < blocks; b0 += kMaxGridY) {
                const dim3 grid(static_cast<unsigned>(g.max_tiles),
                                static_cast<unsigned>(std::min(kMaxGridY, blocks - b0)));
                moe_grouped_tc_kernel<T><<<grid, 128, 0, stream>>>(
                    static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows), static_cast<int>(n_expert),
                    static_cast<int>(cols), x, x_div, g.order, g.offsets, g.n_tiles, g.tiles, static_cast<int>(n_slots),
                    static_cast<int>(b0 * kTcRows), y, bias);
                EMBER_CUDA_CHECK_LAUNCH("moe_grouped_tc_kernel");
            }
        }
    });
}

void moe_grouped_float(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                       const float* x, int x_div, const int32_t* ids, int64_t n_slots, float* y, const float* bias,
                       void* groups, cudaStream_t stream) {
    if (n_slots == 0 || rows == 0) return;
    const Groups g = group_slots(ids, n_slots, n_expert, groups, stream);
    with_type(type, [&](auto tag) {
        constexpr int T = decltype(tag)::value;
        if constexpr (T == kF32 || T == kF16 || T == kBF16) {
            for_row_blocks(rows, g.max_tiles, [&](dim3 grid, int row0) {
                moe_grouped_f_kernel<T>
                    <<<grid, 128, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes, static_cast<int>(rows),
                                               static_cast<int>(n_expert), static_cast<int>(cols), x, x_div, g.order,
                                               g.offsets, g.n_tiles, g.tiles, static_cast<int>(n_slots), row0, y, bias);
                EMBER_CUDA_CHECK_LAUNCH("moe_grouped_f_kernel");
            });
        }
    });
}

void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t cols, float* out,
                 cudaStream_t stream) {
    const int64_t n = n_tokens * cols;
    if (n == 0) return;
    moe_combine_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(y, weights, n_tokens, k, cols, out);
    EMBER_CUDA_CHECK_LAUNCH("moe_combine_kernel");
}

}  // namespace ember::cuda
