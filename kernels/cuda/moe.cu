// Mixture-of-experts kernels (Backend::moe_route, moe_matmul, moe_combine; shapes in
// kernels/backend.h).
//
// moe_matmul here is the decode matrix-vector product of matvec.cu with the weight rows
// chosen per slot: grid.y is the slot, its expert id read on the device, so that a decode
// step (CUDA graphs) never waits for the host. Per call it moves, per slot, its expert's
// rows * row_bytes; slots that share an expert re-read the same bytes, which L2 serves while
// they fit (qwen3moe: one expert's gate rows are 768 x 1152 B = 0.9 MB in Q4_K). Grouping
// the slots by expert on the device (a sort of the ids, then the GEMM path per group) is what
// a long prefill needs; not done yet: this is the reference-grade path the emulator checks.
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

void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t cols, float* out,
                 cudaStream_t stream) {
    const int64_t n = n_tokens * cols;
    if (n == 0) return;
    moe_combine_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(y, weights, n_tokens, k, cols, out);
    EMBER_CUDA_CHECK_LAUNCH("moe_combine_kernel");
}

}  // namespace ember::cuda
