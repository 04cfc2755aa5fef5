// The paged KV-cache layout the CPU attention kernels read (and the engine's KV-cache manager
// allocates). One layer:
//
//   K pool: n_blocks blocks of B slots,  V pool: the same shape. Slot s = block * B + offset
//   holds one token: n_kv_heads * head_dim values (row_bytes of them); a block is B * row_bytes
//   bytes, grouped by head inside (below).
//
//   block 0                         block 1           ...        B = block_tokens (16 or 32)
//   +-------------------------------+-----------------+
//   | head 0: slots 0..B-1 | head 1 | slots B .. 2B-1 |
//   +-------------------------------+-----------------+
//
// A sequence owns a list of block ids (its block table); its token j lives in slot
// block_table[j / B] * B + j % B. Blocks are handed out in any order and can be shared by
// sequences with a common prefix, so nothing is ever copied when sequences grow or fork.
//
// Element types: F16 (default; 2 bytes per value, exact enough for attention), or Q8_0
// (34 bytes per 32 values: half the memory, head_dim must be a multiple of 32 so heads
// start on block boundaries). Keys and values use the same type.
//
// Within a block, the bytes are grouped by head, so that the one task that reads a head reads
// one contiguous run per block (B * head_bytes: 2 KiB for 16 F16 slots of head_dim 64)
// instead of a slice of every row:
//  - values, and Q8_0 keys: head h's part of the row of slot offset o at byte
//    (h * B + o) * head_bytes of the block (head_row below); a Q8_0 head is whole 32-blocks;
//  - F16 keys, transposed: per head h its head_dim x B matrix dimension-major (value d of the
//    key at offset o at element h * head_dim * B + d * B + o; key_f16 below). The decode
//    kernel scores W keys at once with one load per dimension that way, instead of loading
//    W rows and transposing them in registers.
// A block keeps its size and its place, so block tables, sharing and the byte accounting do
// not depend on this.
//
// Bytes per token per layer = 2 * n_kv_heads * head_dim * (2 for F16, 34/32 for Q8_0);
// e.g. Llama-3.2-1B (8 KV heads x 64): 2 KiB per token per layer in F16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/cpu/prefetch.h"

namespace ember::cpu {

// A read-only view of one layer's K and V pools (see above).
struct KvCacheView {
    DType type = DType::F16;  // F16 or Q8_0
    const void* k = nullptr;  // K pool, n_blocks * block_tokens slots
    const void* v = nullptr;  // V pool, same shape
    size_t row_bytes = 0;     // bytes per slot row (n_kv_heads * head_dim values)
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    int32_t block_tokens = 16;  // B

    // Slot of token j for a sequence with this block table.
    int64_t slot(const int32_t* block_table, int64_t j) const {
        return int64_t{block_table[j / block_tokens]} * block_tokens + j % block_tokens;
    }
};

// Bytes of one slot row for `type` (F16 or Q8_0) and n_kv_heads * head_dim values.
inline size_t kv_row_bytes(DType type, int64_t kv_dim) {
    return type == DType::Q8_0 ? static_cast<size_t>(kv_dim / 32 * 34) : static_cast<size_t>(kv_dim) * 2;
}

// F16 keys: the element offset of dimension 0 of head `head`'s key in `slot` within the K
// pool; dimension d is block_tokens elements further per step (see above).
inline size_t key_f16_index(const KvCacheView& kv, int64_t slot, int32_t head) {
    const int64_t B = kv.block_tokens, block = slot / B;
    return static_cast<size_t>(block * B) * (kv.row_bytes / 2) + static_cast<size_t>(head) * kv.head_dim * B +
           static_cast<size_t>(slot % B);
}
inline const uint16_t* key_f16(const KvCacheView& kv, int64_t slot, int32_t head) {
    return static_cast<const uint16_t*>(kv.k) + key_f16_index(kv, slot, head);
}

// Values (and Q8_0 keys): byte offset of head `head`'s part of the row of `slot` in its pool.
inline size_t head_row_offset(const KvCacheView& kv, int64_t slot, int32_t head) {
    const int64_t B = kv.block_tokens, o = slot % B;
    return static_cast<size_t>(slot - o) * kv.row_bytes +
           static_cast<size_t>(int64_t{head} * B + o) * kv_row_bytes(kv.type, kv.head_dim);
}
inline const uint8_t* head_row(const KvCacheView& kv, const void* pool, int64_t slot, int32_t head) {
    return static_cast<const uint8_t*>(pool) + head_row_offset(kv, slot, head);
}

// Requests head `head`'s keys and values of tokens [j0, j1) of a sequence from memory
// (prefetch to L2), a whole block's run of each at a time: a batch of decodes reads every
// sequence's cache once per step, its blocks scattered over the pool, and the attention
// kernels would otherwise wait on DRAM for them.
inline void prefetch_kv(const KvCacheView& kv, const int32_t* block_table, int32_t head, int64_t j0, int64_t j1) {
    const int64_t B = kv.block_tokens;
    const size_t run = kv_row_bytes(kv.type, kv.head_dim) * static_cast<size_t>(B);
    for (int64_t j = j0; j < j1; j = (j / B + 1) * B) {
        const int64_t first = kv.slot(block_table, j) / B * B;
        prefetch_l2(head_row(kv, kv.v, first, head), run);
        prefetch_l2(kv.type == DType::F16 ? static_cast<const void*>(key_f16(kv, first, head))
                                          : static_cast<const void*>(head_row(kv, kv.k, first, head)),
                    run);
    }
}

}  // namespace ember::cpu
