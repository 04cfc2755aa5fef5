#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "kernels/common/error.h"

namespace ember {

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

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) const {
    const bool any = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                     params_.frequency_penalty != 0.0f;
    if (!any || params_.repeat_last_n == 0 || history.empty()) return;
    size_t window = history.size();
    if (params_.repeat_last_n > 0) window = std::min(window, static_cast<size_t>(params_.repeat_last_n));
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : history.last(window)) ++counts[t];
    for (auto [tok, n] : counts) {
        if (tok < 0 || static_cast<size_t>(tok) >= logits.size()) continue;
        float& l = logits[tok];
        l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
        l -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(n);
    }
}

void Sampler::apply_bias(std::span<float> logits) const {
    for (auto [tok, bias] : params_.logit_bias)
        if (tok >= 0 && static_cast<size_t>(tok) < logits.size()) logits[tok] += bias;
}

void Sampler::truncate(std::vector<Candidate>& c) const {
    auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
    const size_t k = params_.top_k > 0 ? std::min(c.size(), static_cast<size_t>(params_.top_k)) : c.size();
    std::partial_sort(c.begin(), c.begin() + static_cast<ptrdiff_t>(k), c.end(), by_logit);
    c.resize(k);
    // Softmax at the sampling temperature, then nucleus and min-p cuts on those probabilities.
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

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
    if (logits.empty()) throw Error("sampler: empty logits");
    apply_penalties(logits, history);
    apply_bias(logits);
    if (params_.temperature <= 0.0f) {
        // Greedy; ties go to the lowest id so results never depend on the scan order.
        return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    cand_.clear();
    for (size_t i = 0; i < logits.size(); ++i)
        if (logits[i] > -std::numeric_limits<float>::infinity()) cand_.push_back({static_cast<int32_t>(i), logits[i], 0});
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

}  // namespace ember
