#include "kernels/cpu/matmul_internal.h"
namespace ember::cpu::detail {
const KernelTable* kernels_avx2() { return nullptr; }
}
