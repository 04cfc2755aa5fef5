// What an extra row costs in a pass, learned from the scheduler's own passes, and the rule that
// says when a request's draft pays for its rows in the current pass.
//
// A pass of r rows (one per decode, one per drafted token) takes about a + b r seconds: a does
// not grow with rows (the weights streamed once, launches, the per-pass bookkeeping), b does
// (each row's multiply-adds against every weight, its sampling). With n sequences decoding,
// a pass gives n tokens: n / (a + b n) tokens a second. Adding D drafted rows whose guesses stand
// with probability alpha gives n + alpha D tokens (every sequence still gets its own token, the
// bonus or the correction), in a + b (n + D) seconds. Then
//     (n + alpha D) / (a + b (n + D)) > n / (a + b n)
//  <=> (n + alpha D)(a + b n) > n (a + b n) + n b D
//  <=> alpha D (a + b n) > b n D
//  <=> alpha > b n / (a + b n),
// the share of the pass that is per-row work, whatever D is. Alone on a memory-bound pass
// (a >> b) the share is small and drafting pays almost whatever is guessed; in a compute-bound
// batch of 16 it nears 1 and only a draft that is nearly always accepted still pays.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>

namespace ember {

// Whether drafting pays in a pass with `n` rows, by the rule above (a, b in seconds; b <= 0:
// rows are free and any guess pays; a <= 0: the pass is all per-row work and none does).
bool draft_pays(double a, double b, int32_t n, double alpha);

// a and b by least squares over the last `window` passes of decodes (row count, seconds).
class PassCost {
public:
    explicit PassCost(size_t window = 64) : window_(window) {}
    void add(int32_t rows, double seconds);
    // Whether a fit is known: enough passes, with at least two row counts among them (until
    // then the scheduler drafts as if rows were free, as it did before it learned).
    bool known() const { return known_; }
    double a() const { return a_; }
    double b() const { return b_; }
    // draft_pays with the fit; true while none is known.
    bool pays(int32_t n, double alpha) const { return !known_ || draft_pays(a_, b_, n, alpha); }

private:
    void refit();
    struct Sample {
        int32_t rows;
        double seconds;
    };
    std::deque<Sample> samples_;
    size_t window_;
    bool known_ = false;
    double a_ = 0, b_ = 0;
};

}  // namespace ember
