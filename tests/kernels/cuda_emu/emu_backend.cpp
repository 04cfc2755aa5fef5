// The emulated flavour of make_test_cuda_backend: the CUDA backend's own code (compiled
// against the emulator, kernels/cuda/emu) created directly, without the module loader.
#include "kernels/cuda/cuda_backend.h"
#include "tests/kernels/cuda_emu/cuda_test_backend.h"

namespace ember::test {

std::unique_ptr<Backend> make_test_cuda_backend() { return cuda::make_cuda_backend(0); }
const char* cuda_test_flavour() { return "emulator"; }

}  // namespace ember::test
