// Choosing the compute backend at run time: the CUDA module if it loads and finds a GPU,
// otherwise the CPU, always with a reason a user can act on.
//
// The CUDA backend lives in a separately loaded module (libember_cuda.so, see
// kernels/cuda/cuda_module.h): this program never links CUDA, so it starts anywhere. Where
// the module is looked for, in order:
//   1. BackendRequest::cuda_module, if set (only that path);
//   2. $EMBER_CUDA_MODULE, if set (only that path);
//   3. next to the executable (dirname(/proc/self/exe)/libember_cuda.so), then
//      <exe dir>/../lib/ember/libember_cuda.so (the install layout);
//   4. the build tree it was configured in (EMBER_CUDA_MODULE_DEFAULT).
// A module that produced a backend or answered a device query is never unloaded.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ember {

enum class BackendPreference { Auto, Cpu, Cuda };

struct BackendRequest {
    BackendPreference preference = BackendPreference::Auto;
    int n_threads = 0;        // CPU threads (0 = one per core); also used for a fallback
    std::string cuda_module;  // module path override ("" = search, see above)
    int cuda_device = 0;      // which GPU
};

struct BackendChoice {
    std::unique_ptr<Backend> backend;  // never null
    std::string device;                // "cuda:0" or "cpu"
    // Why this backend: "CUDA device 0: NVIDIA H200" or, on a fallback to the CPU, what
    // failed ("CUDA module not found at ...", "cannot load CUDA module ...: libcublas.so.13:
    // cannot open shared object file ...", "no NVIDIA driver ... (cudaErrorInsufficientDriver)").
    std::string reason;
};

// Never throws for CUDA problems (they become a CPU fallback with a reason); throws
// ember::Error only if the CPU backend itself cannot be made.
BackendChoice choose_backend(const BackendRequest& request);

// `ember info --devices`: the CPU first, then each CUDA device the module reports.
struct DeviceDescription {
    std::string id;             // "cpu", "cuda:0"
    std::string name;           // "NVIDIA H200", or the CPU backend's name
    uint64_t total_memory = 0;  // bytes (0 when unknown)
    uint64_t free_memory = 0;
    int cc_major = 0, cc_minor = 0;  // CUDA compute capability
    int multiprocessors = 0;
};

// If `cuda_status` is given it receives why no CUDA device is listed ("" when some are).
std::vector<DeviceDescription> list_devices(const BackendRequest& request = {}, std::string* cuda_status = nullptr);

// ---- lower level, for ember-gpu-check and tests ------------------------------------------
// The loaded module's entry points (see cuda_module.h). Null members: not exported.
struct CudaModule {
    std::string path;
    int (*abi_version)() = nullptr;
    int (*device_count)(char*, size_t) = nullptr;
    int (*device_info)(int, void*, char*, size_t) = nullptr;  // EmberCudaDeviceInfo*
    Backend* (*create_backend)(int, char*, size_t) = nullptr;
    void (*destroy_backend)(Backend*) = nullptr;
    int (*bench_copy)(int, uint64_t, int, double*, char*, size_t) = nullptr;
    int (*bench_gemm_f16)(int, int, int, int, int, double*, char*, size_t) = nullptr;
};

// Finds, loads and checks the module (ABI version). Returns null and sets `why` on failure.
// The result stays valid for the life of the process.
const CudaModule* load_cuda_module(const BackendRequest& request, std::string& why);

// The candidate paths of the search above, in order.
std::vector<std::string> cuda_module_search_paths(const BackendRequest& request);

}  // namespace ember
