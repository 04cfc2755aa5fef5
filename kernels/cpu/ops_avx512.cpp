// The op kernels (ops_kernels.inc) built for avx512; see CMakeLists.txt for the flags.
#define EMBER_OPS_TABLE_FN ops_table_avx512
#include "kernels/cpu/ops_kernels.inc"
