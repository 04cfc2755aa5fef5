// The C ABI between the program and the separately loaded CUDA module (libember_cuda.so).
//
// Why a module: a binary linked to libcudart/libcublas does not even start where the NVIDIA
// driver or cuBLAS is missing. So everything CUDA lives in a MODULE library that the loader
// (kernels/backend_loader.cpp) dlopen()s; on any failure the program falls back to the CPU.
//
// Rules of this interface:
//  - Only these extern "C" functions are exported (the module is built with hidden
//    visibility). Their names and signatures never change within an ABI version; bump
//    kEmberCudaAbiVersion on ANY change to them, to EmberCudaDeviceInfo, or to the
//    ember::Backend class (the backend object crosses the boundary as a C++ object).
//  - No exception ever crosses the boundary: failures return 0 / nullptr and write a
//    human-readable reason into `why` (always NUL-terminated, truncated to why_len).
//  - The module is never dlclose()d once a function other than ember_cuda_abi_version has
//    been called: backends created by it keep pointers to its code.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
namespace ember {
class Backend;
}
typedef ember::Backend EmberBackend;
extern "C" {
#else
typedef struct EmberBackend EmberBackend;
#endif

#define EMBER_CUDA_ABI_VERSION 3  // 2: Backend::top_k, set_graphs, graph_stats; 3: checked ops (do_*)

struct EmberCudaDeviceInfo {
    char name[256];              // "NVIDIA H200"
    uint64_t total_memory;       // bytes
    uint64_t free_memory;        // bytes, at the time of the call
    int32_t cc_major, cc_minor;  // compute capability
    int32_t multiprocessors;
    int32_t reserved[13];
};

#if defined(EMBER_CUDA_MODULE_BUILD)
#define EMBER_CUDA_EXPORT __attribute__((visibility("default")))
#else
#define EMBER_CUDA_EXPORT
#endif

// EMBER_CUDA_ABI_VERSION of the module.
EMBER_CUDA_EXPORT int ember_cuda_abi_version(void);

// Number of usable CUDA devices; 0 with a reason (no driver: cudaErrorInsufficientDriver,
// no device: cudaErrorNoDevice, ...).
EMBER_CUDA_EXPORT int ember_cuda_device_count(char* why, size_t why_len);

// Fills *out for `device`; 1 on success, 0 with a reason.
EMBER_CUDA_EXPORT int ember_cuda_device_info(int device, struct EmberCudaDeviceInfo* out, char* why, size_t why_len);

// A new backend on `device` (owned by the caller: destroy with ember_cuda_destroy_backend or
// `delete`, both run the module's virtual destructor); nullptr with a reason on failure.
EMBER_CUDA_EXPORT EmberBackend* ember_cuda_create_backend(int device, char* why, size_t why_len);
EMBER_CUDA_EXPORT void ember_cuda_destroy_backend(EmberBackend* backend);

// ---- measurements for ember-gpu-check (no backend needed) ---------------------------------
// Device-to-device cudaMemcpy of `bytes`, median of `iters` timed copies after warm-up;
// *gbps counts bytes read + bytes written. 1 on success.
EMBER_CUDA_EXPORT int ember_cuda_bench_copy(int device, uint64_t bytes, int iters, double* gbps, char* why,
                                            size_t why_len);
// cublasGemmEx, FP16 inputs, FP32 accumulate and output, C[m x n] = A[m x k] * B[k x n] on
// random data; median of `iters` after warm-up; *seconds per GEMM. 1 on success.
EMBER_CUDA_EXPORT int ember_cuda_bench_gemm_f16(int device, int m, int n, int k, int iters, double* seconds, char* why,
                                                size_t why_len);

#ifdef __cplusplus
}  // extern "C"
#endif
