// Internal to ops.cpp and the per-ISA op kernel files: the table of kernels each ISA build of
// ops_kernels.inc exports. Kernels work on a range; ops.cpp does the threading.
#pragma once
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace ember::cpu::ops::detail {

// A tile of attention work: the query heads of one KV head for up to kMaxTileTokens tokens of
// one sequence (n_rep <= the ISA's tile_rows). The kernel runs it as sub-tiles of
// tile_rows / n_rep tokens (one row per lane) that share each converted key group. Token i's
// query heads start at q + i * q_stride (n_rep * head_dim contiguous values) and see keys
// [kv_start[i], kv_end[i]).
inline constexpr int kMaxTileTokens = 16;
struct AttnTile {
    const float* q = nullptr;
    float* out = nullptr;
    int64_t q_stride = 0;
    int32_t n_tok = 0;
    int32_t n_rep = 1;
    int32_t kv_head = 0;
    int64_t kv_start[kMaxTileTokens] = {};
    int64_t kv_end[kMaxTileTokens] = {};
    const int32_t* block_table = nullptr;
    float scale = 1.0f;
    float softcap = 0.0f;
    const float* sinks = nullptr;  // the n_rep heads' sink logits, or nullptr
};

struct OpsTable {
    void (*rms_norm_rows)(const float* x, const float* w, float* y, int64_t r0, int64_t r1, int64_t cols, float eps);
    // cs: per token, n_rot/2 cosines then n_rot/2 sines.
    void (*rope_tokens)(float* x, int64_t t0, int64_t t1, int32_t n_heads, const RopeSpec& spec, const float* cs);
    void (*softmax_rows)(float* x, int64_t r0, int64_t r1, int64_t cols);
    void (*swiglu)(const float* g, const float* u, float* out, int64_t n);
    void (*geglu)(const float* g, const float* u, float* out, int64_t n);
    void (*swiglu_oai)(const float* g, const float* u, float* out, int64_t n);
    void (*add)(const float* a, const float* b, float* out, int64_t n);
    void (*mul)(const float* a, const float* b, float* out, int64_t n);
    void (*scale)(float* x, float s, int64_t n);
    void (*attention_head)(const KvCacheView& kv, const AttentionHeadArgs& args);
    // Flash-attention style tile kernel, vectorized over the tile's query rows; nullptr (and
    // tile_rows 0) where only attention_head exists.
    void (*attention_tile)(const KvCacheView& kv, const AttnTile& tile);
    int tile_rows;
    // float -> IEEE half, round to nearest even (the F16 KV cache store): f32_to_fp16's bits
    // for every non-NaN value.
    void (*f32_to_f16)(const float* x, uint16_t* out, int64_t n);
    // One token of the gated delta rule on one head's state (ops.h delta_rule_token).
    void (*delta_token)(float* S, int32_t D, const float* k, const float* q, const float* v, float decay, float beta,
                        float q_scale, float* o);
};

const OpsTable* ops_table_scalar();
const OpsTable* ops_table_avx2();    // nullptr where not built
const OpsTable* ops_table_avx512();  // nullptr where not built

}  // namespace ember::cpu::ops::detail
