// What an extra row costs in a pass, learned from the scheduler's own passes, and the rule that
// says when a request's draft pays for its rows in the current pass.
//
// A pass of r rows (one per decode, one per prefill token, one per drafted token) takes about
// a + b r seconds: a does not grow with rows (the weights streamed once, launches, the per-pass
// bookkeeping), b does (each row's multiply-adds against every weight, its sampling). A pass of
// n rows gives n rows of work (a token each for the decodes, the prefill's progress): n / (a + b n)
// a second. Adding D drafted rows whose guesses stand with probability alpha gives n + alpha D
// (every sequence still gets its own token, the bonus or the correction), in a + b (n + D)
// seconds. Then
//     (n + alpha D) / (a + b (n + D)) > n / (a + b n)
//  <=> (n + alpha D)(a + b n) > n (a + b n) + n b D
//  <=> alpha D (a + b n) > b n D
//  <=> alpha > b n / (a + b n),
// the share of the pass that is per-row work, whatever D is. Alone on a memory-bound pass
// (a >> b) the share is small and drafting pays almost whatever is guessed; in a compute-bound
// batch of 16 it nears 1 and only a draft that is nearly always accepted still pays.
//
// The line holds only over the row counts it was fitted on: on the CPU a pass of up to 8 rows
// (AVX-512, kGemvMaxTokens) streams each weight once for all of them, a larger one is a gemm
// with a cost per row of its own, so a line fitted on one stream's passes (1 to 9 rows) says
// nothing of a batch of 16 (PassCost::knows_beyond).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>

namespace ember {

// The per-row share of a pass of `n` rows, b n / (a + b n) (a, b in seconds; b <= 0: rows are
// free, 0; a <= 0: the pass is all per-row work, 1).
double per_row_share(double a, double b, int32_t n);

// Whether drafting pays in a pass with `n` rows: alpha above the per-row share.
bool draft_pays(double a, double b, int32_t n, double alpha);

// The acceptance rate credited to a request after `accepted` of its `drafted` guesses stood:
// the mean of the posterior under Jeffreys' prior, (accepted + 1/2) / (drafted + 1), the form
// DraftModel::paying_length uses too. A request that has guessed nothing counts as 1/2, so its
// first guess rides only in a pass where even a coin flip's rate pays, never in a compute-bound
// batch whose per-row share is above 1/2.
double acceptance_estimate(int32_t accepted, int32_t drafted);

// a and b by least squares over the last `window` passes of decodes (row count, seconds).
class PassCost {
public:
    explicit PassCost(size_t window = 64) : window_(window) {}
    void add(int32_t rows, double seconds);
    // Whether a fit is known: enough passes, with at least two row counts among them.
    bool known() const { return known_; }
    // Whether the fit has seen a pass of more than `rows` rows, so that what a row added to a
    // pass of `rows` costs is measured, not extrapolated from smaller passes.
    bool knows_beyond(int32_t rows) const { return known_ && max_rows_ > rows; }
    // Whether the rule can judge a draft in a pass of `rows` rows: alone, or beyond what the fit
    // has seen. A batch whose cost is not measured drafts nothing, and that says nothing about
    // any request's rate (the scheduler pauses nobody for it).
    bool measured(int32_t rows) const { return rows <= 1 || knows_beyond(rows); }
    double a() const { return a_; }
    double b() const { return b_; }
    int32_t max_rows() const { return max_rows_; }  // the largest pass behind the fit
    double share(int32_t rows) const { return per_row_share(a_, b_, rows); }

    // Whether a request with `accepted` of `drafted` guesses standing may draft in a pass of
    // `rows` rows without drafts (decodes and prefill tokens):
    //   - not measured(rows): no; alone (rows == 1) with no fit yet: yes, as before the cost was
    //     learned (that is how it is);
    //   - otherwise its estimated rate (acceptance_estimate) must beat the pass's share;
    //   - a probe (one guess to keep the rate current, draft_pace.h) rides only where it could
    //     change the answer: where the rate, had the guess stood, would beat the share. A
    //     probe that cannot tip the rule buys nothing with its row.
    bool allows(int32_t rows, int32_t accepted, int32_t drafted, bool probe) const;

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
    int32_t max_rows_ = 0;
};

}  // namespace ember
