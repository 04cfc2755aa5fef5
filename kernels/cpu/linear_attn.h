// Linear attention (Gated DeltaNet, qwen35) on the CPU: the causal convolution with its
// rolling state and the gated delta rule's recurrent form (kernels/backend.h states the math;
// RecurrentLayer the state's layout). Both walk each sequence's tokens in order, so the work
// is spread over sequences and channels (convolution) or sequences and value heads (delta
// rule), never over tokens.
#pragma once
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace ember::cpu::linear_attn {

// The tokens of one batch: token t belongs to sequence seq_of[t], whose state is slot_of_seq.
struct SeqTokens {
    const int32_t* seq_of = nullptr;
    const int32_t* slot_of_seq = nullptr;
    int64_t n_tokens = 0;
    int32_t n_seqs = 0;
};

// out[t][c] = silu(sum_k window_t[k][c] * w[c * kernel + k]) over x (n_tokens x channels);
// state: per slot (kernel - 1) x channels, updated.
void conv_silu(const SeqTokens& b, const float* x, const float* w, int32_t kernel, int64_t channels, float* state,
               float* out, ThreadPool& pool);

struct DeltaRuleArgs {
    const float *q, *k, *v;  // rows q_stride / k_stride / v_stride floats apart
    int64_t q_stride, k_stride, v_stride;
    const float *alpha, *beta;  // n_tokens x n_v_heads
    const float *dt_bias, *a;   // n_v_heads
    float l2_eps;
    int32_t n_k_heads, n_v_heads, head_dim;
    float* state;                // per slot n_v_heads x head_dim x head_dim
    float* out;                  // n_tokens x n_v_heads * head_dim
    bool grouped_heads = false;  // key head of value head h: h / (n_v/n_k), else h % n_k
};
void gated_delta_rule(const SeqTokens& b, const DeltaRuleArgs& a, ThreadPool& pool);

// out = sigmoid(gate) * up over n elements (qwen35's gate on full attention's output).
void sigmoid_gate(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool);

}  // namespace ember::cpu::linear_attn
