#include "engine/server/server_metrics.h"

#include <algorithm>
#include <cstdio>

namespace ember::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
    for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i] = 0;
}

void Histogram::observe(double seconds) {
    const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e9), std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
    Snapshot s;
    s.bounds = bounds_;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
        s.counts.push_back(counts_[i].load(std::memory_order_relaxed));
        s.count += s.counts.back();
    }
    s.sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return s;
}

ServerMetrics::ServerMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      queue_wait_({0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30}) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
    std::lock_guard lock(mutex_);
    ++requests_[{endpoint, status}];
}

void ServerMetrics::finished(const RequestStats& stats) {
    prompt_tokens_.fetch_add(static_cast<uint64_t>(std::max(0, stats.prompt_tokens)), std::memory_order_relaxed);
    cached_tokens_.fetch_add(static_cast<uint64_t>(std::max(0, stats.reused_tokens)), std::memory_order_relaxed);
    generated_tokens_.fetch_add(static_cast<uint64_t>(std::max(0, stats.generated_tokens)), std::memory_order_relaxed);
    if (stats.generated_tokens > 0) ttft_.observe(stats.ttft_ms * 1e-3);
    queue_wait_.observe(stats.queue_wait_ms * 1e-3);
    const std::string_view reason = stop_reason_name(stats.stop_reason);
    std::lock_guard lock(mutex_);
    ++finished_[reason.empty() ? "none" : std::string(reason)];
}

MetricsSnapshot ServerMetrics::snapshot() const {
    MetricsSnapshot m;
    {
        std::lock_guard lock(mutex_);
        m.requests = requests_;
        m.finished = finished_;
    }
    m.prompt_tokens = prompt_tokens_.load(std::memory_order_relaxed);
    m.cached_tokens = cached_tokens_.load(std::memory_order_relaxed);
    m.generated_tokens = generated_tokens_.load(std::memory_order_relaxed);
    m.ttft = ttft_.snapshot();
    m.inter_token = inter_token_.snapshot();
    m.queue_wait = queue_wait_.snapshot();
    return m;
}

namespace {

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// Label values escape backslash, quote and newline (the text format's rules).
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\', out += c;
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void gauge(std::string& out, const char* name, const char* help, double value) {
    header(out, name, "gauge", help);
    out += std::string(name) + " " + number(value) + "\n";
}

void counter(std::string& out, const char* name, const char* help, uint64_t value) {
    header(out, name, "counter", help);
    out += std::string(name) + " " + std::to_string(value) + "\n";
}

void histogram(std::string& out, const char* name, const char* help, const Histogram::Snapshot& h) {
    header(out, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        out += std::string(name) + "_bucket{le=\"" + number(h.bounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    out += std::string(name) + "_sum " + number(h.sum) + "\n";
    out += std::string(name) + "_count " + std::to_string(h.count) + "\n";
}

// The engine's own running totals (EngineStatus::speculation): acceptance rate is
// accepted / drafted, tokens per pass tokens / passes, over any range of a scrape series.
void speculation_counters(std::string& out, const SpeculationTotals& s) {
    counter(out, "ember_speculative_drafted_tokens_total",
            "Speculative decoding: guessed tokens checked by the model (prompt lookup, draft models).", s.drafted);
    counter(out, "ember_speculative_accepted_tokens_total", "Of those, tokens the model accepted.", s.accepted);
    counter(out, "ember_speculative_passes_total", "Forward passes that gave a speculating request tokens.", s.passes);
    counter(out, "ember_speculative_tokens_total", "Tokens those passes gave (tokens per pass = this / passes).",
            s.tokens);
}

}  // namespace

std::string prometheus_text(const MetricsSnapshot& m, const EngineStatus& status) {
    std::string out;
    header(out, "ember_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : m.requests)
        out += "ember_http_requests_total{endpoint=\"" + label(key.first) + "\",status=\"" +
               std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    header(out, "ember_generations_total", "counter", "Generations that ended, by stop reason.");
    for (const auto& [reason, n] : m.finished)
        out += "ember_generations_total{stop_reason=\"" + label(reason) + "\"} " + std::to_string(n) + "\n";
    counter(out, "ember_prompt_tokens_total", "Prompt tokens of finished generations.", m.prompt_tokens);
    counter(out, "ember_prompt_tokens_cached_total", "Of those, tokens whose KV was reused, not computed.",
            m.cached_tokens);
    counter(out, "ember_generated_tokens_total", "Tokens generated by finished generations.", m.generated_tokens);
    histogram(out, "ember_time_to_first_token_seconds", "Submitted to first token.", m.ttft);
    histogram(out, "ember_inter_token_seconds", "Between two streamed text events of one request.", m.inter_token);
    histogram(out, "ember_queue_wait_seconds", "Submitted to first scheduled.", m.queue_wait);

    int running = 0, queued = 0;
    for (const RequestStatus& r : status.requests) (r.state == "queued" ? queued : running) += 1;
    gauge(out, "ember_requests_running", "Requests in the running batch.", running);
    gauge(out, "ember_requests_queued", "Requests waiting for a place in the batch.", queued);
    gauge(out, "ember_kv_blocks_total", "KV cache blocks.", status.kv_blocks_total);
    gauge(out, "ember_kv_blocks_used", "KV cache blocks in use.", status.kv_blocks_used);
    gauge(out, "ember_kv_cache_usage_ratio", "KV cache blocks in use / total.",
          status.kv_blocks_total > 0 ? double(status.kv_blocks_used) / status.kv_blocks_total : 0.0);
    gauge(out, "ember_kv_blocks_cached", "Unused KV cache blocks that hold a published prompt prefix.",
          status.kv_blocks_cached);
    gauge(out, "ember_kv_host_cache_bytes", "Prompt-prefix KV blocks evicted from the pool and kept in host RAM.",
          static_cast<double>(status.kv_host_cache_bytes));
    gauge(out, "ember_kv_disk_cache_bytes", "Prompt-prefix KV blocks written to disk (ember serve --cache-disk).",
          static_cast<double>(status.kv_disk_cache_bytes));
    speculation_counters(out, status.speculation);
    header(out, "ember_memory_bytes", "gauge", "Bytes the model holds, by device and kind.");
    for (const DeviceMemory& d : status.memory) {
        const std::pair<const char*, uint64_t> kinds[] = {{"weights", d.weights},
                                                          {"mapped_weights", d.mapped_weights},
                                                          {"kv_cache", d.kv_cache},
                                                          {"state", d.state},
                                                          {"scratch", d.scratch}};
        for (const auto& [kind, bytes] : kinds)
            out += "ember_memory_bytes{device=\"" + label(d.device) + "\",kind=\"" + kind + "\"} " +
                   std::to_string(bytes) + "\n";
    }
    return out;
}

}  // namespace ember::server
