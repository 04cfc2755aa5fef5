// The app's one InferenceEngine, whichever model is loaded: the chats and the local API
// server (engine/server) both submit here, and it forwards to the Scheduler of the loaded
// model, or to a remote engine (engine/remote: a model served by vLLM, llama-server, another
// Ember, ...) put behind it with install_engine(). Loading another model swaps what is behind it without its clients
// noticing, so the server keeps its port across model changes; with no model loaded, submit() throws "No model is
// loaded." (the server answers that as an error, the chat shows it).
//
// Request ids carry the model's generation (a load counter) above the scheduler's own id, so
// a late cancel() for a request of the previous model can never stop one of the next.
//
// Threads: submit/cancel/forget/status/snapshot from any thread, under a shared lock that
// install() and take() hold exclusively only to move pointers (the engine thread loads and
// destroys models outside it). Nothing here waits for a forward pass.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>

#include "engine/runtime/model.h"
#include "engine/scheduler/draft_load.h"
#include "engine/scheduler/inference_engine.h"

namespace ember::app {

// The scheduler's settings the app chooses (the rest keep the Scheduler's defaults).
struct SlotOptions {
    std::string model_name;  // the name API clients use
    int32_t max_batch = 4;   // answers in one pass at most
    int32_t max_cached = 4;  // idle chats whose KV sequence is kept for their next turn
};

class EngineSlot final : public ember::InferenceEngine {
public:
    EngineSlot();
    ~EngineSlot() override;

    // Engine thread: puts a loaded model behind the slot with its scheduler, and its draft
    // model (engine/scheduler/draft_load.h) when `draft` holds one: it proposes only for the
    // requests that set EngineRequest::draft (the chats set to "Draft model").
    void install(std::unique_ptr<ember::Model> model, const SlotOptions& options, ember::LoadedDraft draft = {});
    // Any thread: puts an engine with no local model behind the slot (a RemoteEngine); the
    // chats and the API server then submit to it as to a scheduler.
    void install_engine(std::unique_ptr<ember::InferenceEngine> engine);
    // Engine thread: empties the slot and destroys what was in it, outside the lock: the
    // scheduler first (every request of it gets its Finished event, Cancelled), then the draft
    // model, then the model.
    void clear();
    bool loaded() const;

    uint64_t submit(ember::EngineRequest request, ember::EventSink sink) override;
    void cancel(uint64_t request_id) override;
    void forget(const std::string& cache_key) override;
    ember::EngineStatus status() const override;
    // The loaded model's telemetry (an empty one when none is): the reference is only good
    // until the next model change; telemetry_snapshot() is the safe read from other threads.
    const ember::Telemetry& telemetry() const override;
    ember::TelemetrySnapshot telemetry_snapshot() const;

private:
    static constexpr int kIdBits = 40;  // scheduler ids below, the model's generation above
    uint64_t to_slot_id(uint64_t scheduler_id) const { return generation_ << kIdBits | scheduler_id; }
    // The engine's id when `slot_id` belongs to the engine installed now.
    std::optional<uint64_t> to_scheduler_id(uint64_t slot_id) const;

    mutable std::shared_mutex mutex_;
    // Declared in destruction order's reverse: the scheduler goes before the model it runs.
    std::unique_ptr<ember::Model> model_;             // null for a remote engine
    ember::LoadedDraft draft_;                        // the model's draft (none: empty)
    std::unique_ptr<ember::InferenceEngine> engine_;  // the model's Scheduler, or a remote engine
    uint64_t generation_ = 0;                         // models installed so far
    ember::Telemetry idle_telemetry_;                 // what telemetry() shows with no model
};

}  // namespace ember::app
