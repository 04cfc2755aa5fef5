// A sliding window of timed samples (inter-token latencies, TTFTs, rates) that one thread
// writes and any number of threads read at the same time, without a lock.
//
// The writer stores each sample as one 64-bit atomic word (its time in whole milliseconds on a
// 32-bit clock that wraps after 49 days, and its value as a float) into a ring and then publishes the new count
// with a release store: a reader always sees whole samples, never a torn one. A slot can be
// overwritten while a reader copies the ring; the reader then gets a newer sample in that
// slot, which is still a real sample, and the time filter drops anything outside the window.
// For a monitor read a few times a second that is exactly right, and the writer never waits.
#pragma once
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <vector>

namespace ember {

// p50/p95/p99 and friends of the samples inside one window.
struct WindowStats {
    int64_t count = 0;  // samples in the window
    double mean = 0, min = 0, max = 0;
    double p50 = 0, p95 = 0, p99 = 0;
    double sum = 0;
};

// Percentile of sorted values by the nearest-rank method (p in [0, 100]): the smallest value
// such that at least p% of the samples are <= it. Empty input gives 0.
double nearest_rank(const std::vector<float>& sorted, double p);
// Stats of `values` (any order; sorted in place).
WindowStats stats_of(std::vector<float>& values);

template <size_t N>
class SampleWindow {
    static_assert(std::has_single_bit(N), "ring size must be a power of two");

public:
    // Writer thread only. t_ms: the sample's time on the caller's millisecond clock.
    void add(uint32_t t_ms, float value) {
        const uint64_t n = count_.load(std::memory_order_relaxed);
        slots_[n & (N - 1)].store(pack(t_ms, value), std::memory_order_relaxed);
        count_.store(n + 1, std::memory_order_release);
    }
    // Any thread: the samples of the last `window_ms` milliseconds before now_ms (age in
    // [0, window_ms), computed modulo 2^32 so the clock's wrap does not matter), in no
    // particular order. window_ms == 0: every sample the ring still holds.
    std::vector<float> values(uint32_t now_ms, uint32_t window_ms) const {
        const uint64_t n = count_.load(std::memory_order_acquire);
        const uint64_t kept = n < N ? n : N;
        std::vector<float> out;
        out.reserve(kept);
        for (uint64_t i = n - kept; i < n; ++i) {
            uint32_t t;
            float v;
            unpack(slots_[i & (N - 1)].load(std::memory_order_relaxed), t, v);
            if (window_ms == 0 || static_cast<uint32_t>(now_ms - t) < window_ms) out.push_back(v);
        }
        return out;
    }
    WindowStats stats(uint32_t now_ms, uint32_t window_ms) const {
        std::vector<float> v = values(now_ms, window_ms);
        return stats_of(v);
    }
    uint64_t total() const { return count_.load(std::memory_order_acquire); }  // ever added

private:
    static uint64_t pack(uint32_t t, float v) { return (uint64_t{t} << 32) | std::bit_cast<uint32_t>(v); }
    static void unpack(uint64_t w, uint32_t& t, float& v) {
        t = static_cast<uint32_t>(w >> 32);
        v = std::bit_cast<float>(static_cast<uint32_t>(w));
    }
    std::array<std::atomic<uint64_t>, N> slots_{};
    std::atomic<uint64_t> count_{0};
};

}  // namespace ember
