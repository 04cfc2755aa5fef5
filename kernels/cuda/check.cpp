#include "kernels/cuda/check.h"

#include <string>

#include "kernels/common/error.h"

namespace ember::cuda {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
    std::string f = file;
    if (const auto slash = f.find_last_of('/'); slash != std::string::npos) f = f.substr(slash + 1);
    throw Error(std::string("CUDA error in ") + call + " (" + f + ":" + std::to_string(line) +
                "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line) {
    std::string f = file;
    if (const auto slash = f.find_last_of('/'); slash != std::string::npos) f = f.substr(slash + 1);
    throw Error(std::string("cuBLAS error in ") + call + " (" + f + ":" + std::to_string(line) +
                "): " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

}  // namespace ember::cuda
