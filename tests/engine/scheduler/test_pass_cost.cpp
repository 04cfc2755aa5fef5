// Speculation's pass-cost rule (pass_cost.h): a draft rides in a pass only when its acceptance
// rate beats the per-row share of the pass, b n / (a + b n); checked against the tokens-per-second
// comparison it is derived from, on synthetic (a, b, n, alpha, D). Then the online fit of a and b
// from (rows, seconds) samples, and the pace a refusal leaves (draft_pace.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/scheduler/draft_pace.h"
#include "engine/scheduler/pass_cost.h"

using namespace ember;

TEST_CASE("draft_pays: alpha against the per-row share of the pass") {
    // One stream on a memory-bound pass: a 10 ms of weights, 0.1 ms a row; share 1/101.
    CHECK(draft_pays(10e-3, 0.1e-3, 1, 0.02));
    CHECK_FALSE(draft_pays(10e-3, 0.1e-3, 1, 0.005));
    // 16 streams on a compute-bound pass: a 1 ms, 2 ms a row; share 32/33 = 0.970.
    CHECK_FALSE(draft_pays(1e-3, 2e-3, 16, 0.9));
    CHECK_FALSE(draft_pays(1e-3, 2e-3, 16, 0.22));
    CHECK(draft_pays(1e-3, 2e-3, 16, 0.98));
    // Degenerate fits: rows free (b <= 0) pay with any acceptance; a pass of rows only never.
    CHECK(draft_pays(1e-3, -1e-6, 16, 0.01));
    CHECK_FALSE(draft_pays(1e-3, 0, 16, 0));
    CHECK_FALSE(draft_pays(-1e-4, 1e-3, 1, 0.99));
}

TEST_CASE("draft_pays agrees with tokens per second with and without the draft, whatever D") {
    int32_t checked = 0;
    for (double a : {1e-3, 5e-3, 20e-3})
        for (double b : {0.05e-3, 0.5e-3, 2e-3})
            for (int32_t n : {1, 4, 16})
                for (double alpha : {0.0, 0.1, 0.3, 0.6, 0.9, 0.99})
                    for (int32_t D : {1, 3, 8}) {
                        const double plain = n / (a + b * n);
                        const double drafted = (n + alpha * D) / (a + b * (n + D));
                        if (std::abs(drafted - plain) < 1e-9 * plain) continue;  // a tie either way
                        CAPTURE(a);
                        CAPTURE(b);
                        CAPTURE(n);
                        CAPTURE(alpha);
                        CAPTURE(D);
                        CHECK(draft_pays(a, b, n, alpha) == (drafted > plain));
                        ++checked;
                    }
    CHECK(checked > 400);
}

TEST_CASE("PassCost: a and b by least squares, unknown until two row counts, over a window") {
    PassCost cost(16);
    for (int i = 0; i < 10; ++i) cost.add(16, 0.040);  // one row count: no slope yet
    CHECK_FALSE(cost.known());
    CHECK(cost.pays(16, 0.0));  // unknown: draft as before
    for (int32_t rows : {16, 17, 18, 20, 24, 19})
        cost.add(rows, 2e-3 + 2.375e-3 * rows);  // 40 ms at 16 rows, on the same line
    REQUIRE(cost.known());
    CHECK(cost.a() == doctest::Approx(2e-3).epsilon(1e-6));
    CHECK(cost.b() == doctest::Approx(2.375e-3).epsilon(1e-6));
    CHECK_FALSE(cost.pays(16, 0.9));  // share 38/40
    CHECK(cost.pays(1, 0.6));         // alone: share 2.375/4.375
    // The regime changes (other load, fewer threads): the window forgets the old passes.
    for (int i = 0; i < 16; ++i) cost.add(1 + i % 4, 10e-3 + 0.1e-3 * (1 + i % 4));
    CHECK(cost.a() == doctest::Approx(10e-3).epsilon(1e-6));
    CHECK(cost.b() == doctest::Approx(0.1e-3).epsilon(1e-6));
}

TEST_CASE("draft pace: a refusal pauses, then probes one guess; refusals in a row pause longer") {
    const DraftPaceOptions o;  // pause 16, max_misses 4
    DraftPace p;
    p = next_pace(p, o, 4, 1);
    for (int32_t r = 0; r < 6; ++r) {
        p = refused_pace(p, o);
        CHECK(p.cap == 1);
        CHECK(p.probe);
        const int32_t pause = o.pause << std::min(r, o.max_misses);
        CHECK(p.pause == pause);
        int32_t waited = 0;
        while (!p.may_draft()) ++waited;
        CHECK(waited == pause);
    }
    p = next_pace(p, o, 1, 1);  // the probe stood: the pass decides again
    CHECK_FALSE(p.probe);
    CHECK_FALSE(p.off);
    CHECK(p.cap == 2);
}
