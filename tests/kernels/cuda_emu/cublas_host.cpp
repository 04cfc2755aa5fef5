// A host stand-in for the cuBLAS calls of kernels/cuda (cuda_backend.cpp, bench.cu), linked
// only into the emulated CUDA tests: NVIDIA's signatures (cublas_v2.h), host float math.
// cublasGemmEx with FP16/BF16/F32 inputs, FP32 compute and output is what the prefill path
// asks for: each product is formed in float (exact for FP16 inputs) and summed in float, in
// order; real cuBLAS sums in another order, so the GEMM tests' tolerances do not depend on
// it. Matrices are checked to lie inside device allocations (a wrong leading dimension or
// tile offset in the backend is reported, not read past).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/cuda/emu/emu.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
};

namespace {

size_t elem_bytes(cudaDataType t) {
    switch (t) {
        case CUDA_R_32F:
            return 4;
        case CUDA_R_16F:
            return 2;
        case CUDA_R_16BF:
            return 2;
        default:
            return 0;
    }
}

float load(const void* p, cudaDataType t, size_t i) {
    switch (t) {
        case CUDA_R_32F:
            return static_cast<const float*>(p)[i];
        case CUDA_R_16F:
            return __half2float(static_cast<const __half*>(p)[i]);
        default:
            return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    }
}

// op(M) (rows x cols, column-major storage with leading dimension ld) into a dense
// row-major float matrix.
std::vector<float> dense(const void* m, cudaDataType t, cublasOperation_t op, int rows, int cols, int ld) {
    std::vector<float> d(static_cast<size_t>(rows) * static_cast<size_t>(cols));
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j)
            d[static_cast<size_t>(i) * cols + j] =
                load(m, t,
                     op == CUBLAS_OP_N ? static_cast<size_t>(i) + static_cast<size_t>(j) * ld
                                       : static_cast<size_t>(j) + static_cast<size_t>(i) * ld);
    return d;
}

// Bytes a column-major operand spans: ld * (stored columns - 1) + stored rows elements.
bool operand_ok(const void* p, cudaDataType t, cublasOperation_t op, int rows, int cols, int ld, const char* what) {
    const int stored_rows = op == CUBLAS_OP_N ? rows : cols, stored_cols = op == CUBLAS_OP_N ? cols : rows;
    if (ld < stored_rows) {
        std::fprintf(stderr, "cuBLAS stand-in: %s: ld %d < %d rows\n", what, ld, stored_rows);
        return false;
    }
    const size_t span =
        (static_cast<size_t>(ld) * static_cast<size_t>(stored_cols - 1) + static_cast<size_t>(stored_rows)) *
        elem_bytes(t);
    if (!ember::emu::is_device_range(p, span)) {
        std::fprintf(stderr, "cuBLAS stand-in: %s (%zu bytes from %p) is not inside one device allocation\n", what,
                     span, p);
        return false;
    }
    return true;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* h) {
    *h = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS:
            return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "CUBLAS_STATUS_NOT_SUPPORTED";
        default:
            return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}
const char* cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS:
            return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "the library was not initialized";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "the functionality requested is not supported (host stand-in)";
        default:
            return "an internal operation failed";
    }
}

// C (m x n) = alpha op(A) (m x k) op(B) (k x n) + beta C, column-major.
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType at, int lda, const void* B, cudaDataType bt,
                            int ldb, const void* beta, void* C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (compute != CUBLAS_COMPUTE_32F || ct != CUDA_R_32F || !elem_bytes(at) || !elem_bytes(bt) ||
        (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if ((k > 0 && (!operand_ok(A, at, ta, m, k, lda, "A") || !operand_ok(B, bt, tb, k, n, ldb, "B"))) ||
        !operand_ok(C, ct, CUBLAS_OP_N, m, n, ldc, "C"))
        return CUBLAS_STATUS_INVALID_VALUE;
    const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
    const std::vector<float> Ad = dense(A, at, ta, m, k, lda);                                             // m x k
    const std::vector<float> Bt = dense(B, bt, tb == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N, n, k, ldb);  // n x k
    float* c = static_cast<float*>(C);
    for (int j = 0; j < n; ++j) {
        const float* bj = Bt.data() + static_cast<size_t>(j) * k;
        for (int i = 0; i < m; ++i) {
            const float* ai = Ad.data() + static_cast<size_t>(i) * k;
            float s = 0.0f;
            for (int l = 0; l < k; ++l) s += ai[l] * bj[l];
            float& out = c[static_cast<size_t>(i) + static_cast<size_t>(j) * ldc];
            out = b == 0.0f ? a * s : a * s + b * out;  // beta 0: C is not read (may be garbage)
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
