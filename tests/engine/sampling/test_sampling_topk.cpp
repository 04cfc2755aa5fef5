// The sampler's candidates path (Backend::top_k on the CPU backend + Sampler::sample_top)
// against the full-row path (Sampler::sample) on random logits with penalties, bias, ties,
// -inf and NaN, over many seeds: the same tokens, and the same adjusted row bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"
#include "kernels/backend.h"
#include "kernels/common/error.h"
#include "kernels/common/topk.h"

using namespace ember;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A row with ties (values on a 1/4 grid for some seeds), banned (-inf; for some seeds 90%,
// so that fewer than k remain) and NaN entries.
std::vector<float> random_row(std::mt19937& rng, size_t n) {
    std::normal_distribution<float> normal(0.0f, 2.5f);
    const bool grid = rng() % 2;
    const uint32_t banned = rng() % 4 == 0 ? 900 : 20;
    std::vector<float> v(n);
    for (auto& x : v) {
        x = normal(rng);
        if (grid) x = std::round(x * 4) / 4;
        const uint32_t r = rng() % 1000;
        if (r < banned) x = -kInf;
        else if (r < banned + 3) x = kNaN;
        else if (r < banned + 6) x = -0.0f;
    }
    return v;
}

SamplingParams random_params(std::mt19937& rng, int32_t vocab) {
    auto uni = [&](float a, float b) { return a + (b - a) * static_cast<float>(rng() % 10000) / 10000.0f; };
    SamplingParams p;
    p.temperature = rng() % 5 == 0 ? 0.0f : uni(0.2f, 1.6f);
    const int32_t kinds[] = {1, 2, 40, static_cast<int32_t>(rng() % 1024 + 1), kMaxTopK, vocab + 7};
    p.top_k = kinds[rng() % 6];
    p.top_p = rng() % 3 == 0 ? 1.0f : uni(0.3f, 0.99f);
    p.min_p = rng() % 3 == 0 ? 0.0f : uni(0.0f, 0.2f);
    p.repeat_penalty = rng() % 4 == 0 ? 1.0f : uni(0.7f, 1.6f);
    p.presence_penalty = rng() % 2 ? 0.0f : uni(-0.5f, 1.0f);
    p.frequency_penalty = rng() % 2 ? 0.0f : uni(-0.3f, 0.8f);
    const int32_t windows[] = {-1, 0, 1, 3, 64, 200};
    p.repeat_last_n = windows[rng() % 6];
    for (int i = 0, n = static_cast<int>(rng() % 12); i < n; ++i) {
        const int32_t id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab + 3));  // some outside
        p.logit_bias[id] = rng() % 4 == 0 ? -kInf : uni(-5.0f, 5.0f);
    }
    p.seed = rng();
    return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One sampler step through the backend: adjustments -> top_k -> sample_top. nullopt when it
// throws (every token banned), like sample() does.
std::optional<int32_t> via_candidates(Backend& be, Sampler& s, const std::vector<float>& logits,
                                      const std::vector<int32_t>& history, std::vector<float>& adjusted) {
    Tensor t = be.alloc(MemoryKind::Activations, DType::F32, static_cast<int64_t>(logits.size()), 1, "logits");
    be.upload(t, logits.data(), logits.size() * sizeof(float));
    const int32_t k = s.top_k_candidates();
    const TopKRow row = s.adjustments(history);
    std::vector<TopKCandidate> top(static_cast<size_t>(k));
    int32_t count = -1;
    be.top_k(t, k, std::span(&row, 1), top, std::span(&count, 1));
    adjusted.resize(logits.size());
    be.download(t, adjusted.data(), adjusted.size() * sizeof(float));
    be.free(t);
    try {
        return s.sample_top(std::span(top).first(static_cast<size_t>(count)));
    } catch (const Error&) {
        return std::nullopt;
    }
}

std::optional<int32_t> via_full_row(Sampler& s, std::vector<float>& logits, const std::vector<int32_t>& history) {
    try {
        return s.sample(logits, history);
    } catch (const Error&) {
        return std::nullopt;
    }
}

// The CPU backend every case uses (one for the whole run, as the Qt suite had).
Backend& cpu() {
    static const std::unique_ptr<Backend> backend = make_cpu_backend(1);
    return *backend;
}

}  // namespace

// 300 random settings x 6 draws: identical tokens (so identical RNG use) and rows.
TEST_CASE("candidates match full row") {
    int candidate_cases = 0;
    for (uint32_t seed = 1; seed <= 300; ++seed) {
        std::mt19937 rng(seed);
        const int32_t vocab = static_cast<int32_t>(rng() % 3000 + 1);
        const SamplingParams p = random_params(rng, vocab);
        Sampler full(p), cand(p);
        if (cand.top_k_candidates() == 0) continue;  // only the full row applies
        ++candidate_cases;
        std::vector<int32_t> history;
        for (int i = 0, n = static_cast<int>(rng() % 300); i < n; ++i)
            history.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab + (i % 50 == 0 ? 9 : 0))));
        for (int draw = 0; draw < 6; ++draw) {
            const std::vector<float> base = random_row(rng, static_cast<size_t>(vocab));
            std::vector<float> row = base, adjusted;
            const auto a = via_full_row(full, row, history);
            const auto b = via_candidates(cpu(), cand, base, history, adjusted);
            if (a != b)
                FAIL("seed " << seed << " draw " << draw << ": full row " << (a ? *a : -1) << ", candidates "
                             << (b ? *b : -1) << " (top_k " << p.top_k << ", temperature " << p.temperature << ")");
            REQUIRE_MESSAGE(same_bits(row, adjusted), "seed " << seed << ": adjusted rows differ");
            history.push_back(a ? *a : 0);
        }
    }
    REQUIRE(candidate_cases > 150);
}

// Whole vocabularies: the candidates are exactly the first k of the full row sorted by
// topk::order_key, for rows whose best entries come last (ascending: the running bound is
// raised at every cut-back), first, or anywhere, with ties, -inf and NaN.
TEST_CASE("candidates are the k best of a large row") {
    std::mt19937 rng(7);
    for (const int32_t k : {1, 2, 40, 300, kMaxTopK}) {
        for (int order = 0; order < 3; ++order) {
            std::vector<float> l = random_row(rng, 49152);
            if (order < 2) {  // the numbers sorted, each NaN left where it was
                std::vector<float> v;
                for (float x : l)
                    if (!std::isnan(x)) v.push_back(x);
                std::sort(v.begin(), v.end());
                if (order == 1) std::reverse(v.begin(), v.end());
                size_t j = 0;
                for (float& x : l)
                    if (!std::isnan(x)) x = v[j++];
            }
            std::vector<uint64_t> keys;
            for (size_t i = 0; i < l.size(); ++i) {
                const uint64_t key = topk::order_key(l[i], static_cast<int32_t>(i));
                if (key != topk::kNoCandidate) keys.push_back(key);
            }
            std::sort(keys.begin(), keys.end());
            Tensor t = cpu().alloc(MemoryKind::Activations, DType::F32, static_cast<int64_t>(l.size()), 1, "logits");
            cpu().upload(t, l.data(), l.size() * sizeof(float));
            std::vector<TopKCandidate> top(static_cast<size_t>(k));
            int32_t count = 0;
            const TopKRow none;
            cpu().top_k(t, k, std::span(&none, 1), top, std::span(&count, 1));
            cpu().free(t);
            REQUIRE_EQ(count, k);
            for (int32_t i = 0; i < k; ++i)
                REQUIRE_MESSAGE(top[static_cast<size_t>(i)].id == topk::key_id(keys[static_cast<size_t>(i)]),
                                "k " << k << ", order " << order << ", rank " << i);
        }
    }
}

// Equal logits (and -0 == +0) are ordered by id, lowest first, as sample() orders them.
TEST_CASE("ties go to the lower id") {
    std::vector<float> l = {1.0f, 2.0f, 2.0f, -0.0f, 0.0f, 2.0f, -0.0f};
    Tensor t = cpu().alloc(MemoryKind::Activations, DType::F32, 7, 1, "logits");
    cpu().upload(t, l.data(), l.size() * sizeof(float));
    std::vector<TopKCandidate> top(7);
    int32_t count = 0;
    const TopKRow none;
    cpu().top_k(t, 7, std::span(&none, 1), top, std::span(&count, 1));
    REQUIRE_EQ(count, 7);
    const int32_t want[] = {1, 2, 5, 0, 3, 4, 6};
    for (int i = 0; i < 7; ++i) REQUIRE_EQ(top[static_cast<size_t>(i)].id, want[i]);
    REQUIRE((std::signbit(top[4].logit) && !std::signbit(top[5].logit)));  // logits returned as they are
    cpu().free(t);
}

// Greedy: NaN never wins, ties go to the lowest id, both paths; all NaN gives token 0.
TEST_CASE("greedy ignores na n") {
    for (const std::vector<float>& l : {std::vector<float>{kNaN, 1.0f, 3.0f, 3.0f},
                                        std::vector<float>{-kInf, kNaN, -kInf}, std::vector<float>{kNaN, kNaN}}) {
        Sampler a(SamplingParams::greedy()), b(SamplingParams::greedy());
        std::vector<float> row = l, adjusted;
        const auto x = via_full_row(a, row, {});
        const auto y = via_candidates(cpu(), b, l, {}, adjusted);
        REQUIRE(x == y);
    }
    Sampler s(SamplingParams::greedy());
    std::vector<float> l = {kNaN, 1.0f, 3.0f, 3.0f};
    REQUIRE_EQ(s.sample(l, {}), 2);
}

// The penalty window: the last repeat_last_n tokens, each id once with its count.
TEST_CASE("adjustments follow the window") {
    SamplingParams p = SamplingParams::greedy();
    p.repeat_penalty = 1.3f;
    p.repeat_last_n = 4;
    p.logit_bias[7] = -kInf;
    Sampler s(p);
    const std::vector<int32_t> history = {9, 9, 5, 2, 5, 5};
    const TopKRow r = s.adjustments(history);
    REQUIRE_EQ(r.penalized.size(), size_t{2});
    REQUIRE_EQ(r.penalized[0].id, 2);
    REQUIRE_EQ(r.penalized[0].count, 1);
    REQUIRE_EQ(r.penalized[1].id, 5);
    REQUIRE_EQ(r.penalized[1].count, 3);
    REQUIRE_EQ(r.bias.size(), size_t{1});
    REQUIRE_EQ(r.bias[0].id, 7);
    p.repeat_last_n = -1;
    REQUIRE_EQ(Sampler(p).adjustments(history).penalized.size(), size_t{3});
    p.repeat_last_n = 0;
    REQUIRE_EQ(Sampler(p).adjustments(history).penalized.size(), size_t{0});
}

// Every token banned: both paths refuse (greedy: both pick token 0).
TEST_CASE("everything banned") {
    for (float temperature : {0.0f, 0.8f}) {
        SamplingParams p;
        p.temperature = temperature;
        p.top_k = 3;
        for (int32_t id = 0; id < 5; ++id) p.logit_bias[id] = -kInf;
        Sampler a(p), b(p);
        const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 0.0f};
        std::vector<float> row = l, adjusted;
        const auto x = via_full_row(a, row, {});
        const auto y = via_candidates(cpu(), b, l, {}, adjusted);
        REQUIRE(x == y);
        REQUIRE_EQ(x.has_value(), temperature == 0.0f);
    }
}

// Which path a setting takes.
TEST_CASE("candidate counts") {
    SamplingParams p;
    p.top_k = 40;
    REQUIRE_EQ(Sampler(p).top_k_candidates(), 40);
    p.top_k = kMaxTopK + 1;
    REQUIRE_EQ(Sampler(p).top_k_candidates(), 0);
    p.top_k = 0;
    REQUIRE_EQ(Sampler(p).top_k_candidates(), 0);
    p.temperature = 0.0f;
    REQUIRE_EQ(Sampler(p).top_k_candidates(), 1);
}

TEST_CASE("top k rejects bad arguments") {
    Tensor t = cpu().alloc(MemoryKind::Activations, DType::F32, 8, 1, "logits");
    std::vector<TopKCandidate> top(kMaxTopK + 1);
    int32_t count = 0;
    const TopKRow none;
    REQUIRE_THROWS_AS(cpu().top_k(t, 0, std::span(&none, 1), top, std::span(&count, 1)), Error);
    REQUIRE_THROWS_AS(cpu().top_k(t, kMaxTopK + 1, std::span(&none, 1), top, std::span(&count, 1)), Error);
    REQUIRE_THROWS_AS(cpu().top_k(t, 4, std::span(&none, 1), std::span(top).first(3), std::span(&count, 1)), Error);
    cpu().free(t);
}
