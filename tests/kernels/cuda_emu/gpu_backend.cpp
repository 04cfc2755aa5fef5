// The GPU flavour of make_test_cuda_backend: the real module (libember_cuda.so, kernels
// built by nvcc) through the program's own loader, on device 0.
#include <stdexcept>

#include "kernels/backend_loader.h"
#include "tests/kernels/cuda_emu/cuda_test_backend.h"

namespace ember::test {

std::unique_ptr<Backend> make_test_cuda_backend() {
    BackendRequest req;
    req.preference = BackendPreference::Cuda;
    BackendChoice c = choose_backend(req);
    if (c.device.rfind("cuda", 0) != 0) throw std::runtime_error("no CUDA backend: " + c.reason);
    return std::move(c.backend);
}
const char* cuda_test_flavour() { return "gpu"; }
int64_t kernel_launches(const char*) { return -1; }

}  // namespace ember::test
