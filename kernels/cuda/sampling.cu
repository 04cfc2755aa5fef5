// The sampler's top-k on the device (Backend::top_k): the logits row never leaves the GPU,
// only its k best (id, logit) do.
//
//   1. topk_adjust_kernel (block per row): penalties, then logit bias, in place, with the
//      arithmetic of kernels/common/topk.h (bit-identical to the host Sampler).
//   2. topk_round_kernel, in rounds: each block turns one chunk (>= 4k, a power of two) of
//      the row into order keys (kernels/common/topk.h: logit descending, id ascending, NaN
//      last) in shared memory, sorts them with a bitonic network and passes on its best k;
//      the survivors of all blocks are the next round's input, until one block remains,
//      which writes (id, logit) and the count. k = 1 (greedy) takes the block minimum
//      instead of sorting. 128256 logits: k = 40 takes 126 + 5 + 1 blocks in 3 rounds,
//      k = 1024 takes 32 + 8 + 2 + 1 blocks in 4.
// Bytes: the row is read once (4 B/logit) plus k * 8 B per block between rounds.
#include "kernels/common/topk.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/sampling.h"

namespace ember::cuda {
namespace {

using topk::kNoCandidate;

__global__ void topk_adjust_kernel(const TopKArgs a) {
    const TopKRowDev r = a.rows[blockIdx.x];
    float* row = a.logits + static_cast<size_t>(blockIdx.x) * a.row_stride;
    for (int i = threadIdx.x; i < r.pen_count; i += blockDim.x) {
        const PenaltyDev p = a.penalties[r.pen_offset + i];
        if (p.id >= 0 && p.id < a.n_vocab)
            row[p.id] = topk::penalized(row[p.id], p.count, r.repeat, r.presence, r.frequency);
    }
    __syncthreads();  // the bias applies to the penalized value (ids are distinct per list)
    for (int i = threadIdx.x; i < r.bias_count; i += blockDim.x) {
        const BiasDev b = a.biases[r.bias_offset + i];
        if (b.id >= 0 && b.id < a.n_vocab) row[b.id] = topk::biased(row[b.id], b.bias);
    }
}

struct RoundArgs {
    const float* logits;  // adjusted rows (first round: the input; last round: logit of each id)
    size_t row_stride;
    const uint64_t* in;  // later rounds: keys of row r at in + r * in_stride
    int64_t in_stride;
    int64_t n;  // elements of a row in this round
    int chunk, k;
    uint64_t* out;  // rounds before the last: keys of row r at out + r * out_stride
    int64_t out_stride;
    CandidateDev* result;  // last round
    int32_t* counts;
};

template <bool FromLogits>
__device__ __forceinline__ uint64_t load_key(const RoundArgs& a, int row, int64_t i) {
    if (i >= a.n) return kNoCandidate;
    if (FromLogits) return topk::order_key(a.logits[row * a.row_stride + i], static_cast<int32_t>(i));
    return a.in[row * a.in_stride + i];
}

__device__ __forceinline__ uint64_t min_u64(uint64_t x, uint64_t y) { return x < y ? x : y; }

// Minimum over the block (blockDim.x a multiple of 32); valid in thread 0.
__device__ uint64_t block_min(uint64_t v, uint64_t* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = min_u64(v, __shfl_xor_sync(kFullMask, v, o));
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < n_warps ? scratch[lane] : kNoCandidate;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = min_u64(v, __shfl_xor_sync(kFullMask, v, o));
    }
    return v;
}

// s[0, k) holds the block's best keys, ascending (kNoCandidate last).
__device__ void emit(const RoundArgs& a, int row, const uint64_t* s) {
    if (gridDim.x > 1) {
        uint64_t* out = a.out + row * a.out_stride + static_cast<int64_t>(blockIdx.x) * a.k;
        for (int i = threadIdx.x; i < a.k; i += blockDim.x) out[i] = s[i];
        return;
    }
    CandidateDev* res = a.result + static_cast<int64_t>(row) * a.k;
    const float* logits = a.logits + row * a.row_stride;
    for (int i = threadIdx.x; i < a.k; i += blockDim.x) {
        const uint64_t key = s[i];
        if (key == kNoCandidate) continue;
        const int32_t id = topk::key_id(key);
        res[i] = {id, logits[id]};
        if (i + 1 == a.k || s[i + 1] == kNoCandidate) a.counts[row] = i + 1;
    }
    if (threadIdx.x == 0 && s[0] == kNoCandidate) a.counts[row] = 0;
}

// Block (chunk c, row r): the best k keys of elements [c * chunk, (c + 1) * chunk).
template <bool FromLogits>
__global__ void __launch_bounds__(1024) topk_round_kernel(const RoundArgs a) {
    extern __shared__ uint64_t s[];
    const int row = blockIdx.y;
    const int64_t base = static_cast<int64_t>(blockIdx.x) * a.chunk;
    if (a.k == 1) {
        uint64_t m = kNoCandidate;
        for (int i = threadIdx.x; i < a.chunk; i += blockDim.x) m = min_u64(m, load_key<FromLogits>(a, row, base + i));
        m = block_min(m, s);
        __syncthreads();  // s was the reduction's scratch
        if (threadIdx.x == 0) s[0] = m;
        __syncthreads();
        emit(a, row, s);
        return;
    }
    for (int i = threadIdx.x; i < a.chunk; i += blockDim.x) s[i] = load_key<FromLogits>(a, row, base + i);
    __syncthreads();
    const unsigned n = static_cast<unsigned>(a.chunk);
    for (unsigned size = 2; size <= n; size <<= 1) {
        for (unsigned j = size >> 1; j > 0; j >>= 1) {
            for (unsigned t = threadIdx.x; t < n / 2; t += blockDim.x) topk::bitonic_pair(s, t, j, size);
            __syncthreads();
        }
    }
    emit(a, row, s);
}

}  // namespace

size_t topk_scratch_keys(int64_t n_vocab, int k, int n_rows) {
    return static_cast<size_t>(topk::round_output(n_vocab, topk::chunk_for(k), k)) * static_cast<size_t>(n_rows);
}

void topk(const TopKArgs& a, cudaStream_t stream) {
    if (a.n_rows <= 0) return;
    topk_adjust_kernel<<<static_cast<unsigned>(a.n_rows), 256, 0, stream>>>(a);
    EMBER_CUDA_CHECK_LAUNCH("topk_adjust_kernel");
    const int chunk = topk::chunk_for(a.k);
    const unsigned threads = static_cast<unsigned>(chunk / 2 < 1024 ? chunk / 2 : 1024);
    const size_t smem = static_cast<size_t>(chunk) * sizeof(uint64_t);
    RoundArgs r{};
    r.logits = a.logits;
    r.row_stride = a.row_stride;
    r.n = a.n_vocab;
    r.chunk = chunk;
    r.k = a.k;
    r.result = a.out;
    r.counts = a.counts;
    for (int round = 0;; ++round) {
        const int64_t blocks = topk::round_blocks(r.n, chunk);
        r.out = a.keys[round % 2];
        r.out_stride = topk::round_output(r.n, chunk, a.k);
        const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.n_rows));
        if (round == 0) topk_round_kernel<true><<<grid, threads, smem, stream>>>(r);
        else topk_round_kernel<false><<<grid, threads, smem, stream>>>(r);
        EMBER_CUDA_CHECK_LAUNCH("topk_round_kernel");
        if (blocks == 1) return;
        r.in = r.out;
        r.in_stride = r.out_stride;
        r.n = r.out_stride;
    }
}

}  // namespace ember::cuda
