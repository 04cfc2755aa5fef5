// Every CUDA runtime and cuBLAS call is checked; a failure becomes ember::Error naming the
// call, where it was made and the library's own message. Kernel launches are followed by
// EMBER_CUDA_CHECK_LAUNCH() (cudaGetLastError: bad configuration, missing kernel image).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ember::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line);

}  // namespace ember::cuda

#define EMBER_CUDA_CHECK(call)                                                                             \
    do {                                                                                                   \
        const cudaError_t ember_e_ = (call);                                                               \
        if (ember_e_ != cudaSuccess) ::ember::cuda::throw_cuda_error(ember_e_, #call, __FILE__, __LINE__); \
    } while (0)

#define EMBER_CUBLAS_CHECK(call)                                                                                       \
    do {                                                                                                               \
        const cublasStatus_t ember_s_ = (call);                                                                        \
        if (ember_s_ != CUBLAS_STATUS_SUCCESS) ::ember::cuda::throw_cublas_error(ember_s_, #call, __FILE__, __LINE__); \
    } while (0)

#define EMBER_CUDA_CHECK_LAUNCH(kernel_name)                                                         \
    do {                                                                                             \
        const cudaError_t ember_e_ = cudaGetLastError();                                             \
        if (ember_e_ != cudaSuccess)                                                                 \
            ::ember::cuda::throw_cuda_error(ember_e_, "launch of " kernel_name, __FILE__, __LINE__); \
    } while (0)
