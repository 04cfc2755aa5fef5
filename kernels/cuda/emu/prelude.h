// First include of every kernel source compiled for the CUDA emulator (rewrite_cu.py puts
// it at the top of the generated copy). NVIDIA's host headers come first, with no CUDA
// macros defined, so that they declare the runtime types and the host half/bfloat16
// arithmetic; then the built-ins (emu.h); then the macros a device compilation has, so
// that the kernels' own `#ifdef __CUDA_ARCH__` paths (hd_util.cuh, topk.h) are the ones
// the GPU runs.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Standard headers the kernels use, before __CUDACC__ is defined (glibc and libstdc++ look
// at it in a few places).
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/emu/emu.h"

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#ifndef EMBER_CUDA_EMU
#define EMBER_CUDA_EMU 1
#endif
