// Mixture-of-experts kernels of the CPU backend (Backend::moe_route, moe_matmul,
// moe_combine; the shapes are described in kernels/backend.h).
#pragma once
#include <cstdint>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"

namespace ember::cpu::moe {

// Routes n_tokens rows of n_expert logits (kernels/common/moe_route.h), tokens split over
// the pool. ids and weights: n_tokens x k; expert_scale: null or n_expert factors.
void route(const float* logits, int64_t n_tokens, int n_expert, int k, int gating, bool normalize, float scale,
           const float* expert_scale, int32_t* ids, float* weights, ThreadPool& pool);

// One call of Backend::moe_matmul. W: the n_expert experts' rows, one after another (each
// expert's rows a matrix of its own in W.layout, see Backend::load_expert_weight); ids:
// n_slots expert ids (slot s uses X row s / k when x_per_token, else row s); Y: n_slots x
// (W.rows / n_expert). The slots are grouped by expert (a counting sort), each group's X rows
// gathered and multiplied by its expert (matmul_grouped: matmul()'s bits; the decode-sized
// groups in one pool dispatch), so every chosen expert's weights are streamed once per call
// however many tokens chose it. bias: null or W.rows floats.
// Throws ember::Error for an id outside [0, n_expert).
void matmul(const WeightMatrix& W, int64_t n_expert, const float* X, bool x_per_token, int k, const int32_t* ids,
            int64_t n_slots, float* Y, const float* bias, ThreadPool& pool);

// out[t] = sum_j weights[t*k + j] * y[t*k + j] (cols floats per row), j ascending.
void combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t cols, float* out, ThreadPool& pool);

// x[t] *= sigmoid(s[t]) over n_tokens rows of cols (the shared expert's gate).
void sigmoid_scale_rows(float* x, const float* s, int64_t n_tokens, int64_t cols, ThreadPool& pool);

}  // namespace ember::cpu::moe
