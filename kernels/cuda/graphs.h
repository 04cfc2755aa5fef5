// Decode passes as CUDA graphs. A decode step issues ~10 launches per layer whose arguments
// are identical from one token to the next: everything that changes per token (token ids,
// positions, KV slots, block table) is read by the kernels from the batch buffer, which
// set_batch() uploads before the pass. So the backend records the launches of a small batch
// instead of issuing them (launch<Fn>(args...) stores Fn and its arguments as bytes), and
// at the next sync point (download, synchronize, set_batch, ...) flush() runs the segment:
//   - a cached graph whose recorded launches are byte-for-byte the same: cudaGraphLaunch;
//   - a segment seen once before: captured (cudaStreamBeginCapture, Relaxed), instantiated
//     (or an old graph updated with cudaGraphExecUpdate when the cache is full), launched;
//   - otherwise launch by launch, remembering the segment's hash.
// Replaying is therefore exactly what launching the same arguments again would do; a
// graph never outlives a change of any argument (pointers included). A failed capture ends
// the capture, turns graphs off for this backend (logged once) and runs the segment eagerly.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"

namespace ember::cuda {

class GraphRunner {
public:
    explicit GraphRunner(cudaStream_t stream);
    ~GraphRunner();
    GraphRunner(const GraphRunner&) = delete;
    GraphRunner& operator=(const GraphRunner&) = delete;

    // Graphs on/off (off: every launch is issued at once). Turning them off drops the cache.
    void set_enabled(bool on);
    bool enabled() const { return enabled_; }
    // Whether the launches that follow are recorded (set_batch: small batches only).
    void record(bool on) { recording_ = on && enabled_; }
    GraphStats stats() const { return stats_; }

    // Fn(args..., stream): now, or recorded for the next flush(). Arguments are copied as
    // bytes (they must be trivially copyable, without padding whose bytes could differ).
    template <auto Fn, class... A>
    void launch(A... args) {
        static_assert((std::is_trivially_copyable_v<A> && ...));
        ++issued_;
        if (!recording_) {
            Fn(args..., stream_);
            return;
        }
        ops_.push_back({&run<Fn, A...>, static_cast<uint32_t>(bytes_.size())});
        (append(&args, sizeof(A)), ...);
    }

    // Issues what was recorded; graph = false: launch by launch, whatever the cache holds.
    void flush(bool graph = true);
    // Counts launch() and flush() calls: equal stamps mean that no launch and no sync point
    // (where the backend may copy or run cuBLAS outside the runner) came between.
    uint64_t issued() const { return issued_; }
    // Forgets cached graphs and seen segments (a scratch buffer moved, graphs turned off).
    void drop_graphs();

private:
    struct Op {
        void (*run)(const uint8_t* args, cudaStream_t stream);
        uint32_t offset;
    };
    struct Graph {
        uint64_t hash = 0;
        std::vector<Op> ops;
        std::vector<uint8_t> bytes;
        cudaGraphExec_t exec = nullptr;
        uint64_t last_use = 0;
    };

    static constexpr size_t slot(size_t n) { return (n + 7) / 8 * 8; }
    template <auto Fn, class... A>
    static void run(const uint8_t* p, cudaStream_t stream) {
        std::tuple<A...> t;
        size_t off = 0;
        std::apply([&](auto&... x) { ((std::memcpy(&x, p + off, sizeof x), off += slot(sizeof x)), ...); }, t);
        std::apply([&](auto&... x) { Fn(x..., stream); }, t);
    }
    void append(const void* p, size_t n) {
        const size_t at = bytes_.size();
        bytes_.resize(at + slot(n), 0);
        std::memcpy(bytes_.data() + at, p, n);
    }

    uint64_t hash() const;
    Graph* find(uint64_t h);
    bool seen_before(uint64_t h);
    bool capture(uint64_t h);
    cudaGraphExec_t instantiate(cudaGraph_t graph, std::string& why);
    bool give_up(const std::string& why);
    void run_eagerly();
    void clear();

    cudaStream_t stream_;
    bool enabled_ = true;
    bool recording_ = false;
    std::vector<Op> ops_;
    std::vector<uint8_t> bytes_;
    std::vector<Graph> graphs_;        // at most kMaxGraphs, least recently used replaced
    std::array<uint64_t, 32> seen_{};  // hashes of segments run once, a ring
    size_t seen_next_ = 0;
    uint64_t clock_ = 0;
    GraphStats stats_;
    bool logged_ = false;
    uint64_t issued_ = 0;
};

}  // namespace ember::cuda
