// Launcher of kernels/cuda/sampling.cu: the sampler's top-k selection on the device
// (Backend::top_k). Plain C++17 host declarations, like ops.h.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace ember::cuda {

// Layouts shared with the host staging buffer (same as ember::TokenCount / TokenBias /
// TopKCandidate; the backend checks with static_assert).
struct PenaltyDev {
    int32_t id, count;
};
struct BiasDev {
    int32_t id;
    float bias;
};
struct CandidateDev {
    int32_t id;
    float logit;
};
// One row's adjustments: ranges of the penalty and bias arrays, and the penalty parameters.
struct TopKRowDev {
    int32_t pen_offset, pen_count;
    int32_t bias_offset, bias_count;
    float repeat, presence, frequency;
    int32_t unused;
};

struct TopKArgs {
    float* logits = nullptr;  // n_rows rows of n_vocab, row_stride floats apart (adjusted in place)
    size_t row_stride = 0;
    int64_t n_vocab = 0;
    int n_rows = 0;
    int k = 1;  // 1..1024
    const TopKRowDev* rows = nullptr;
    const PenaltyDev* penalties = nullptr;
    const BiasDev* biases = nullptr;
    uint64_t* keys[2] = {nullptr, nullptr};  // scratch, topk_scratch_keys() each
    CandidateDev* out = nullptr;             // n_rows x k
    int32_t* counts = nullptr;               // n_rows
};

// Keys per scratch buffer (both the same size) for n_rows rows.
size_t topk_scratch_keys(int64_t n_vocab, int k, int n_rows);
// Adjusts the rows, then selects; enqueued on `stream`, no synchronization.
void topk(const TopKArgs& a, cudaStream_t stream);

}  // namespace ember::cuda
