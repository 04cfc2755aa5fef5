// A pass's cost as a + b rows, fitted online, and the drafting rule (pass_cost.h).
#include "engine/scheduler/pass_cost.h"

#include <algorithm>

namespace ember {

double per_row_share(double a, double b, int32_t n) {
    if (b <= 0) return 0;
    if (a <= 0) return 1;
    const double per_row = b * n;
    return per_row / (a + per_row);
}

bool draft_pays(double a, double b, int32_t n, double alpha) { return alpha > per_row_share(a, b, n); }

double acceptance_estimate(int32_t accepted, int32_t drafted) { return (accepted + 0.5) / (drafted + 1.0); }

bool PassCost::allows(int32_t rows, int32_t accepted, int32_t drafted, bool probe) const {
    if (!measured(rows)) return false;
    if (!knows_beyond(rows)) return true;  // alone, no fit yet
    if (probe) return acceptance_estimate(accepted + 1, drafted + 1) > share(rows);
    return acceptance_estimate(accepted, drafted) > share(rows);
}

void PassCost::add(int32_t rows, double seconds) {
    if (rows <= 0 || !(seconds > 0)) return;
    samples_.push_back({rows, seconds});
    if (samples_.size() > window_) samples_.pop_front();
    refit();
}

// Ordinary least squares of seconds on rows. With one row count only (every pass the same
// size) the slope is unknown: the last fit stands, with the row counts it was fitted on.
void PassCost::refit() {
    constexpr size_t kMinSamples = 8;
    if (samples_.size() < kMinSamples) return;
    double sx = 0, sy = 0;
    int32_t max_rows = 0;
    for (const Sample& s : samples_) {
        sx += s.rows;
        sy += s.seconds;
        max_rows = std::max(max_rows, s.rows);
    }
    const auto m = static_cast<double>(samples_.size());
    const double mx = sx / m, my = sy / m;
    double sxx = 0, sxy = 0;
    for (const Sample& s : samples_) {
        sxx += (s.rows - mx) * (s.rows - mx);
        sxy += (s.rows - mx) * (s.seconds - my);
    }
    if (sxx <= 0) return;
    b_ = sxy / sxx;
    a_ = my - b_ * mx;
    max_rows_ = max_rows;
    known_ = true;
}

}  // namespace ember
