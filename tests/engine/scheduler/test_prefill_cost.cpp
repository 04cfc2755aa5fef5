// PrefillCost, the scheduler's --max-stall-ms estimate of a prompt chunk's work, on the real
// configurations of SmolLM2 (global attention only) and Gemma 3 270M (5 of every 6 layers on a
// 512-token sliding window): the closed forms against a sum over positions, and fit() against
// work() at and across the window's edge.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

#include "engine/gguf/gguf.h"
#include "engine/models/model_config.h"
#include "engine/scheduler/prefill_cost.h"
#include "test_data.h"

using namespace ember;

namespace {

ModelConfig config_of(const char* name) {
    const std::string path = test::test_model(name);
    EMBER_REQUIRE_FILE(path);
    return read_model_config(GgufFile::open(path));
}

// Token by token, straight from the definition: position p sees p + 1 keys on a global layer
// and min(p + 1, window) on a sliding one.
double summed(const PrefillCost& c, int64_t start, int64_t n) {
    double w = 0;
    for (int64_t p = start; p < start + n; ++p) {
        const double keys = static_cast<double>(p + 1);
        const double windowed = c.window > 0 ? static_cast<double>(std::min<int64_t>(p + 1, c.window)) : 0;
        w += c.weights + c.attn_global * keys + c.attn_window * windowed;
    }
    return w;
}

void check_work(const PrefillCost& c, int64_t start, int64_t n) {
    CAPTURE(start);
    CAPTURE(n);
    CHECK(c.work(start, n) == doctest::Approx(summed(c, start, n)).epsilon(1e-12));
}

// fit() is the largest n within the budget: n itself fits, n + 1 does not.
void check_fit(const PrefillCost& c, int64_t start, int32_t n) {
    CAPTURE(start);
    CAPTURE(n);
    const double budget = c.work(start, n);
    CHECK(c.fit(start, budget, 100000) == n);
    CHECK(c.fit(start, budget * (1 - 1e-9), 100000) == n - 1);
    CHECK(c.fit(start, budget, n - 1) == n - 1);  // the limit holds
}

}  // namespace

TEST_CASE("SmolLM2: every layer attends to every earlier key") {
    const ModelConfig cfg = config_of(test::kSmolLM2);
    const PrefillCost c = PrefillCost::of(cfg);
    CHECK(c.window == 0);
    CHECK(c.attn_window == 0);
    // 30 layers of 576 x (2 x 576 + 2 x 192 + 3 x 1536) multiply-adds, attention weighted 4.
    CHECK(c.weights == doctest::Approx(30.0 * 576 * (2 * 576 + 2 * 192 + 3 * 1536)));
    CHECK(c.attn_global == doctest::Approx(4.0 * 2 * 576 * 30));
    for (const auto& [start, n] : {std::pair<int64_t, int64_t>{0, 1}, {0, 512}, {300, 17}, {4000, 600}})
        check_work(c, start, n);
    // Later tokens cost more: the same 100 tokens after 4000 others take more work than first.
    CHECK(c.work(4000, 100) - c.work(0, 100) == doctest::Approx(c.attn_global * 4000 * 100));
    for (const auto& [start, n] : {std::pair<int64_t, int32_t>{0, 16}, {0, 512}, {2000, 33}}) check_fit(c, start, n);
}

TEST_CASE("Gemma 3: sliding-window layers stop growing at the window") {
    const ModelConfig cfg = config_of(test::kGemma3);
    const PrefillCost c = PrefillCost::of(cfg);
    const auto sliding = std::count(cfg.layer_sliding.begin(), cfg.layer_sliding.end(), true);
    REQUIRE(cfg.sliding_window == 512);
    REQUIRE(sliding > 0);
    REQUIRE(sliding < cfg.n_layers);
    CHECK(c.window == 512);
    CHECK(c.attn_window == doctest::Approx(4.0 * 2 * cfg.q_dim() * static_cast<double>(sliding)));
    CHECK(c.attn_global == doctest::Approx(4.0 * 2 * cfg.q_dim() * static_cast<double>(cfg.n_layers - sliding)));
    // Before, across and past the window's edge.
    for (const auto& [start, n] : {std::pair<int64_t, int64_t>{0, 100},
                                   {0, 512},
                                   {0, 513},
                                   {500, 30},
                                   {511, 2},
                                   {512, 1},
                                   {1000, 700},
                                   {0, 3000}})
        check_work(c, start, n);
    // Past the window a token's sliding-layer work is constant: only the global layers grow.
    CHECK(c.work(3000, 1) - c.work(1000, 1) == doctest::Approx(c.attn_global * 2000));
    // So a chunk that starts late fits more tokens than a window-blind estimate would give it.
    const double budget = c.work(2000, 64);
    PrefillCost blind = c;
    blind.attn_global += blind.attn_window;
    blind.attn_window = 0;
    blind.window = 0;
    CHECK(blind.fit(2000, budget, 100000) < 64);
    for (const auto& [start, n] : {std::pair<int64_t, int32_t>{0, 16}, {490, 40}, {512, 64}, {2000, 64}})
        check_fit(c, start, n);
}

TEST_CASE("fit: nothing without a budget or room") {
    const PrefillCost c = PrefillCost::of(config_of(test::kSmolLM2));
    CHECK(c.fit(0, 0, 512) == 0);
    CHECK(c.fit(0, -1, 512) == 0);
    CHECK(c.fit(0, 1e30, 0) == 0);
    CHECK(c.fit(0, 1e30, 512) == 512);
    CHECK(c.work(100, 0) == 0);
}
