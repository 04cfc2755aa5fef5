#include "engine/scheduler/sequence.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "engine/kv/kv_batch.h"
#include "engine/scheduler/scheduler.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

constexpr const char* kCacheKey = "sequence";  // the one conversation of this Sequence's scheduler

// A request's end as generate() waits for it (the engine thread fills it in).
struct Ending {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::atomic<bool> stop{false};  // on_text asked to stop
    EngineEvent event;              // Finished or Failed
};

GenerateStats stats_of(const RequestStats& s) {
    GenerateStats st;
    st.prompt_tokens = s.prompt_tokens;
    st.reused_tokens = s.reused_tokens;
    st.generated_tokens = s.generated_tokens;
    st.reasoning_tokens = s.reasoning_tokens;
    st.ttft_ms = s.generated_tokens > 0 ? s.ttft_ms - s.queue_wait_ms : 0;  // from admission, as the telemetry's
    st.prefill_ms = s.prefill_ms;
    st.decode_ms = s.decode_ms;
    st.stop_reason = s.stop_reason;
    st.drafted_tokens = s.drafted_tokens;
    st.accepted_tokens = s.accepted_tokens;
    st.passes = s.passes;
    st.masks_walked = s.masks_walked;
    st.masks_kept = s.masks_kept;
    st.grammar_ms = s.grammar_ms;
    return st;
}

}  // namespace

Sequence::Sequence(Model& model) : model_(model) {}

Sequence::~Sequence() {
    sched_.reset();  // joins the engine thread, which frees the kept sequence
    drop_prefilled();
}

Scheduler& Sequence::scheduler(Telemetry* telemetry, DraftModel* draft) {
    if (sched_ && telemetry == sched_telemetry_ && draft == sched_draft_) return *sched_;
    sched_.reset();
    generated_ = false;
    SchedulerOptions o;
    o.max_batch = 1;
    o.max_cached = 1;
    o.prefix_cache = false;  // the turns reuse their own sequence (kCacheKey)
    o.telemetry = telemetry;
    o.draft = draft;
    sched_ = std::make_unique<Scheduler>(model_, std::move(o));
    sched_telemetry_ = telemetry;
    sched_draft_ = draft;
    return *sched_;
}

void Sequence::drop_generated() {
    if (!generated_) return;
    sched_->forget(kCacheKey);
    sched_->wait_idle();
    generated_ = false;
}

void Sequence::drop_prefilled() {
    if (seq_ < 0) return;
    model_.kv().free_sequence(seq_);
    seq_ = -1;
}

void Sequence::reset() {
    drop_generated();
    drop_prefilled();
    tokens_.clear();
}

GenerateStats Sequence::generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                                 const TextCallback& on_text, const std::atomic<bool>* cancel) {
    if (prompt.empty()) throw Error("empty prompt");
    if (seq_ >= 0) {
        drop_prefilled();
        tokens_.clear();
    }
    Scheduler& sched = scheduler(opts.telemetry, opts.draft);
    EngineRequest req;
    req.prompt_tokens.assign(prompt.begin(), prompt.end());
    req.sampling = opts.sampling;
    req.max_tokens = opts.max_tokens;
    req.stop = opts.stop;
    req.ignore_eog = opts.ignore_eog;
    req.grammar = opts.grammar;
    req.cache_key = kCacheKey;
    req.lookup = opts.lookup;
    Ending end;
    std::atomic<uint64_t> id{0};
    auto sink = [&](EngineEvent&& e) {
        if (e.kind == EngineEvent::Kind::Started) return;
        if (e.kind == EngineEvent::Kind::Text) {
            if (end.stop.load() || e.text.empty() || !on_text || on_text(e.text)) return;
            end.stop = true;  // the cancel is seen before the next step runs
            if (const uint64_t known = id.load()) sched.cancel(known);
        }
        std::lock_guard lock(end.mu);
        if (e.kind != EngineEvent::Kind::Text) end.event = std::move(e), end.done = true;
        end.cv.notify_all();
    };
    id = sched.submit(std::move(req), sink);
    generated_ = true;
    {
        // The sink wakes this thread on every event, so a stop asked before submit() returned
        // is seen here. Only `cancel`, which nothing signals, is polled (every few
        // milliseconds), and only when given: no wake-ups beside a decode otherwise.
        std::unique_lock lock(end.mu);
        while (!end.done) {
            if (end.stop.load() || (cancel && cancel->load())) sched.cancel(id);
            if (cancel) end.cv.wait_for(lock, std::chrono::milliseconds(10));
            else end.cv.wait(lock);
        }
    }
    sched.wait_idle();
    if (end.event.kind == EngineEvent::Kind::Failed) {
        generated_ = false;  // a failed request keeps nothing
        tokens_.clear();
        throw Error(end.event.error);
    }
    tokens_.assign(prompt.begin(), prompt.end());
    const std::vector<int32_t>& out = end.event.output_ids;
    if (!out.empty()) tokens_.insert(tokens_.end(), out.begin(), out.end() - 1);  // the last is never fed
    return stats_of(end.event.stats);
}

const std::vector<float>& Sequence::prefill(std::span<const int32_t> tokens) {
    if (seq_ < 0) {
        drop_generated();
        tokens_.clear();
        seq_ = model_.kv().new_sequence();
    }
    if (static_cast<int64_t>(tokens_.size() + tokens.size()) > model_.n_ctx())
        throw Error("prompt of " + std::to_string(tokens_.size() + tokens.size()) +
                    " tokens does not fit the context of " + std::to_string(model_.n_ctx()) + " tokens");
    const size_t chunk = static_cast<size_t>(std::max(1, model_.n_batch()));
    for (size_t start = 0; start < tokens.size(); start += chunk) {
        const auto part = tokens.subspan(start, std::min(chunk, tokens.size() - start));
        const int32_t first = static_cast<int32_t>(tokens_.size());
        const std::vector<int32_t> slots = model_.kv().append(seq_, static_cast<int32_t>(part.size()));
        KvBatch batch;
        batch.add(seq_, part, slots, first, start + part.size() == tokens.size());
        try {
            model_.transformer().forward(batch.info(model_.kv()), model_.kv(), logits_);
            model_.file().check_unchanged();  // a truncated file's weights read as zeros
        } catch (...) {
            model_.kv().truncate(seq_, first);  // the cache never holds half a chunk
            throw;
        }
        tokens_.insert(tokens_.end(), part.begin(), part.end());
    }
    return logits_;
}

}  // namespace ember
