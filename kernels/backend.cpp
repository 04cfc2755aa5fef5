#include "kernels/backend.h"

namespace ember {

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

}  // namespace ember
