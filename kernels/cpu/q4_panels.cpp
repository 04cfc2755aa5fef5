// The Q4_0 / Q4_1 panel layout's conversions (layout: q4_panels.h). Portable: repacking runs
// once per weight at load time and reads each byte once, so it is memory-bound anyway.
#include "kernels/cpu/q4_panels.h"

#include <cstring>

namespace ember::cpu::q4_panels {
namespace {

// A GGUF block: half-float d, (Q4_1) half-float m, then 16 nibble bytes.
struct Format {
    int64_t nb, bb, row_bytes, rec_bytes;
    int qs_off;  // nibble bytes within a block
    bool has_min;
    Format(DType t, int64_t cols)
        : nb(cols / 32),
          bb(block_bytes(t)),
          row_bytes(nb * bb),
          rec_bytes(record_bytes(t)),
          qs_off(t == DType::Q4_0 ? 2 : 4),
          has_min(t == DType::Q4_1) {}
};

// Byte offset, within a record, of row i's (0..31) nibble bytes 4k .. 4k + 3.
inline int nibble_offset(int i, int k) { return (i / 16) * kHalfBytes + k * 64 + (i % 16) * 4; }

// Copies block b of row i between GGUF bytes (blk) and its record (rec), either way.
template <bool kToPanel>
void move_block(const Format& f, int i, uint8_t* blk, uint8_t* rec) {
    const auto copy = [](uint8_t* to_panel, uint8_t* to_row, size_t n) {
        if constexpr (kToPanel) std::memcpy(to_panel, to_row, n);
        else std::memcpy(to_row, to_panel, n);
    };
    copy(rec + kScaleOff + 2 * i, blk, 2);
    if (f.has_min) copy(rec + kMinOff + 2 * i, blk + 2, 2);
    for (int k = 0; k < 4; ++k) copy(rec + nibble_offset(i, k), blk + f.qs_off + 4 * k, 4);
}

}  // namespace

void repack(DType type, const void* src, int64_t rows, int64_t cols, void* dst, ThreadPool& pool) {
    const Format f(type, cols);
    const int64_t panel_bytes = kRows * f.row_bytes, whole = rows / kRows;
    auto* s = const_cast<uint8_t*>(static_cast<const uint8_t*>(src));  // only read (move_block<true>)
    auto* d = static_cast<uint8_t*>(dst);
    pool.parallel_for(whole, [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p)
            for (int64_t b = 0; b < f.nb; ++b)
                for (int i = 0; i < kRows; ++i)
                    move_block<true>(f, i, s + p * panel_bytes + i * f.row_bytes + b * f.bb,
                                     d + p * panel_bytes + record_index(f.nb, b) * f.rec_bytes);
    });
    std::memcpy(d + whole * panel_bytes, s + whole * panel_bytes,
                static_cast<size_t>((rows - whole * kRows) * f.row_bytes));
}

void read_row(DType type, const void* panels, int64_t rows, int64_t cols, int64_t r, uint8_t* out) {
    const Format f(type, cols);
    auto* base = const_cast<uint8_t*>(static_cast<const uint8_t*>(panels));  // only read (move_block<false>)
    if (r >= rows / kRows * kRows) {                                         // a GGUF row past the last whole panel
        std::memcpy(out, base + r * f.row_bytes, static_cast<size_t>(f.row_bytes));
        return;
    }
    uint8_t* panel = base + r / kRows * kRows * f.row_bytes;
    for (int64_t b = 0; b < f.nb; ++b)
        move_block<false>(f, static_cast<int>(r % kRows), out + b * f.bb, panel + record_index(f.nb, b) * f.rec_bytes);
}

}  // namespace ember::cpu::q4_panels
