// Sampling arithmetic shared by the host Sampler (engine/sampling/sampler.cpp), the CPU
// backend's top_k and the CUDA top-k kernels (kernels/cuda/sampling.cu), so that all three
// agree bit for bit: the penalty formula, the candidate order as one integer key, and the
// bitonic sorting network + round plan of the GPU selection. Plain C++17 that nvcc also
// compiles for the device; tests/kernels/cuda/test_cuda_topk_host.cpp runs the GPU's
// selection algorithm on the host with these functions.
#pragma once
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define EMBER_TOPK_HD __host__ __device__ __forceinline__
#else
#define EMBER_TOPK_HD inline
#endif

namespace ember::topk {

// llama.cpp repetition penalty (divide positive logits, multiply negative ones), then the
// presence and frequency penalties. On the device every operation is an explicitly rounded
// intrinsic so that nvcc cannot fuse the multiply-add (the host compiler does not contract
// in ISO C++ mode, and x86-64 has no FMA in the baseline ISA). A NaN logit is returned as
// it is: the GPU's arithmetic turns every NaN into its one canonical NaN while x86 keeps the
// input's bits, and the adjusted rows of the two backends must agree byte for byte (a NaN is
// never a candidate either way; seen on an H200, 2026-12-04: the NaN rows differed).
EMBER_TOPK_HD float penalized(float l, int32_t count, float repeat, float presence, float frequency) {
    if (l != l) return l;
#ifdef __CUDA_ARCH__
    l = l > 0.0f ? __fdiv_rn(l, repeat) : __fmul_rn(l, repeat);
    return __fsub_rn(l, __fadd_rn(presence, __fmul_rn(frequency, static_cast<float>(count))));
#else
    l = l > 0 ? l / repeat : l * repeat;
    return l - (presence + frequency * static_cast<float>(count));
#endif
}

EMBER_TOPK_HD float biased(float l, float bias) {
    if (l != l) return l;  // as in penalized()
#ifdef __CUDA_ARCH__
    return __fadd_rn(l, bias);
#else
    return l + bias;
#endif
}

// The sampler's candidate order (logit descending, then id ascending) as an ascending
// 64-bit key: high half = the float's bits mapped to a descending unsigned order, low half =
// the id. -0 ties with +0 as it does in a float comparison. NaN is no candidate: its key is
// kNoCandidate, larger than every real key (which also pads partial chunks).
constexpr uint64_t kNoCandidate = ~0ull;

EMBER_TOPK_HD uint64_t order_key(float logit, int32_t id) {
    if (!(logit == logit)) return kNoCandidate;
    if (logit == 0.0f) logit = 0.0f;
    uint32_t u;
#ifdef __CUDA_ARCH__
    u = __float_as_uint(logit);
#else
    memcpy(&u, &logit, 4);
#endif
    const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (static_cast<uint64_t>(~ascending) << 32) | static_cast<uint32_t>(id);
}

EMBER_TOPK_HD int32_t key_id(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// One compare-exchange of an ascending bitonic sort of a power-of-two array: pair `t`
// (0 <= t < n/2) of the stage (size, j), size = 2, 4, ..., n and j = size/2, ..., 1. The
// pairs of a stage are independent: a GPU block gives each thread some of them between two
// barriers; the host runs them as a loop.
EMBER_TOPK_HD void bitonic_pair(uint64_t* a, unsigned t, unsigned j, unsigned size) {
    const unsigned i = ((t & ~(j - 1)) << 1) | (t & (j - 1));  // t / j * 2j + t % j
    const unsigned p = i | j;
    const uint64_t x = a[i], y = a[p];
    if ((x > y) == ((i & size) == 0)) {
        a[i] = y;
        a[p] = x;
    }
}

// The GPU selection runs in rounds: each block sorts one chunk of keys in shared memory and
// keeps its best k; the survivors of all blocks are the next round's input, until one block
// holds them all. The chunk is at least 4k (each round keeps at most a quarter).
constexpr int kMaxChunk = 4096;  // keys per block: 32 KiB of shared memory

EMBER_TOPK_HD int chunk_for(int k) {
    int c = 1024;
    while (c < 4 * k && c < kMaxChunk) c *= 2;
    return c;
}

EMBER_TOPK_HD int64_t round_blocks(int64_t n, int chunk) { return (n + chunk - 1) / chunk; }

// Keys block b of a round passes on: its best min(k, chunk).
EMBER_TOPK_HD int64_t round_output(int64_t n, int chunk, int k) {
    return round_blocks(n, chunk) * (k < chunk ? k : chunk);
}

}  // namespace ember::topk
