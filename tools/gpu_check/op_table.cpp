// The op check table, in the style of llama.cpp's test-backend-ops: one row per op family,
// run in this order; each family's cases (op, shapes, types, error bound) are a table in its
// ops_*.cpp. GPU outputs are poisoned with NaN before each op, so an element the GPU never
// wrote fails.
#include "tools/gpu_check/check.h"

namespace ember::gpucheck {

namespace {

const OpCheck kOpChecks[] = {
    {"matmul", "y = x W^T + bias, 13 weight types, n = 1..512, vs float64", check_matmul},
    {"embed", "dequantized table rows x scale, 10 types, vs the CPU backend", check_embed},
    {"rms_norm", "per row and per head, in place, vs float64", check_rms_norm},
    {"rope", "normal and NeoX, freq_factors, freq_scale, vs float64", check_rope},
    {"elementwise", "glu (SiLU, GELU), add, gather_output_rows", check_elementwise},
    {"attention", "store_kv + attention over a shuffled paged cache, F16 and Q8_0, vs the CPU backend",
     check_attention},
    {"top_k", "the sampler's candidates with penalties and bias, k = 1, 40, 1024, vs the CPU backend", check_top_k},
};

}  // namespace

std::span<const OpCheck> op_checks() { return kOpChecks; }

}  // namespace ember::gpucheck
