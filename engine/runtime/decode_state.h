// One request's decoding, token by token: the sampler, the streaming detokenizer, the stop
// strings, the limits (max_tokens, end of generation, context) and the timings. The
// Scheduler drives one per request (every front door, `ember run/chat/bench` through
// Sequence included), so a token ends a request for the same reasons everywhere.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar/token_matcher.h"
#include "engine/runtime/stop_reason.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_strings.h"
#include "engine/template/reasoning.h"
#include "engine/tokenizer/detokenizer.h"

namespace ember {

class Telemetry;
class Tokenizer;

struct GenerateStats {
    int32_t prompt_tokens = 0;  // tokens in the prompt
    int32_t reused_tokens = 0;  // of which were already in the cache
    int32_t generated_tokens = 0;
    int32_t reasoning_tokens = 0;  // of the generated ones, written while thinking
    double ttft_ms = 0;            // prompt processing + first token
    double prefill_ms = 0;
    double decode_ms = 0;  // after the first token
    // Speculation (the scheduler's; EngineRequest::lookup): guessed tokens checked, agreed with.
    int32_t drafted_tokens = 0, accepted_tokens = 0;
    int32_t passes = 0;  // forward passes that gave it tokens
    StopReason stop_reason = StopReason::None;
    // Under a grammar: steps that needed the full mask (no candidate allowed), by a trie walk
    // or from the masks kept per grammar position (grammar::TokenMatcher::mask_stats()).
    int32_t masks_walked = 0, masks_kept = 0;
    double grammar_ms = 0;  // spent checking candidates, in full masks and advancing the grammar
    double prefill_tok_s() const { return prefill_ms > 0 ? (prompt_tokens - reused_tokens) * 1000.0 / prefill_ms : 0; }
    double decode_tok_s() const { return decode_ms > 0 ? (generated_tokens - 1) * 1000.0 / decode_ms : 0; }
    double acceptance_rate() const { return drafted_tokens > 0 ? double(accepted_tokens) / drafted_tokens : 0; }
    double tokens_per_pass() const { return passes > 0 ? double(generated_tokens) / passes : 0; }
};

struct DecodeLimits {
    int32_t max_tokens = 256;  // < 0: until end of generation or context; 0: prefill only
    std::vector<std::string> stop;
    bool ignore_eog = false;
    int64_t n_ctx = 0;  // tokens the sequence may hold
};

// How a request's output splits into thinking and answer (engine/template/reasoning.h).
struct ReasoningSetup {
    ReasoningFormat format = ReasoningFormat::None;
    std::string generation_prompt;  // primes the splitter (the prompt may have opened the thinking)
    // Thinking tokens allowed; then the engine writes the format's closing marker in the
    // model's place (llama-server's reasoning budget) and the model goes on to answer. -1: no limit.
    int32_t budget = -1;
    // Control tokens that other readers of the output need written out (tool-call markers:
    // tool_call_marker_tokens); the detokenizer skips them otherwise.
    std::vector<std::string> write_tokens{};
};

// Tokens a sequence holding `cached` can keep when it is to process `prompt` next: the
// common prefix, less the prompt's last token when all of it is cached (its logits are
// needed to sample).
size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt);

class DecodeState {
public:
    // The clock of ttft/prefill starts now. telemetry (optional) gets first_token/token.
    DecodeState(const Tokenizer& tok, const SamplingParams& sampling, DecodeLimits limits,
                Telemetry* telemetry = nullptr, uint64_t request_id = 0);

    Sampler& sampler() { return sampler_; }
    const DecodeLimits& limits() const { return limits_; }
    // The prompt is in the cache: prefill time ends here.
    void prefill_done();

    // Splits the output into thinking and answer from now on (before the first token), and
    // writes setup.write_tokens out.
    void split_reasoning(const ReasoningSetup& setup);
    // The token to feed next instead of sampling one (a thinking budget closing the thinking).
    std::optional<int32_t> forced_token();

    // Constrains the output to `g` (before the first token): sampling must then pick only
    // tokens matcher()->allows(), and accept() advances it. `vocab`: the model's
    // (Model::grammar_vocab()).
    void constrain(std::shared_ptr<const grammar::Grammar> g, std::shared_ptr<const grammar::TokenVocab> vocab);
    grammar::TokenMatcher* matcher() { return matcher_ ? &*matcher_ : nullptr; }

    struct Step {
        std::string text;                    // new answer text to show (may be empty)
        std::string reasoning;               // new thinking text (split_reasoning only)
        StopReason stop = StopReason::None;  // None: feed the token and go on
    };
    // A token was sampled; `cached` is how many tokens the sequence holds before it is fed.
    // EOG: nothing shown, EndOfText. Else its text (stop strings held back), then the stop
    // string, max_tokens and context checks in that order. Under a grammar the token
    // advances it (ember::Error when it is not allowed), and a grammar that can only end
    // ends the request (EndOfText) without waiting for the model's end token.
    Step accept(int32_t token, int64_t cached);
    // The request ends for `reason` (stats().stop_reason is set): the text still held back,
    // unless a stop string or a cancel ended it (nothing more is shown then).
    Step finish(StopReason reason);

    GenerateStats& stats() { return st_; }
    const GenerateStats& stats() const { return st_; }

private:
    using Clock = std::chrono::steady_clock;
    void split(Step& s);
    Sampler sampler_;
    StreamingDetokenizer detok_;
    StopMatcher stops_;
    DecodeLimits limits_;
    const Tokenizer& tok_;
    Telemetry* tel_;
    uint64_t id_;
    GenerateStats st_;
    std::unique_ptr<ReasoningSplitter> split_;
    int32_t budget_ = -1;
    std::vector<int32_t> close_tokens_;  // forced when the budget runs out
    std::deque<int32_t> forced_;
    std::optional<grammar::TokenMatcher> matcher_;
    Clock::time_point t0_, t_first_, t_prev_;
};

}  // namespace ember
