// Conversions that feed the prefill GEMM (cuBLAS FP16 x FP16 -> FP32, in cuda_backend.cpp).
//
// Prefill multiplies many tokens by each weight matrix, so it is compute-bound: for n tokens
// a rows x cols matrix costs 2*n*rows*cols FLOPs against rows*row_bytes bytes. Quantized
// weights are dequantized, a tile of rows at a time, into an FP16 scratch buffer and handed
// to cublasGemmEx with FP32 accumulation; the tile is written and read once more
// (rows*cols*2 bytes each way), small next to the GEMM for n >= 64: e.g. Llama-3-8B ffn_up,
// n = 2048: 240 GFLOP (~0.35 ms at ~700 TFLOP/s) vs 33 MB read + 2 x 117 MB tile traffic
// (~0.06 ms at 4.3 TB/s).
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

// One thread per 32-element chunk: reads row_bytes/chunks bytes, writes 64 bytes of FP16.
template <int T>
__global__ void __launch_bounds__(256) dequant_f16_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows,
                                                          int chunks_per_row, __half* __restrict__ out) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * chunks_per_row) return;
    const int64_t r = i / chunks_per_row;
    const int c = static_cast<int>(i % chunks_per_row);
    float v[32];
    if constexpr (is_tiled_type(T)) dequant_tiled_chunk<T>(tiled_row(w, row_bytes, rows, r, chunks_per_row), c, v);
    else dequant_chunk<T>(w + static_cast<size_t>(r) * row_bytes, c, v);
    // out row r starts at r * cols halves = r * chunks_per_row * 64 bytes: 64-byte aligned.
    uint4* o = reinterpret_cast<uint4*>(out + i * 32);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        uint32_t h[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const __half2 p = __floats2half2_rn(v[8 * q + 2 * j], v[8 * q + 2 * j + 1]);
            memcpy(&h[j], &p, 4);  // not a pointer cast: well-defined host C++ too (the emulator)
        }
        o[q] = make_uint4(h[0], h[1], h[2], h[3]);
    }
}

// BF16 weights -> FP16, one element per thread (2 bytes in, 2 out).
__global__ void bf16_to_f16_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, int64_t cols,
                                   __half* __restrict__ out) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const int64_t r = i / cols, c = i % cols;
    out[i] = __float2half_rn(bf2f(reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(r) * row_bytes)[c]));
}

// F32 activations -> FP16 (4 bytes in, 2 out per element). Values beyond +-65504 become inf:
// activations entering a matmul are normalized or products of normalized values, but
// gemma-style models with large FFN activations would need BF16 here (left as a note).
__global__ void f32_to_f16_kernel(const float* __restrict__ x, int64_t n, __half* __restrict__ out) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half_rn(x[i]);
}

// y[t][r] += bias[r]: 8 bytes read + 4 written per element.
__global__ void add_bias_kernel(float* __restrict__ y, int64_t total, int64_t cols, const float* __restrict__ bias) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < total) y[i] += bias[i % cols];
}

template <int T>
void launch_dequant(const void* w, size_t row_bytes, int64_t rows, int64_t cols, __half* out, cudaStream_t stream) {
    const int64_t total = rows * (cols / 32);
    dequant_f16_kernel<T><<<blocks_for(total, 256), 256, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes, rows,
                                                                      static_cast<int>(cols / 32), out);
    EMBER_CUDA_CHECK_LAUNCH("dequant_f16_kernel");
}

}  // namespace

void dequant_f16(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, __half* out,
                 cudaStream_t stream) {
    if (rows * cols == 0) return;
    switch (type) {
        case kQ4_0:
            return launch_dequant<kQ4_0>(w, row_bytes, rows, cols, out, stream);
        case kQ4_1:
            return launch_dequant<kQ4_1>(w, row_bytes, rows, cols, out, stream);
        case kQ5_0:
            return launch_dequant<kQ5_0>(w, row_bytes, rows, cols, out, stream);
        case kQ5_1:
            return launch_dequant<kQ5_1>(w, row_bytes, rows, cols, out, stream);
        case kQ8_0:
            return launch_dequant<kQ8_0>(w, row_bytes, rows, cols, out, stream);
        case kQ4_0R:
            return launch_dequant<kQ4_0R>(w, row_bytes, rows, cols, out, stream);
        case kQ5_0R:
            return launch_dequant<kQ5_0R>(w, row_bytes, rows, cols, out, stream);
        case kQ8_0R:
            return launch_dequant<kQ8_0R>(w, row_bytes, rows, cols, out, stream);
        case kQ4_KR:
            return launch_dequant<kQ4_KR>(w, row_bytes, rows, cols, out, stream);
        case kQ6_KR:
            return launch_dequant<kQ6_KR>(w, row_bytes, rows, cols, out, stream);
        case kQ2_K:
            return launch_dequant<kQ2_K>(w, row_bytes, rows, cols, out, stream);
        case kQ3_K:
            return launch_dequant<kQ3_K>(w, row_bytes, rows, cols, out, stream);
        case kQ4_K:
            return launch_dequant<kQ4_K>(w, row_bytes, rows, cols, out, stream);
        case kQ5_K:
            return launch_dequant<kQ5_K>(w, row_bytes, rows, cols, out, stream);
        case kQ6_K:
            return launch_dequant<kQ6_K>(w, row_bytes, rows, cols, out, stream);
        case kMXFP4:
            return launch_dequant<kMXFP4>(w, row_bytes, rows, cols, out, stream);
        case kBF16:
            bf16_to_f16_kernel<<<blocks_for(rows * cols, 256), 256, 0, stream>>>(static_cast<const uint8_t*>(w),
                                                                                 row_bytes, rows, cols, out);
            EMBER_CUDA_CHECK_LAUNCH("bf16_to_f16_kernel");
            return;
        default:
            return;  // F16 is used in place, F32 goes through an FP32 GEMM (backend)
    }
}

void f32_to_f16(const float* x, int64_t n, __half* out, cudaStream_t stream) {
    if (n == 0) return;
    f32_to_f16_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, n, out);
    EMBER_CUDA_CHECK_LAUNCH("f32_to_f16_kernel");
}

void add_bias(float* y, int64_t n, int64_t cols, const float* bias, cudaStream_t stream) {
    if (n * cols == 0) return;
    add_bias_kernel<<<blocks_for(n * cols, 256), 256, 0, stream>>>(y, n * cols, cols, bias);
    EMBER_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

}  // namespace ember::cuda
