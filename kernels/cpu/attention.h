// Attention over the block KV cache, and writing new keys/values into it.
//
// KV layout (per layer, one pool for K and one for V): slot-major rows. Slot s = block *
// block_tokens + offset holds one token's n_kv_heads * head_dim values (F16, or Q8_0 blocks
// of 32) in one row. A sequence's token j lives in slot block_table[j / B] * B + j % B, so
// blocks can be shared between sequences and handed out in any order.
#pragma once
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace ember::cpu {

struct KvView {
    DType type = DType::F16;
    void* k = nullptr;
    void* v = nullptr;
    int64_t kv_dim = 0;        // n_kv_heads * head_dim
    int32_t block_tokens = 16;
};

struct AttentionBatch {
    int n_tokens = 0;
    const int32_t* positions = nullptr;    // [n_tokens]
    const int32_t* seq_of = nullptr;       // [n_tokens]
    const int32_t* block_table = nullptr;  // [n_seqs * max_blocks]
    int32_t max_blocks = 0;
};

struct AttentionConfig {
    int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
    float scale = 1.0f;
    int32_t window = 0;    // 0: all earlier positions; else only the last `window` (incl. self)
    float softcap = 0.0f;  // 0: off; else scores = softcap * tanh(scores / softcap)
};

// Writes n_tokens rows of k and v (f32, kv_dim each) into their slots.
void store_kv(const KvView& kv, const float* k, const float* v, const int32_t* slots, int n_tokens, ThreadPool& pool);

// out[t, h*head_dim..] = softmax(q[t,h] . K[seq(t), 0..pos(t)] * scale) V, causal, with GQA
// (query head h reads kv head h / (n_heads / n_kv_heads)). One pass, online softmax.
void attention(const KvView& kv, const AttentionBatch& b, const AttentionConfig& c, const float* q, float* out,
               ThreadPool& pool);

}  // namespace ember::cpu
