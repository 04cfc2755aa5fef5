// The emulated flavour of make_test_cuda_backend: the CUDA backend's own code (compiled
// against the emulator, kernels/cuda/emu) created directly, without the module loader.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emu/emu.h"
#include "tests/kernels/cuda_emu/cuda_test_backend.h"

namespace ember::test {

std::unique_ptr<Backend> make_test_cuda_backend() { return cuda::make_cuda_backend(0); }
const char* cuda_test_flavour() { return "emulator"; }
int64_t kernel_launches(const char* name) {
    int64_t n = 0;
    for (const auto& kc : emu::kernel_counts())
        if (kc.name == name) n += static_cast<int64_t>(kc.launches);
    return n;
}

}  // namespace ember::test
