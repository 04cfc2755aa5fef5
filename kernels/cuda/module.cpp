// The module's C ABI (cuda_module.h): device discovery, backend creation and the ceiling
// measurements, each turning every failure into a reason string (no exception crosses).
#define EMBER_CUDA_MODULE_BUILD 1
#include "kernels/cuda/cuda_module.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "kernels/cuda/bench.h"
#include "kernels/cuda/cuda_backend.h"

#ifndef EMBER_CUDA_ARCHS
#define EMBER_CUDA_ARCHS "unknown"
#endif

namespace {

void set_why(char* why, size_t len, const std::string& s) {
    if (!why || len == 0) return;
    const size_t n = std::min(len - 1, s.size());
    std::memcpy(why, s.data(), n);
    why[n] = '\0';
}

std::string describe(cudaError_t e, const char* call) {
    switch (e) {
        case cudaErrorInsufficientDriver:
            return "no NVIDIA driver, or one older than this CUDA 13 build needs (cudaErrorInsufficientDriver)";
        case cudaErrorNoDevice:
            return "no CUDA-capable device (cudaErrorNoDevice)";
        case cudaErrorStubLibrary:
            return "the CUDA driver found is a stub library, not a real driver (cudaErrorStubLibrary); "
                   "is a toolkit 'stubs' folder on LD_LIBRARY_PATH?";
        default:
            return std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    }
}

}  // namespace

extern "C" {

int ember_cuda_abi_version(void) { return EMBER_CUDA_ABI_VERSION; }

int ember_cuda_device_count(char* why, size_t why_len) {
    set_why(why, why_len, "");
    int n = 0;  // cudaGetDeviceCount leaves it untouched on error
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        set_why(why, why_len, describe(e, "cudaGetDeviceCount"));
        return 0;
    }
    if (n <= 0) {
        set_why(why, why_len, "no CUDA-capable device");
        return 0;
    }
    return n;
}

int ember_cuda_device_info(int device, EmberCudaDeviceInfo* out, char* why, size_t why_len) {
    set_why(why, why_len, "");
    if (!out) return 0;
    std::memset(out, 0, sizeof *out);
    cudaDeviceProp p{};
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) {
        cudaGetLastError();
        set_why(why, why_len, describe(e, "cudaGetDeviceProperties"));
        return 0;
    }
    std::snprintf(out->name, sizeof out->name, "%s", p.name);
    out->total_memory = p.totalGlobalMem;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->multiprocessors = p.multiProcessorCount;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        out->free_memory = free_b;
        out->total_memory = total_b;
    } else {
        cudaGetLastError();
    }
    return 1;
}

EmberBackend* ember_cuda_create_backend(int device, char* why, size_t why_len) {
    set_why(why, why_len, "");
    try {
        cudaError_t e = cudaSetDevice(device);
        if (e != cudaSuccess) {
            cudaGetLastError();
            set_why(why, why_len, describe(e, "cudaSetDevice"));
            return nullptr;
        }
        e = ember::cuda::probe_kernel_image();
        if (e != cudaSuccess) {
            cudaGetLastError();
            cudaDeviceProp p{};
            cudaGetDeviceProperties(&p, device);
            set_why(why, why_len,
                    "this CUDA module has no code for " + std::string(p.name) + " (sm_" + std::to_string(p.major) +
                        std::to_string(p.minor) + "); it was built for CUDA architectures " EMBER_CUDA_ARCHS " (" +
                        cudaGetErrorName(e) + ")");
            return nullptr;
        }
        return ember::cuda::make_cuda_backend(device).release();
    } catch (const std::exception& ex) {
        set_why(why, why_len, ex.what());
    } catch (...) {
        set_why(why, why_len, "unknown error creating the CUDA backend");
    }
    return nullptr;
}

void ember_cuda_destroy_backend(EmberBackend* backend) { delete backend; }

int ember_cuda_bench_copy(int device, uint64_t bytes, int iters, double* gbps, char* why, size_t why_len) {
    set_why(why, why_len, "");
    try {
        *gbps = ember::cuda::bench_copy_gbps(device, bytes, iters);
        return 1;
    } catch (const std::exception& ex) {
        set_why(why, why_len, ex.what());
    }
    return 0;
}

int ember_cuda_bench_gemm_f16(int device, int m, int n, int k, int iters, double* seconds, char* why, size_t why_len) {
    set_why(why, why_len, "");
    try {
        *seconds = ember::cuda::bench_gemm_f16_seconds(device, m, n, k, iters);
        return 1;
    } catch (const std::exception& ex) {
        set_why(why, why_len, ex.what());
    }
    return 0;
}

}  // extern "C"
