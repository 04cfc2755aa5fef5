#include "app/core/engine_slot.h"

#include <mutex>
#include <utility>

#include "engine/scheduler/scheduler.h"
#include "kernels/common/error.h"

namespace ember::app {

EngineSlot::EngineSlot() = default;
EngineSlot::~EngineSlot() { clear(); }

void EngineSlot::install(std::unique_ptr<ember::Model> model, const SlotOptions& options, ember::LoadedDraft draft) {
    clear();
    ember::SchedulerOptions so;
    so.draft = draft.get();
    so.draft_every_request = false;
    so.model_name = options.model_name;
    so.max_batch = options.max_batch;
    so.max_cached = options.max_cached;
    so.max_stall_ms = ember::kDefaultMaxStallMs;  // two chats: one's long prompt barely pauses the other
    auto scheduler = std::make_unique<ember::Scheduler>(*model, so);
    std::unique_lock lock(mutex_);
    model_ = std::move(model);
    draft_ = std::move(draft);
    engine_ = std::move(scheduler);
    ++generation_;
}

void EngineSlot::install_engine(std::unique_ptr<ember::InferenceEngine> engine) {
    clear();
    std::unique_lock lock(mutex_);
    engine_ = std::move(engine);
    ++generation_;
}

void EngineSlot::clear() {
    std::unique_ptr<ember::InferenceEngine> engine;
    std::unique_ptr<ember::Model> model;
    ember::LoadedDraft draft;
    {
        std::unique_lock lock(mutex_);
        engine = std::move(engine_);
        draft = std::move(draft_);
        model = std::move(model_);
    }
    engine.reset();          // joins the engine's threads after cancelling what runs
    draft.proposer.reset();  // it uses the draft's model
    draft.model.reset();
    model.reset();
}

bool EngineSlot::loaded() const {
    std::shared_lock lock(mutex_);
    return engine_ != nullptr;
}

std::optional<uint64_t> EngineSlot::to_scheduler_id(uint64_t slot_id) const {
    if (slot_id >> kIdBits != generation_) return std::nullopt;
    return slot_id & ((uint64_t{1} << kIdBits) - 1);
}

uint64_t EngineSlot::submit(ember::EngineRequest request, ember::EventSink sink) {
    std::shared_lock lock(mutex_);
    if (!engine_) throw ember::Error("No model is loaded.");
    const uint64_t generation = generation_;
    // The sink sees the slot's ids too (events can arrive before submit() returns).
    return to_slot_id(engine_->submit(std::move(request), [generation, sink = std::move(sink)](ember::EngineEvent&& e) {
        e.request_id = generation << kIdBits | e.request_id;
        sink(std::move(e));
    }));
}

void EngineSlot::cancel(uint64_t request_id) {
    std::shared_lock lock(mutex_);
    if (const auto id = to_scheduler_id(request_id); id && engine_) engine_->cancel(*id);
}

void EngineSlot::forget(const std::string& cache_key) {
    std::shared_lock lock(mutex_);
    if (engine_) engine_->forget(cache_key);
}

ember::EngineStatus EngineSlot::status() const {
    std::shared_lock lock(mutex_);
    if (!engine_) return {};
    ember::EngineStatus s = engine_->status();
    for (ember::RequestStatus& r : s.requests) r.id = to_slot_id(r.id);
    return s;
}

const ember::Telemetry& EngineSlot::telemetry() const {
    std::shared_lock lock(mutex_);
    return engine_ ? engine_->telemetry() : idle_telemetry_;
}

ember::TelemetrySnapshot EngineSlot::telemetry_snapshot() const {
    std::shared_lock lock(mutex_);
    return (engine_ ? engine_->telemetry() : idle_telemetry_).snapshot();
}

}  // namespace ember::app
