// Internal to ops.cpp and the per-ISA op kernel files: the table of kernels each ISA build of
// ops_kernels.inc exports. Kernels work on a range; ops.cpp does the threading.
#pragma once
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace ember::cpu::ops::detail {

struct OpsTable {
    void (*rms_norm_rows)(const float* x, const float* w, float* y, int64_t r0, int64_t r1, int64_t cols, float eps);
    // cs: per token, n_rot/2 cosines then n_rot/2 sines.
    void (*rope_tokens)(float* x, int64_t t0, int64_t t1, int32_t n_heads, const RopeSpec& spec, const float* cs);
    void (*softmax_rows)(float* x, int64_t r0, int64_t r1, int64_t cols);
    void (*swiglu)(const float* g, const float* u, float* out, int64_t n);
    void (*geglu)(const float* g, const float* u, float* out, int64_t n);
    void (*add)(const float* a, const float* b, float* out, int64_t n);
    void (*mul)(const float* a, const float* b, float* out, int64_t n);
    void (*scale)(float* x, float s, int64_t n);
    void (*attention_head)(const KvCacheView& kv, const AttentionHeadArgs& args);
};

const OpsTable* ops_table_scalar();
const OpsTable* ops_table_avx2();    // nullptr where not built
const OpsTable* ops_table_avx512();  // nullptr where not built

}  // namespace ember::cpu::ops::detail
