// Sampler and stop strings: exact, deterministic behaviour on hand-made logits.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "kernels/common/error.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_strings.h"

using namespace ember;

TEST_CASE("greedy picks max lowest id on ties") {
    Sampler s(SamplingParams::greedy());
    std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
    REQUIRE_EQ(s.sample(l, {}), 1);
}
TEST_CASE("logit bias bans and boosts") {
    SamplingParams p = SamplingParams::greedy();
    p.logit_bias[1] = -std::numeric_limits<float>::infinity();
    p.logit_bias[2] = 10.0f;
    Sampler s(p);
    std::vector<float> l = {0.0f, 5.0f, -1.0f};
    REQUIRE_EQ(s.sample(l, {}), 2);
}
TEST_CASE("repetition penalty llama semantics") {
    SamplingParams p = SamplingParams::greedy();
    p.repeat_penalty = 2.0f;
    Sampler s(p);
    std::vector<float> l = {4.0f, 3.0f, -1.0f};
    REQUIRE_EQ(s.sample(l, std::vector<int32_t>{0, 2}), 1);  // 4 -> 2 < 3
    REQUIRE_EQ(l[0], 2.0f);
    REQUIRE_EQ(l[2], -2.0f);  // negative logits are multiplied
}
TEST_CASE("presence and frequency penalties") {
    SamplingParams p = SamplingParams::greedy();
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    Sampler s(p);
    std::vector<float> l = {1.0f, 1.0f};
    s.sample(l, std::vector<int32_t>{0, 0, 0, 1});
    REQUIRE_EQ(l[0], 1.0f - 0.5f - 0.75f);
    REQUIRE_EQ(l[1], 1.0f - 0.5f - 0.25f);
}
TEST_CASE("penalty window") {
    SamplingParams p = SamplingParams::greedy();
    p.repeat_penalty = 4.0f;
    p.repeat_last_n = 1;
    Sampler s(p);
    std::vector<float> l = {4.0f, 4.0f};
    s.sample(l, std::vector<int32_t>{0, 1});  // only the last token (1) is in the window
    REQUIRE_EQ(l[0], 4.0f);
    REQUIRE_EQ(l[1], 1.0f);
}
TEST_CASE("same seed same tokens") {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 7;
    std::vector<float> base(50);
    for (int i = 0; i < 50; ++i) base[static_cast<size_t>(i)] = std::sin(static_cast<float>(i));
    auto run = [&](uint64_t seed) {
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> out;
        for (int i = 0; i < 64; ++i) {
            auto l = base;
            out.push_back(s.sample(l, {}));
        }
        return out;
    };
    REQUIRE_EQ(run(7), run(7));
    REQUIRE(run(7) != run(8));
}
TEST_CASE("distribution matches softmax") {
    // Temperature 1, no truncation: empirical frequencies follow softmax(logits).
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Sampler s(p);
    const std::vector<float> base = {0.0f, std::log(2.0f), std::log(5.0f)};  // probs 1/8, 2/8, 5/8
    std::map<int, int> counts;
    const int N = 40000;
    for (int i = 0; i < N; ++i) {
        auto l = base;
        ++counts[s.sample(l, {})];
    }
    REQUIRE(std::abs(counts[0] / double(N) - 0.125) < 0.01);
    REQUIRE(std::abs(counts[1] / double(N) - 0.25) < 0.01);
    REQUIRE(std::abs(counts[2] / double(N) - 0.625) < 0.01);
}
TEST_CASE("top k top p min p cut") {
    const std::vector<float> base = {5.0f, 4.9f, 0.0f, -3.0f, 4.95f};
    auto only = [&](SamplingParams p, std::set<int> allowed) {
        p.temperature = 1.0f;
        Sampler s(p);
        for (int i = 0; i < 2000; ++i) {
            auto l = base;
            if (!allowed.count(s.sample(l, {}))) return false;
        }
        return true;
    };
    SamplingParams k;
    k.top_k = 2;
    k.top_p = 1;
    k.min_p = 0;
    REQUIRE(only(k, {0, 4}));
    SamplingParams tp;
    tp.top_k = 0;
    tp.top_p = 0.5f;
    tp.min_p = 0;
    REQUIRE(only(tp, {0, 4}));
    SamplingParams mp;
    mp.top_k = 0;
    mp.top_p = 1;
    mp.min_p = 0.5f;
    REQUIRE(only(mp, {0, 1, 4}));
}
TEST_CASE("rejects bad params") {
    SamplingParams p;
    p.top_p = 0.0f;
    REQUIRE_THROWS_AS(Sampler{p}, Error);
    SamplingParams all_banned = SamplingParams();
    all_banned.logit_bias[0] = -std::numeric_limits<float>::infinity();
    Sampler s(all_banned);
    std::vector<float> l = {1.0f};
    REQUIRE_THROWS_AS(s.sample(l, {}), Error);
}
TEST_CASE("stop string across chunks") {
    StopMatcher m({"<|im_end|>", "\n\nUser:"});
    REQUIRE_EQ(m.feed("Paris is the cap").text, std::string("Paris is the cap"));
    auto r = m.feed("ital.<|im");
    REQUIRE_EQ(r.text, std::string("ital."));
    REQUIRE(!r.stopped);
    r = m.feed("_end|> trailing");
    REQUIRE(r.stopped);
    REQUIRE_EQ(r.text, std::string(""));
}
TEST_CASE("held back text released when not a stop") {
    StopMatcher m({"STOP"});
    REQUIRE_EQ(m.feed("abc ST").text, std::string("abc "));
    REQUIRE_EQ(m.feed("AR").text, std::string("STAR"));
    REQUIRE_EQ(m.feed("S").text, std::string(""));
    REQUIRE_EQ(m.flush(), std::string("S"));
}
TEST_CASE("earliest stop wins") {
    StopMatcher m({"b", "abc"});
    auto r = m.feed("xxabc");
    REQUIRE(r.stopped);
    REQUIRE_EQ(r.text, std::string("xx"));  // "abc" starts before "b"
}
