// A pass's cost as a + b rows, fitted online, and the drafting rule (pass_cost.h).
#include "engine/scheduler/pass_cost.h"

namespace ember {

bool draft_pays(double a, double b, int32_t n, double alpha) {
    if (b <= 0) return alpha > 0;
    if (a <= 0) return false;
    const double per_row = b * n;
    return alpha > per_row / (a + per_row);
}

void PassCost::add(int32_t rows, double seconds) {
    if (rows <= 0 || !(seconds > 0)) return;
    samples_.push_back({rows, seconds});
    if (samples_.size() > window_) samples_.pop_front();
    refit();
}

// Ordinary least squares of seconds on rows. With one row count only (every pass the same
// size) the slope is unknown: the last fit stands.
void PassCost::refit() {
    constexpr size_t kMinSamples = 8;
    if (samples_.size() < kMinSamples) return;
    double sx = 0, sy = 0;
    for (const Sample& s : samples_) {
        sx += s.rows;
        sy += s.seconds;
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
    known_ = true;
}

}  // namespace ember
