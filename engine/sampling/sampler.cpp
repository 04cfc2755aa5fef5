#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/error.h"

namespace ember {
namespace {

// Greedy: the lowest id with the highest logit. NaN never wins (the caller has refused a row
// of NaN), so the result equals the first of Backend::top_k's k = 1 answer.
int32_t argmax(std::span<const float> l) {
    size_t best = l.size();
    for (size_t i = 0; i < l.size(); ++i)
        if (!std::isnan(l[i]) && (best == l.size() || l[i] > l[best])) best = i;
    return best == l.size() ? 0 : static_cast<int32_t>(best);
}

// A row with no number in it: broken weights (NaN in a file) or a broken computation, which
// must be named as such, not reported as if every token were banned.
[[noreturn]] void fail_nan() {
    throw Error("sampler: every logit the model produced is NaN (its weights contain NaN, or the computation broke)");
}

}  // namespace

Sampler::Sampler(SamplingParams params) : params_(std::move(params)), state_(params_.seed) {
    if (!(params_.top_p > 0.0f)) throw Error("top_p must be > 0");
    if (params_.repeat_penalty <= 0.0f) throw Error("repeat penalty must be > 0");
}

void Sampler::reseed(uint64_t seed) { state_ = seed; }

// splitmix64: tiny, fast, and identical on every platform.
double Sampler::uniform() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::top_k_candidates() const {
    if (greedy()) return 1;
    return params_.top_k > 0 && params_.top_k <= kMaxTopK ? params_.top_k : 0;
}

// Penalties count each token of the last repeat_last_n tokens of `history` (-1: all of it).
TopKRow Sampler::adjustments(std::span<const int32_t> history) {
    penalized_.clear();
    bias_.clear();
    const bool any =
        params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    if (any && params_.repeat_last_n != 0 && !history.empty()) {
        size_t window = history.size();
        if (params_.repeat_last_n > 0) window = std::min(window, static_cast<size_t>(params_.repeat_last_n));
        std::vector<int32_t>& ids = window_;  // reused: this runs once per generated token
        ids.assign(history.end() - static_cast<ptrdiff_t>(window), history.end());
        std::sort(ids.begin(), ids.end());
        for (size_t i = 0; i < ids.size();) {
            size_t e = i + 1;
            while (e < ids.size() && ids[e] == ids[i]) ++e;
            penalized_.push_back({ids[i], static_cast<int32_t>(e - i)});
            i = e;
        }
    }
    for (auto [tok, bias] : params_.logit_bias) bias_.push_back({tok, bias});
    TopKRow r;
    r.repeat_penalty = params_.repeat_penalty;
    r.presence_penalty = params_.presence_penalty;
    r.frequency_penalty = params_.frequency_penalty;
    r.penalized = penalized_;
    r.bias = bias_;
    return r;
}

void Sampler::truncate(std::vector<Candidate>& c) const {
    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    const size_t k = params_.top_k > 0 ? std::min(c.size(), static_cast<size_t>(params_.top_k)) : c.size();
    std::partial_sort(c.begin(), c.begin() + static_cast<ptrdiff_t>(k), c.end(), by_logit);
    c.resize(k);
    finish(c);
}

// Softmax at the sampling temperature, then nucleus and min-p cuts on those probabilities.
void Sampler::finish(std::vector<Candidate>& c) const {
    const float inv_t = 1.0f / params_.temperature;
    const float max_l = c.front().logit;
    double sum = 0;
    for (auto& x : c) sum += x.p = std::exp((x.logit - max_l) * inv_t);
    for (auto& x : c) x.p = static_cast<float>(x.p / sum);
    if (params_.top_p < 1.0f) {
        double cum = 0;
        size_t keep = 0;
        while (keep < c.size()) {
            cum += c[keep++].p;
            if (cum >= params_.top_p) break;
        }
        c.resize(keep);
    }
    if (params_.min_p > 0.0f) {
        const float floor = c.front().p * params_.min_p;
        size_t keep = 1;
        while (keep < c.size() && c[keep].p >= floor) ++keep;
        c.resize(keep);
    }
}

// From cand_ (every candidate that is not banned): top-k, softmax, top-p, min-p, then the
// seeded draw.
int32_t Sampler::draw() {
    if (cand_.empty()) throw Error("sampler: every token is banned by logit bias");
    truncate(cand_);
    double sum = 0;
    for (auto& x : cand_) sum += x.p;
    double r = uniform() * sum;
    for (auto& x : cand_) {
        r -= x.p;
        if (r < 0) return x.id;
    }
    return cand_.back().id;
}

void Sampler::gather(std::span<const float> logits) {
    cand_.clear();
    for (size_t i = 0; i < logits.size(); ++i)
        if (logits[i] > -std::numeric_limits<float>::infinity())
            cand_.push_back({static_cast<int32_t>(i), logits[i], 0});
}

void Sampler::gather_top(std::span<const TopKCandidate> top) {
    cand_.clear();
    for (const TopKCandidate& c : top)
        if (c.logit > -std::numeric_limits<float>::infinity()) cand_.push_back({c.id, c.logit, 0});
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
    if (logits.empty()) throw Error("sampler: empty logits");
    apply_adjustments(logits, adjustments(history));
    if (std::all_of(logits.begin(), logits.end(), [](float x) { return std::isnan(x); })) fail_nan();
    if (greedy()) return argmax(logits);
    gather(logits);
    return draw();
}

// What draw() would draw from, its weights divided by their sum.
std::vector<TokenProb> Sampler::normalized() {
    if (cand_.empty()) throw Error("sampler: every token is banned by logit bias");
    truncate(cand_);
    double sum = 0;
    for (auto& x : cand_) sum += x.p;
    std::vector<TokenProb> d;
    d.reserve(cand_.size());
    for (auto& x : cand_) d.push_back({x.id, static_cast<float>(x.p / sum)});
    return d;
}

std::vector<TokenProb> Sampler::distribution(std::span<float> logits, std::span<const int32_t> history) {
    if (logits.empty()) throw Error("sampler: empty logits");
    apply_adjustments(logits, adjustments(history));
    if (std::all_of(logits.begin(), logits.end(), [](float x) { return std::isnan(x); })) fail_nan();
    if (greedy()) return {{argmax(logits), 1.0f}};
    gather(logits);
    return normalized();
}

std::vector<TokenProb> Sampler::distribution_top(std::span<const TopKCandidate> top) {
    if (top.empty()) fail_nan();
    if (greedy()) return {{top.front().id, 1.0f}};
    gather_top(top);
    return normalized();
}

int32_t Sampler::draw_from(std::span<const TokenProb> dist) {
    if (dist.empty()) throw Error("sampler: nothing to draw from");
    double sum = 0;
    for (const TokenProb& x : dist) sum += x.p;
    double r = uniform() * sum;
    for (const TokenProb& x : dist) {
        r -= x.p;
        if (r < 0) return x.id;
    }
    return dist.back().id;
}

// `top` is the backend's best min(k, non-NaN) of the adjusted row, in sample()'s order, so
// after dropping -inf it is exactly the top-k prefix sample() selects; empty only when
// every logit is NaN.
int32_t Sampler::sample_top(std::span<const TopKCandidate> top) {
    if (top.empty()) fail_nan();  // top_k returns min(k, non-NaN) candidates, k >= 1
    if (greedy()) return top.front().id;
    gather_top(top);
    return draw();
}

}  // namespace ember
