// The CUDA graph runner (kernels/cuda/graphs.h) on a machine without a GPU, with host
// functions in place of kernel launchers: recorded launches are issued at flush() in order
// with their exact arguments (the byte serialization of every argument type the backend
// passes); the second sighting of a segment tries a capture, which fails without a driver:
// graphs turn off and the segment still runs exactly once, eagerly. (Replays need a GPU:
// ember-gpu-check compares decode with graphs on and off.)
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/graphs.h"
#include "kernels/cuda/ops.h"

using namespace ember;
using namespace ember::cuda;

namespace {

std::vector<std::string> g_calls;

void op_scalars(int a, int64_t b, float c, bool d, const float* p, float2* q, cudaStream_t) {
    g_calls.push_back("scalars " + std::to_string(a) + " " + std::to_string(b) + " " + std::to_string(c) + " " +
                      std::to_string(d) + " " + std::to_string(reinterpret_cast<uintptr_t>(p)) + " " +
                      std::to_string(reinterpret_cast<uintptr_t>(q)));
}

void op_attention(const AttentionArgs& a, int splits, cudaStream_t) {
    g_calls.push_back("attention " + std::to_string(a.n_heads) + " " + std::to_string(a.head_dim) + " " +
                      std::to_string(a.scale) + " " + std::to_string(a.smem_optin) + " " +
                      std::to_string(reinterpret_cast<uintptr_t>(a.block_table)) + " " + std::to_string(splits));
}

AttentionArgs attention_args() {
    AttentionArgs a = AttentionArgs();
    a.n_heads = 32;
    a.head_dim = 128;
    a.scale = 0.125f;
    a.smem_optin = 227 * 1024;
    a.block_table = reinterpret_cast<const int32_t*>(uintptr_t{0x7000});
    return a;
}

// One decode-like segment: the same launches every time.
void record_segment(GraphRunner& r) {
    r.launch<&op_scalars>(7, int64_t{1} << 40, 2.5f, true, reinterpret_cast<const float*>(uintptr_t{0x1000}),
                          reinterpret_cast<float2*>(uintptr_t{0x2000}));
    r.launch<&op_attention>(attention_args(), 3);
}

const std::vector<std::string> kSegment = {
    "scalars 7 1099511627776 2.500000 1 4096 8192",
    "attention 32 128 0.125000 232448 28672 3",
};

bool have_gpu() {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();
    return ok;
}

}  // namespace

TEST_CASE("not recording launches at once") {
    g_calls.clear();
    GraphRunner r(nullptr);
    record_segment(r);
    REQUIRE(g_calls == kSegment);
    r.flush();
    REQUIRE(g_calls.size() == size_t{2});
    REQUIRE(r.stats().eager == uint64_t{0});
}

TEST_CASE("recorded launches run at flush, in order") {
    g_calls.clear();
    GraphRunner r(nullptr);
    r.record(true);
    record_segment(r);
    REQUIRE(g_calls.empty());
    r.flush(false);
    REQUIRE(g_calls == kSegment);
    REQUIRE(r.stats().eager == uint64_t{1});
    r.flush(false);  // nothing left
    REQUIRE(g_calls.size() == size_t{2});
}

TEST_CASE("a failed capture falls back once") {
    g_calls.clear();
    if (have_gpu()) {
        MESSAGE("skipped: a GPU is present, so the capture succeeds (ember-gpu-check covers it)");
        return;
    }
    GraphRunner r(nullptr);
    for (int pass = 0; pass < 3; ++pass) {
        r.record(true);
        record_segment(r);
        r.flush();  // pass 0: eager, remembered; pass 1: capture fails -> eager; pass 2: graphs off
    }
    std::vector<std::string> want;
    for (int pass = 0; pass < 3; ++pass) want.insert(want.end(), kSegment.begin(), kSegment.end());
    REQUIRE(g_calls == want);
    REQUIRE(r.stats().failures == uint64_t{1});
    REQUIRE(r.stats().eager == uint64_t{2});
    REQUIRE(r.stats().captured + r.stats().replayed == uint64_t{0});
    REQUIRE(!r.enabled());
}

TEST_CASE("disabled never records") {
    g_calls.clear();
    GraphRunner r(nullptr);
    r.set_enabled(false);
    r.record(true);
    record_segment(r);
    REQUIRE(g_calls == kSegment);
}
