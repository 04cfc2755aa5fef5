#include "kernels/backend.h"

#include <string>

#include "kernels/common/error.h"
#include "kernels/common/topk.h"

namespace ember {

Tensor Tensor::shaped(DType type, int64_t cols, int64_t rows) {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    if (!info) throw Error("unknown tensor type " + std::to_string(static_cast<uint32_t>(type)));
    if (cols < 0 || rows < 0 || cols % info->block_elems != 0)
        throw Error(std::to_string(cols) + " columns is not a whole number of " + std::string(info->name) + " blocks");
    Tensor t;
    t.type = type;
    t.cols = cols;
    t.rows = rows;
    t.row_bytes = ember::row_bytes(*info, static_cast<uint64_t>(cols));
    return t;
}

Tensor Tensor::slice_rows(int64_t first, int64_t n) const {
    Tensor t = *this;
    t.data = static_cast<uint8_t*>(data) + static_cast<size_t>(first) * row_bytes;
    t.rows = n;
    return t;
}

// Only for contiguous plain-float tensors: the per-head view of q/k activations.
Tensor Tensor::reshape(int64_t new_cols) const {
    Tensor t = *this;
    const int64_t total = cols * rows;
    t.cols = new_cols;
    t.rows = total / new_cols;
    t.row_bytes = row_bytes / static_cast<size_t>(cols) * static_cast<size_t>(new_cols);
    return t;
}

void apply_adjustments(std::span<float> row, const TopKRow& adj) {
    const auto n = static_cast<int64_t>(row.size());
    for (const TokenCount& p : adj.penalized)
        if (p.id >= 0 && p.id < n)
            row[static_cast<size_t>(p.id)] = topk::penalized(row[static_cast<size_t>(p.id)], p.count, adj.repeat_penalty,
                                                             adj.presence_penalty, adj.frequency_penalty);
    for (const TokenBias& b : adj.bias)
        if (b.id >= 0 && b.id < n) row[static_cast<size_t>(b.id)] = topk::biased(row[static_cast<size_t>(b.id)], b.bias);
}

}  // namespace ember
