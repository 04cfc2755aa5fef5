// The CUDA implementation of ember::Backend (inside the module; the program reaches it only
// through the C ABI in cuda_module.h).
#pragma once
#include <memory>

#include "kernels/backend.h"

namespace ember::cuda {

// Throws ember::Error (no device, out of memory, cuBLAS failure).
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace ember::cuda
