// One conversation's place in the KV cache. generate() keeps whatever prefix of the new
// prompt is already cached (the previous turns of a chat) and only processes the rest, so
// a chat turn costs its new tokens, not the whole history.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/decode_state.h"
#include "engine/runtime/model.h"
#include "engine/runtime/stop_reason.h"
#include "engine/sampling/sampler.h"

namespace ember {

class Telemetry;

struct GenerateOptions {
    SamplingParams sampling;
    int32_t max_tokens = 256;                         // < 0: until end of generation or context; 0: prefill only
    std::vector<std::string> stop;                    // stop strings (never shown)
    bool ignore_eog = false;                          // benchmarks: keep going past end-of-generation tokens
    Telemetry* telemetry = nullptr;                   // when set, records this request's timings (engine/telemetry)
    uint64_t request_id = 0;                          // the request's id in the telemetry
    double queue_wait_ms = 0;                         // how long the request waited before generate() (telemetry)
    std::shared_ptr<const grammar::Grammar> grammar;  // constrain sampling; null = free text
};

// Receives each piece of text as it becomes valid UTF-8 (stop strings already removed),
// with the token id that completed it. Return false to stop.
using TextCallback = std::function<bool(std::string_view text)>;

class Sequence {
public:
    explicit Sequence(Model& model);
    ~Sequence();
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;

    GenerateStats generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const TextCallback& on_text,
                           const std::atomic<bool>* cancel = nullptr);
    // Processes tokens without sampling (e.g. benchmarks); returns the last row's logits.
    const std::vector<float>& prefill(std::span<const int32_t> tokens);
    // Tokens currently in the cache for this sequence (prompt + generated so far).
    const std::vector<int32_t>& tokens() const { return tokens_; }
    void reset();

private:
    void keep_common_prefix(std::span<const int32_t> prompt);
    // download = false: the last token's logits stay on the backend (logits_dev_), for
    // sampling from Backend::top_k candidates.
    void feed(std::span<const int32_t> tokens, bool want_logits, bool download = true);
    int32_t sample_next(DecodeState& ds);

    Model& model_;
    int32_t seq_ = -1;
    std::vector<int32_t> tokens_;
    std::vector<float> logits_;
    Tensor logits_dev_;  // valid after feed(..., download = false)
    std::vector<TopKCandidate> top_;
    std::vector<float> row_;  // a grammar's fallback: the whole adjusted row
};

}  // namespace ember
