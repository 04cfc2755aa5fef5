// main() of test_cuda_emu / test_cuda_gpu. With --require-all-kernels (the emulated
// flavour's ctest entry) it prints every __global__ function of kernels/cuda with how often
// the tests launched it, and fails when one was never launched.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef EMBER_CUDA_EMU
#include "kernels/cuda/emu/emu.h"

namespace {

struct Listed {
    const char* name;
    const char* file;
};
const Listed kKernels[] = {
#include "cuda_kernels.inc"
};

// 0 when every listed kernel ran at least once.
int kernel_coverage() {
    const auto counts = ember::emu::kernel_counts();
    int missing = 0;
    std::printf("\n__global__ functions of kernels/cuda executed under the emulator:\n");
    for (const Listed& k : kKernels) {
        const ember::emu::KernelCount* c = nullptr;
        for (const auto& kc : counts)
            if (kc.name == k.name) c = &kc;
        if (c) {
            std::printf("  ran   %-26s %-16s %6llu launches %8llu blocks %3llu instantiations\n", k.name, k.file,
                        static_cast<unsigned long long>(c->launches), static_cast<unsigned long long>(c->blocks),
                        static_cast<unsigned long long>(c->instantiations));
        } else {
            std::printf("  NEVER %-26s %-16s\n", k.name, k.file);
            ++missing;
        }
    }
    const int total = static_cast<int>(sizeof kKernels / sizeof kKernels[0]);
    std::printf("%d of %d __global__ functions executed\n", total - missing, total);
    return missing;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    bool require_all = false;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--require-all-kernels") == 0) require_all = true;
        else args.push_back(argv[i]);
    }
    doctest::Context ctx(static_cast<int>(args.size()), args.data());
    const int rc = ctx.run();
    if (ctx.shouldExit()) return rc;
#ifdef EMBER_CUDA_EMU
    if (require_all && kernel_coverage() != 0) {
        std::printf("FAIL: some __global__ functions were never executed\n");
        return rc ? rc : 1;
    }
#else
    (void)require_all;
#endif
    return rc;
}
