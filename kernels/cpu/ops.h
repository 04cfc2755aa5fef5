// Transformer ops besides matmul, on f32 activations: RMSNorm, RoPE, softmax, gated
// activations, element-wise arithmetic and paged attention (layout: kv_layout.h).
//
// All are vectorized (compiled per ISA like matmul, chosen by active_isa()) and split over
// the pool when the work pays for a wake-up; pass pool = nullptr to run on the caller only.
// In-place use (out == an input) is allowed wherever an output has the shape of an input.
// Namespace `ops` keeps these apart from the backend's own helpers of the same names.
#pragma once
#include <cstdint>

#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/thread_pool.h"

namespace ember::cpu::ops {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for `rows` rows of `cols` (w has cols values; a
// Gemma-style "1 + w" weight is pre-added by the loader). w = nullptr: no weight.
void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps, ThreadPool* pool);

// x += b, then y = rms_norm(x) (w as above), row by row in one job: bitwise add() followed by
// rms_norm(), with one wait for the pool instead of two.
void add_rms_norm(float* x, const float* b, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                  ThreadPool* pool);

// Rotary position embedding, in place, on n_tokens x n_heads rows of head_dim values; token t
// is at positions[t]. The first n_rot dims of each head rotate in pairs: (2i, 2i + 1)
// normally, (i, i + n_rot / 2) with neox. Pair i turns by
//   theta = positions[t] * freq_scale * freq_base^(-2i / n_rot) / freq_factors[i]
// (freq_factors: n_rot / 2 values or nullptr = all 1; this is how Llama 3 rope scaling and
// linear scaling are applied by the caller). theta and its sine/cosine are computed in
// double once per token and shared by all heads.
struct RopeSpec {
    int32_t head_dim = 0;
    int32_t n_rot = 0;
    bool neox = false;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    const float* freq_factors = nullptr;
    // YaRN, as RopeParams (kernels/common/rope_yarn.h): the angle of each pair and a factor on
    // cos and sin; the defaults leave the formula above.
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    int32_t n_ctx_orig = 0;
    bool reverse = false;  // rotate by minus the angle (RopeParams::reverse)
};
void rope(float* x, int64_t n_tokens, int32_t n_heads, const int32_t* positions, const RopeSpec& spec,
          ThreadPool* pool);

// One token of the gated delta rule (kernels/backend.h) on one head's D x D state S (row j:
// value j), in place, the caller's thread only: S = decay S; S += beta (v - S k) k^T;
// o = S q * q_scale (k and q already normalized).
void delta_rule_token(float* S, int32_t D, const float* k, const float* q, const float* v, float decay, float beta,
                      float q_scale, float* o);

// Numerically stable softmax of each of `rows` rows of `cols`, in place.
void softmax(float* x, int64_t rows, int64_t cols, ThreadPool* pool);

// out = silu(gate) * up and out = gelu_tanh(gate) * up over n elements.
void swiglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool);
void geglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool);
// gpt-oss's clamped SwiGLU (ggml_swiglu_oai, alpha 1.702, limit 7): x = min(gate, 7),
// y = clamp(up, -7, 7), out = x / (1 + exp(-1.702 x)) * (y + 1).
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool);

// out = a + b, out = a * b, x *= s over n elements.
void add(const float* a, const float* b, float* out, int64_t n, ThreadPool* pool);
void mul(const float* a, const float* b, float* out, int64_t n, ThreadPool* pool);
void scale(float* x, float s, int64_t n, ThreadPool* pool);
// x = cap * tanh(x / cap)
void softcap(float* x, float cap, int64_t n, ThreadPool* pool);

// Attention of the query heads of one KV head (GQA group) for one query token, over the
// keys/values at positions [kv_start, n_kv) of one sequence:
//   out[r] = sum_j softmax_j(s_rj) v_j,  s_rj = softcap(scale * q[r] . k_j)
// q, out: n_rep x head_dim (the query heads sharing kv_head). softcap(s) = cap * tanh(s /
// cap), off when cap = 0. Causal masking is the caller's n_kv = position + 1; a sliding
// window of W tokens is kv_start = max(0, position - W + 1). With sinks (gpt-oss), head r's
// softmax denominator also holds exp(sinks[r]), a logit with no value: the head may attend
// to "nothing". One pass: online softmax over blocks of keys; keys/values are read once for
// all n_rep heads.
struct AttentionHeadArgs {
    const float* q = nullptr;
    int32_t n_rep = 1;
    int32_t kv_head = 0;
    const int32_t* block_table = nullptr;  // the sequence's block ids
    int64_t n_kv = 0;
    int64_t kv_start = 0;
    float scale = 1.0f;
    float softcap = 0.0f;
    const float* sinks = nullptr;  // n_rep sink logits of these heads, or nullptr
    float* out = nullptr;
};
void attention_head(const KvCacheView& kv, const AttentionHeadArgs& args);

// Attention for a batch of query tokens of several sequences: q and out are n_tokens x
// (n_heads * head_dim); query head h uses KV head h / (n_heads / n_kv_heads). Token t is at
// positions[t] of sequence seq_of[t], whose block ids are block_table[seq_of[t] *
// max_blocks ...]; it sees positions [max(0, pos - window + 1) or 0, pos]. Tasks are
// (token, KV head) pairs spread over the pool.
struct AttentionBatchArgs {
    const float* q = nullptr;
    float* out = nullptr;
    int64_t n_tokens = 0;
    int32_t n_heads = 0;
    const int32_t* positions = nullptr;
    const int32_t* seq_of = nullptr;  // nullptr: every token in sequence 0
    const int32_t* block_table = nullptr;
    int32_t max_blocks = 0;
    int32_t window = 0;  // 0: no sliding window
    float scale = 1.0f;
    float softcap = 0.0f;
    const float* sinks = nullptr;  // [n_heads] sink logits (attention_head), or nullptr
};
void attention(const KvCacheView& kv, const AttentionBatchArgs& args, ThreadPool* pool);

// Writes n_tokens rows of keys and values (f32, n_kv_heads * head_dim each) into their slots,
// converting to the cache type.
void store_kv(const KvCacheView& kv, void* k_pool, void* v_pool, const float* k, const float* v, const int32_t* slots,
              int64_t n_tokens, ThreadPool* pool);
// The inverse: n_tokens rows of keys and values read from their slots into f32 (exact: every
// F16 and Q8_0 value is a float).
void load_kv(const KvCacheView& kv, float* k, float* v, const int32_t* slots, int64_t n_tokens, ThreadPool* pool);

}  // namespace ember::cpu::ops
