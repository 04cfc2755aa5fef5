#include "kernels/cuda/graphs.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "kernels/cuda/check.h"

namespace ember::cuda {
namespace {

constexpr size_t kMaxGraphs = 8;

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

}  // namespace

GraphRunner::GraphRunner(cudaStream_t stream) : stream_(stream) {}

GraphRunner::~GraphRunner() {
    clear();  // recorded launches of a backend being destroyed are not run
    drop_graphs();
}

void GraphRunner::set_enabled(bool on) {
    if (!on) {
        flush(false);
        drop_graphs();
        recording_ = false;
    }
    enabled_ = on;
}

void GraphRunner::clear() {
    ops_.clear();
    bytes_.clear();
}

void GraphRunner::drop_graphs() {
    for (Graph& g : graphs_)
        if (g.exec) cudaGraphExecDestroy(g.exec);  // an exec still running is freed when it completes
    graphs_.clear();
    seen_.fill(0);
}

uint64_t GraphRunner::hash() const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const Op& op : ops_) h = fnv1a(&op.run, sizeof op.run, h);
    return fnv1a(bytes_.data(), bytes_.size(), h);
}

GraphRunner::Graph* GraphRunner::find(uint64_t h) {
    for (Graph& g : graphs_) {
        if (g.hash != h || g.ops.size() != ops_.size() || g.bytes != bytes_) continue;
        bool same = true;
        for (size_t i = 0; same && i < ops_.size(); ++i) same = g.ops[i].run == ops_[i].run;
        if (same) return &g;
    }
    return nullptr;
}

// True if `h` ran once before; otherwise remembers it.
bool GraphRunner::seen_before(uint64_t h) {
    if (std::find(seen_.begin(), seen_.end(), h) != seen_.end()) return true;
    seen_[seen_next_] = h;
    seen_next_ = (seen_next_ + 1) % seen_.size();
    return false;
}

void GraphRunner::flush(bool graph) {
    ++issued_;
    if (ops_.empty()) return;
    struct Clear {
        GraphRunner* r;
        ~Clear() { r->clear(); }
    } clear_at_exit{this};
    if (graph && enabled_) {
        const uint64_t h = hash();
        if (Graph* g = find(h)) {
            EMBER_CUDA_CHECK(cudaGraphLaunch(g->exec, stream_));
            g->last_use = ++clock_;
            ++stats_.replayed;
            return;
        }
        if (seen_before(h) && capture(h)) return;
    }
    run_eagerly();
}

void GraphRunner::run_eagerly() {
    for (const Op& op : ops_) op.run(bytes_.data() + op.offset, stream_);
    ++stats_.eager;
}

// Captures the recorded launches into a graph and launches it. false (graphs now off) when
// anything fails; the stream is never left capturing and nothing has run yet.
bool GraphRunner::capture(uint64_t h) {
    cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return give_up(std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e));
    }
    std::string why;
    try {
        for (const Op& op : ops_) op.run(bytes_.data() + op.offset, stream_);
    } catch (const std::exception& ex) {
        why = ex.what();
    }
    cudaGraph_t graph = nullptr;
    e = cudaStreamEndCapture(stream_, &graph);
    if (!why.empty() || e != cudaSuccess) {
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        return give_up(why.empty() ? std::string("cudaStreamEndCapture: ") + cudaGetErrorString(e) : why);
    }
    cudaGraphExec_t exec = instantiate(graph, why);
    cudaGraphDestroy(graph);
    if (!exec) return give_up(why);
    e = cudaGraphLaunch(exec, stream_);
    if (e != cudaSuccess) {
        cudaGraphExecDestroy(exec);
        cudaGetLastError();
        return give_up(std::string("cudaGraphLaunch: ") + cudaGetErrorString(e));
    }
    Graph g;
    g.hash = h;
    g.ops = ops_;
    g.bytes = bytes_;
    g.exec = exec;
    g.last_use = ++clock_;
    graphs_.push_back(std::move(g));
    ++stats_.captured;
    return true;
}

// A new executable graph, or, with the cache full, the least recently used one updated in
// place (same topology: only kernel arguments / grid sizes differ) or replaced.
cudaGraphExec_t GraphRunner::instantiate(cudaGraph_t graph, std::string& why) {
    cudaGraphExec_t exec = nullptr;
    if (graphs_.size() >= kMaxGraphs) {
        auto lru = std::min_element(graphs_.begin(), graphs_.end(),
                                    [](const Graph& a, const Graph& b) { return a.last_use < b.last_use; });
        exec = lru->exec;
        graphs_.erase(lru);
        // Updates apply to later launches; waiting first keeps it simple should one be queued.
        cudaError_t e = cudaStreamSynchronize(stream_);
        cudaGraphExecUpdateResultInfo info{};
        if (e == cudaSuccess) e = cudaGraphExecUpdate(exec, graph, &info);
        if (e == cudaSuccess) return exec;
        cudaGetLastError();
        cudaGraphExecDestroy(exec);
        exec = nullptr;
    }
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e);
        return nullptr;
    }
    return exec;
}

bool GraphRunner::give_up(const std::string& why) {
    ++stats_.failures;
    if (!logged_) {
        std::fprintf(stderr,
                     "ember: CUDA graphs turned off for this backend (%s); decode launches kernels one by one\n",
                     why.c_str());
        logged_ = true;
    }
    drop_graphs();
    enabled_ = false;
    recording_ = false;
    return false;
}

}  // namespace ember::cuda
