// Engine telemetry: what the monitor panel, `ember ps` and /metrics show, recorded by the
// engine thread while it generates and read by any thread at any rate.
//
// Concurrency. Several requests may run at once (engine/scheduler): per-request calls carry
// the request's id; `current` follows the most recently started request, the load gauges
// (running, queued) and the per-pass batch sizes (step()) describe the whole engine.
//
// Cost model. The per-token call (token()) is a clock read and three relaxed atomic stores;
// it never takes a lock, allocates or waits for a reader; nor do step() and set_load(). Per-request and per-load events
// (request_started, first_token, request_finished, set_memory) copy a small struct under a
// mutex that readers hold only while copying it: those run once per answer, not per token.
// snapshot() does the work (copying the rings, sorting for percentiles) on the reader's
// thread, so a 4 Hz monitor costs the engine nothing it can measure.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "engine/telemetry/sample_window.h"
#include "kernels/backend.h"

namespace ember {

// Bytes one backend holds, split by what they are for (its own accounting, MemoryReport),
// against the device it lives on.
struct DeviceMemory {
    std::string device;           // "cpu", "cuda:0"
    int32_t layers = 0;           // model layers placed on it
    uint64_t weights = 0;         // weights the backend allocated (copies on a GPU)
    uint64_t mapped_weights = 0;  // weights used in place from the file map (CPU)
    uint64_t kv_cache = 0;
    uint64_t state = 0;         // linear-attention layers' recurrent state (MemoryKind::State)
    uint64_t scratch = 0;       // activations and other per-pass buffers
    uint64_t device_total = 0;  // 0 when the backend does not know
    uint64_t device_free = 0;
    uint64_t held() const { return weights + mapped_weights + kv_cache + state + scratch; }
};
DeviceMemory device_memory(const Backend& backend, std::string device, int32_t layers);

// One request as the engine saw it.
struct RequestSample {
    uint64_t id = 0;
    int32_t prompt_tokens = 0;
    int32_t reused_tokens = 0;     // prompt tokens found in the KV cache
    int32_t generated_tokens = 0;  // so far, while it runs
    double queue_wait_ms = 0;      // submitted -> started
    int32_t batch_size = 1;        // sequences in the pass that started it
    double ttft_ms = 0;            // started -> first token (0 until then)
    double prefill_tok_s = 0;
    double decode_tok_s = 0;  // set when it finishes
    bool running = false;
};

// Speculative decoding's yield (prompt lookup, draft models), counted over the passes that
// gave a speculating request tokens: its guesses checked and accepted, and the tokens those
// passes gave (accepted guesses plus the one sampled token each).
struct SpeculationTotals {
    uint64_t drafted = 0, accepted = 0;
    uint64_t passes = 0, tokens = 0;
    double acceptance_rate() const { return drafted > 0 ? double(accepted) / double(drafted) : 0; }
    double tokens_per_pass() const { return passes > 0 ? double(tokens) / double(passes) : 0; }
};

struct TelemetrySnapshot {
    uint32_t now_ms = 0;         // on the telemetry clock (ms since it was made, wraps at 2^32)
    uint32_t window_ms = 0;      // the window the stats below cover
    RequestSample current;       // the running request, else the last one (id 0: none yet)
    WindowStats inter_token_ms;  // decode latency between consecutive tokens
    WindowStats ttft_ms;
    WindowStats prefill_tok_s;
    WindowStats decode_tok_s;  // per finished request
    WindowStats queue_wait_ms;
    WindowStats batch_size;           // per request: sequences in the pass that started it
    WindowStats step_sequences;       // per forward pass: sequences in it
    WindowStats step_tokens;          // per forward pass: tokens in it
    int32_t running = 0, queued = 0;  // requests in the engine now (set_load)
    uint64_t steps = 0;               // forward passes so far
    double decode_tok_s_now = 0;      // from the inter-token latencies of the last 2 s (0 when idle)
    double cache_hit_rate = 0;        // window: reused / prompt tokens of the requests started in it
    uint64_t requests = 0, prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0;  // totals
    std::vector<DeviceMemory> memory;  // one per backend the model uses
    SpeculationTotals speculation;     // since the telemetry was made
};

class Telemetry {
public:
    using Clock = std::chrono::steady_clock;
    // window: how far back the percentiles look (the monitor's "last minutes").
    explicit Telemetry(std::chrono::milliseconds window = std::chrono::minutes(2));

    // ---- writer side: the engine thread ------------------------------------------------
    // A request left the engine's queue and began its prefill; it becomes `current`.
    void request_started(uint64_t id, int32_t prompt_tokens, int32_t reused_tokens, double queue_wait_ms,
                         int32_t batch_size);
    void first_token(uint64_t id, double ttft_ms, double prefill_tok_s);
    // Every decoded token after the first: the time since the same request's previous one.
    void token(uint64_t id, double inter_token_ms);
    void request_finished(uint64_t id, int32_t generated_tokens, double decode_tok_s);
    // One forward pass over `sequences` sequences and `tokens` tokens (a scheduler step).
    void step(int32_t sequences, int32_t tokens);
    // One pass's share of a speculating request: guesses checked and accepted, tokens it gave.
    void speculation(int32_t drafted, int32_t accepted, int32_t tokens);
    // Requests running and waiting now (any thread; plain atomic stores).
    void set_load(int32_t running, int32_t queued);
    void set_memory(std::vector<DeviceMemory> memory);

    // ---- reader side: any thread -------------------------------------------------------
    TelemetrySnapshot snapshot() const;
    SpeculationTotals speculation_totals() const;  // snapshot().speculation, without the rest
    uint32_t now_ms() const;

private:
    static constexpr size_t kTokenRing = 1 << 14;    // inter-token samples kept
    static constexpr size_t kRequestRing = 1 << 10;  // per-request samples kept

    Clock::time_point epoch_;
    uint32_t window_ms_;
    SampleWindow<kTokenRing> inter_token_;
    SampleWindow<kRequestRing> ttft_, prefill_, decode_, queue_wait_, batch_;
    SampleWindow<kTokenRing> step_sequences_, step_tokens_;
    std::atomic<uint64_t> requests_{0}, prompt_tokens_{0}, reused_tokens_{0}, generated_tokens_{0}, steps_{0};
    std::atomic<uint64_t> current_id_{0};    // id of `current_`, for token()
    std::atomic<int32_t> generated_now_{0};  // tokens of the current request (per token)
    std::atomic<int32_t> running_{0}, queued_{0};
    std::atomic<uint64_t> spec_drafted_{0}, spec_accepted_{0}, spec_passes_{0}, spec_tokens_{0};

    struct PromptUse {
        uint32_t t_ms;
        int32_t prompt, reused;
    };
    mutable std::mutex mutex_;  // guards the three below; never taken per token
    RequestSample current_;
    std::deque<PromptUse> prompts_;  // requests started within the window, for the hit rate
    std::vector<DeviceMemory> memory_;
};

}  // namespace ember
