// Element-wise ops and row gathers. All memory-bound: bytes per element noted per kernel.
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

// out = act(gate) * up; 8 bytes read + 4 written per element. out may alias gate.
// SiLU(g) = g / (1 + e^-g); GELU(tanh) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)));
// gpt-oss (act 2, ggml_swiglu_oai): x = min(g, 7), y = clamp(u, -7, 7), x / (1 + e^(-1.702 x)) (y + 1).
__device__ __forceinline__ float glu_value(float g, float u, int act) {
    if (act == 2) {
        constexpr float kAlpha = 1.702f, kLimit = 7.0f;
        const float x = fminf(g, kLimit), y = fminf(kLimit, fmaxf(-kLimit, u));
        return x / (1.0f + expf(-kAlpha * x)) * (y + 1.0f);
    }
    if (act == 3) return u / (1.0f + expf(-g));  // sigmoid(g) * u: qwen35's attention gate
    if (act == 1) {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
    }
    return g / (1.0f + expf(-g)) * u;
}

// Q8: out also quantized for the next matvec (quantize_q8's bits, +1.125 bytes per element);
// n % 32 == 0, so each warp holds whole 32-element chunks or leaves as one.
template <bool Q8>
__global__ void glu_kernel(const float* gate, const float* __restrict__ up, float* out, int64_t n, int act, int8_t* xq,
                           float2* ds) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = glu_value(gate[i], up[i], act);
    out[i] = v;
    if constexpr (Q8) quantize_chunk_q8(v, xq + (i & ~int64_t{31}), ds + i / 32);
}

// The same on row views (gate and up of a fused gate+up result: rows gate_ld / up_ld floats
// apart); out contiguous.
__global__ void glu_rows_kernel(const float* gate, int64_t gate_ld, const float* __restrict__ up, int64_t up_ld,
                                float* out, int64_t rows, int64_t cols, int act) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const int64_t r = i / cols, c = i % cols;
    out[i] = glu_value(gate[r * gate_ld + c], up[r * up_ld + c], act);
}

// x += y; 8 bytes read + 4 written per element.
__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

// x *= s; 4 bytes read + 4 written per element.
__global__ void scale_kernel(float* __restrict__ x, float s, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

// x = cap * tanh(x * (1 / cap)): the final logits of gemma models, 4 + 4 bytes per element.
__global__ void softcap_kernel(float* __restrict__ x, float cap, float inv_cap, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] * inv_cap);
}

// out[i] = x[rows[i]]: one block per output row, 4 bytes in + 4 out per element.
__global__ void gather_rows_kernel(const float* __restrict__ x, int64_t cols, const int32_t* __restrict__ rows,
                                   float* __restrict__ out) {
    const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * cols;
    float* dst = out + static_cast<int64_t>(blockIdx.x) * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
}

// Embedding rows of block types: one thread per 32-element chunk of one token's row
// (grid.y = token); reads one row of the table per token, writes cols * 4 bytes.
template <int T>
__global__ void embed_q_kernel(const uint8_t* __restrict__ table, size_t row_bytes, int64_t rows, int chunks,
                               const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= chunks) return;
    const int t = blockIdx.y;
    float v[32];
    if constexpr (is_tiled_type(T)) dequant_tiled_chunk<T>(tiled_row(table, row_bytes, rows, ids[t], chunks), c, v);
    else dequant_chunk<T>(table + static_cast<size_t>(ids[t]) * row_bytes, c, v);
    float4* o = reinterpret_cast<float4*>(out + (static_cast<int64_t>(t) * chunks + c) * 32);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        o[q] = scale == 1.0f
                   ? make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3])
                   : make_float4(v[4 * q] * scale, v[4 * q + 1] * scale, v[4 * q + 2] * scale, v[4 * q + 3] * scale);
    }
}

// Float tables: one thread per element.
template <int T>
__global__ void embed_f_kernel(const uint8_t* __restrict__ table, size_t row_bytes, int cols,
                               const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const int t = blockIdx.y;
    const uint8_t* row = table + static_cast<size_t>(ids[t]) * row_bytes;
    float v;
    if constexpr (T == kF32) v = reinterpret_cast<const float*>(row)[c];
    else if constexpr (T == kF16) v = h2f(reinterpret_cast<const uint16_t*>(row)[c]);
    else v = bf2f(reinterpret_cast<const uint16_t*>(row)[c]);
    out[static_cast<int64_t>(t) * cols + c] = scale == 1.0f ? v : v * scale;
}

template <int T>
void launch_embed_q(const void* table, size_t row_bytes, int64_t rows, int64_t cols, const int32_t* ids, int64_t n,
                    float scale, float* out, cudaStream_t stream) {
    const int chunks = static_cast<int>(cols / 32);
    const dim3 grid(blocks_for(chunks, 128), static_cast<unsigned>(n));
    embed_q_kernel<T>
        <<<grid, 128, 0, stream>>>(static_cast<const uint8_t*>(table), row_bytes, rows, chunks, ids, scale, out);
    EMBER_CUDA_CHECK_LAUNCH("embed_q_kernel");
}

template <int T>
void launch_embed_f(const void* table, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float scale,
                    float* out, cudaStream_t stream) {
    const dim3 grid(blocks_for(cols, 256), static_cast<unsigned>(n));
    embed_f_kernel<T><<<grid, 256, 0, stream>>>(static_cast<const uint8_t*>(table), row_bytes, static_cast<int>(cols),
                                                ids, scale, out);
    EMBER_CUDA_CHECK_LAUNCH("embed_f_kernel");
}

// dst (rows x cols, rows dst_ld floats apart) = src's rows, src_ld floats apart.
__global__ void copy_rows_kernel(const float* __restrict__ src, int64_t src_ld, float* __restrict__ dst, int64_t dst_ld,
                                 int64_t rows, int64_t cols) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    dst[i / cols * dst_ld + i % cols] = src[i / cols * src_ld + i % cols];
}

// x[r][c] *= sigmoid(s[r]): 8 bytes moved per element (s read once per row from cache).
__global__ void sigmoid_scale_rows_kernel(float* x, const float* __restrict__ s, int64_t rows, int64_t cols) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    x[i] *= 1.0f / (1.0f + expf(-s[i / cols]));
}

}  // namespace

void sigmoid_scale_rows(float* x, const float* s, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows * cols == 0) return;
    sigmoid_scale_rows_kernel<<<blocks_for(rows * cols, 256), 256, 0, stream>>>(x, s, rows, cols);
    EMBER_CUDA_CHECK_LAUNCH("sigmoid_scale_rows_kernel");
}

void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows, int64_t cols,
               cudaStream_t stream) {
    if (rows * cols == 0) return;
    copy_rows_kernel<<<blocks_for(rows * cols, 256), 256, 0, stream>>>(src, src_ld, dst, dst_ld, rows, cols);
    EMBER_CUDA_CHECK_LAUNCH("copy_rows_kernel");
}

void glu(const float* gate, const float* up, float* out, int64_t n, int act, int8_t* xq, float2* ds,
         cudaStream_t stream) {
    if (n == 0) return;
    if (xq) glu_kernel<true><<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, out, n, act, xq, ds);
    else glu_kernel<false><<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, out, n, act, xq, ds);
    EMBER_CUDA_CHECK_LAUNCH("glu_kernel");
}

void glu_rows(const float* gate, int64_t gate_ld, const float* up, int64_t up_ld, float* out, int64_t rows,
              int64_t cols, int act, cudaStream_t stream) {
    if (rows * cols == 0) return;
    glu_rows_kernel<<<blocks_for(rows * cols, 256), 256, 0, stream>>>(gate, gate_ld, up, up_ld, out, rows, cols, act);
    EMBER_CUDA_CHECK_LAUNCH("glu_rows_kernel");
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    add_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, y, n);
    EMBER_CUDA_CHECK_LAUNCH("add_kernel");
}

void scale(float* x, float s, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    scale_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, s, n);
    EMBER_CUDA_CHECK_LAUNCH("scale_kernel");
}

void softcap(float* x, float cap, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    softcap_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, cap, 1.0f / cap, n);
    EMBER_CUDA_CHECK_LAUNCH("softcap_kernel");
}

void gather_rows(const float* x, int64_t cols, const int32_t* rows, int64_t n, float* out, cudaStream_t stream) {
    if (n == 0) return;
    gather_rows_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(x, cols, rows, out);
    EMBER_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

void embed(int type, const void* table, size_t row_bytes, int64_t rows, int64_t cols, const int32_t* ids, int64_t n,
           float scale, float* out, cudaStream_t stream) {
    if (n == 0) return;
    switch (type) {
        case kF32:
            return launch_embed_f<kF32>(table, row_bytes, cols, ids, n, scale, out, stream);
        case kF16:
            return launch_embed_f<kF16>(table, row_bytes, cols, ids, n, scale, out, stream);
        case kBF16:
            return launch_embed_f<kBF16>(table, row_bytes, cols, ids, n, scale, out, stream);
        case kQ4_0:
            return launch_embed_q<kQ4_0>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ4_1:
            return launch_embed_q<kQ4_1>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ5_0:
            return launch_embed_q<kQ5_0>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ5_1:
            return launch_embed_q<kQ5_1>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ8_0:
            return launch_embed_q<kQ8_0>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ4_0R:
            return launch_embed_q<kQ4_0R>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ5_0R:
            return launch_embed_q<kQ5_0R>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ8_0R:
            return launch_embed_q<kQ8_0R>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ4_KR:
            return launch_embed_q<kQ4_KR>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ6_KR:
            return launch_embed_q<kQ6_KR>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ2_K:
            return launch_embed_q<kQ2_K>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ3_K:
            return launch_embed_q<kQ3_K>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ4_K:
            return launch_embed_q<kQ4_K>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ5_K:
            return launch_embed_q<kQ5_K>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kQ6_K:
            return launch_embed_q<kQ6_K>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        case kMXFP4:
            return launch_embed_q<kMXFP4>(table, row_bytes, rows, cols, ids, n, scale, out, stream);
        default:
            return;
    }
}

}  // namespace ember::cuda
