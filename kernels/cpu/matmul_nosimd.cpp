// Non-x86 builds: only the portable kernels exist.
#include "kernels/cpu/matmul_internal.h"

namespace ember::cpu::detail {
const KernelTable* kernels_avx2() { return nullptr; }
const KernelTable* kernels_avx512() { return nullptr; }
}  // namespace ember::cpu::detail
