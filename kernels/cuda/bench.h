// Ceiling measurements (bench.cu) and the kernel-image probe, for module.cpp. C++17.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

namespace ember::cuda {

// Throw ember::Error on any CUDA/cuBLAS failure.
double bench_copy_gbps(int device, uint64_t bytes, int iters);
double bench_gemm_f16_seconds(int device, int m, int n, int k, int iters);
// cudaSuccess if this module has machine code (or PTX) the current device can run.
cudaError_t probe_kernel_image();

}  // namespace ember::cuda
