// One conversation for the command line (`ember run`, `chat`, `bench`), as a blocking client of
// a Scheduler of its own (a batch of one): there is one generation loop, the scheduler's, and
// every front door gets its reuse, telemetry and speculation. The turns of a Sequence share one
// cache_key, so a chat turn costs its new tokens, not the whole history.
//
// prefill() is the bare forward pass (tests, perplexity): the logits of tokens fed to a KV
// sequence of its own, nothing sampled. Between two calls the engine thread is idle
// (Scheduler::wait_idle), so the caller's thread may use the model.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/decode_state.h"
#include "engine/runtime/model.h"
#include "engine/runtime/stop_reason.h"
#include "engine/sampling/sampler.h"

namespace ember {

class DraftModel;
class Scheduler;
class Telemetry;

struct GenerateOptions {
    SamplingParams sampling;
    int32_t max_tokens = 256;                         // < 0: until end of generation or context; 0: prefill only
    std::vector<std::string> stop;                    // stop strings (never shown)
    bool ignore_eog = false;                          // benchmarks: keep going past end-of-generation tokens
    Telemetry* telemetry = nullptr;                   // when set, records the requests' timings (engine/telemetry)
    bool lookup = false;                              // prompt lookup speculation (EngineRequest::lookup)
    DraftModel* draft = nullptr;                      // draft-model speculation (draft_model.h); outlives the call
    std::shared_ptr<const grammar::Grammar> grammar;  // constrain sampling; null = free text
};

// Receives each piece of text as it becomes valid UTF-8 (stop strings already removed).
// Return false to stop.
using TextCallback = std::function<bool(std::string_view text)>;

class Sequence {
public:
    explicit Sequence(Model& model);
    ~Sequence();
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;

    // Submits the prompt to the scheduler and returns when the request has ended; on_text is
    // called on the engine thread, in order. Throws ember::Error for a request that fails.
    GenerateStats generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const TextCallback& on_text,
                           const std::atomic<bool>* cancel = nullptr);
    // Processes tokens without sampling (tests, perplexity); returns the last row's logits.
    const std::vector<float>& prefill(std::span<const int32_t> tokens);
    // Tokens in this sequence's KV cache: the last generate()'s prompt and every generated
    // token but the last (never fed back), or what prefill() was given.
    const std::vector<int32_t>& tokens() const { return tokens_; }
    void reset();

private:
    Scheduler& scheduler(Telemetry* telemetry, DraftModel* draft);
    void drop_generated();  // frees the scheduler's kept sequence
    void drop_prefilled();  // frees prefill()'s KV sequence

    Model& model_;
    std::unique_ptr<Scheduler> sched_;
    Telemetry* sched_telemetry_ = nullptr;  // what sched_ records into
    DraftModel* sched_draft_ = nullptr;     // what sched_ drafts with
    bool generated_ = false;                // the scheduler keeps a sequence under kCacheKey
    int32_t seq_ = -1;                      // prefill()'s KV sequence, -1 while none
    std::vector<int32_t> tokens_;
    std::vector<float> logits_;
};

}  // namespace ember
