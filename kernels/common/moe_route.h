// Mixture-of-experts routing of one token (Backend::moe_route), shared by the CPU backend and
// the CUDA kernel (kernels/cuda/moe.cu) so that both choose the same experts the same way:
// llama.cpp's build_moe_ffn selection (softmax, then ggml_argsort_top_k) and weighting
// (renormalised, scaled). Plain C++17 that nvcc also compiles for the device; no scratch:
// the j-th choice is the best entry ranked below the (j-1)-th, recomputed from the logits, so
// a GPU thread routes a token in k passes over its n_expert logits (1024 compares for
// qwen3moe's 8 of 128).
#pragma once
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define EMBER_MOE_HD __host__ __device__ __forceinline__
#else
#define EMBER_MOE_HD inline
#endif

namespace ember::moe {

// The smallest sum of weights that normalisation divides by (llama.cpp clamps at the
// smallest normal FP16 value, 2^-14).
constexpr float kMinWeightSum = 6.103515625e-5f;

// Whether (v, i) ranks before (pv, pi): larger value first, ties to the lower id.
EMBER_MOE_HD bool ranks_before(float v, int i, float pv, int pi) { return v > pv || (v == pv && i < pi); }

// gating 0 = MoeGating::Softmax (top-k of softmax(logits)), 1 = SoftmaxTopK (softmax of the
// top-k logits). Writes k ids, best first, and their weights; expert_scale (null or
// n_expert floats) then multiplies each weight by its expert's factor (gemma4's per-expert
// output scale, which llama.cpp applies to the expert's output: the same product).
EMBER_MOE_HD void route_row(const float* logits, int n_expert, int k, int gating, bool normalize, float scale,
                            const float* expert_scale, int32_t* ids, float* weights) {
    float mx = logits[0];
    for (int i = 1; i < n_expert; ++i) mx = logits[i] > mx ? logits[i] : mx;
    const bool softmax_all = gating == 0;
    float inv_sum = 1.0f;
    if (softmax_all) {
        float sum = 0.0f;
        for (int i = 0; i < n_expert; ++i) sum += expf(logits[i] - mx);
        inv_sum = 1.0f / sum;
    }
    // Ranked by the probability (softmax_all, as ggml ranks them) or by the logit.
    float prev_v = INFINITY;
    int prev_i = -1;
    for (int j = 0; j < k; ++j) {
        float best_v = -INFINITY;
        int best_i = -1;
        for (int i = 0; i < n_expert; ++i) {
            const float v = softmax_all ? expf(logits[i] - mx) * inv_sum : logits[i];
            if (v != v) continue;                                        // NaN never ranks
            if (j > 0 && !ranks_before(prev_v, prev_i, v, i)) continue;  // already chosen
            if (best_i < 0 || ranks_before(v, i, best_v, best_i)) {
                best_v = v;
                best_i = i;
            }
        }
        if (best_i < 0) best_i = 0;  // NaN logits: nothing ranks; expert 0 keeps the output defined
        ids[j] = best_i;
        weights[j] = best_v;
        prev_v = best_v;
        prev_i = best_i;
    }
    if (!softmax_all) {  // softmax over the k chosen logits; the first is their largest
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) {
            weights[j] = expf(weights[j] - logits[ids[0]]);
            sum += weights[j];
        }
        for (int j = 0; j < k; ++j) weights[j] /= sum;
    }
    if (normalize) {
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) sum += weights[j];
        sum = sum > kMinWeightSum ? sum : kMinWeightSum;
        for (int j = 0; j < k; ++j) weights[j] /= sum;
    }
    if (scale != 1.0f)
        for (int j = 0; j < k; ++j) weights[j] *= scale;
    if (expert_scale)
        for (int j = 0; j < k; ++j) weights[j] *= expert_scale[ids[j]];
}

}  // namespace ember::moe
