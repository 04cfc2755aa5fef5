// The weight panel layout's conversions (layout: weight_panels.h). Portable: repacking runs
// once per weight at load time and reads each byte once, so it is memory-bound anyway.
#include "kernels/cpu/weight_panels.h"

#include <cstring>

namespace ember::cpu::weight_panels {
namespace {

// A GGUF block: half-float d, (Q4_1) half-float m, then the codes (16 nibble bytes or 32
// signed bytes).
struct Format {
    DType type;
    int64_t nb, bb, row_bytes, rec_bytes;
    Format(DType t, int64_t cols)
        : type(t), nb(cols / 32), bb(block_bytes(t)), row_bytes(nb * bb), rec_bytes(record_bytes(t)) {}
};

// Copies n bytes from `from` to `to`, flipping the sign bit of each when `flip` (Q8_0's
// signed codes <-> the panel's unsigned ones: the same either way).
inline void copy(uint8_t* to, const uint8_t* from, int n, bool flip) {
    for (int i = 0; i < n; ++i) to[i] = flip ? static_cast<uint8_t>(from[i] ^ 0x80) : from[i];
}

// Moves block b of row i (0..31) between its GGUF bytes (blk) and its record (rec): into the
// record when kToPanel, else back.
template <bool kToPanel>
void move_block(const Format& f, int i, uint8_t* blk, uint8_t* rec) {
    const auto move = [](uint8_t* in_rec, uint8_t* in_blk, int n, bool flip = false) {
        if constexpr (kToPanel) copy(in_rec, in_blk, n, flip);
        else copy(in_blk, in_rec, n, flip);
    };
    const int codes = code_bytes(f.type), half = i / 16, lane = (i % 16) * 4;
    move(rec + codes + 2 * i, blk, 2);
    if (f.type == DType::Q4_1) move(rec + codes + 64 + 2 * i, blk + 2, 2);
    if (f.type == DType::Q8_0) {
        for (int g = 0; g < 8; ++g) move(rec + (2 * g + half) * 64 + lane, blk + 2 + 4 * g, 4, true);
    } else {
        const int qs = f.type == DType::Q4_0 ? 2 : 4;
        for (int k = 0; k < 4; ++k) move(rec + half * 256 + k * 64 + lane, blk + qs + 4 * k, 4);
    }
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

}  // namespace ember::cpu::weight_panels
