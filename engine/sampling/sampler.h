// Turns a row of logits into the next token: penalties, logit bias, then greedy or
// temperature sampling with top-k / top-p / min-p. Same seed + same inputs = same tokens
// (the RNG and the uniform draw are our own, not implementation-defined std distributions).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace ember {

struct SamplingParams {
    float temperature = 0.8f;       // <= 0 means greedy
    int32_t top_k = 40;             // <= 0 disables
    float top_p = 0.95f;            // >= 1 disables
    float min_p = 0.05f;            // <= 0 disables
    float repeat_penalty = 1.0f;    // 1 disables (llama.cpp semantics: divide positive logits)
    int32_t repeat_last_n = 64;     // window for all penalties; 0 = none, -1 = whole history
    float presence_penalty = 0.0f;  // subtract once per token seen in the window
    float frequency_penalty = 0.0f; // subtract per occurrence in the window
    std::map<int32_t, float> logit_bias;  // added to the logit; -inf bans a token
    uint64_t seed = 0xE3BE5EED;

    static SamplingParams greedy() {
        SamplingParams p;
        p.temperature = 0.0f;
        return p;
    }
};

class Sampler {
public:
    explicit Sampler(SamplingParams params);

    // Picks a token from `logits` (modified in place by penalties/bias), given the tokens
    // generated or consumed so far in this sequence (for penalties).
    int32_t sample(std::span<float> logits, std::span<const int32_t> history);

    const SamplingParams& params() const { return params_; }
    void reseed(uint64_t seed);

private:
    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };
    void apply_penalties(std::span<float> logits, std::span<const int32_t> history) const;
    void apply_bias(std::span<float> logits) const;
    void truncate(std::vector<Candidate>& c) const;  // top-k, softmax, top-p, min-p
    double uniform();                                // [0, 1)

    SamplingParams params_;
    uint64_t state_;
    std::vector<Candidate> cand_;
};

}  // namespace ember
