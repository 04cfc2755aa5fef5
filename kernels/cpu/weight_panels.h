// Q4_0, Q4_1 and Q8_0 weights rearranged at load time into "panels" that the AVX-512 kernels
// multiply without repacking them on every call (matmul.h, WeightLayout::Panels).
//
// Why: a batched step (several sequences decoding at once) multiplies each weight row with
// only a few tokens, so rebuilding the register-tile layout from GGUF rows took a quarter of
// the step. The panel layout is that tile layout in the file's own code width, so it has
// exactly the GGUF bytes' size and the decode path reads it as fast as rows.
//
// Layout of a matrix of R rows, nb = cols / 32 blocks per row (row_bytes = block bytes x nb):
//  * Rows [32 p, 32 p + 32) of every whole panel p occupy bytes [32 p row_bytes, 32 (p + 1)
//    row_bytes), like the rows they replace. Rows past the last whole panel (R % 32 of
//    them) stay GGUF rows at their usual offsets.
//  * A panel is nb records of 32 blocks' bytes, in the order the kernels visit blocks:
//    lane-major (blocks 0, 16, 32, ..., then 1, 17, ..., the canonical reduction order's
//    lanes, see matmul_internal.h), so a kernel reads its panel front to back.
//  * The record of block b starts with the 32 rows' codes, in 64-byte vectors whose dword i
//    belongs to row i of a half (rows 16 h .. 16 h + 15):
//      Q4_0 / Q4_1: for h = 0, 1, 4 vectors; dword i of vector k = nibble bytes 4k .. 4k + 3
//        of row 16 h + i (codes 4k .. 4k + 3 in the low nibbles, 16 + 4k .. in the high);
//      Q8_0: for g = 0 .. 7 and h = 0, 1, vector 2g + h; dword i = codes 4g .. 4g + 3 of row
//        16 h + i as unsigned bytes (the file's signed codes + 128, so the int8 kernels'
//        offset of 128 applies unchanged).
//    Then the 32 rows' half-float scales d, then (Q4_1) their half-float mins m.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace ember::cpu::weight_panels {

inline constexpr int kRows = 32;   // rows per panel
inline constexpr int kLanes = 16;  // lanes of the canonical reduction order

inline bool supports(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0; }
// GGUF block bytes: 18, 20, 34.
inline int block_bytes(DType t) { return t == DType::Q4_0 ? 18 : t == DType::Q4_1 ? 20 : 34; }
// Bytes of a record's codes; its scales follow, then (Q4_1) the mins at +64.
inline constexpr int code_bytes(DType t) { return t == DType::Q8_0 ? 1024 : 512; }
inline int record_bytes(DType t) { return kRows * block_bytes(t); }  // 576, 640, 1088

// Index of block b's record within its panel (nb blocks per row): lane j = b % 16 holds
// ceil((nb - j) / 16) records, lanes before it come first.
inline int64_t record_index(int64_t nb, int64_t b) {
    const int64_t j = b % kLanes, q = nb / kLanes, rem = nb % kLanes;
    return j * q + (j < rem ? j : rem) + b / kLanes;
}

// Rows [0, rows) of a matrix of a supported type in GGUF rows (`src`) written to `dst` in the
// panel layout (same size; src and dst must not overlap). Panels are split over the pool.
void repack(DType type, const void* src, int64_t rows, int64_t cols, void* dst, ThreadPool& pool);

// Row r of a matrix in the panel layout back as its GGUF bytes (row_bytes of them).
void read_row(DType type, const void* panels, int64_t rows, int64_t cols, int64_t r, uint8_t* out);

}  // namespace ember::cpu::weight_panels
