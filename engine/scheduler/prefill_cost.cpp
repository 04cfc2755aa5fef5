#include "engine/scheduler/prefill_cost.h"

#include <algorithm>

namespace ember {

PrefillCost PrefillCost::of(const ModelConfig& c) {
    constexpr double kAttentionWeight = 4;
    PrefillCost p;
    // Per layer, at its own widths (gemma4's sliding and global layers differ); a layer that
    // shares an earlier layer's K/V projects only q.
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const LayerShape& l = c.layers[i];
        const double kv = c.owns_kv(static_cast<int32_t>(i)) ? 2.0 * l.kv_dim() : 0.0;
        p.weights += static_cast<double>(c.n_embd) * (2.0 * l.q_dim() + kv + 3.0 * l.n_ff);
        const double attn = kAttentionWeight * 2.0 * l.q_dim();  // q.k and p.v per key
        (c.sliding_window > 0 && c.layer_sliding[i] ? p.attn_window : p.attn_global) += attn;
    }
    p.window = p.attn_window > 0 ? c.sliding_window : 0;
    return p;
}

double PrefillCost::work(int64_t start, int64_t n) const {
    if (n <= 0) return 0;
    const auto keys = [](int64_t first, int64_t count) {  // sum of p + 1 over [first, first + count)
        const double f = static_cast<double>(first), k = static_cast<double>(count);
        return k * f + k * (k + 1) / 2;
    };
    double w = static_cast<double>(n) * weights + attn_global * keys(start, n);
    if (attn_window > 0) {
        const int64_t growing = std::clamp<int64_t>(window - start, 0, n);  // positions with p + 1 <= window
        w += attn_window * (keys(start, growing) + static_cast<double>(n - growing) * static_cast<double>(window));
    }
    return w;
}

// work() grows with n, so a binary search finds the last n within the budget.
int32_t PrefillCost::fit(int64_t start, double budget, int32_t limit) const {
    if (budget <= 0 || limit <= 0) return 0;
    int32_t lo = 0, hi = limit;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (work(start, mid) <= budget) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

}  // namespace ember
