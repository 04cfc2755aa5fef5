// The CUDA backend under test: the emulated one (kernels/cuda/emu, built into the test) or,
// in the GPU build of the same tests (scripts/gpu-check.sh), the real module on device 0.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace ember::test {

// Throws (fails the test) when no CUDA backend can be made.
std::unique_ptr<Backend> make_test_cuda_backend();
// "emulator" or "gpu".
const char* cuda_test_flavour();
// Launches of the named __global__ function so far (e.g. "attention_tc_kernel": which path
// an op took), or -1 where nothing counts them (the GPU flavour).
int64_t kernel_launches(const char* name);

}  // namespace ember::test
