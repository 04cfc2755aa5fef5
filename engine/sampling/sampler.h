// Turns a row of logits into the next token: penalties, logit bias, then greedy or
// temperature sampling with top-k / top-p / min-p. Same seed + same inputs = same tokens
// (the RNG and the uniform draw are our own, not implementation-defined std distributions).
//
// Two ways in, same token for the same inputs and seed:
//   - sample(): the whole logits row on the host;
//   - candidates path, when top_k_candidates() > 0 (greedy, or 0 < top_k <= kMaxTopK): the
//     backend applies adjustments(history) to the row where it lives and returns its best
//     top_k_candidates() tokens (Backend::top_k); sample_top() finishes from those.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "kernels/backend.h"

namespace ember {

// One token's probability in a sampling distribution (Sampler::distribution): the tokens the
// sampler may draw, after every transform; any token not listed has probability 0.
struct TokenProb {
    int32_t id;
    float p;
};

struct SamplingParams {
    float temperature = 0.8f;             // <= 0 means greedy
    int32_t top_k = 40;                   // <= 0 disables
    float top_p = 0.95f;                  // >= 1 disables
    float min_p = 0.05f;                  // <= 0 disables
    float repeat_penalty = 1.0f;          // 1 disables (llama.cpp semantics: divide positive logits)
    int32_t repeat_last_n = 64;           // window for all penalties; 0 = none, -1 = whole history
    float presence_penalty = 0.0f;        // subtract once per token seen in the window
    float frequency_penalty = 0.0f;       // subtract per occurrence in the window
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

    // How many candidates sample_top() needs: 1 when greedy, top_k when 0 < top_k <=
    // kMaxTopK, 0 when only the full row will do (sample()).
    int32_t top_k_candidates() const;
    // The penalties (repeat_last_n window of `history`) and logit bias sample() applies, as
    // sparse lists for Backend::top_k. The spans point into this Sampler; valid until the
    // next call.
    TopKRow adjustments(std::span<const int32_t> history);
    // Picks a token from the backend's best candidates for adjustments(history) (sorted, at
    // most top_k_candidates()): the token sample() picks from the full row. Both throw
    // ember::Error naming NaN when every logit is NaN (no candidates at all).
    int32_t sample_top(std::span<const TopKCandidate> top);

    // The distribution sample() / sample_top() draw from for the same input (penalties, bias,
    // temperature, top-k, top-p, min-p), sparse and summing to 1: one token with p = 1 when
    // greedy. distribution() modifies `logits` as sample() does. Speculative decoding's
    // rejection rule (speculative.h) compares it with a proposer's.
    std::vector<TokenProb> distribution(std::span<float> logits, std::span<const int32_t> history);
    std::vector<TokenProb> distribution_top(std::span<const TopKCandidate> top);
    // A draw from `dist` (any non-negative weights, not all zero) with this sampler's RNG.
    int32_t draw_from(std::span<const TokenProb> dist);
    // The next number of this sampler's seeded RNG, uniform in [0, 1).
    double uniform();

    const SamplingParams& params() const { return params_; }
    void reseed(uint64_t seed);

private:
    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };
    bool greedy() const { return params_.temperature <= 0.0f; }
    void truncate(std::vector<Candidate>& c) const;  // top-k, then finish()
    void finish(std::vector<Candidate>& c) const;    // softmax, top-p, min-p
    int32_t draw();                                  // truncate(cand_), then the draw
    void gather(std::span<const float> logits);      // cand_: every token not banned
    void gather_top(std::span<const TopKCandidate> top);
    std::vector<TokenProb> normalized();  // truncate(cand_), as a distribution

    SamplingParams params_;
    uint64_t state_;
    std::vector<Candidate> cand_;
    std::vector<int32_t> window_;  // adjustments() scratch: the penalty window, sorted
    std::vector<TokenCount> penalized_;
    std::vector<TokenBias> bias_;
};

}  // namespace ember
