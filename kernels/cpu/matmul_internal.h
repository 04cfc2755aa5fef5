// Internal to the CPU matmul: the int8 formats shared by the dispatcher (matmul.cpp) and the
// per-ISA kernel files (matmul_scalar.cpp, matmul_avx2.cpp, matmul_avx512.cpp), and the table
// of kernels each ISA file exports. Not part of the public API.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/dtype.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/prefetch.h"

namespace ember::cpu::detail {

// Elements per "chunk": the unit the int8 kernels unpack and reduce at once (8 zmm or 16 ymm
// of bytes). Activations are padded with zeros to a multiple of it.
inline constexpr int kChunk = 512;

// How a quantized type maps onto u8 x s8 integer dot products: every element is
// x = scale[b] * (q - offset) + min[b] with q an unsigned code, per block b of G elements.
// In every supported type exactly one of offset / has_min is set.
struct Int8Kind {
    int G = 32;            // elements per scale block (32, or 16 for Q2_K/Q3_K/Q6_K)
    int offset = 0;        // subtracted from every code (8 for Q4_0, 128 for Q8_0, ...)
    bool has_min = false;  // per-block additive term (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K)
    // The activations' d and dsum rounded to half floats after the codes are chosen: ggml
    // multiplies these weight types with q8_0 / q8_1 activations, whose scales are stored as
    // halves (the K-quants' q8_K keeps a float). Rounded the same way, the two engines' integer
    // dot products are scaled by the same numbers, and what remains is summation order.
    bool half_scale = false;
};

// False for types that take the float path (F32, F16, BF16) or are unsupported.
bool int8_kind(DType type, Int8Kind* kind);

// Activations quantized for one matmul call. Per G-block of each token: codes q (int8,
// q = round(x / d)), the scale d = max|x| / 127, init = -offset * sum(q) (starts the integer
// accumulator, folding in the weights' code offset) and dsum = d * sum(q) (for has_min);
// with Int8Kind::half_scale, d and dsum are then rounded to half floats (round_half_scales).
// Rows are zero-padded to kpad elements (a multiple of kChunk).
//
// Two layouts:
//  * tile == 0 (gemv, scalar): natural. qs[t][kpad], d/init/dsum[t][nb]. (The AVX-512
//    table permutes Q4_0's codes within each 128-element group; see quantize_q4_0_order.)
//  * tile == NR > 0 (gemm): tokens in tiles of NR (the last one zero-padded); per tile, per
//    block a record of qs[G/4][NR][4] (4 consecutive codes of each token in turn, what a
//    broadcast feeds a u8 x s8 dot instruction) then d[NR], init[NR], dsum[NR]. One pointer
//    walks a tile linearly.
struct ActQ8 {
    int64_t n_tokens = 0;
    int64_t cols = 0;
    int64_t kpad = 0;
    int G = 32;
    int tile = 0;
    // tile == 0
    int8_t* qs = nullptr;
    float* d = nullptr;
    int32_t* init = nullptr;
    float* dsum = nullptr;
    // tile > 0
    uint8_t* tiled = nullptr;

    int64_t nb() const { return kpad / G; }
    size_t rec_bytes() const { return static_cast<size_t>(tile) * (static_cast<size_t>(G) + 12); }
    size_t tile_bytes() const { return static_cast<size_t>(nb()) * rec_bytes(); }
    int64_t n_tiles() const { return tile ? (n_tokens + tile - 1) / tile : 0; }
};

// Before quantize_tiled fills tokens [t0, t1) (whole tiles, but for the last tile of the
// call): a partial last tile is zeroed first, since the kernels compute its missing tokens
// and drop them. Every other byte they read gets written (the blocks past `cols` that pad
// a row to kpad are never read), so nothing else is cleared: zeroing whole tiles cost
// 2 % of a SmolLM2 serving profile, most of it in prompt processing.
inline void zero_partial_tile(ActQ8& a, int64_t t1) {
    if (t1 % a.tile != 0) std::memset(a.tiled + (t1 - 1) / a.tile * a.tile_bytes(), 0, a.tile_bytes());
}

// The canonical reduction order (kernels/cpu/README.md): every path and ISA computes each
// output element y[t][r] this way, so a row's bits depend neither on the other tokens of the
// call (gemv or gemm, tile position) nor on the instruction set.
//  * 16 partial sums ("lanes"), each a chain of fused multiply-adds in increasing order over
//    its terms. Quantized weights: lane j takes the blocks b with b % 16 == j (blocks of G
//    activations); block b adds
//      f = float(isum_b) * d_x[b];  acc = fma(f, scale_w[b], acc);
//      [has_min: acc = fma(min_w[b], dsum_x[b], acc)]
//    (isum_b: the exact integer dot product including init). The zero blocks that pad a row
//    to whole 512-element chunks add exactly nothing (fma(0, 0, acc) == acc: a lane starts
//    at +0 and cannot reach -0 short of an underflow), so a kernel may compute or skip them;
//    skipping saves up to 44 % of the work on short rows (576 columns: 1024 padded).
//    Float weights: lane j takes the columns c with c % 16 == j: acc = fma(w[c], x[c], acc).
//  * then one fixed tree over the lanes (reduce16).
inline constexpr int kLanes = 16;

// Sums 16 partial sums as the AVX-512 horizontal sum does: lanes j + j+8, then j + j+4,
// j + j+2, j + j+1. `add` adds two of them (scalars or vectors holding several outputs).
template <class V, class Add>
inline V reduce16(V* p, Add add) {
    for (int w = kLanes / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) p[j] = add(p[j], p[j + w]);
    return p[0];
}

// Software prefetch for the gemv (decode) kernels, which read every weight byte once from
// DRAM. The hardware prefetchers alone keep too few lines in flight for one or two cores to
// approach the DRAM bandwidth; requesting the bytes kPrefetchAhead past the ones being read
// raised decode of the 1B shape by 8-14 % on the 2-core Zen 5 VM. 8 KiB: 4-8 KiB measured
// best while the host's bandwidth is low, 8-12 KiB while it is high (docs/BENCHMARKS.md).
// Prefetches never fault, so running past the matrix end is harmless.
inline constexpr int64_t kPrefetchAhead = 8192;

struct WeightPrefetch {
    int64_t step_bytes;  // weight bytes per kernel step (a chunk of `elems` elements)

    WeightPrefetch(const WeightMatrix& W, int64_t elems)
        : step_bytes((static_cast<int64_t>(W.row_bytes) * elems + W.cols - 1) / W.cols) {}

    // Before the first row of a range: the first kPrefetchAhead bytes, which step() skips.
    static void start(const WeightMatrix& W, int64_t r0, int64_t r1) {
        const auto* p = static_cast<const uint8_t*>(W.data) + r0 * static_cast<int64_t>(W.row_bytes);
        const int64_t n = std::min<int64_t>(kPrefetchAhead, (r1 - r0) * static_cast<int64_t>(W.row_bytes));
        for (int64_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
    }
    // The locality a gemv prefetches a type's weights with: 2 (L2 only) for super-block
    // (K-quant) types, whose chunks take more loads and compute per byte, so 8 KiB run ahead
    // in L1 evicted the activations; 3 (L1) for the rest (measured: kernels/cpu/matmul_avx512.cpp).
    static constexpr int locality_for(int64_t block_elems) { return block_elems == 256 ? 2 : 3; }
    // Before reading the step that starts at p (kLocality: as step_fixed's).
    template <int kLocality = 3>
    void step(const uint8_t* p) const {
        for (int64_t o = 0; o < step_bytes; o += 64) __builtin_prefetch(p + kPrefetchAhead + o, 0, kLocality);
    }
    // The same for steps of kBytes known at compile time: unrolled, so a decode kernel spends
    // no loop instructions on it (Q4_0: 5 prefetches per 288-byte chunk). kLocality 3 brings
    // the bytes into L1 ahead of use, 2 only into L2 (see gemv_q8_t for which kernels use 2).
    template <int64_t kBytes, int kLocality = 3>
    static void step_fixed(const uint8_t* p) {
#pragma GCC unroll 32
        for (int64_t o = 0; o < kBytes; o += 64) __builtin_prefetch(p + kPrefetchAhead + o, 0, kLocality);
    }
};

// Scratch for one thread, owned by the dispatcher, reused between calls.
struct Scratch {
    uint8_t* data = nullptr;
    size_t size = 0;
};

// Kernels one ISA provides. The matmul ones process rows [r0, r1) of W for every token.
struct KernelTable {
    // Quantizes tokens [t0, t1) of X into act (arrays already allocated, layout per
    // act.tile; with tiles, t0 is a multiple of the tile and t1 the end of a tile or n).
    void (*quantize_act)(const float* X, int64_t t0, int64_t t1, const Int8Kind& kind, ActQ8& act);
    // gemv: each weight row is unpacked once and dotted with every token (few tokens; act
    // in natural layout). gemm: rows are repacked into panels of panel_rows rows and
    // multiplied in register tiles (r0 a multiple of panel_rows; act tiled by gemm_tile).
    void (*gemv_q8)(const WeightMatrix& W, const Int8Kind& kind, const ActQ8& act, int64_t r0, int64_t r1, float* Y,
                    Scratch& scratch);
    void (*gemm_q8)(const WeightMatrix& W, const Int8Kind& kind, const ActQ8& act, int64_t r0, int64_t r1, float* Y,
                    Scratch& scratch);
    // Float kernels (weights converted to f32 on the fly). gemv_f32 reads X as given;
    // gemm_f32 reads X packed by pack_x_tiles with f32_tile tokens per tile.
    void (*gemv_f32)(const WeightMatrix& W, const float* X, int64_t n_tokens, int64_t r0, int64_t r1, float* Y,
                     Scratch& scratch);
    void (*gemm_f32)(const WeightMatrix& W, const float* xtiles, int64_t n_tokens, int64_t r0, int64_t r1, float* Y,
                     Scratch& scratch);
    float (*dot_f32)(const float* a, const float* b, int64_t n);
    int panel_rows;       // rows per gemm panel
    int gemm_tile;        // tokens per activation tile for gemm_q8 (0: natural layout)
    int f32_tile;         // tokens per X tile for gemm_f32 (0: X as given)
    int gemv_max_tokens;  // up to this many tokens gemv_q8 / gemv_f32 run (one pass for int8)
    size_t (*scratch_bytes)(const WeightMatrix& W, int64_t n_tokens);
    // Q4_0 / Q4_1 / Q8_0 in WeightLayout::Panels, any number of tokens (act tiled by gemm_tile); rows
    // [r0, r1), r0 a multiple of 32. nullptr: this ISA has no panel kernels (matmul then
    // converts the matrix back to rows).
    void (*gemm_panels)(const WeightMatrix& W, const ActQ8& act, int64_t r0, int64_t r1, float* Y, Scratch& scratch);
};

// Column order of the float gemm's packed operands: column c sits at position
// (c % 16) * kq + c / 16 with kq = ceil(K / 16), so each canonical lane's columns are
// contiguous, in the order its chain takes them; positions past K hold zeros.
inline int64_t lane_cols(int64_t K) { return (K + kLanes - 1) / kLanes; }
inline int64_t lane_pos(int64_t c, int64_t kq) { return c % kLanes * kq + c / kLanes; }

// Packs tokens [t0, t1) of X (n x K, t0 a multiple of `tile`) as tiles of `tile` tokens,
// each [16 kq positions (lane_pos)][tile] floats, so a kernel broadcasts x[t][c] from
// consecutive addresses; tokens past n and positions past K are zeros.
void pack_x_tiles(const float* X, int64_t n, int64_t K, int tile, int64_t t0, int64_t t1, float* out);

const KernelTable& kernels_scalar();
const KernelTable* kernels_avx2();    // nullptr if not compiled in
const KernelTable* kernels_avx512();  // nullptr if not compiled in

}  // namespace ember::cpu::detail
