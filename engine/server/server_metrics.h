// What /metrics reports (Prometheus text format 0.0.4): request and token counters and latency
// histograms kept by the server as it answers, plus gauges read from the engine's status at
// scrape time (KV blocks, queue depth, memory).
//
// The event sinks run on the engine's thread, so observing is lock-free (relaxed atomics); the
// per-request counter by endpoint and status takes a mutex once per HTTP request.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/scheduler/inference_engine.h"

namespace ember::server {

class Histogram {
public:
    struct Snapshot {
        std::vector<double> bounds;    // upper bounds (seconds), ascending; +Inf is implied
        std::vector<uint64_t> counts;  // per bucket, bounds.size() + 1 of them (not cumulative)
        double sum = 0;
        uint64_t count = 0;
    };
    explicit Histogram(std::vector<double> bounds);
    void observe(double seconds);
    Snapshot snapshot() const;

private:
    std::vector<double> bounds_;
    std::unique_ptr<std::atomic<uint64_t>[]> counts_;
    std::atomic<uint64_t> sum_ns_{0};
};

struct MetricsSnapshot {
    std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, HTTP status) -> count
    std::map<std::string, uint64_t> finished;                  // stop reason -> generations
    uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
    Histogram::Snapshot ttft, inter_token, queue_wait;
};

class ServerMetrics {
public:
    ServerMetrics();
    void count_request(const std::string& endpoint, int status);
    void finished(const RequestStats& stats);  // a generation ended (any stop reason)
    // The time between two streamed Text events of one request: what a client sees between
    // tokens (one token per event, except where text is held back for a UTF-8 character or a
    // possible stop string).
    void inter_token(double seconds) { inter_token_.observe(seconds); }
    MetricsSnapshot snapshot() const;

private:
    mutable std::mutex mutex_;  // guards requests_, finished_
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, uint64_t> finished_;
    std::atomic<uint64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0};
    Histogram ttft_, inter_token_, queue_wait_;
};

// The /metrics page: the counters and histograms, and the engine's gauges.
std::string prometheus_text(const MetricsSnapshot& m, const EngineStatus& status);

}  // namespace ember::server
