#include "engine/telemetry/telemetry.h"

#include <algorithm>
#include <cmath>

namespace ember {

double nearest_rank(const std::vector<float>& sorted, double p) {
    if (sorted.empty()) return 0;
    const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
    const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
    return sorted[i];
}

WindowStats stats_of(std::vector<float>& values) {
    WindowStats s;
    if (values.empty()) return s;
    std::sort(values.begin(), values.end());
    s.count = static_cast<int64_t>(values.size());
    for (float v : values) s.sum += v;
    s.mean = s.sum / static_cast<double>(s.count);
    s.min = values.front();
    s.max = values.back();
    s.p50 = nearest_rank(values, 50);
    s.p95 = nearest_rank(values, 95);
    s.p99 = nearest_rank(values, 99);
    return s;
}

DeviceMemory device_memory(const Backend& backend, std::string device, int32_t layers) {
    const MemoryReport r = backend.memory();
    DeviceMemory m;
    m.device = std::move(device);
    m.layers = layers;
    m.weights = r.bytes[static_cast<int>(MemoryKind::Weights)];
    m.kv_cache = r.bytes[static_cast<int>(MemoryKind::KvCache)];
    m.state = r.bytes[static_cast<int>(MemoryKind::State)];
    m.scratch = r.bytes[static_cast<int>(MemoryKind::Activations)];
    m.mapped_weights = r.mapped_weight_bytes;
    m.device_total = r.device_total;
    m.device_free = r.device_free;
    return m;
}

Telemetry::Telemetry(std::chrono::milliseconds window)
    : epoch_(Clock::now()), window_ms_(static_cast<uint32_t>(std::max<int64_t>(1, window.count()))) {}

uint32_t Telemetry::now_ms() const {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - epoch_).count();
    return static_cast<uint32_t>(static_cast<uint64_t>(ms));  // wraps after 49 days, by design
}

void Telemetry::request_started(uint64_t id, int32_t prompt_tokens, int32_t reused_tokens, double queue_wait_ms,
                                int32_t batch_size) {
    const uint32_t now = now_ms();
    queue_wait_.add(now, static_cast<float>(queue_wait_ms));
    batch_.add(now, static_cast<float>(batch_size));
    requests_.fetch_add(1, std::memory_order_relaxed);
    prompt_tokens_.fetch_add(static_cast<uint64_t>(std::max(0, prompt_tokens)), std::memory_order_relaxed);
    reused_tokens_.fetch_add(static_cast<uint64_t>(std::max(0, reused_tokens)), std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    generated_now_.store(0, std::memory_order_relaxed);
    current_id_.store(id, std::memory_order_relaxed);
    current_ = RequestSample{};
    current_.id = id;
    current_.prompt_tokens = prompt_tokens;
    current_.reused_tokens = reused_tokens;
    current_.queue_wait_ms = queue_wait_ms;
    current_.batch_size = batch_size;
    current_.running = true;
    prompts_.push_back({now, prompt_tokens, reused_tokens});
    while (!prompts_.empty() && static_cast<uint32_t>(now - prompts_.front().t_ms) >= window_ms_) prompts_.pop_front();
}

void Telemetry::first_token(uint64_t id, double ttft_ms, double prefill_tok_s) {
    const uint32_t now = now_ms();
    ttft_.add(now, static_cast<float>(ttft_ms));
    if (prefill_tok_s > 0) prefill_.add(now, static_cast<float>(prefill_tok_s));
    generated_tokens_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    if (current_.id != id) return;
    generated_now_.store(1, std::memory_order_relaxed);
    current_.ttft_ms = ttft_ms;
    current_.prefill_tok_s = prefill_tok_s;
}

void Telemetry::token(uint64_t id, double inter_token_ms) {
    inter_token_.add(now_ms(), static_cast<float>(inter_token_ms));
    if (id == current_id_.load(std::memory_order_relaxed)) generated_now_.fetch_add(1, std::memory_order_relaxed);
    generated_tokens_.fetch_add(1, std::memory_order_relaxed);
}

void Telemetry::request_finished(uint64_t id, int32_t generated_tokens, double decode_tok_s) {
    if (decode_tok_s > 0) decode_.add(now_ms(), static_cast<float>(decode_tok_s));
    std::lock_guard lock(mutex_);
    if (current_.id != id) return;
    current_.generated_tokens = generated_tokens;
    current_.decode_tok_s = decode_tok_s;
    current_.running = false;
}

void Telemetry::step(int32_t sequences, int32_t tokens) {
    const uint32_t now = now_ms();
    step_sequences_.add(now, static_cast<float>(sequences));
    step_tokens_.add(now, static_cast<float>(tokens));
    steps_.fetch_add(1, std::memory_order_relaxed);
}

void Telemetry::speculation(int32_t drafted, int32_t accepted, int32_t tokens) {
    spec_drafted_.fetch_add(static_cast<uint64_t>(drafted), std::memory_order_relaxed);
    spec_accepted_.fetch_add(static_cast<uint64_t>(accepted), std::memory_order_relaxed);
    spec_passes_.fetch_add(1, std::memory_order_relaxed);
    spec_tokens_.fetch_add(static_cast<uint64_t>(tokens), std::memory_order_relaxed);
}

void Telemetry::set_load(int32_t running, int32_t queued) {
    running_.store(running, std::memory_order_relaxed);
    queued_.store(queued, std::memory_order_relaxed);
}

void Telemetry::set_memory(std::vector<DeviceMemory> memory) {
    std::lock_guard lock(mutex_);
    memory_ = std::move(memory);
}

SpeculationTotals Telemetry::speculation_totals() const {
    return {spec_drafted_.load(std::memory_order_relaxed), spec_accepted_.load(std::memory_order_relaxed),
            spec_passes_.load(std::memory_order_relaxed), spec_tokens_.load(std::memory_order_relaxed)};
}

TelemetrySnapshot Telemetry::snapshot() const {
    TelemetrySnapshot s;
    s.now_ms = now_ms();
    s.window_ms = window_ms_;
    s.inter_token_ms = inter_token_.stats(s.now_ms, window_ms_);
    s.ttft_ms = ttft_.stats(s.now_ms, window_ms_);
    s.prefill_tok_s = prefill_.stats(s.now_ms, window_ms_);
    s.decode_tok_s = decode_.stats(s.now_ms, window_ms_);
    s.queue_wait_ms = queue_wait_.stats(s.now_ms, window_ms_);
    s.batch_size = batch_.stats(s.now_ms, window_ms_);
    s.step_sequences = step_sequences_.stats(s.now_ms, window_ms_);
    s.step_tokens = step_tokens_.stats(s.now_ms, window_ms_);
    s.steps = steps_.load(std::memory_order_relaxed);
    s.speculation = speculation_totals();
    s.running = running_.load(std::memory_order_relaxed);
    s.queued = queued_.load(std::memory_order_relaxed);
    const WindowStats recent = inter_token_.stats(s.now_ms, 2000);
    s.decode_tok_s_now = recent.count > 0 && recent.mean > 0 ? 1000.0 / recent.mean : 0;
    s.requests = requests_.load(std::memory_order_relaxed);
    s.prompt_tokens = prompt_tokens_.load(std::memory_order_relaxed);
    s.reused_tokens = reused_tokens_.load(std::memory_order_relaxed);
    s.generated_tokens = generated_tokens_.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    s.current = current_;
    if (s.current.running) s.current.generated_tokens = generated_now_.load(std::memory_order_relaxed);
    int64_t prompt = 0, reused = 0;
    for (const PromptUse& p : prompts_) {
        if (static_cast<uint32_t>(s.now_ms - p.t_ms) >= window_ms_) continue;
        prompt += p.prompt;
        reused += p.reused;
    }
    s.cache_hit_rate = prompt > 0 ? static_cast<double>(reused) / static_cast<double>(prompt) : 0;
    s.memory = memory_;
    return s;
}

}  // namespace ember
