// Speculation's pass-cost rule (pass_cost.h): a draft rides in a pass only when its acceptance
// rate beats the per-row share of the pass, b n / (a + b n); checked against the tokens-per-second
// comparison it is derived from, on synthetic (a, b, n, alpha, D). Then the online fit of a and b
// from (rows, seconds) samples and the row counts it knows, the rate credited to a request
// (Jeffreys' estimate), the probe rule, and the pace a refusal leaves (draft_pace.h).
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
    CHECK(cost.allows(1, 0, 0, false));         // alone: drafts, as before the cost was learned
    CHECK_FALSE(cost.allows(16, 0, 0, false));  // a batch drafts nothing on a cost not measured
    for (int32_t rows : {16, 17, 18, 20, 24, 19})
        cost.add(rows, 2e-3 + 2.375e-3 * rows);  // 40 ms at 16 rows, on the same line
    REQUIRE(cost.known());
    CHECK(cost.a() == doctest::Approx(2e-3).epsilon(1e-6));
    CHECK(cost.b() == doctest::Approx(2.375e-3).epsilon(1e-6));
    CHECK(cost.max_rows() == 24);
    CHECK(cost.share(16) == doctest::Approx(38.0 / 40.0));
    CHECK_FALSE(cost.allows(16, 90, 100, false));  // 90.5 / 101 = 0.896 against 0.95
    CHECK(cost.allows(16, 99, 100, false));        // 99.5 / 101 = 0.985
    CHECK(cost.allows(1, 3, 5, false));            // alone: 3.5 / 6 = 0.583 against 2.375 / 4.375 = 0.543
    // The regime changes (other load, fewer threads): the window forgets the old passes.
    for (int i = 0; i < 16; ++i) cost.add(1 + i % 4, 10e-3 + 0.1e-3 * (1 + i % 4));
    CHECK(cost.a() == doctest::Approx(10e-3).epsilon(1e-6));
    CHECK(cost.b() == doctest::Approx(0.1e-3).epsilon(1e-6));
    CHECK(cost.max_rows() == 4);
    CHECK_FALSE(cost.knows_beyond(4));
    CHECK_FALSE(cost.allows(8, 99, 100, false));
}

TEST_CASE("PassCost: a line fitted on small passes says nothing of a larger batch") {
    // One stream drafting: passes of 1 to 9 rows, each weight streamed once for all of them
    // (a 10 ms, b 0.1 ms). Then a batch of 16 on the gemm path, 40 ms: not on that line.
    PassCost cost;
    for (int i = 0; i < 18; ++i) cost.add(1 + i % 9, 10e-3 + 0.1e-3 * (1 + i % 9));
    REQUIRE(cost.known());
    CHECK(cost.share(16) < 0.14);  // the line's word for 16 rows: almost any guess would pay
    CHECK(cost.allows(8, 0, 0, false));
    CHECK_FALSE(cost.allows(9, 0, 0, false));  // the fit has seen no pass beyond 9 rows
    CHECK_FALSE(cost.allows(16, 99, 100, false));
    for (int i = 0; i < 20; ++i) cost.add(16, 40e-3);
    CHECK_FALSE(cost.allows(16, 99, 100, false));  // 16 rows only: still no slope at 16
    // Passes of 16 to 19 rows (a few guesses): the line through them, a 2 ms and b 2.375 ms.
    for (int i = 0; i < 64; ++i) cost.add(16 + i % 4, 2e-3 + 2.375e-3 * (16 + i % 4));
    CHECK(cost.knows_beyond(16));
    CHECK(cost.share(16) == doctest::Approx(38.0 / 40.0));
    CHECK_FALSE(cost.allows(16, 90, 100, false));
    CHECK(cost.allows(16, 99, 100, false));
}

TEST_CASE("acceptance_estimate: Jeffreys' posterior mean, a fresh request at one half") {
    CHECK(acceptance_estimate(0, 0) == doctest::Approx(0.5));
    CHECK(acceptance_estimate(0, 1) == doctest::Approx(0.25));
    CHECK(acceptance_estimate(1, 1) == doctest::Approx(0.75));
    CHECK(acceptance_estimate(47, 100) == doctest::Approx(47.5 / 101));
    // With the fit known, a request that has guessed nothing drafts where a coin flip's rate
    // pays, and nowhere else: alone on a memory-bound pass, not in a compute-bound batch.
    PassCost cost;  // a 10 ms, b 1 ms: share 1/11 alone, 16/26 in a batch of 16
    for (int i = 0; i < 32; ++i) cost.add(1 + i, 10e-3 + 1e-3 * (1 + i));
    for (int32_t rows = 1; rows < 32; ++rows) {
        CAPTURE(rows);
        CHECK(cost.allows(rows, 0, 0, false) == (cost.share(rows) < 0.5));
    }
    CHECK(cost.allows(1, 0, 0, false));
    CHECK_FALSE(cost.allows(16, 0, 0, false));
}

TEST_CASE("a probe rides only where a standing guess would tip the rule") {
    PassCost cost;  // a 10 ms, b 1 ms
    for (int i = 0; i < 32; ++i) cost.add(1 + i, 10e-3 + 1e-3 * (1 + i));
    int32_t tipped = 0, idle = 0;
    for (int32_t rows : {1, 2, 4, 8, 16, 24})
        for (int32_t drafted : {0, 1, 3, 10, 40, 300})
            for (int32_t accepted = 0; accepted <= drafted; accepted += std::max(1, drafted / 7)) {
                CAPTURE(rows);
                CAPTURE(drafted);
                CAPTURE(accepted);
                // The probe's row buys the rule's next answer: it is drafted exactly when, had
                // it stood, the request would draft; a rejected probe never lets it draft more.
                const bool probe = cost.allows(rows, accepted, drafted, true);
                CHECK(probe == cost.allows(rows, accepted + 1, drafted + 1, false));
                if (cost.allows(rows, accepted, drafted + 1, false)) CHECK(probe);
                ++(probe ? tipped : idle);
            }
    CHECK(tipped > 20);
    CHECK(idle > 20);
    // 16 streams (share 16/26 = 0.62), a request at 47 % after 300 guesses: no probe can carry
    // it over, so none rides until the batch thins out.
    CHECK_FALSE(cost.allows(16, 141, 300, true));
    CHECK(cost.allows(1, 141, 300, true));
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
