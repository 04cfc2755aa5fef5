// The local InferenceEngine: continuous batching over one loaded Model. One engine thread
// owns the model and its KV cache; every step it runs ONE forward pass holding a token for
// each decoding sequence plus prefill chunks of newly admitted ones (chunked prefill), then
// samples, detokenizes and delivers events per request. The step loop and its policies
// (admission, fairness, preemption, cache_key reuse) are described in README.md here.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/draft_pace.h"
#include "engine/scheduler/pass_cost.h"
#include "engine/scheduler/prefill_cost.h"
#include "engine/scheduler/prompt_lookup.h"
#include "engine/scheduler/inference_engine.h"

namespace ember {

// What one step did (SchedulerOptions::on_step, for tests and tools): the sequences of its
// forward pass in batch order.
struct StepEntry {
    uint64_t request_id = 0;
    int32_t tokens = 0;    // tokens of this request in the pass (1 for a decode)
    bool decode = false;   // it was decoding (one token per step) before this step
    bool sampled = false;  // it produced a token this step
    bool ended = false;    // it finished with this step (its Finished event has gone out)
    int32_t drafted = 0;   // speculation: guessed tokens in the pass (tokens = 1 + drafted)
    int32_t accepted = 0;  // of which the model agreed with
};
struct StepInfo {
    uint64_t step = 0;  // 1, 2, ... (passes run so far)
    std::vector<StepEntry> batch;
    int32_t queued = 0;       // requests waiting after the step
    int32_t free_blocks = 0;  // KV blocks free after the step
};

// The products' max_stall_ms (`ember serve`, the app): a pause a reader barely notices, for
// 0-10 % more time to the long prompt's first token (docs/BENCHMARKS.md, Serving, `--max-stall-ms`).
inline constexpr int32_t kDefaultMaxStallMs = 250;

struct SchedulerOptions {
    std::string model_name;       // the name clients use; "" = the file name without .gguf
    int32_t max_batch = 8;        // sequences in one pass at most (<= the KV cache's n_seqs is sensible)
    int32_t max_step_tokens = 0;  // tokens in one pass at most; 0 = the model's n_batch; >= max_batch
    // While sequences are streaming, a step's prefill chunks are cut so that the step lasts about
    // this long (from the measured cost of recent passes; at least one KV block of prefill per
    // step): a long prompt arriving mid-stream delays each running stream's next token by about
    // this, not by a whole max_step_tokens chunk. 0: no cut (max_step_tokens only).
    int32_t max_stall_ms = 0;
    int32_t max_queue = 256;   // requests waiting at most; submit() throws beyond
    int32_t max_cached = 4;    // idle cache_key sequences kept (least recently used evicted first)
    bool prefix_cache = true;  // publish full KV blocks and reuse them across requests (kv_cache.h)
    // Prompt lookup for every request that can use it, as if each set EngineRequest::lookup
    // (`ember serve --lookup`).
    bool lookup = false;
    LookupOptions lookup_options;
    // A draft model (draft_model.h) proposes for every request that can speculate (as for
    // lookup; its proposals are judged by the same rule, speculative.h), instead of prompt
    // lookup. Not owned: it must outlive the scheduler, and only this scheduler's engine thread
    // may use it.
    DraftModel* draft = nullptr;
    // With a draft: true, every request that can speculate uses it (`ember serve --draft`);
    // false, only those that set EngineRequest::draft (the app: the chats set to "Draft model").
    bool draft_every_request = true;
    // Drafts ride only in passes where their rows pay (pass_cost.h); false: every pass may carry
    // them, as the draft pace allows (tests of the rejection rule, which want many drafts).
    bool draft_by_pass_cost = true;
    // Where requests' timings are recorded (it must outlive the scheduler); null: the
    // scheduler's own (telemetry()). A client that outlives engines (the CLI's Sequence) owns one.
    Telemetry* telemetry = nullptr;
    // Called on the engine thread after every step that ran a pass (tests count steps with
    // it). It may call submit() and cancel(); it must not block. What it throws is logged.
    std::function<void(const StepInfo&)> on_step;
};

// Engine-wide counters (any thread).
struct SchedulerStats {
    uint64_t steps = 0;
    uint64_t preemptions = 0;  // sequences whose KV blocks were taken back to be recomputed
    uint64_t finished = 0;     // requests that ended (any reason, cancels included)
};

class Scheduler final : public InferenceEngine {
public:
    // `model` must outlive the scheduler; from now on only the engine thread touches it.
    Scheduler(Model& model, SchedulerOptions options);
    // Cancels every request (each gets its Finished event, Cancelled) and joins the thread.
    ~Scheduler() override;
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    uint64_t submit(EngineRequest request, EventSink sink) override;
    void cancel(uint64_t request_id) override;
    void forget(const std::string& cache_key) override;
    EngineStatus status() const override;
    const Telemetry& telemetry() const override { return telemetry_; }
    SchedulerStats stats() const;
    // Blocks until the engine thread has nothing queued, running or to forget and waits for
    // work: from then until the next submit() or forget() it touches neither the model nor its
    // KV cache (Sequence uses the model between requests).
    void wait_idle();
    const SchedulerOptions& options() const { return opts_; }

private:
    struct Job;
    struct Running;
    struct Cached {  // an ended request's sequence, kept for its cache_key
        std::string key;
        int32_t seq = -1;
        std::vector<int32_t> tokens;  // in the KV cache
        bool rolled = false;          // holds moved rows (Transformer::roll_kv): never published
    };
    struct Planned {                    // one sequence's part of a pass
        size_t index = 0;               // in running_
        int32_t n = 0;                  // tokens
        std::vector<int32_t> kv_slots;  // where its tokens go in the KV cache
        DraftProposal draft;            // a decode's guessed continuation, after its one token
    };

    // Engine thread.
    void run();
    StepInfo step();
    void drain();
    void admit();
    bool fits(const Job& job) const;
    void admit_one(std::shared_ptr<Job> job);
    // Context overflow roll: r.seq, holding `cached` (a chat's kept sequence) or empty (null:
    // the whole conversation's published blocks are attached, Job::roll), gets the turns after
    // the dropped ones moved down instead of computed again, and r.tokens what it then holds.
    // False: nothing after the dropped turns is cached (r.seq as it was, or empty); the caller
    // reuses what it can as truncate does.
    bool attach_rolled(Running& r, Job& job, const std::vector<int32_t>& target, const std::vector<int32_t>* cached);
    std::vector<Planned> plan_step();
    // max_stall_ms's cost model: a pass costs a decode-only pass's seconds plus seconds per
    // unit of prefill work (cost_, from the model's shape).
    struct PassShape {
        int32_t decodes = 0, prefill = 0;  // tokens
        int32_t drafted = 0;               // the decodes' guessed tokens
        double work = 0;                   // of the prefill tokens
    };
    double stall_work() const;  // prefill work this step may take
    PassShape pass_shape(const std::vector<Planned>& plan) const;
    void learn_step_cost(const PassShape& shape, double seconds);
    bool uses_prefix_cache(const Job& job) const;  // attaches and publishes prefix blocks
    bool rolls(const Job& job) const;              // context overflow roll, and turns were dropped
    void evict_cached(int32_t seq, int32_t n);
    void drop_cached(const std::string& key);
    void preempt(size_t i);
    void run_pass(const std::vector<Planned>& plan, StepInfo& info);
    void sample(const std::vector<Planned>& plan, bool host, int32_t k, StepInfo& info);
    int32_t sample_row(Running& r, size_t row, bool host, int32_t k, std::span<const int32_t> history,
                       std::span<const int32_t> counts);
    int32_t sample_candidates(Job& job, size_t row, std::span<const TopKCandidate> top);
    int32_t verify_rows(Running& r, const Planned& p, size_t row, bool host, int32_t k,
                        std::span<const int32_t> counts);
    std::vector<TokenProb> row_distribution(Running& r, size_t row, bool host, int32_t k,
                                            std::span<const int32_t> history, std::span<const int32_t> counts);
    std::vector<float> host_row(size_t row) const;
    static void mark_sampled(const Running& r, StepInfo& info);
    void count_pass(Job& job, int32_t drafted, int32_t accepted, int32_t tokens);
    void accept(Running& r, int32_t token, int64_t cached);
    // Speculation: whether the request's decodes carry a draft, the draft for this step, and
    // after the pass the KV cache rolled back past the rejected guesses (through the seam).
    bool speculates(const Job& job) const;
    bool drafts_with_model(const Job& job) const;  // the draft model proposes for it
    bool draft_pays(const Job& job, int32_t decodes) const;
    static std::span<const int32_t> history(const Running& r, const Planned& p, size_t j);
    void pass_input(const Running& r, const Planned& p, std::vector<int32_t>& input) const;
    std::vector<DraftProposal> plan_drafts(int32_t budget, int32_t decodes);
    bool pass_allows_draft(Job& job, int32_t decodes) const;
    int32_t draft_len(const Job& job) const;
    int32_t max_draft() const;
    void settle_draft(Running& r, const Planned& p, int32_t accepted, StepInfo& info);
    void adapt_draft(Job& job, int32_t drafted, int32_t accepted) const;
    void adapt_model_draft(Job& job, int32_t drafted, int32_t accepted) const;
    void pause_draft(Job& job) const;
    DraftPaceOptions pace_options() const;
    void sweep();
    void release(Running& r, bool keep);
    void forget_job(const Job& job);
    void end_job(Job& job, StopReason reason);
    void fail_job(Job& job, const std::string& error);
    void publish_memory();
    void publish_load();

    Model& model_;
    SchedulerOptions opts_;
    std::string model_name_;
    Telemetry own_telemetry_;
    Telemetry& telemetry_;  // opts_.telemetry or own_telemetry_

    mutable std::mutex mutex_;  // guards the members below up to the engine-only ones
    std::condition_variable wake_;
    std::condition_variable idle_cv_;
    bool idle_ = false;  // the engine thread is waiting for work
    bool stopping_ = false;
    uint64_t next_id_ = 1;
    std::deque<std::shared_ptr<Job>> queue_;         // waiting, by id (FCFS; preempted ones rejoin in order)
    std::map<uint64_t, std::shared_ptr<Job>> live_;  // queued or running, by id
    std::vector<std::string> forgets_;               // cache keys to drop
    std::vector<DeviceMemory> memory_;               // published by the engine thread

    std::atomic<int32_t> blocks_used_{0}, blocks_cached_{0}, n_running_{0}, n_queued_{0};
    std::atomic<uint64_t> host_cache_bytes_{0};
    std::atomic<uint64_t> disk_cache_bytes_{0};
    std::atomic<uint64_t> steps_{0}, preemptions_{0}, finished_{0};

    // Engine thread only.
    std::vector<Running> running_;  // by id: oldest (highest priority) first
    std::list<Cached> cached_;      // most recently used first
    std::vector<float> logits_;     // host logits of the last pass's output rows
    Tensor logits_dev_;             // or where they were computed
    std::vector<TopKCandidate> top_;
    std::vector<float> row_;       // a grammar's fallback: rows of logits_dev_ downloaded
    int32_t max_pass_tokens_ = 0;  // largest pass so far (scratch grows with it)
    // For max_stall_ms: the prefill work of a run of tokens, from the model's shape, then the
    // recent passes' cost as running means: seconds per unit of that work, of a decode-only pass.
    PrefillCost cost_;
    double work_seconds_ = 0;
    double decode_step_seconds_ = 0;
    // Speculation: what a row costs in a pass of decodes, so a draft rides only where it pays.
    PassCost pass_cost_;
    std::thread thread_;
};

}  // namespace ember
