// Internal to the CPU matmul: the int8 formats shared by the dispatcher (matmul.cpp) and the
// per-ISA kernel files (matmul_avx2.cpp, matmul_avx512.cpp), and the table of kernels each
// ISA file exports. Not part of the public API.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/cpu/matmul.h"

namespace ember::cpu::detail {

// Elements per "chunk": the unit the int8 kernels unpack and reduce at once (8 zmm or 16 ymm
// of bytes). Activations are padded to a multiple of it.
inline constexpr int kChunk = 512;

// How a quantized type maps onto u8 x s8 integer dot products: every element is
// x = scale[b] * (q - offset) + min[b] with q an unsigned code, per block b of G elements.
struct Int8Kind {
    int G = 32;          // elements per scale block (32, or 16 for Q2_K/Q3_K/Q6_K)
    int offset = 0;      // subtracted from every code (8 for Q4_0, 128 for Q8_0, ...)
    bool has_min = false;  // per-block additive term (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K)
};

// False for types that take the float path (F32, F16, BF16) or are unsupported.
bool int8_kind(DType type, Int8Kind* kind);

// Activations quantized for one matmul call: per token, codes in natural element order and,
// per G-block, the scale, the integer offset correction and (for has_min types) d * sum.
// Arrays are padded with zeros up to `kpad` elements (a multiple of kChunk).
struct ActQ8 {
    int64_t n_tokens = 0;
    int64_t cols = 0;
    int64_t kpad = 0;       // padded row length of qs
    int G = 32;
    int8_t* qs = nullptr;    // [n_tokens][kpad]
    float* d = nullptr;      // [n_tokens][kpad / G]   block scale
    int32_t* init = nullptr; // [n_tokens][kpad / G]   -offset * sum(q in block)
    float* dsum = nullptr;   // [n_tokens][kpad / G]   d * sum(q in block)
    int64_t nb() const { return kpad / G; }
};

// Scratch for one thread, owned by the dispatcher, reused between calls.
struct Scratch {
    uint8_t* data = nullptr;
    size_t size = 0;
};

// Kernels one ISA provides. All of them process whole rows [r0, r1) of W for every token.
struct KernelTable {
    // Quantize tokens [t0, t1) of X into act (act's arrays already allocated).
    void (*quantize_act)(const float* X, int64_t t0, int64_t t1, const Int8Kind& kind, ActQ8& act);
    // Int8 kernels. gemv: each weight row is unpacked once and dotted with every token
    // (n_tokens small). gemm: rows [r0, r1) are repacked into panels of panel_rows rows and
    // multiplied in register tiles (r0 must be a multiple of panel_rows).
    void (*gemv_q8)(const WeightMatrix& W, const Int8Kind& kind, const ActQ8& act, int64_t r0,
                    int64_t r1, float* Y, Scratch& scratch);
    void (*gemm_q8)(const WeightMatrix& W, const Int8Kind& kind, const ActQ8& act, int64_t r0,
                    int64_t r1, float* Y, Scratch& scratch);
    // Float kernels (weights converted to f32 on the fly).
    void (*gemv_f32)(const WeightMatrix& W, const float* X, int64_t n_tokens, int64_t r0,
                     int64_t r1, float* Y, Scratch& scratch);
    void (*gemm_f32)(const WeightMatrix& W, const float* X, int64_t n_tokens, int64_t r0,
                     int64_t r1, float* Y, Scratch& scratch);
    float (*dot_f32)(const float* a, const float* b, int64_t n);
    int panel_rows;          // rows per gemm panel (r0 alignment for gemm_q8 / gemm_f32)
    size_t (*scratch_bytes)(const WeightMatrix& W, int64_t n_tokens);
};

const KernelTable& kernels_scalar();
const KernelTable* kernels_avx2();    // nullptr if not compiled in
const KernelTable* kernels_avx512();  // nullptr if not compiled in

}  // namespace ember::cpu::detail
