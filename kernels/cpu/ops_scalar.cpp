// The op kernels (ops_kernels.inc) built for scalar; see CMakeLists.txt for the flags.
#define EMBER_OPS_TABLE_FN ops_table_scalar
#include "kernels/cpu/ops_kernels.inc"

#if !defined(EMBER_X86_KERNELS)
namespace ember::cpu::ops::detail {
const OpsTable* ops_table_avx2() { return nullptr; }
const OpsTable* ops_table_avx512() { return nullptr; }
}  // namespace ember::cpu::ops::detail
#endif
