// The Q4_0 panel layout's conversions (layout: q4_0_panels.h). Portable: repacking runs once
// per weight at load time and reads each byte once, so it is memory-bound anyway.
#include "kernels/cpu/q4_0_panels.h"

#include <cstring>

namespace ember::cpu::q4_0_panels {
namespace {

// Byte offset, within block b's record, of row i's (0..31) nibble byte 4k + m.
inline int nibble_offset(int i, int k, int m) { return (i / 16) * kHalfBytes + k * 64 + (i % 16) * 4 + m; }

void repack_panel(const uint8_t* src, int64_t nb, int64_t row_bytes, uint8_t* dst) {
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* rec = dst + record_index(nb, b) * kRecordBytes;
        for (int i = 0; i < kRows; ++i) {
            const uint8_t* blk = src + i * row_bytes + b * kBlockBytes;
            std::memcpy(rec + kScaleOff + 2 * i, blk, 2);
            for (int k = 0; k < 4; ++k) std::memcpy(rec + nibble_offset(i, k, 0), blk + 2 + 4 * k, 4);
        }
    }
}

}  // namespace

void repack(const void* src, int64_t rows, int64_t cols, void* dst, ThreadPool& pool) {
    const int64_t nb = cols / 32, row_bytes = nb * kBlockBytes, panel_bytes = kRows * row_bytes;
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    const int64_t whole = rows / kRows;
    pool.parallel_for(whole, [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p) repack_panel(s + p * panel_bytes, nb, row_bytes, d + p * panel_bytes);
    });
    std::memcpy(d + whole * panel_bytes, s + whole * panel_bytes,
                static_cast<size_t>((rows - whole * kRows) * row_bytes));
}

void read_row(const void* panels, int64_t rows, int64_t cols, int64_t r, uint8_t* out) {
    const int64_t nb = cols / 32, row_bytes = nb * kBlockBytes;
    const auto* base = static_cast<const uint8_t*>(panels);
    if (r >= rows / kRows * kRows) {  // a GGUF row past the last whole panel
        std::memcpy(out, base + r * row_bytes, static_cast<size_t>(row_bytes));
        return;
    }
    const uint8_t* panel = base + r / kRows * kRows * row_bytes;
    const int i = static_cast<int>(r % kRows);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* rec = panel + record_index(nb, b) * kRecordBytes;
        uint8_t* blk = out + b * kBlockBytes;
        std::memcpy(blk, rec + kScaleOff + 2 * i, 2);
        for (int k = 0; k < 4; ++k) std::memcpy(blk + 2 + 4 * k, rec + nibble_offset(i, k, 0), 4);
    }
}

}  // namespace ember::cpu::q4_0_panels
