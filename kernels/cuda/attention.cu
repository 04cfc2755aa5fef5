// Causal attention over the block KV cache: one kernel for decode and prefill.
//
// Work unit (one thread block of 4 warps): a query tile x one group of G query heads that
// share a KV head (GQA) x one split of the key range.
//   - Query tile: up to TQ consecutive batch tokens of the same sequence (tiles of <= 32
//     tokens are built once per batch on the host; each is cut into sub-tiles of TQ = P / G
//     tokens, P <= 32 (query, head) pairs per block).
//   - Keys are streamed in tiles of 32 positions, gathered through the block table and
//     converted (F16 or Q8_0) to FP32 in shared memory, so one key tile serves all P pairs.
//   - Within a key tile each lane owns one key: its score is a length-D dot product against
//     the pair's query (shared memory broadcast); the warp then folds the 32 scores into an
//     online softmax (running max m, running sum l) and each lane accumulates D/32 output
//     dimensions from the value tile.
//   - Split-K (flash-decoding): when there are too few blocks to fill the GPU (decode: one
//     token per sequence) the key range is split; each split writes its (m, l, acc[D])
//     partial and attention_combine_kernel merges them.
// Masks: key j is visible to a query at position p iff first(p) <= j <= p, first(p) =
// p - window + 1 (sliding window) or 0. Soft-capping: s = cap * tanh(s / cap). Sinks: one
// more term e^sink in a head's denominator, added where the splits are combined.
//
// Cost per (query, head): reads the visible K and V rows once per query tile: decode is
// bound by KV bytes (2 * n_keys * D * 2 bytes for F16 per KV head, shared by G heads);
// prefill does ~4 * D FLOPs per (query, head, key) in FP32 on the CUDA cores (no tensor
// cores yet: correctness first; an mma.sync/wgmma version is the next step for long
// prompts).
#include <atomic>
#include <climits>
#include <string>

#include "kernels/common/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.cuh"

namespace ember::cuda {
namespace {

constexpr int kKeyTile = 32;  // keys per shared-memory tile (one per lane)
constexpr int kWarps = 4;
constexpr int kMaxPairsPerWarp = 8;

struct KernelArgs {
    AttentionArgs a;
    int group;          // G: query heads per block
    int groups_per_kv;  // rep / G
    int tile_tokens;    // TQ
    int subtiles;       // ceil(32 / TQ)
};

__device__ __forceinline__ float load_kv(const uint8_t* row, int kv_type, int e) {
    if (kv_type == kQ8_0) {
        const uint8_t* blk = row + (e >> 5) * 34;
        return static_cast<float>(static_cast<int8_t>(blk[2 + (e & 31)])) * ld_half(blk);
    }
    return h2f(reinterpret_cast<const uint16_t*>(row)[e]);
}

// NE = ceil(D / 32): output dimensions per lane (lane owns d = lane + 32 e).
template <int NE>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const KernelArgs ka) {
    const AttentionArgs& a = ka.a;
    extern __shared__ float smem[];
    const int D = a.head_dim;
    const int KS = D + 1;  // padded K rows: lane j reading row j hits bank (j + d) % 32
    float* Ks = smem;
    float* Vs = Ks + kKeyTile * KS;
    float* Qs = Vs + kKeyTile * D;

    const int tile = blockIdx.x / ka.subtiles, sub = blockIdx.x % ka.subtiles;
    const int2 td = a.tiles[tile];
    const int tq0 = td.x + sub * ka.tile_tokens;
    const int ntq = min(ka.tile_tokens, td.x + td.y - tq0);
    if (ntq <= 0) return;  // uniform over the block, before any barrier
    const int G = ka.group;
    const int kvh = blockIdx.y / ka.groups_per_kv;
    const int h0 = kvh * (a.n_heads / a.n_kv_heads) + (blockIdx.y % ka.groups_per_kv) * G;
    const int n_pairs = ntq * G;
    const int32_t* table = a.block_table + static_cast<int64_t>(a.seq_of[tq0]) * a.max_blocks;

    // Keys any query of the sub-tile can see.
    int lo = INT_MAX, hi = 0;
    for (int i = 0; i < ntq; ++i) {
        const int pos = a.positions[tq0 + i];
        lo = min(lo, a.window > 0 ? max(0, pos - a.window + 1) : 0);
        hi = max(hi, pos + 1);
    }
    // This split's share of the tile's key range (a multiple of kKeyTile; trailing splits of
    // a short range may be empty and then write m = -inf, l = 0).
    const int n_splits = static_cast<int>(gridDim.z);
    const int split_size = ((hi - lo + n_splits - 1) / n_splits + kKeyTile - 1) / kKeyTile * kKeyTile;
    const int k_begin = lo + static_cast<int>(blockIdx.z) * split_size;
    const int k_end = min(hi, k_begin + split_size);

    for (int idx = threadIdx.x; idx < n_pairs * D; idx += blockDim.x) {
        const int p = idx / D, d = idx % D;
        const int t = tq0 + p / G, h = h0 + p % G;
        Qs[idx] = a.q[(static_cast<int64_t>(t) * a.n_heads + h) * D + d];
    }

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float m[kMaxPairsPerWarp], l[kMaxPairsPerWarp], acc[kMaxPairsPerWarp][NE];
#pragma unroll
    for (int i = 0; i < kMaxPairsPerWarp; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < NE; ++e) acc[i][e] = 0.0f;
    }

    const int kvoff = kvh * D;
    for (int kt = k_begin; kt < k_end; kt += kKeyTile) {
        __syncthreads();  // Qs written / previous key tile consumed
        for (int idx = threadIdx.x; idx < kKeyTile * D; idx += blockDim.x) {
            const int j = idx / D, d = idx % D;
            const int pos = kt + j;
            float kv_k = 0.0f, kv_v = 0.0f;
            if (pos < k_end) {
                const int64_t slot =
                    static_cast<int64_t>(table[pos / a.block_tokens]) * a.block_tokens + pos % a.block_tokens;
                kv_k = load_kv(a.k + slot * a.kv_row_bytes, a.kv_type, kvoff + d);
                kv_v = load_kv(a.v + slot * a.kv_row_bytes, a.kv_type, kvoff + d);
            }
            Ks[j * KS + d] = kv_k;
            Vs[j * D + d] = kv_v;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kMaxPairsPerWarp; ++i) {
            const int p = warp + kWarps * i;
            if (p >= n_pairs) break;  // uniform over the warp
            const int pos = a.positions[tq0 + p / G];
            const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
            const int key = kt + lane;
            const bool valid = key < k_end && key <= pos && key >= first;
            float s = -INFINITY;
            if (valid) {
                const float* qp = Qs + p * D;
                const float* kp = Ks + lane * KS;
                float dot = 0.0f;
                for (int d = 0; d < D; ++d) dot += qp[d] * kp[d];
                s = dot * a.scale;
                if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
            }
            const float tile_max = warp_max(s);
            if (tile_max == -INFINITY) continue;  // nothing visible in this tile for this query
            const float m_new = fmaxf(m[i], tile_max);
            const float corr = expf(m[i] - m_new);  // 0 when m[i] is still -inf
            const float pj = valid ? expf(s - m_new) : 0.0f;
            l[i] = l[i] * corr + warp_sum(pj);
#pragma unroll
            for (int e = 0; e < NE; ++e) acc[i][e] *= corr;
            for (int j = 0; j < kKeyTile; ++j) {
                const float pjj = __shfl_sync(kFullMask, pj, j);
#pragma unroll
                for (int e = 0; e < NE; ++e) {
                    const int d = lane + 32 * e;
                    if (d < D) acc[i][e] += pjj * Vs[j * D + d];
                }
            }
            m[i] = m_new;
        }
    }

    // Partial results of this split: [split][token][head][m, l, acc[D]].
#pragma unroll
    for (int i = 0; i < kMaxPairsPerWarp; ++i) {
        const int p = warp + kWarps * i;
        if (p >= n_pairs) break;
        const int t = tq0 + p / G, h = h0 + p % G;
        float* out = a.partial + ((static_cast<int64_t>(blockIdx.z) * a.n_tokens + t) * a.n_heads + h) * (D + 2);
        if (lane == 0) {
            out[0] = m[i];
            out[1] = l[i];
        }
#pragma unroll
        for (int e = 0; e < NE; ++e) {
            const int d = lane + 32 * e;
            if (d < D) out[2 + d] = acc[i][e];
        }
    }
}

// Merges the splits: out = sum_z e^(m_z - M) acc_z / sum_z e^(m_z - M) l_z. One block per
// (token, head); reads n_splits * (D + 2) floats, writes D. A head's sink (gpt-oss) adds
// e^(sink - M) to the denominator only: the softmax over its keys and the sink.
__global__ void attention_combine_kernel(const float* __restrict__ partial, int n_splits, int64_t n_rows, int D,
                                         const float* __restrict__ sinks, int n_heads, float* __restrict__ out) {
    const int64_t r = blockIdx.x;  // token * n_heads + head
    float M = -INFINITY;
    for (int z = 0; z < n_splits; ++z) M = fmaxf(M, partial[(z * n_rows + r) * (D + 2)]);
    float L = 0.0f;
    if (M != -INFINITY) {
        for (int z = 0; z < n_splits; ++z) {
            const float* p = partial + (z * n_rows + r) * (D + 2);
            if (p[0] != -INFINITY) L += p[1] * expf(p[0] - M);
        }
        if (sinks) L += expf(sinks[r % n_heads] - M);
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        if (M != -INFINITY) {
            for (int z = 0; z < n_splits; ++z) {
                const float* p = partial + (z * n_rows + r) * (D + 2);
                if (p[0] != -INFINITY) v += p[2 + d] * expf(p[0] - M);
            }
        }
        out[r * D + d] = v * inv;
    }
}

int largest_divisor_at_most(int n, int cap) {
    for (int g = cap < n ? cap : n; g > 1; --g)
        if (n % g == 0) return g;
    return 1;
}

size_t smem_bytes(int D, int pairs) {
    return static_cast<size_t>(kKeyTile * (D + 1) + kKeyTile * D + pairs * D) * sizeof(float);
}

// Pairs per block: 32, or fewer when shared memory is short (head_dim 256 on small GPUs,
// 512: 147 KiB at 8 pairs).
int pairs_per_block(const AttentionArgs& a, int group) {
    for (int p = kWarps * kMaxPairsPerWarp; p >= group; p /= 2)
        if (smem_bytes(a.head_dim, p) <= a.smem_optin) return p;
    return 0;
}

KernelArgs make_kernel_args(const AttentionArgs& a) {
    KernelArgs ka;
    ka.a = a;
    const int rep = a.n_heads / a.n_kv_heads;
    ka.group = largest_divisor_at_most(rep, kMaxPairsPerWarp);
    ka.groups_per_kv = rep / ka.group;
    const int pairs = pairs_per_block(a, ka.group);
    ka.tile_tokens = pairs / ka.group;
    if (ka.tile_tokens < 1) ka.tile_tokens = 1;
    if (ka.tile_tokens > kAttnTileTokens) ka.tile_tokens = kAttnTileTokens;
    ka.subtiles = (kAttnTileTokens + ka.tile_tokens - 1) / ka.tile_tokens;
    return ka;
}

}  // namespace

void attention_validate(const AttentionArgs& a) {
    if (a.head_dim <= 0 || a.head_dim > 512)
        throw Error("CUDA attention: head_dim " + std::to_string(a.head_dim) + " is not supported (1..512)");
    if (a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
        throw Error("CUDA attention: " + std::to_string(a.n_heads) + " query heads are not a multiple of " +
                    std::to_string(a.n_kv_heads) + " KV heads");
    if (a.kv_type != kF16 && a.kv_type != kQ8_0) throw Error("CUDA attention: KV cache must be F16 or Q8_0");
    if (a.kv_type == kQ8_0 && a.head_dim % 32 != 0)
        throw Error("CUDA attention: a Q8_0 KV cache needs head_dim % 32 == 0 (head_dim " + std::to_string(a.head_dim) +
                    ")");
    const int rep = a.n_heads / a.n_kv_heads;
    if (pairs_per_block(a, largest_divisor_at_most(rep, kMaxPairsPerWarp)) == 0)
        throw Error("CUDA attention: head_dim " + std::to_string(a.head_dim) + " needs " +
                    std::to_string(smem_bytes(a.head_dim, 8) / 1024) +
                    " KiB of shared memory per block, the device allows " + std::to_string(a.smem_optin / 1024) +
                    " KiB");
}

namespace {

// Beyond 48 KiB a block needs the kernel's limit raised, per device. Done once per device
// and size: a segment always runs eagerly before the CUDA graph runner captures it, so the
// host call never happens inside a capture.
template <int NE>
void allow_smem(size_t smem) {
    constexpr int kDevices = 64;
    static std::atomic<size_t> allowed[kDevices];
    int dev = 0;
    EMBER_CUDA_CHECK(cudaGetDevice(&dev));
    const bool cached = dev >= 0 && dev < kDevices;
    if (cached && smem <= allowed[dev].load()) return;
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<NE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
    if (cached) allowed[dev].store(smem);
}

template <int NE>
void launch(const KernelArgs& ka, int n_splits, cudaStream_t stream) {
    const size_t smem = smem_bytes(ka.a.head_dim, ka.tile_tokens * ka.group);
    if (smem > 48 * 1024) allow_smem<NE>(smem);
    const dim3 grid(static_cast<unsigned>(ka.a.n_tiles * ka.subtiles),
                    static_cast<unsigned>(ka.a.n_kv_heads * ka.groups_per_kv), static_cast<unsigned>(n_splits));
    attention_kernel<NE><<<grid, kWarps * 32, smem, stream>>>(ka);
    EMBER_CUDA_CHECK_LAUNCH("attention_kernel");
}

}  // namespace

int attention_splits(const AttentionArgs& a, int max_pos) {
    const int rep = a.n_heads / (a.n_kv_heads > 0 ? a.n_kv_heads : 1);
    const int group = largest_divisor_at_most(rep, kMaxPairsPerWarp);
    const int pairs = pairs_per_block(a, group);
    const int tq = pairs / group > 0 ? pairs / group : 1;
    // Blocks doing real work without splitting: ~one per TQ tokens per head group.
    const int64_t blocks = ((static_cast<int64_t>(a.n_tokens) + tq - 1) / tq) * (rep / group) * a.n_kv_heads;
    const int64_t target = 2 * static_cast<int64_t>(a.sm_count);
    if (blocks >= target) return 1;
    // Each split gets at least 256 keys.
    const int max_by_keys = (max_pos + 1) / 256 > 1 ? (max_pos + 1) / 256 : 1;
    int64_t s = (target + blocks - 1) / blocks;
    if (s > max_by_keys) s = max_by_keys;
    if (s > 64) s = 64;
    return static_cast<int>(s < 1 ? 1 : s);
}

size_t attention_partial_floats(const AttentionArgs& a, int n_splits) {
    return static_cast<size_t>(n_splits) * a.n_tokens * a.n_heads * (a.head_dim + 2);
}

void attention(const AttentionArgs& a, int n_splits, cudaStream_t stream) {
    attention_validate(a);
    if (a.n_tokens == 0) return;
    const KernelArgs ka = make_kernel_args(a);
    const int ne = (a.head_dim + 31) / 32;
    if (ne <= 1) launch<1>(ka, n_splits, stream);
    else if (ne <= 2) launch<2>(ka, n_splits, stream);
    else if (ne <= 4) launch<4>(ka, n_splits, stream);
    else if (ne <= 8) launch<8>(ka, n_splits, stream);
    else launch<16>(ka, n_splits, stream);  // gemma4's global layers: head_dim 512
    const int64_t n_rows = static_cast<int64_t>(a.n_tokens) * a.n_heads;
    attention_combine_kernel<<<static_cast<unsigned>(n_rows), a.head_dim >= 128 ? 128 : 32, 0, stream>>>(
        a.partial, n_splits, n_rows, a.head_dim, a.sinks, a.n_heads, a.out);
    EMBER_CUDA_CHECK_LAUNCH("attention_combine_kernel");
}

}  // namespace ember::cuda
