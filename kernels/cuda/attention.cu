// Causal attention over the block KV cache: two kernels writing the same split partials.
//   - attention_kernel (decode, mixed batches, head dims the other lacks): FP32 on CUDA cores.
//   - attention_tc_kernel (prefill: >= 16 tokens, query tiles >= 8 tokens on average; head
//     dims 64/80/96/128/256): FlashAttention-2 style on tensor cores (wmma FP16 x FP16 ->
//     FP32), described where it is defined below.
//
// Work unit (one thread block): a query tile x one group of G query heads that share a KV
// head (GQA) x one split of the key range.
//   - Query tile: up to TQ consecutive batch tokens of the same sequence (tiles of <= 32
//     tokens are built once per batch on the host; each is cut into sub-tiles of TQ = P / G
//     tokens, P <= 32 (query, head) pairs per block; 64 for the tensor-core kernel).
//   - Keys are streamed in tiles of 32 positions, gathered through the block table and
//     converted (F16 or Q8_0) to FP32 (FP16 for tensor cores) in shared memory, so one key
//     tile serves all P pairs.
//   - attention_kernel: within a key tile each lane owns one key: its score is a length-D dot
//     product against the pair's query (shared memory broadcast); the warp then folds the 32
//     scores into an online softmax (running max m, running sum l) and each lane accumulates
//     D/32 output dimensions from the value tile.
//   - Split-K (flash-decoding): when there are too few blocks to fill the GPU (decode: one
//     token per sequence) the key range is split; each split writes its (m, l, acc[D])
//     partial and attention_combine_kernel merges them.
// Masks: key j is visible to a query at position p iff first(p) <= j <= p, first(p) =
// p - window + 1 (sliding window) or 0. Soft-capping: s = cap * tanh(s / cap). Sinks: one
// more term e^sink in a head's denominator, added where the splits are combined.
//
// Cost per (query, head): reads the visible K and V rows once per query tile: decode is
// bound by KV bytes (2 * n_keys * D * 2 bytes for F16 per KV head, shared by G heads);
// prefill does ~4 * D FLOPs per (query, head, key): on tensor cores where
// attention_tc_kernel takes the batch, else in FP32 on the CUDA cores.
#include <mma.h>  // nvcuda::wmma; in emulated builds kernels/cuda/emu/include/mma.h

#include <atomic>
#include <climits>
#include <cstdlib>
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
    int group;           // G: query heads per block
    int groups_per_kv;   // rep / G
    int tile_tokens;     // TQ
    int subtiles;        // ceil(32 / TQ)
    int tc_warps;        // warps of attention_tc_kernel's blocks; 0: attention_kernel
    int pairs_per_warp;  // attention_kernel's PW
};

__device__ __forceinline__ float load_kv(const uint8_t* row, int kv_type, int e) {
    if (kv_type == kQ8_0) {
        const uint8_t* blk = row + (e >> 5) * 34;
        return static_cast<float>(static_cast<int8_t>(blk[2 + (e & 31)])) * ld_half(blk);
    }
    return h2f(reinterpret_cast<const uint16_t*>(row)[e]);
}

// What one block works on (both kernels): query sub-tile, head group, this split's keys.
struct BlockWork {
    int tq0, ntq;          // first batch token, tokens (ntq <= 0: nothing to do)
    int h0, kvh, n_pairs;  // first query head, its KV head, (token, head) pairs = ntq * G
    int k_begin, k_end;    // this split's key positions
    const int32_t* table;  // the sequence's block table row
};

__device__ __forceinline__ BlockWork block_work(const KernelArgs& ka) {
    const AttentionArgs& a = ka.a;
    BlockWork w{};
    const int tile = blockIdx.x / ka.subtiles, sub = blockIdx.x % ka.subtiles;
    const int2 td = a.tiles[tile];
    w.tq0 = td.x + sub * ka.tile_tokens;
    w.ntq = min(ka.tile_tokens, td.x + td.y - w.tq0);
    if (w.ntq <= 0) return w;
    w.kvh = blockIdx.y / ka.groups_per_kv;
    w.h0 = w.kvh * (a.n_heads / a.n_kv_heads) + (blockIdx.y % ka.groups_per_kv) * ka.group;
    w.n_pairs = w.ntq * ka.group;
    w.table = a.block_table + static_cast<int64_t>(a.seq_of[w.tq0]) * a.max_blocks;
    // Keys any query of the sub-tile can see.
    int lo = INT_MAX, hi = 0;
    for (int i = 0; i < w.ntq; ++i) {
        const int pos = a.positions[w.tq0 + i];
        lo = min(lo, a.window > 0 ? max(0, pos - a.window + 1) : 0);
        hi = max(hi, pos + 1);
    }
    // This split's share of the tile's key range (a multiple of kKeyTile; trailing splits of
    // a short range may be empty and then write m = -inf, l = 0).
    const int n_splits = static_cast<int>(gridDim.z);
    const int split_size = ((hi - lo + n_splits - 1) / n_splits + kKeyTile - 1) / kKeyTile * kKeyTile;
    w.k_begin = lo + static_cast<int>(blockIdx.z) * split_size;
    w.k_end = min(hi, w.k_begin + split_size);
    return w;
}

__device__ __forceinline__ int64_t kv_slot(const AttentionArgs& a, const int32_t* table, int pos) {
    return static_cast<int64_t>(table[pos / a.block_tokens]) * a.block_tokens + pos % a.block_tokens;
}

// Partial results of a split: [split][token][head][m, l, acc[D]].
__device__ __forceinline__ float* partial_row(const AttentionArgs& a, int t, int h) {
    return a.partial + ((static_cast<int64_t>(blockIdx.z) * a.n_tokens + t) * a.n_heads + h) * (a.head_dim + 2);
}

// NE = ceil(D / 32): output dimensions per lane (lane owns d = lane + 32 e). PW: pairs per
// warp at most (p = warp + kWarps i): 8 for query tiles, 2 for decode (G <= 8 pairs a block),
// whose accumulators then take a quarter of the registers.
template <int NE, int PW>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const KernelArgs ka) {
    const AttentionArgs& a = ka.a;
    extern __shared__ float smem[];
    const int D = a.head_dim;
    const int KS = D + 1;  // padded K rows: lane j reading row j hits bank (j + d) % 32
    float* Ks = smem;
    float* Vs = Ks + kKeyTile * KS;
    float* Qs = Vs + kKeyTile * D;

    const BlockWork w = block_work(ka);
    if (w.ntq <= 0) return;  // uniform over the block, before any barrier
    const int G = ka.group, tq0 = w.tq0, h0 = w.h0, kvh = w.kvh, n_pairs = w.n_pairs;
    const int k_begin = w.k_begin, k_end = w.k_end;
    const int32_t* table = w.table;

    for (int idx = threadIdx.x; idx < n_pairs * D; idx += blockDim.x) {
        const int p = idx / D, d = idx % D;
        const int t = tq0 + p / G, h = h0 + p % G;
        Qs[idx] = a.q[(static_cast<int64_t>(t) * a.n_heads + h) * D + d];
    }

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float m[PW], l[PW], acc[PW][NE];
#pragma unroll
    for (int i = 0; i < PW; ++i) {
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
                const int64_t slot = kv_slot(a, table, pos);
                kv_k = load_kv(a.k + slot * a.kv_row_bytes, a.kv_type, kvoff + d);
                kv_v = load_kv(a.v + slot * a.kv_row_bytes, a.kv_type, kvoff + d);
            }
            Ks[j * KS + d] = kv_k;
            Vs[j * D + d] = kv_v;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < PW; ++i) {
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
    for (int i = 0; i < PW; ++i) {
        const int p = warp + kWarps * i;
        if (p >= n_pairs) break;
        const int t = tq0 + p / G, h = h0 + p % G;
        float* out = partial_row(a, t, h);
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

// ---- Prefill on tensor cores (FlashAttention-2 style) ---------------------------------------
// Rows of a block: its (token, head) pairs, 16 per warp (one wmma M tile), up to kTcWarps
// warps; the K/V tile of kKeyTile keys is staged in shared memory as FP16 (F16 cache: the
// stored bits; Q8_0: q * d rounded once) and shared by all rows. Per key tile each warp
//   S (16 x 32)  = Q K^T on tensor cores (Q as FP16 fragments, held for the whole kernel;
//                  FP32 accumulators), stored to its shared S tile;
//   softmax      : scale, soft-cap, mask, online max / sum in FP32, two lanes per row;
//                  P = e^(s - m) rounded to FP16; the row's O rescaled when m grew;
//   O (16 x D)  += P V on tensor cores, O kept in shared memory as FP32 (loaded into
//                  accumulator fragments per 16 columns and stored back).
// wmma fragments have no element layout to rely on, so the row-wise softmax and rescale go
// through shared memory: S out, P in, O in and out per tile (an mma.sync version would keep
// S, P and O in registers). Output: the same partials as attention_kernel, so split-K and
// sinks go through attention_combine_kernel unchanged.
constexpr int kTcWarps = 4;
constexpr int kTcRows = 16;  // rows per warp

// Shared memory layout (element strides padded against bank conflicts; every wmma pointer
// stays 32-byte aligned): K, V [kKeyTile][D + 8] halves; per warp S [16][36] floats,
// P [16][40] halves, O [16][D + 4] floats (Q's FP16 staging before the first tile).
struct TcSmem {
    static constexpr int kLdS = kKeyTile + 4, kLdP = kKeyTile + 8;
    static __host__ __device__ constexpr int ldh(int D) { return D + 8; }
    static __host__ __device__ constexpr int ldo(int D) { return D + 4; }
    static __host__ __device__ constexpr size_t kv_bytes(int D) { return size_t{2} * kKeyTile * ldh(D) * 2; }
    static __host__ __device__ constexpr size_t warp_bytes(int D) {
        return size_t{kTcRows} * (kLdS * 4 + kLdP * 2 + ldo(D) * 4);
    }
    static __host__ __device__ constexpr size_t bytes(int D, int warps) { return kv_bytes(D) + warps * warp_bytes(D); }
};

// Two floats rounded to FP16, as the bits of a half2 (lo in the low half).
__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
    return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
           static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16;
}

// Stages keys [kt, kt + kKeyTile) of KV head kvh as FP16 rows (zeros past k_end): 8 values
// (16 bytes of an F16 row) per thread step.
template <int D>
__device__ __forceinline__ void stage_kv_tile(const AttentionArgs& a, const BlockWork& w, int kt, __half* Ks,
                                              __half* Vs) {
    constexpr int kLd = TcSmem::ldh(D), kChunks = D / 8;
    for (int idx = threadIdx.x; idx < kKeyTile * kChunks; idx += blockDim.x) {
        const int j = idx / kChunks, d0 = (idx % kChunks) * 8, pos = kt + j;
        uint4 kk = make_uint4(0, 0, 0, 0), vv = kk;
        if (pos < w.k_end) {
            const int64_t off = kv_slot(a, w.table, pos) * static_cast<int64_t>(a.kv_row_bytes);
            const int e = w.kvh * D + d0;
            if (a.kv_type == kF16) {
                kk = *reinterpret_cast<const uint4*>(a.k + off + 2 * e);
                vv = *reinterpret_cast<const uint4*>(a.v + off + 2 * e);
            } else {  // Q8_0: 34-byte blocks of 32 values, a half scale then 32 int8
                const uint8_t* kb = a.k + off + (e >> 5) * 34;
                const uint8_t* vb = a.v + off + (e >> 5) * 34;
                const float dk = ld_half(kb), dv = ld_half(vb);
                const int8_t* qk = reinterpret_cast<const int8_t*>(kb + 2 + (e & 31));
                const int8_t* qv = reinterpret_cast<const int8_t*>(vb + 2 + (e & 31));
                kk = make_uint4(half2_bits(qk[0] * dk, qk[1] * dk), half2_bits(qk[2] * dk, qk[3] * dk),
                                half2_bits(qk[4] * dk, qk[5] * dk), half2_bits(qk[6] * dk, qk[7] * dk));
                vv = make_uint4(half2_bits(qv[0] * dv, qv[1] * dv), half2_bits(qv[2] * dv, qv[3] * dv),
                                half2_bits(qv[4] * dv, qv[5] * dv), half2_bits(qv[6] * dv, qv[7] * dv));
            }
        }
        *reinterpret_cast<uint4*>(Ks + j * kLd + d0) = kk;
        *reinterpret_cast<uint4*>(Vs + j * kLd + d0) = vv;
    }
}

// One lane's share of the online softmax: row r = lane / 2, keys half = lane % 2 of the
// tile. Reads the warp's S tile, writes P, rescales the lane's half of the O row.
struct TcRowState {
    float m = -INFINITY, l = 0.0f;
    int pos = -1, first = 0;  // the row's query position and first visible key (pos < 0: no row)
};

template <int D>
__device__ __forceinline__ void tc_softmax(const AttentionArgs& a, TcRowState& st, int kt, int k_end, const float* Sw,
                                           __half* Pw, float* Ow) {
    const int lane = threadIdx.x & 31, r = lane >> 1, part = lane & 1;
    float s[16];
    float tmax = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const int key = kt + part * 16 + j;
        float v = Sw[r * TcSmem::kLdS + part * 16 + j] * a.scale;
        if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
        const bool valid = key < k_end && key <= st.pos && key >= st.first;
        s[j] = valid ? v : -INFINITY;
        tmax = fmaxf(tmax, s[j]);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(kFullMask, tmax, 1));
    const float m_new = fmaxf(st.m, tmax);
    // Nothing visible yet (m_new = -inf): P = 0 and the row stays as it is.
    const float corr = m_new == -INFINITY ? 1.0f : expf(st.m - m_new);  // 0 when m was -inf
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const float p = s[j] == -INFINITY ? 0.0f : expf(s[j] - m_new);
        Pw[r * TcSmem::kLdP + part * 16 + j] = __float2half_rn(p);
        sum += p;
    }
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    st.l = st.l * corr + sum;
    st.m = m_new;
    if (corr != 1.0f) {
        float* o = Ow + r * TcSmem::ldo(D) + part * (D / 2);
        for (int d = 0; d < D / 2; ++d) o[d] *= corr;
    }
}

template <int D>
__global__ void __launch_bounds__(kTcWarps * 32) attention_tc_kernel(const KernelArgs ka) {
    namespace wmma = nvcuda::wmma;
    constexpr int kNc = D / 16, kLdh = TcSmem::ldh(D), kLdo = TcSmem::ldo(D);
    const AttentionArgs& a = ka.a;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    const BlockWork w = block_work(ka);
    if (w.ntq <= 0) return;  // uniform over the block, before any barrier

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __half* Ks = reinterpret_cast<__half*>(tc_smem);
    __half* Vs = Ks + kKeyTile * kLdh;
    unsigned char* wbase = tc_smem + TcSmem::kv_bytes(D) + warp * TcSmem::warp_bytes(D);
    float* Sw = reinterpret_cast<float*>(wbase);
    __half* Pw = reinterpret_cast<__half*>(Sw + kTcRows * TcSmem::kLdS);
    float* Ow = reinterpret_cast<float*>(Pw + kTcRows * TcSmem::kLdP);
    const int row0 = warp * kTcRows;  // the warp's first pair

    // Q rows as FP16 (zeros past the block's pairs) staged in the O area, then fragments.
    __half* Qw = reinterpret_cast<__half*>(Ow);
    for (int idx = lane; idx < kTcRows * D; idx += 32) {
        const int r = idx / D, d = idx % D, p = row0 + r;
        const float v =
            p < w.n_pairs ? a.q[(static_cast<int64_t>(w.tq0 + p / ka.group) * a.n_heads + w.h0 + p % ka.group) * D + d]
                          : 0.0f;
        Qw[r * kLdh + d] = __float2half_rn(v);
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qf[kNc];
#pragma unroll
    for (int c = 0; c < kNc; ++c) wmma::load_matrix_sync(qf[c], Qw + c * 16, kLdh);
    __syncwarp();
    for (int idx = lane; idx < kTcRows * kLdo; idx += 32) Ow[idx] = 0.0f;

    TcRowState st;
    {
        const int p = row0 + (lane >> 1);
        if (p < w.n_pairs) {
            st.pos = a.positions[w.tq0 + p / ka.group];
            st.first = a.window > 0 ? max(0, st.pos - a.window + 1) : 0;
        }
    }
    const bool warp_has_rows = row0 < w.n_pairs;  // uniform over the warp

    for (int kt = w.k_begin; kt < w.k_end; kt += kKeyTile) {
        __syncthreads();  // the previous K/V tile has been read
        stage_kv_tile<D>(a, w, kt, Ks, Vs);
        __syncthreads();
        if (!warp_has_rows) continue;
        for (int n = 0; n < kKeyTile / 16; ++n) {  // S = Q K^T, 16 keys at a time
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.0f);
#pragma unroll
            for (int c = 0; c < kNc; ++c) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> kf;  // K^T: [d][key]
                wmma::load_matrix_sync(kf, Ks + n * 16 * kLdh + c * 16, kLdh);
                wmma::mma_sync(sf, qf[c], kf, sf);
            }
            wmma::store_matrix_sync(Sw + n * 16, sf, TcSmem::kLdS, wmma::mem_row_major);
        }
        __syncwarp();
        tc_softmax<D>(a, st, kt, w.k_end, Sw, Pw, Ow);
        __syncwarp();
#pragma unroll 1                         // unrolled, ptxas spilled at head_dim 128 (72 registers)
        for (int c = 0; c < kNc; ++c) {  // O += P V, 16 output columns at a time
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, Ow + c * 16, kLdo, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < kKeyTile / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vf;
                wmma::load_matrix_sync(pf, Pw + kk * 16, TcSmem::kLdP);
                wmma::load_matrix_sync(vf, Vs + kk * 16 * kLdh + c * 16, kLdh);
                wmma::mma_sync(of, pf, vf, of);
            }
            wmma::store_matrix_sync(Ow + c * 16, of, kLdo, wmma::mem_row_major);
        }
        __syncwarp();
    }

    if (!warp_has_rows) return;
    const int r = lane >> 1;
    if ((lane & 1) == 0 && row0 + r < w.n_pairs) {
        const int p = row0 + r;
        float* out = partial_row(a, w.tq0 + p / ka.group, w.h0 + p % ka.group);
        out[0] = st.m;
        out[1] = st.l;
    }
    for (int idx = lane; idx < kTcRows * D; idx += 32) {
        const int rr = idx / D, d = idx % D, p = row0 + rr;
        if (p < w.n_pairs) partial_row(a, w.tq0 + p / ka.group, w.h0 + p % ka.group)[2 + d] = Ow[rr * kLdo + d];
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

// The tensor-core kernel's head dims (its Q fragments are a register array: one template
// per size). Others (8, 512, ...) run attention_kernel.
bool tc_head_dim(int D) { return D == 64 || D == 80 || D == 96 || D == 128 || D == 256; }

// Warps per tensor-core block: enough rows for a 32-token tile's pairs (<= 4 warps), fewer
// while the shared memory does not fit (head_dim 256 below sm_80); 0 when one warp does not.
int tc_warps(const AttentionArgs& a, int group) {
    int warps = (kAttnTileTokens * group + kTcRows - 1) / kTcRows;
    for (warps = warps < kTcWarps ? warps : kTcWarps; warps >= 1; --warps)
        if (TcSmem::bytes(a.head_dim, warps) <= a.smem_optin) return warps;
    return 0;
}

// Prefill (>= 16 tokens, query tiles 8 tokens long on average) takes the tensor-core kernel
// where it supports the shape; decode and decode-heavy mixed batches keep attention_kernel,
// whose blocks hold 32 pairs of any token count. EMBER_CUDA_ATTN_TC=0 turns it off (A/B runs).
bool use_tensor_cores(const AttentionArgs& a, int group) {
    static const bool disabled = [] {
        const char* e = std::getenv("EMBER_CUDA_ATTN_TC");
        return e && std::string(e) == "0";
    }();
    if (disabled || !tc_head_dim(a.head_dim)) return false;
    if (a.n_tokens < 16 || a.n_tokens < 8 * a.n_tiles) return false;
    // 16-byte loads of F16 rows (Q8_0 rows are read bytewise).
    if (a.kv_type == kF16 &&
        (a.kv_row_bytes % 16 != 0 || reinterpret_cast<uintptr_t>(a.k) % 16 || reinterpret_cast<uintptr_t>(a.v) % 16))
        return false;
    return tc_warps(a, group) > 0;
}

KernelArgs make_kernel_args(const AttentionArgs& a) {
    KernelArgs ka;
    ka.a = a;
    const int rep = a.n_heads / a.n_kv_heads;
    ka.group = largest_divisor_at_most(rep, kMaxPairsPerWarp);
    ka.groups_per_kv = rep / ka.group;
    ka.tc_warps = use_tensor_cores(a, ka.group) ? tc_warps(a, ka.group) : 0;
    ka.pairs_per_warp = kMaxPairsPerWarp;
    if (!ka.tc_warps && a.n_tokens == a.n_tiles) {  // decode: every query tile is one token
        ka.tile_tokens = ka.subtiles = 1;
        ka.pairs_per_warp = (ka.group + kWarps - 1) / kWarps;  // <= 2
        return ka;
    }
    const int pairs = ka.tc_warps ? ka.tc_warps * kTcRows : pairs_per_block(a, ka.group);
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
template <auto Kernel>
void allow_smem(size_t smem) {
    constexpr int kDevices = 64;
    static std::atomic<size_t> allowed[kDevices];
    int dev = 0;
    EMBER_CUDA_CHECK(cudaGetDevice(&dev));
    const bool cached = dev >= 0 && dev < kDevices;
    if (cached && smem <= allowed[dev].load()) return;
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    if (cached) allowed[dev].store(smem);
}

dim3 grid_of(const KernelArgs& ka, int n_splits) {
    return dim3(static_cast<unsigned>(ka.a.n_tiles * ka.subtiles),
                static_cast<unsigned>(ka.a.n_kv_heads * ka.groups_per_kv), static_cast<unsigned>(n_splits));
}

template <int NE, int PW>
void launch(const KernelArgs& ka, int n_splits, cudaStream_t stream) {
    const size_t smem = smem_bytes(ka.a.head_dim, ka.tile_tokens * ka.group);
    if (smem > 48 * 1024) allow_smem<attention_kernel<NE, PW>>(smem);
    attention_kernel<NE, PW><<<grid_of(ka, n_splits), kWarps * 32, smem, stream>>>(ka);
    EMBER_CUDA_CHECK_LAUNCH("attention_kernel");
}

template <int NE>
void launch(const KernelArgs& ka, int n_splits, cudaStream_t stream) {
    if (ka.pairs_per_warp <= 2) launch<NE, 2>(ka, n_splits, stream);
    else launch<NE, kMaxPairsPerWarp>(ka, n_splits, stream);
}

template <int D>
void launch_tc(const KernelArgs& ka, int n_splits, cudaStream_t stream) {
    const size_t smem = TcSmem::bytes(D, ka.tc_warps);
    if (smem > 48 * 1024) allow_smem<attention_tc_kernel<D>>(smem);
    attention_tc_kernel<D><<<grid_of(ka, n_splits), ka.tc_warps * 32, smem, stream>>>(ka);
    EMBER_CUDA_CHECK_LAUNCH("attention_tc_kernel");
}

void launch_any(const KernelArgs& ka, int n_splits, cudaStream_t stream) {
    const int D = ka.a.head_dim;
    if (ka.tc_warps) {
        if (D == 64) launch_tc<64>(ka, n_splits, stream);
        else if (D == 80) launch_tc<80>(ka, n_splits, stream);
        else if (D == 96) launch_tc<96>(ka, n_splits, stream);
        else if (D == 128) launch_tc<128>(ka, n_splits, stream);
        else launch_tc<256>(ka, n_splits, stream);
        return;
    }
    const int ne = (D + 31) / 32;
    if (ne <= 1) launch<1>(ka, n_splits, stream);
    else if (ne <= 2) launch<2>(ka, n_splits, stream);
    else if (ne <= 4) launch<4>(ka, n_splits, stream);
    else if (ne <= 8) launch<8>(ka, n_splits, stream);
    else launch<16>(ka, n_splits, stream);  // gemma4's global layers: head_dim 512
}

}  // namespace

int attention_splits(const AttentionArgs& a, int max_pos) {
    if (a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0) return 1;  // attention_validate throws
    const KernelArgs ka = make_kernel_args(a);
    // Blocks doing real work without splitting: ~one per TQ tokens per head group.
    const int64_t blocks =
        ((static_cast<int64_t>(a.n_tokens) + ka.tile_tokens - 1) / ka.tile_tokens) * ka.groups_per_kv * a.n_kv_heads;
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
    launch_any(make_kernel_args(a), n_splits, stream);
    const int64_t n_rows = static_cast<int64_t>(a.n_tokens) * a.n_heads;
    attention_combine_kernel<<<static_cast<unsigned>(n_rows), a.head_dim >= 128 ? 128 : 32, 0, stream>>>(
        a.partial, n_splits, n_rows, a.head_dim, a.sinks, a.n_heads, a.out);
    EMBER_CUDA_CHECK_LAUNCH("attention_combine_kernel");
}

}  // namespace ember::cuda
