#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include "engine/core/log.h"
#include "engine/kv/kv_batch.h"
#include "engine/sampling/constrained.h"
#include "engine/sampling/speculative.h"
#include "engine/runtime/chat.h"
#include "engine/runtime/decode_state.h"
#include "engine/runtime/prompt_fit.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

enum State : int { kQueued = 0, kPrefill = 1, kDecode = 2 };

constexpr int32_t kMaxTopLogprobs = 20;

std::string default_model_name(const Model& model) {
    return std::filesystem::path(model.file().path()).stem().string();
}

// The distribution logprobs report: log-softmax of the model's own logits for the row, before
// penalties, logit bias, temperature and truncation (what the model thinks, not the sampler).
TokenLogprob logprob_of(std::span<const float> row, int32_t token, int32_t top_n, const Tokenizer& tok) {
    float max = -std::numeric_limits<float>::infinity();
    for (float x : row)
        if (x > max) max = x;
    double sum = 0;
    for (float x : row)
        if (!std::isnan(x)) sum += std::exp(static_cast<double>(x) - max);
    const float lse = max + static_cast<float>(std::log(sum));
    TokenLogprob lp;
    lp.id = token;
    lp.piece = tok.token_to_piece(token);
    lp.logprob = row[static_cast<size_t>(token)] - lse;
    if (top_n > 0) {
        std::vector<int32_t> ids(row.size());
        std::iota(ids.begin(), ids.end(), 0);
        const auto n = std::min<size_t>(static_cast<size_t>(top_n), ids.size());
        auto better = [&](int32_t a, int32_t b) {
            const float la = row[static_cast<size_t>(a)], lb = row[static_cast<size_t>(b)];
            if (std::isnan(la) != std::isnan(lb)) return std::isnan(lb);
            return la != lb ? la > lb : a < b;
        };
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
        for (size_t i = 0; i < n; ++i)
            lp.top.push_back({ids[i], tok.token_to_piece(ids[i]), row[static_cast<size_t>(ids[i])] - lse});
    }
    return lp;
}

}  // namespace

// A request from submit() to its last event. The atomics are read by status() and cancel()
// on other threads; the rest belongs to the engine thread once the request is queued.
struct Scheduler::Job {
    uint64_t id = 0;
    EngineRequest req;  // prompt fields cleared: the tokens are below
    std::vector<int32_t> prompt;
    ReasoningSetup reasoning;  // how its output splits into thinking and answer
    int32_t dropped_turns = 0;
    std::optional<DroppedSpan> roll;  // context overflow roll: where the dropped turns were
    int32_t rolled_tokens = 0;
    EventSink sink;
    Clock::time_point submitted = Clock::now();
    std::atomic<bool> cancelled{false};
    std::atomic<int> state{kQueued};
    std::atomic<int32_t> generated{0};
    std::atomic<int32_t> drafted_now{0}, accepted_now{0}, passes_now{0};  // for status()

    // Engine thread. These survive a preemption: the request resumes where it was.
    std::unique_ptr<DecodeState> decode;  // from its first admission
    std::vector<int32_t> output;          // tokens sampled so far
    std::vector<TokenLogprob> logprobs;   // of tokens whose text is still held back
    int32_t reused_tokens = 0;
    int32_t preemptions = 0;
    int32_t drafted = 0, accepted = 0;  // speculation: guessed tokens checked, and agreed with
    int32_t passes = 0;                 // passes that gave it tokens (tokens per pass = output / passes)
    DraftPace pace;            // how much it drafts next (draft_pace.h; a draft model's rule: adapt_model_draft)
    int32_t draft_misses = 0;  // drafts with a rejected token (a draft model's acceptance estimate)
    int32_t draft_pauses = 0;  // a draft model's pauses in a row (each twice as long)
    double queue_wait_ms = 0;

    int32_t total() const { return static_cast<int32_t>(prompt.size() + output.size()); }
    int32_t token_at(size_t i) const { return i < prompt.size() ? prompt[i] : output[i - prompt.size()]; }
    void emit(EngineEvent&& e) {
        e.request_id = id;
        if (sink) sink(std::move(e));
    }
};

// A request with a KV sequence, in the running batch.
struct Scheduler::Running {
    std::shared_ptr<Job> job;
    int32_t seq = -1;
    std::vector<int32_t> tokens;         // in the KV cache: a prefix of job->prompt + job->output
    bool rolled = false;                 // holds moved rows (Transformer::roll_kv): never published
    StopReason done = StopReason::None;  // ended this step, for this reason
    std::string error;                   // or failed
    int32_t remaining() const { return job->total() - static_cast<int32_t>(tokens.size()); }
    bool decoding() const { return !job->output.empty() && remaining() == 1; }
};

namespace {
// A state snapshot after a pass over prompt tokens is kept (and stored); after a decode step
// only the sequence's newest is, until the turn ends (KvCache::publish).
KvCache::Snapshot snapshot_kind(size_t in_cache, size_t prompt) {
    return in_cache > prompt ? KvCache::Snapshot::Latest : KvCache::Snapshot::Keep;
}

// `draft`'s bytes added to the entry of the same device in `m` (a new entry for a device the
// target does not use).
void add_draft_memory(std::vector<DeviceMemory>& m, const std::vector<DeviceMemory>& draft) {
    for (const DeviceMemory& d : draft) {
        auto it = std::find_if(m.begin(), m.end(), [&](const DeviceMemory& t) { return t.device == d.device; });
        if (it == m.end()) {
            m.push_back(d);
            m.back().layers = 0;
            continue;
        }
        it->weights += d.weights;
        it->mapped_weights += d.mapped_weights;
        it->kv_cache += d.kv_cache;
        it->state += d.state;
        it->scratch += d.scratch;
    }
}
}  // namespace

Scheduler::Scheduler(Model& model, SchedulerOptions options)
    : model_(model),
      opts_(std::move(options)),
      model_name_(opts_.model_name),
      telemetry_(opts_.telemetry ? *opts_.telemetry : own_telemetry_),
      cost_(PrefillCost::of(model.config())) {
    if (model_name_.empty()) model_name_ = default_model_name(model_);
    if (opts_.max_step_tokens == 0) opts_.max_step_tokens = std::max(model_.n_batch(), opts_.max_batch);
    if (opts_.max_batch < 1) throw Error("scheduler: max_batch must be at least 1");
    if (opts_.max_step_tokens < opts_.max_batch)
        throw Error("scheduler: max_step_tokens (" + std::to_string(opts_.max_step_tokens) +
                    ") must be at least max_batch (" + std::to_string(opts_.max_batch) + ")");
    if (opts_.max_queue < 0 || opts_.max_cached < 0) throw Error("scheduler: max_queue and max_cached must be >= 0");
    if (opts_.prefix_cache && model_.kv().has_recurrent())
        log_info("prefix reuse for " + model_.config().arch +
                 " resumes from recurrent-state snapshots at block ends (KvCache::publish)");
    running_.reserve(static_cast<size_t>(opts_.max_batch));
    thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

// ---- any thread -------------------------------------------------------------------------

uint64_t Scheduler::submit(EngineRequest request, EventSink sink) {
    if (!request.model.empty() && request.model != model_name_)
        throw Error("unknown model '" + request.model + "' (this engine serves '" + model_name_ + "')");
    const int kinds = !request.messages.empty() + !request.prompt.empty() + !request.prompt_tokens.empty();
    if (kinds != 1) throw Error("a request needs exactly one of messages, prompt and prompt tokens");
    if (request.top_logprobs < -1 || request.top_logprobs > kMaxTopLogprobs)
        throw Error("top_logprobs must be between 0 and " + std::to_string(kMaxTopLogprobs) + " (-1: none)");
    Sampler check(request.sampling);  // throws on invalid sampling parameters
    if (request.reasoning_budget < -1)
        throw Error("reasoning budget must be -1 (no limit) or a number of tokens, not " +
                    std::to_string(request.reasoning_budget));
    auto job = std::make_shared<Job>();
    const int64_t n_ctx = model_.n_ctx();
    const Tokenizer& tok = model_.tokenizer();
    if (!request.messages.empty()) {
        job->reasoning.format = reasoning_format(model_);
        if (job->reasoning.format != ReasoningFormat::None)
            job->reasoning.generation_prompt =
                chat_generation_prompt(model_, request.messages, request.template_options);
        job->reasoning.budget = request.reasoning_budget;
        if (!request.template_options.tools_json.empty())
            job->reasoning.write_tokens = tool_call_marker_tokens(tool_call_format(model_));
        if (request.context_overflow == OverflowPolicy::Roll) {
            if (const std::string why = model_.transformer().roll_refusal(); !why.empty())
                throw Error("context overflow roll is not available for this model: " + why +
                            " (truncate leaves out the same turns and computes the rest again)");
        }
        if (request.context_overflow != OverflowPolicy::Stop) {
            std::vector<int32_t> full;
            if (request.context_overflow == OverflowPolicy::Roll)
                full = chat_prompt_tokens(model_, request.messages, request.template_options);
            FittedPrompt f = fit_prompt(model_, std::move(request.messages), answer_room(n_ctx, request.max_tokens),
                                        request.template_options);
            job->prompt = std::move(f.tokens);
            job->dropped_turns = f.dropped_turns;
            if (f.dropped_turns > 0 && !full.empty()) job->roll = dropped_span(full, job->prompt);
        } else {
            job->prompt = chat_prompt_tokens(model_, request.messages, request.template_options);
            // Stop: refused here, before anything is computed; room for one answer token.
            if (static_cast<int64_t>(job->prompt.size()) >= n_ctx)
                throw ContextOverflow::conversation(static_cast<int64_t>(job->prompt.size()), 1, n_ctx);
        }
    } else if (!request.prompt.empty()) {
        job->prompt = tok.encode(request.prompt, false, request.prompt_parse_special);
        if (tok.add_bos() && tok.bos() >= 0) job->prompt.insert(job->prompt.begin(), tok.bos());
    } else {
        for (int32_t id : request.prompt_tokens)
            if (id < 0 || id >= tok.n_vocab())
                throw Error("prompt token " + std::to_string(id) + " is not in the vocabulary (0.." +
                            std::to_string(tok.n_vocab() - 1) + ")");
        job->prompt = std::move(request.prompt_tokens);
    }
    if (job->prompt.empty()) throw Error("the prompt is empty");
    if (static_cast<int64_t>(job->prompt.size()) >= n_ctx)
        throw Error("prompt of " + std::to_string(job->prompt.size()) + " tokens does not fit the context of " +
                    std::to_string(n_ctx) + " tokens (it needs room for at least one generated token)");
    request.messages.clear();
    request.prompt.clear();
    request.prompt_tokens.clear();
    job->req = std::move(request);
    job->sink = std::move(sink);
    int32_t queued = 0;
    {
        std::lock_guard lock(mutex_);
        if (stopping_) throw Error("the engine is shutting down");
        if (queue_.size() >= static_cast<size_t>(opts_.max_queue))
            throw EngineBusy("the queue is full (" + std::to_string(opts_.max_queue) + " requests waiting)");
        job->id = next_id_++;
        job->submitted = Clock::now();
        queue_.push_back(job);
        live_.emplace(job->id, job);
        queued = static_cast<int32_t>(queue_.size());
        n_queued_.store(queued);
    }
    wake_.notify_one();
    telemetry_.set_load(n_running_.load(), queued);
    return job->id;
}

void Scheduler::cancel(uint64_t request_id) {
    {
        std::lock_guard lock(mutex_);
        const auto it = live_.find(request_id);
        if (it == live_.end()) return;
        it->second->cancelled.store(true);
    }
    wake_.notify_one();
}

void Scheduler::forget(const std::string& cache_key) {
    if (cache_key.empty()) return;
    {
        std::lock_guard lock(mutex_);
        forgets_.push_back(cache_key);
    }
    wake_.notify_one();
}

void Scheduler::wait_idle() {
    std::unique_lock lock(mutex_);
    idle_cv_.wait(lock, [&] { return stopping_ || (idle_ && queue_.empty() && forgets_.empty()); });
}

SchedulerStats Scheduler::stats() const { return {steps_.load(), preemptions_.load(), finished_.load()}; }

EngineStatus Scheduler::status() const {
    EngineStatus s;
    s.model = model_name_;
    s.model_path = model_.file().path();
    s.tool_call_format = tool_call_format(model_);
    s.chat_template = model_.chat_template().tmpl.source();
    s.device = model_.device();
    s.device_reason = model_.device_reason();
    s.n_ctx = model_.n_ctx();
    s.max_batch = opts_.max_batch;
    s.kv_blocks_total = model_.kv().config().n_blocks;
    s.kv_blocks_used = blocks_used_.load();
    s.kv_blocks_cached = blocks_cached_.load();
    s.kv_host_cache_bytes = host_cache_bytes_.load();
    s.kv_disk_cache_bytes = disk_cache_bytes_.load();
    s.speculation = telemetry_.speculation_totals();
    std::lock_guard lock(mutex_);
    s.memory = memory_;
    for (const auto& [id, job] : live_) {
        RequestStatus r;
        r.id = id;
        const int state = job->state.load();
        r.state = state == kQueued ? "queued" : state == kPrefill ? "prefill" : "decode";
        r.prompt_tokens = static_cast<int32_t>(job->prompt.size());
        r.generated_tokens = job->generated.load();
        r.age_ms = ms_since(job->submitted);
        r.drafted_tokens = job->drafted_now.load();
        r.accepted_tokens = job->accepted_now.load();
        r.passes = job->passes_now.load();
        s.requests.push_back(std::move(r));
    }
    std::stable_sort(s.requests.begin(), s.requests.end(), [](const RequestStatus& a, const RequestStatus& b) {
        return (a.state == "queued") < (b.state == "queued");
    });
    return s;
}

// ---- engine thread ----------------------------------------------------------------------

void Scheduler::run() {
    publish_memory();
    while (true) {
        {
            std::unique_lock lock(mutex_);
            idle_ = true;  // seen by wait_idle() only while the wait below holds no work
            idle_cv_.notify_all();
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty() || !forgets_.empty(); });
            idle_ = false;
            if (stopping_) break;
        }
        StepInfo info;
        try {
            info = step();
        } catch (const std::exception& e) {  // a bug, not a request's fault: fail what runs, keep serving
            log_warn(std::string("scheduler: ") + e.what());
            for (Running& r : running_) r.error = e.what();
            sweep();
        }
        if (opts_.on_step && !info.batch.empty()) {
            try {
                opts_.on_step(info);
            } catch (const std::exception& e) {  // the hook's error, not the requests'
                log_warn(std::string("scheduler: on_step: ") + e.what());
            }
        }
    }
    for (Running& r : running_) r.done = StopReason::Cancelled;
    sweep();
    std::deque<std::shared_ptr<Job>> queued;
    {
        std::lock_guard lock(mutex_);
        queued.swap(queue_);
        n_queued_.store(0);
    }
    for (const auto& job : queued) end_job(*job, StopReason::Cancelled);
    for (const Cached& c : cached_) model_.kv().free_sequence(c.seq);
    cached_.clear();
}

StepInfo Scheduler::step() {
    drain();
    admit();
    StepInfo info;
    if (!running_.empty()) {
        const std::vector<Planned> plan = plan_step();
        const PassShape shape = pass_shape(plan);
        const auto start = std::chrono::steady_clock::now();
        if (!plan.empty()) run_pass(plan, info);
        learn_step_cost(shape, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (!info.batch.empty()) {  // counted before anything ends: a client that saw its end sees the step
            info.step = steps_.fetch_add(1) + 1;
            int32_t tokens = 0;
            for (const StepEntry& e : info.batch) tokens += e.tokens;
            telemetry_.step(static_cast<int32_t>(info.batch.size()), tokens);
            if (tokens > max_pass_tokens_) {  // the scratch buffers grew for this pass
                max_pass_tokens_ = tokens;
                publish_memory();
            }
        }
        for (StepEntry& e : info.batch)
            for (const Running& r : running_)
                if (r.job->id == e.request_id) e.ended = r.done != StopReason::None || !r.error.empty();
        sweep();
    }
    publish_load();
    info.queued = n_queued_.load();
    info.free_blocks = model_.kv().free_blocks();
    return info;  // an empty batch: nothing ran (everything cancelled or waiting)
}

// Blocks in use, requests running and queued: for status() and the telemetry, updated before
// any Finished event goes out (a client that saw its request end sees it gone).
void Scheduler::publish_load() {
    blocks_used_.store(model_.kv().used_blocks());
    blocks_cached_.store(model_.kv().idle_blocks());
    const HostPrefixStore* host = model_.kv().host_cache();
    host_cache_bytes_.store(host ? host->bytes() : 0);
    const DiskPrefixStore* disk = model_.kv().disk_cache();
    disk_cache_bytes_.store(disk ? disk->bytes() : 0);
    n_running_.store(static_cast<int32_t>(running_.size()));
    telemetry_.set_load(n_running_.load(), n_queued_.load());
}

// Cancels and forgotten cache keys, before anything is admitted or run.
void Scheduler::drain() {
    std::vector<std::string> forgets;
    std::vector<std::shared_ptr<Job>> cancelled;
    {
        std::lock_guard lock(mutex_);
        forgets.swap(forgets_);
        for (auto it = queue_.begin(); it != queue_.end();) {
            if ((*it)->cancelled.load()) {
                cancelled.push_back(std::move(*it));
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
        n_queued_.store(static_cast<int32_t>(queue_.size()));
    }
    for (const std::string& key : forgets) {
        drop_cached(key);
        for (Running& r : running_)
            if (r.job->req.cache_key == key) r.job->req.cache_key.clear();  // not kept when it ends
    }
    for (const auto& job : cancelled) end_job(*job, StopReason::Cancelled);
    for (Running& r : running_)
        if (r.job->cancelled.load()) r.done = StopReason::Cancelled;
    sweep();
}

// FCFS: the oldest waiting request is admitted when the batch has a place and the KV pool
// has room for its whole prompt next to what the running ones still need; nobody overtakes
// it, so a long prompt is never starved by a stream of short ones.
void Scheduler::admit() {
    while (running_.size() < static_cast<size_t>(opts_.max_batch)) {
        std::shared_ptr<Job> job;
        {
            std::lock_guard lock(mutex_);
            if (queue_.empty()) return;
            job = queue_.front();
        }
        if (!running_.empty() && !fits(*job)) return;
        {
            std::lock_guard lock(mutex_);
            queue_.pop_front();
            n_queued_.store(static_cast<int32_t>(queue_.size()));
        }
        admit_one(std::move(job));
    }
}

// Room for the whole prompt and one generated token, next to what the running sequences still
// need to prefill; kept cache sequences count as room (they can be evicted).
bool Scheduler::fits(const Job& job) const {
    std::vector<KvCache::Growth> growing;
    for (const Running& r : running_) growing.push_back({r.seq, r.remaining()});
    std::vector<int32_t> evictable;
    for (const Cached& c : cached_) evictable.push_back(c.seq);
    return model_.kv().admits(job.total() + 1, growing, evictable);
}

void Scheduler::admit_one(std::shared_ptr<Job> job) {
    KvCache& kv = model_.kv();
    Running r;
    r.job = job;
    std::vector<int32_t> target(job->prompt);
    target.insert(target.end(), job->output.begin(), job->output.end());
    const auto hit = std::find_if(cached_.begin(), cached_.end(), [&](const Cached& c) {
        return !job->req.cache_key.empty() && c.key == job->req.cache_key;
    });
    if (hit != cached_.end()) {
        r.seq = hit->seq;
        r.rolled = hit->rolled;
        const std::vector<int32_t> cached = std::move(hit->tokens);
        cached_.erase(hit);
        if (!rolls(*job) || !attach_rolled(r, *job, target, &cached)) {
            const auto n = static_cast<int32_t>(reusable_prefix(cached, target));
            r.tokens.assign(target.begin(), target.begin() + kv.truncate(r.seq, n));
        }
    } else {
        r.seq = kv.new_sequence();
        const bool rolled = rolls(*job) && uses_prefix_cache(*job) && attach_rolled(r, *job, target, nullptr);
        if (!rolled && uses_prefix_cache(*job) && !target.empty()) {  // the last token is computed, for logits
            const int32_t n = kv.attach_prefix(r.seq, std::span(target).first(target.size() - 1));
            r.tokens.assign(target.begin(), target.begin() + n);
        }
    }
    if (!job->decode) {  // first admission (a preempted request resumes silently)
        job->queue_wait_ms = ms_since(job->submitted);
        job->reused_tokens = static_cast<int32_t>(r.tokens.size());
        const EngineRequest& q = job->req;
        job->decode = std::make_unique<DecodeState>(model_.tokenizer(), q.sampling,
                                                    DecodeLimits{q.max_tokens, q.stop, q.ignore_eog, model_.n_ctx()},
                                                    &telemetry_, job->id);
        job->decode->split_reasoning(job->reasoning);
        if (q.grammar) job->decode->constrain(q.grammar, model_.grammar_vocab());
        GenerateStats& st = job->decode->stats();
        st.prompt_tokens = static_cast<int32_t>(job->prompt.size());
        st.reused_tokens = job->reused_tokens;
        telemetry_.request_started(job->id, st.prompt_tokens, st.reused_tokens, job->queue_wait_ms,
                                   static_cast<int32_t>(running_.size()) + 1);
        EngineEvent e;
        e.kind = EngineEvent::Kind::Started;
        job->emit(std::move(e));
    }
    job->state.store(kPrefill);
    const auto at = std::upper_bound(running_.begin(), running_.end(), job->id,
                                     [](uint64_t id, const Running& x) { return id < x.job->id; });
    running_.insert(at, std::move(r));
}

bool Scheduler::attach_rolled(Running& r, Job& job, const std::vector<int32_t>& target,
                              const std::vector<int32_t>* cached) {
    KvCache& kv = model_.kv();
    int32_t at = 0, by = 0, end = 0;  // roll_kv's: drop [at, at + by), keep up to end
    if (cached) {                     // the chat's own sequence, whatever it dropped before
        const CachedDrop d = find_drop(*cached, target);
        // The target's last token is computed, for logits.
        const int32_t kept = std::min(d.kept, static_cast<int32_t>(target.size()) - 1 - d.at);
        if (kept <= 0) return false;
        at = d.at, by = d.by;
        end = kv.truncate(r.seq, at + by + kept);
    } else {  // the whole conversation's published blocks
        if (!job.roll) return false;
        const std::vector<int32_t> full = with_dropped(target, *job.roll);
        at = job.roll->at, by = static_cast<int32_t>(job.roll->dropped.size());
        end = kv.attach_prefix(r.seq, std::span(full).first(full.size() - 1));
        if (end <= at + by) {
            kv.truncate(r.seq, 0);
            return false;
        }
    }
    if (end > at + by) {
        try {
            model_.transformer().roll_kv(kv, r.seq, at, by, end);
            r.tokens.assign(target.begin(), target.begin() + (end - by));
            r.rolled = true;
            job.rolled_tokens = end - by - at;
            return true;
        } catch (const std::exception& e) {  // rows may be half moved: nothing of them is kept
            log_warn(std::string("scheduler: context roll failed, computing the prompt again: ") + e.what());
            kv.truncate(r.seq, 0);
            r.tokens.clear();
            return true;
        }
    }
    r.tokens.assign(target.begin(), target.begin() + kv.truncate(r.seq, std::min(kv.length(r.seq), at)));
    return true;
}

// A recurrent state holds every token it has seen: its rows cannot be moved as K/V rows are.
bool Scheduler::rolls(const Job& job) const {
    return job.req.context_overflow == OverflowPolicy::Roll && job.dropped_turns > 0 && !model_.kv().has_recurrent();
}

bool Scheduler::uses_prefix_cache(const Job& job) const { return opts_.prefix_cache && job.req.reuse_prefix; }

// The tokens of this step: first one for every sequence owed exactly one (decodes), then
// prefill chunks from what is left of max_step_tokens, oldest first. KV blocks are taken in
// the same order; a decode that finds none free evicts kept cache_key sequences, then
// preempts the youngest running sequence (possibly itself); a prefill chunk shrinks to the
// room there is.
std::vector<Scheduler::Planned> Scheduler::plan_step() {
    std::vector<int32_t> want(running_.size(), 0);
    int32_t budget = opts_.max_step_tokens;
    int32_t decodes = 0;
    for (size_t i = 0; i < running_.size(); ++i) {
        if (running_[i].remaining() != 1) continue;
        want[i] = 1;
        --budget;
        ++decodes;
    }
    // Speculation: a decode's draft rides in its pass, from what the decodes left of the budget,
    // where its rows pay for themselves in this pass (pass_cost.h).
    std::vector<DraftProposal> drafts = plan_drafts(budget, decodes);
    for (size_t i = 0; i < running_.size(); ++i) {
        want[i] += static_cast<int32_t>(drafts[i].tokens.size());
        budget -= static_cast<int32_t>(drafts[i].tokens.size());
    }
    KvCache& kv = model_.kv();
    const int32_t B = kv.config().block_tokens;
    double work_left = stall_work();  // infinite unless max_stall_ms cuts this step
    bool first = true;                // the first prefill chunk takes at least a block: it always moves
    for (size_t i = 0; i < running_.size(); ++i) {
        if (want[i] != 0) continue;
        int32_t n = std::min(running_[i].remaining(), budget);
        const auto start = static_cast<int64_t>(running_[i].tokens.size());
        if (n > 0 && std::isfinite(work_left)) {
            n = std::min(n, std::max(cost_.fit(start, work_left, n), first ? B : 0));
            work_left -= cost_.work(start, n);
        }
        // A recurrent state is snapshot where a pass ends on a block (KvCache::publish): a
        // chunk that crosses block ends stops at the last one, the rest follows next step.
        if (kv.has_recurrent() && n > 1) {
            const auto end = (start + n) / B * B;
            if (end > start && end < start + n) n = static_cast<int32_t>(end - start);
        }
        first = first && n == 0;
        want[i] = n;
        budget -= n;
    }
    std::vector<Planned> plan;
    for (size_t i = 0; i < running_.size();) {
        Running& r = running_[i];
        int32_t n = want[i];
        if (n == 0) {
            ++i;
            continue;
        }
        if (!drafts[i].tokens.empty() && !kv.can_allocate(r.seq, n)) {  // a draft never evicts nor preempts
            drafts[i] = {};
            n = 1;
        }
        // A decode needs its one token; a prefill chunk at least one. Younger sequences give
        // way to older ones.
        if (!kv.can_allocate(r.seq, 1)) evict_cached(r.seq, n);
        while (!kv.can_allocate(r.seq, 1) && running_.size() > i + 1) {
            preempt(running_.size() - 1);
            want.pop_back();
            drafts.pop_back();
        }
        if (!kv.can_allocate(r.seq, 1)) {
            if (n == 1 && running_.size() > 1) {  // a decode with nobody younger to take from
                preempt(i);
                want.erase(want.begin() + static_cast<std::ptrdiff_t>(i));
                drafts.erase(drafts.begin() + static_cast<std::ptrdiff_t>(i));
                continue;
            }
            n = 0;
        }
        if (n > 1 && drafts[i].tokens.empty()) {
            if (!kv.can_allocate(r.seq, n)) evict_cached(r.seq, n);
            n = std::min(n, kv.room(r.seq));
        }
        if (n > 0) {
            std::optional<std::vector<int32_t>> slots = kv.allocate_slots(r.seq, n);
            if (!slots) throw Error("scheduler: the KV cache refused " + std::to_string(n) + " tokens it had room for");
            plan.push_back({i, n, std::move(*slots), std::move(drafts[i])});
        }
        ++i;
    }
    if (plan.empty() && !running_.empty()) {
        // Every prefill is stuck for blocks: give the oldest the youngest's.
        if (running_.size() > 1) preempt(running_.size() - 1);
        else running_.front().error = "the KV cache cannot hold this request";
    }
    return plan;
}

// The prefill work that fits in max_stall_ms next to the decodes, by the recent passes' cost;
// infinite when nothing is streaming, the option is off or no cost is known yet.
double Scheduler::stall_work() const {
    constexpr double kAll = std::numeric_limits<double>::infinity();
    if (opts_.max_stall_ms <= 0 || work_seconds_ <= 0) return kAll;
    if (std::none_of(running_.begin(), running_.end(), [](const Running& r) { return r.decoding(); })) return kAll;
    return std::max(0.0, opts_.max_stall_ms / 1000.0 - decode_step_seconds_) / work_seconds_;
}

Scheduler::PassShape Scheduler::pass_shape(const std::vector<Planned>& plan) const {
    PassShape s;
    for (const Planned& p : plan) {
        const Running& r = running_[p.index];
        if (r.decoding()) {
            ++s.decodes;
            s.drafted += static_cast<int32_t>(p.draft.tokens.size());
        } else {
            s.prefill += p.n;
            s.work += cost_.work(static_cast<int64_t>(r.tokens.size()), p.n);
        }
    }
    return s;
}

// Running means of a pass's cost: seconds of a pass of decodes only; seconds per unit of work
// of the prefill in a pass with at least a KV block of it (the decodes' share taken off). The
// newest pass weighs 1/2. A pass of decodes only also teaches speculation what a row costs.
void Scheduler::learn_step_cost(const PassShape& shape, double seconds) {
    const auto mean = [](double& m, double x) { m = m > 0 ? 0.5 * (m + x) : x; };
    if (shape.decodes > 0 && shape.prefill == 0) {
        pass_cost_.add(shape.decodes + shape.drafted, seconds);
        mean(decode_step_seconds_, seconds);
    } else if (shape.prefill >= model_.kv().config().block_tokens && shape.work > 0) {
        const double prefill_seconds = seconds - (shape.decodes > 0 ? decode_step_seconds_ : 0);
        if (prefill_seconds > 0) mean(work_seconds_, prefill_seconds / shape.work);
    }
}

// Frees kept cache_key sequences, least recently used first, until `seq` can grow by `n`.
void Scheduler::evict_cached(int32_t seq, int32_t n) {
    KvCache& kv = model_.kv();
    while (!kv.can_allocate(seq, n) && !cached_.empty()) {
        kv.free_sequence(cached_.back().seq);
        cached_.pop_back();
    }
}

void Scheduler::drop_cached(const std::string& key) {
    for (auto it = cached_.begin(); it != cached_.end();) {
        if (it->key == key) {
            model_.kv().free_sequence(it->seq);
            it = cached_.erase(it);
        } else {
            ++it;
        }
    }
}

// Preemption by recompute: the sequence's blocks go back to the pool at once and the request
// waits at the head of the queue (in id order) with its prompt and the tokens it generated;
// readmitted, it prefills them again and goes on, invisibly to its client.
void Scheduler::preempt(size_t i) {
    Running r = std::move(running_[i]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    model_.kv().free_sequence(r.seq);
    ++r.job->preemptions;
    preemptions_.fetch_add(1);
    r.job->state.store(kQueued);
    std::lock_guard lock(mutex_);
    const auto at = std::upper_bound(queue_.begin(), queue_.end(), r.job->id,
                                     [](uint64_t id, const std::shared_ptr<Job>& j) { return id < j->id; });
    queue_.insert(at, std::move(r.job));
    n_queued_.store(static_cast<int32_t>(queue_.size()));
}

// A planned sequence's tokens in the pass: its own next ones, then its draft.
void Scheduler::pass_input(const Running& r, const Planned& p, std::vector<int32_t>& input) const {
    input.clear();
    const size_t start = r.tokens.size();
    const auto own = static_cast<size_t>(p.n) - p.draft.tokens.size();
    for (size_t j = 0; j < own; ++j) input.push_back(r.job->token_at(start + j));
    input.insert(input.end(), p.draft.tokens.begin(), p.draft.tokens.end());
}

void Scheduler::run_pass(const std::vector<Planned>& plan, StepInfo& info) {
    KvCache& kv = model_.kv();
    KvBatch pass;
    std::vector<int32_t> input;
    bool host = false;  // some row needs its whole logits row on the host
    int32_t k = 0;      // else: Backend::top_k candidates per row
    for (const Planned& p : plan) {
        const Running& r = running_[p.index];
        const size_t start = r.tokens.size();
        pass_input(r, p, input);
        const size_t own = input.size() - p.draft.tokens.size();  // the request's own tokens, then the guesses
        const bool output = start + own == static_cast<size_t>(r.job->total()) && r.job->req.max_tokens != 0;
        pass.add(r.seq, input, p.kv_slots, static_cast<int32_t>(start),
                 output ? 1 + static_cast<int32_t>(p.draft.tokens.size()) : 0);
        info.batch.push_back(
            {r.job->id, p.n, r.decoding(), false, false, static_cast<int32_t>(p.draft.tokens.size()), 0});
        if (!output) continue;
        int32_t kk = r.job->decode->sampler().top_k_candidates();
        if (kk > 0 && r.job->decode->matcher()) kk = std::max(kk, kGrammarCandidates);
        host = host || kk == 0 || r.job->req.top_logprobs >= 0;
        k = std::max(k, kk);
    }
    const BatchInfo batch = pass.info(kv);
    try {
        if (host) model_.transformer().forward(batch, kv, logits_);
        else logits_dev_ = model_.transformer().forward_device(batch, kv);
        model_.file().check_unchanged();  // a truncated file's weights read as zeros
    } catch (const std::exception& e) {
        for (const Planned& p : plan) {
            Running& r = running_[p.index];
            kv.truncate(r.seq, static_cast<int32_t>(r.tokens.size()));  // the cache never holds half a chunk
            r.error = e.what();
        }
        return;
    }
    for (const Planned& p : plan) {
        Running& r = running_[p.index];
        pass_input(r, p, input);
        r.tokens.insert(r.tokens.end(), input.begin(), input.end());
        // A drafting sequence publishes once its guesses are settled (settle_draft).
        if (uses_prefix_cache(*r.job) && !r.rolled && p.draft.tokens.empty())
            kv.publish(r.seq, r.tokens, snapshot_kind(r.tokens.size(), r.job->prompt.size()));
    }
    sample(plan, host, k, info);
}

void Scheduler::sample(const std::vector<Planned>& plan, bool host, int32_t k, StepInfo& info) {
    // Output rows in batch order: one per sequence whose input is complete, and one more per
    // drafted token (row j scores the token after the draft's first j).
    std::vector<const Planned*> sampling;
    size_t n_rows = 0;
    for (const Planned& p : plan) {
        Running& r = running_[p.index];
        if (r.remaining() > 0) continue;
        if (r.job->req.max_tokens == 0) {
            r.done = StopReason::Length;  // prefill only: cached, nothing sampled
        } else {
            sampling.push_back(&p);
            n_rows += 1 + p.draft.tokens.size();
        }
    }
    if (sampling.empty()) return;
    std::vector<int32_t> counts(n_rows, 0);
    if (!host) {
        // Each row's adjustments see its own history (a drafting row: the draft's tokens before
        // it); the sampler's spans last until its next call, so they are copied.
        std::vector<TopKRow> adjust;
        std::vector<std::vector<TokenCount>> penalized(n_rows);
        std::vector<std::vector<TokenBias>> bias(n_rows);
        for (const Planned* p : sampling) {
            Running& r = running_[p->index];
            for (size_t j = 0; j <= p->draft.tokens.size(); ++j) {
                TopKRow a = r.job->decode->sampler().adjustments(history(r, *p, j));
                const size_t at = adjust.size();
                penalized[at].assign(a.penalized.begin(), a.penalized.end());
                bias[at].assign(a.bias.begin(), a.bias.end());
                a.penalized = penalized[at];
                a.bias = bias[at];
                adjust.push_back(a);
            }
        }
        top_.resize(n_rows * static_cast<size_t>(k));
        model_.transformer().output_backend().top_k(logits_dev_, k, adjust, top_, counts);
    }
    size_t row = 0;
    for (const Planned* p : sampling) {
        Running& r = running_[p->index];
        const size_t before = r.job->output.size();
        int32_t agreed = 0;
        try {
            if (p->draft.tokens.empty()) {
                const std::span<const int32_t> seen = history(r, *p, 0);
                const int32_t token = sample_row(r, row, host, k, seen, counts);
                mark_sampled(r, info);
                accept(r, token, static_cast<int64_t>(seen.size()));  // throws when a forced token breaks the grammar
            } else {
                agreed = verify_rows(r, *p, row, host, k, counts);
                mark_sampled(r, info);
                settle_draft(r, *p, agreed, info);
            }
        } catch (const std::exception& e) {
            r.error = e.what();
        }
        count_pass(*r.job, static_cast<int32_t>(p->draft.tokens.size()), agreed,
                   static_cast<int32_t>(r.job->output.size() - before));
        row += 1 + p->draft.tokens.size();
    }
}

// Speculation's telemetry, per request (RequestStats, status()) and engine-wide (Telemetry):
// a pass that gave a request tokens counts as one of its passes, and for a request that
// speculates, with what it drafted and what stood.
void Scheduler::count_pass(Job& job, int32_t drafted, int32_t accepted, int32_t tokens) {
    if (tokens <= 0) return;
    ++job.passes;
    job.passes_now.store(job.passes);
    job.drafted_now.store(job.drafted);
    job.accepted_now.store(job.accepted);
    if (speculates(job)) telemetry_.speculation(drafted, accepted, tokens);
}

// A drafting sequence's rows by the rejection rule (speculative.h): row j's distribution is
// the one plain decoding would sample from after the draft's first j tokens (penalties see
// them), each standing guess is accepted as a sampled token would be, and the first rejected
// one is replaced by the residual's draw, or the bonus row's draw follows a whole draft.
// Returns how many guesses stood.
int32_t Scheduler::verify_rows(Running& r, const Planned& p, size_t row, bool host, int32_t k,
                               std::span<const int32_t> counts) {
    Job& job = *r.job;
    int32_t agreed = 0;
    for (size_t j = 0; j <= p.draft.tokens.size(); ++j) {
        const std::span<const int32_t> seen = history(r, p, j);
        std::vector<float> raw;  // logprobs: the target's own row, as plain decoding reports it
        if (job.req.top_logprobs >= 0) raw = host_row(row + j);
        const std::vector<TokenProb> dist = row_distribution(r, row + j, host, k, seen, counts);
        DraftJudgement verdict{false, 0};
        if (j < p.draft.tokens.size()) verdict = judge_draft_token(job.decode->sampler(), dist, p.draft, j);
        else verdict.token = job.decode->sampler().draw_from(dist);
        if (!raw.empty())
            job.logprobs.push_back(logprob_of(raw, verdict.token, job.req.top_logprobs, model_.tokenizer()));
        accept(r, verdict.token, static_cast<int64_t>(seen.size()));
        if (r.done != StopReason::None || !verdict.accepted) break;
        ++agreed;
    }
    return agreed;
}

// The distribution a row's plain sampling draws from (Sampler::distribution): from the host
// row (adjusted in place) or from the backend's candidates, which carry the row's own
// adjustments.
std::vector<TokenProb> Scheduler::row_distribution(Running& r, size_t row, bool host, int32_t k,
                                                   std::span<const int32_t> history, std::span<const int32_t> counts) {
    Sampler& sampler = r.job->decode->sampler();
    if (!host)
        return sampler.distribution_top(
            std::span(top_).subspan(row * static_cast<size_t>(k), static_cast<size_t>(counts[row])));
    const size_t V = static_cast<size_t>(model_.config().n_vocab);
    return sampler.distribution(std::span<float>(logits_.data() + row * V, V), history);
}

std::vector<float> Scheduler::host_row(size_t row) const {
    const size_t V = static_cast<size_t>(model_.config().n_vocab);
    return {logits_.begin() + static_cast<std::ptrdiff_t>(row * V),
            logits_.begin() + static_cast<std::ptrdiff_t>((row + 1) * V)};
}

void Scheduler::mark_sampled(const Running& r, StepInfo& info) {
    for (StepEntry& e : info.batch)
        if (e.request_id == r.job->id) e.sampled = true;
}

// The token of one output row: a forced one (thinking budget), else sampled from the host row
// or from the backend's candidates.
int32_t Scheduler::sample_row(Running& r, size_t row, bool host, int32_t k, std::span<const int32_t> history,
                              std::span<const int32_t> counts) {
    Job& job = *r.job;
    Sampler& sampler = job.decode->sampler();
    const size_t V = static_cast<size_t>(model_.config().n_vocab);
    if (const auto forced = job.decode->forced_token()) {  // a thinking budget closes the thinking
        if (host && job.req.top_logprobs >= 0)
            job.logprobs.push_back(logprob_of(std::span<const float>(logits_.data() + row * V, V), *forced,
                                              job.req.top_logprobs, model_.tokenizer()));
        return *forced;
    }
    if (host) {
        const std::span<float> logits(logits_.data() + row * V, V);
        std::vector<float> raw;
        if (job.req.top_logprobs >= 0) raw.assign(logits.begin(), logits.end());
        const grammar::TokenMatcher* m = job.decode->matcher();
        const int32_t token = m ? sample_row_allowed(sampler, *m, logits, history) : sampler.sample(logits, history);
        if (!raw.empty()) job.logprobs.push_back(logprob_of(raw, token, job.req.top_logprobs, model_.tokenizer()));
        return token;
    }
    return sample_candidates(job, row,
                             std::span(top_).subspan(row * static_cast<size_t>(k), static_cast<size_t>(counts[row])));
}

// The tokens a row's sampling sees: the cache's up to the row's input (the last sampled token
// and, for row j, the draft's first j).
std::span<const int32_t> Scheduler::history(const Running& r, const Planned& p, size_t j) {
    return std::span(r.tokens).first(r.tokens.size() - p.draft.tokens.size() + j);
}

// A draft model proposes for every request, or (the app) for those that ask.
bool Scheduler::drafts_with_model(const Job& job) const {
    return opts_.draft && (opts_.draft_every_request || job.req.draft);
}

// A request speculates when asked to and its rows can be judged one by one by the rejection
// rule (speculative.h): any sampling, penalties, bias and logprobs (each row sees the draft's
// tokens before it as history), but no grammar or thinking budget (their state advances per
// token), and a cache that can roll back.
bool Scheduler::speculates(const Job& job) const {
    return (opts_.lookup || job.req.lookup || drafts_with_model(job)) && !job.req.grammar && job.reasoning.budget < 0 &&
           !model_.kv().has_recurrent();
}

// The guesses of this step's speculating decodes, from what the decodes left of the pass's
// `budget` in a pass of `decodes` decodes: prompt lookup per sequence, or the draft model's
// proposals in batched passes.
std::vector<DraftProposal> Scheduler::plan_drafts(int32_t budget, int32_t decodes) {
    std::vector<DraftProposal> drafts(running_.size());
    std::vector<std::vector<int32_t>> texts;  // the draft model's contexts (Want spans them)
    std::vector<DraftModel::Want> wants;
    std::vector<size_t> wanted;  // running_ index of each want
    texts.reserve(running_.size());
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
        if (!running_[i].decoding() || !speculates(*running_[i].job)) continue;
        Job& job = *running_[i].job;
        if (drafts_with_model(job) && job.pace.cap < 0) {  // a draft model starts where it pays with no history
            job.pace.cap = opts_.draft->paying_length(0, 0);
            // One that does not pay even then is first tried after the longest pause: the try
            // makes it prefill the whole prompt.
            if (job.pace.cap == 0) job.draft_pauses = 4, pause_draft(job);
        }
        if (!job.pace.may_draft() || !pass_allows_draft(job, decodes)) continue;
        const int32_t k = std::min(draft_len(job), budget);
        if (k <= 0) continue;
        std::vector<int32_t> text(job.prompt);
        text.insert(text.end(), job.output.begin(), job.output.end());
        if (drafts_with_model(job)) {
            texts.push_back(std::move(text));  // reserved: the spans in wants stay valid
            wants.push_back({job.id, texts.back(), k, &job.req.sampling});
            wanted.push_back(i);
            budget -= k;  // the most it may propose: the draft runs once for all of them
        } else {
            LookupOptions o = opts_.lookup_options;
            o.max_draft = k;
            drafts[i].tokens = lookup_draft(text, o);
            budget -= static_cast<int32_t>(drafts[i].tokens.size());
        }
    }
    if (!wants.empty()) {
        std::vector<DraftProposal> p = opts_.draft->propose(wants);
        for (size_t w = 0; w < wants.size(); ++w) drafts[wanted[w]] = std::move(p[w]);
    }
    return drafts;
}

// Whether the request's draft pays for its rows in a pass of `decodes` decodes, by its
// acceptance rate so far (guesses that stood over guesses, counted by token: a single probe
// moves it by one guess, not by half) against the per-row share of such a pass (pass_cost.h).
// Before the request has drafted, or before the cost is known, it drafts: that is how both are
// learned.
bool Scheduler::draft_pays(const Job& job, int32_t decodes) const {
    if (job.drafted == 0 || !opts_.draft_by_pass_cost) return true;
    return pass_cost_.pays(decodes, static_cast<double>(job.accepted) / job.drafted);
}

// The pass-cost rule (pass_cost.h) for a request allowed to draft by its pace: refused, it
// rests (refused_pace) and then probes with one guess; a first draft, with the cost known, is a
// single guess (a full one is up to max_draft rows on a rate not yet seen). The same for a
// draft model: its proposals are rows of the target's pass too.
bool Scheduler::pass_allows_draft(Job& job, int32_t decodes) const {
    if (!job.pace.probe) {
        if (!draft_pays(job, decodes)) {
            job.pace = refused_pace(job.pace, pace_options());
            return false;
        }
        job.pace.refusals = 0;
    }
    if (job.drafted == 0 && pass_cost_.known() && opts_.draft_by_pass_cost) job.pace.cap = 1;
    return true;
}

// The next draft's length: the request's pace, no guess past what it may still write (a
// verification pass writes up to 1 + draft tokens) or the context still holds.
int32_t Scheduler::draft_len(const Job& job) const {
    int64_t left = model_.n_ctx() - job.total();
    if (job.req.max_tokens > 0)
        left = std::min<int64_t>(left, job.req.max_tokens - static_cast<int64_t>(job.output.size()));
    return static_cast<int32_t>(std::min<int64_t>(job.pace.limit(pace_options()), left - 1));
}

int32_t Scheduler::max_draft() const { return opts_.draft ? opts_.draft->max_draft() : opts_.lookup_options.max_draft; }

// Speculation turns itself down, and off, when it stops paying: prompt lookup (guesses cost
// only the pass's extra tokens) by draft_pace.h's rule; a draft model (each proposal a pass of
// the draft) by its numbers (adapt_model_draft).
void Scheduler::adapt_draft(Job& job, int32_t drafted, int32_t accepted) const {
    if (drafts_with_model(job)) return adapt_model_draft(job, drafted, accepted);
    job.pace = next_pace(job.pace, pace_options(), drafted, accepted);
}

DraftPaceOptions Scheduler::pace_options() const {
    DraftPaceOptions o;
    o.max_draft = max_draft();
    return o;
}

// A draft model's next length: the one DraftModel::paying_length finds for the request's
// acceptance so far (kept in the pace's cap); a pause when none pays. It never turns off for
// good, it is tried ever more rarely (pause_draft).
void Scheduler::adapt_model_draft(Job& job, int32_t drafted, int32_t accepted) const {
    job.draft_misses += accepted < drafted ? 1 : 0;
    job.pace.probe = false;
    job.pace.cap = opts_.draft->paying_length(job.accepted, job.draft_misses);
    if (job.pace.cap == 0) pause_draft(job);
    else job.draft_pauses = 0;
}

// A draft model that does not pay rests kDraftModelPause decodes, twice that after each further
// pause in a row (at most 16 times), then tries one token: every try makes the draft catch up
// on the tokens it missed, so a draft that never pays is tried ever more rarely.
void Scheduler::pause_draft(Job& job) const {
    constexpr int32_t kDraftModelPause = 16;
    job.pace.cap = 1;
    job.pace.pause = kDraftModelPause << std::min(job.draft_pauses, 4);
    ++job.draft_pauses;
}

// After a drafting sequence's tokens are accepted: the cache keeps every token but the newest
// (as after any decode), so the rejected guesses are rolled back through the KV seam; only
// then are its full blocks published.
void Scheduler::settle_draft(Running& r, const Planned& p, int32_t accepted, StepInfo& info) {
    KvCache& kv = model_.kv();
    const auto keep = static_cast<int32_t>(r.job->total()) - 1;
    const auto have = static_cast<int32_t>(r.tokens.size());
    if (have > keep) r.tokens.resize(static_cast<size_t>(kv.rollback(r.seq, have - keep)));
    if (opts_.draft) opts_.draft->settle(r.job->id, r.tokens);  // the draft's cache in step
    Job& job = *r.job;
    job.drafted += static_cast<int32_t>(p.draft.tokens.size());
    job.accepted += accepted;
    adapt_draft(job, static_cast<int32_t>(p.draft.tokens.size()), accepted);
    for (StepEntry& e : info.batch)
        if (e.request_id == r.job->id) e.accepted = accepted;
    if (uses_prefix_cache(*r.job) && !r.rolled)
        kv.publish(r.seq, r.tokens, snapshot_kind(r.tokens.size(), r.job->prompt.size()));
}

// The candidates path: the sampler's pick of the backend's best; under a grammar the best
// allowed one, or when none is, from the whole row (top_k adjusted it in place on the
// device) under the full mask.
int32_t Scheduler::sample_candidates(Job& job, size_t row, std::span<const TopKCandidate> top) {
    Sampler& sampler = job.decode->sampler();
    const grammar::TokenMatcher* m = job.decode->matcher();
    if (!m) return sampler.sample_top(top);
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<int32_t> t = sample_top_allowed(sampler, *m, top);
    if (!t) {
        const size_t stride = logits_dev_.row_bytes / sizeof(float);
        row_.resize((row + 1) * stride);
        model_.transformer().output_backend().download(logits_dev_, row_.data(), (row + 1) * logits_dev_.row_bytes);
        t = sample_adjusted_allowed(
            sampler, *m, std::span<const float>(row_).subspan(row * stride, static_cast<size_t>(logits_dev_.cols)));
    }
    job.decode->stats().grammar_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return *t;
}

void Scheduler::accept(Running& r, int32_t token, int64_t cached) {
    Job& job = *r.job;
    DecodeState& ds = *job.decode;
    if (ds.stats().generated_tokens == 0) ds.prefill_done();
    job.output.push_back(token);
    DecodeState::Step step = ds.accept(token, cached);
    job.generated.store(ds.stats().generated_tokens);
    job.state.store(kDecode);
    if (step.stop == StopReason::EndOfText && !job.logprobs.empty()) job.logprobs.pop_back();  // no text, no entry
    if (!step.text.empty() || !step.reasoning.empty()) {
        EngineEvent e;
        e.kind = EngineEvent::Kind::Text;
        e.text = std::move(step.text);
        e.reasoning = std::move(step.reasoning);
        e.tokens = std::move(job.logprobs);
        job.logprobs.clear();
        job.emit(std::move(e));
    }
    r.done = step.stop;
}

// Ends the requests marked done or failed: their KV blocks are freed (or kept under their
// cache_key) at once.
void Scheduler::sweep() {
    for (size_t i = running_.size(); i-- > 0;) {
        Running& r = running_[i];
        if (r.error.empty() && r.done == StopReason::None) continue;
        Running ended = std::move(r);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        release(ended, ended.error.empty());
        publish_load();
        if (ended.error.empty()) end_job(*ended.job, ended.done);
        else fail_job(*ended.job, ended.error);
    }
}

void Scheduler::release(Running& r, bool keep) {
    KvCache& kv = model_.kv();
    if (keep && uses_prefix_cache(*r.job) && !r.rolled) kv.end_turn(r.seq);  // its last snapshot to disk
    const std::string& key = r.job->req.cache_key;
    if (!keep || key.empty() || opts_.max_cached == 0) {
        kv.free_sequence(r.seq);
        return;
    }
    drop_cached(key);  // a concurrent request with the same key: the newest turn wins
    cached_.push_front({key, r.seq, std::move(r.tokens), r.rolled});
    while (cached_.size() > static_cast<size_t>(opts_.max_cached)) {
        kv.free_sequence(cached_.back().seq);
        cached_.pop_back();
    }
}

void Scheduler::forget_job(const Job& job) {
    if (opts_.draft) opts_.draft->forget(job.id);  // engine thread, as every end
    std::lock_guard lock(mutex_);
    live_.erase(job.id);
    finished_.fetch_add(1);
}

void Scheduler::end_job(Job& job, StopReason reason) {
    forget_job(job);
    RequestStats s;
    s.prompt_tokens = static_cast<int32_t>(job.prompt.size());
    s.dropped_turns = job.dropped_turns;
    s.rolled_tokens = job.rolled_tokens;
    s.preemptions = job.preemptions;
    s.drafted_tokens = job.drafted;
    s.accepted_tokens = job.accepted;
    s.passes = job.passes;
    s.stop_reason = reason;
    if (job.decode) {
        DecodeState& ds = *job.decode;
        DecodeState::Step last = ds.finish(reason);
        if (!last.text.empty() || !last.reasoning.empty()) {
            EngineEvent e;
            e.kind = EngineEvent::Kind::Text;
            e.text = std::move(last.text);
            e.reasoning = std::move(last.reasoning);
            e.tokens = std::move(job.logprobs);
            job.emit(std::move(e));
        }
        const GenerateStats& st = ds.stats();
        telemetry_.request_finished(job.id, st.generated_tokens, st.decode_tok_s());
        s.reused_tokens = job.reused_tokens;
        s.generated_tokens = st.generated_tokens;
        s.reasoning_tokens = st.reasoning_tokens;
        s.queue_wait_ms = job.queue_wait_ms;
        s.ttft_ms = st.generated_tokens > 0 ? job.queue_wait_ms + st.ttft_ms : 0;
        s.decode_ms = st.decode_ms;
        s.prefill_ms = st.prefill_ms;
        s.masks_walked = st.masks_walked;
        s.masks_kept = st.masks_kept;
        s.grammar_ms = st.grammar_ms;
    } else {
        s.queue_wait_ms = ms_since(job.submitted);
    }
    EngineEvent e;
    e.kind = EngineEvent::Kind::Finished;
    e.stats = s;
    e.output_ids = job.output;
    job.emit(std::move(e));
}

void Scheduler::fail_job(Job& job, const std::string& error) {
    forget_job(job);
    if (job.decode) telemetry_.request_finished(job.id, job.decode->stats().generated_tokens, 0);
    EngineEvent e;
    e.kind = EngineEvent::Kind::Failed;
    e.error = error;
    job.emit(std::move(e));
}

// The draft model's bytes count with the target's, device by device (its layers do not: the
// monitor's layer count is the target's placement).
void Scheduler::publish_memory() {
    std::vector<DeviceMemory> m = model_.memory_use();
    if (opts_.draft) add_draft_memory(m, opts_.draft->model().memory_use());
    telemetry_.set_memory(m);
    std::lock_guard lock(mutex_);
    memory_ = std::move(m);
}

}  // namespace ember
