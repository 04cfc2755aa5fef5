// The GPU top-k selection (kernels/cuda/sampling.cu) run on the host: the same header
// (kernels/common/topk.h) the kernels use for the order key, the bitonic network and the
// round plan, driven by loops where the GPU has threads. Checked against the sampler's
// comparison and the CPU backend's top_k (std::partial_sort), bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/topk.h"

using namespace ember;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The sampler's order (engine/sampling/sampler.cpp, truncate()).
bool sampler_before(float la, int32_t a, float lb, int32_t b) { return la > lb || (la == lb && a < b); }

// A block's sort: every stage of the network, the pairs of a stage as a loop.
void bitonic_sort(uint64_t* s, unsigned n) {
    for (unsigned size = 2; size <= n; size <<= 1)
        for (unsigned j = size >> 1; j > 0; j >>= 1)
            for (unsigned t = 0; t < n / 2; ++t) topk::bitonic_pair(s, t, j, size);
}

// topk() of sampling.cu for one row, round by round and block by block.
int32_t gpu_rounds(const std::vector<float>& row, int k, std::vector<TopKCandidate>& out) {
    const int chunk = topk::chunk_for(k);
    std::vector<uint64_t> in, next, s(static_cast<size_t>(chunk));
    int64_t n = static_cast<int64_t>(row.size());
    for (int round = 0;; ++round) {
        const int64_t blocks = topk::round_blocks(n, chunk);
        next.assign(static_cast<size_t>(topk::round_output(n, chunk, k)), 0);
        for (int64_t b = 0; b < blocks; ++b) {
            for (int i = 0; i < chunk; ++i) {
                const int64_t e = b * chunk + i;
                s[static_cast<size_t>(i)] = e >= n ? topk::kNoCandidate
                                            : round == 0
                                                ? topk::order_key(row[static_cast<size_t>(e)], static_cast<int32_t>(e))
                                                : in[static_cast<size_t>(e)];
            }
            if (k == 1) s[0] = *std::min_element(s.begin(), s.end());
            else bitonic_sort(s.data(), static_cast<unsigned>(chunk));
            std::copy_n(s.begin(), k, next.begin() + b * k);
        }
        if (blocks == 1) break;
        in.swap(next);
        n = static_cast<int64_t>(in.size());
    }
    out.clear();
    for (int i = 0; i < k && next[static_cast<size_t>(i)] != topk::kNoCandidate; ++i) {
        const int32_t id = topk::key_id(next[static_cast<size_t>(i)]);
        out.push_back({id, row[static_cast<size_t>(id)]});
    }
    return static_cast<int32_t>(out.size());
}

std::vector<float> random_row(std::mt19937& rng, size_t n, int kind) {
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        float x = normal(rng);
        if (kind == 1) x = std::round(x * 2) / 2;      // many ties
        if (kind == 2 && rng() % 100 < 97) x = -kInf;  // few finite
        if (kind == 3 && rng() % n >= 20) x = kNaN;    // fewer non-NaN than k
        if (rng() % 500 == 0) x = -0.0f;
        v[i] = x;
    }
    return v;
}

}  // namespace

TEST_CASE("the order key is the sampler order") {
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, kInf, -kInf, 1e-45f, -1e-45f, 3.4e38f, -3.4e38f, 0.5f, 0.5f};
    std::mt19937 rng(7);
    std::vector<float> vals(std::begin(specials), std::end(specials));
    std::normal_distribution<float> normal(0.0f, 10.0f);
    for (int i = 0; i < 200; ++i) vals.push_back(i % 3 ? normal(rng) : std::round(normal(rng)));
    for (size_t a = 0; a < vals.size(); ++a) {
        for (size_t b = 0; b < vals.size(); ++b) {
            for (int32_t ia : {0, 5, 131072}) {
                for (int32_t ib : {0, 5, 131072}) {
                    const bool want = sampler_before(vals[a], ia, vals[b], ib);
                    const bool got = topk::order_key(vals[a], ia) < topk::order_key(vals[b], ib);
                    if (want != got) FAIL("(", double(vals[a]), ", ", ia, ") vs (", double(vals[b]), ", ", ib, ")");
                }
            }
        }
    }
    REQUIRE(topk::order_key(kNaN, 3) == topk::kNoCandidate);
    REQUIRE(topk::order_key(-kInf, 0x7fffffff) < topk::kNoCandidate);
    REQUIRE(topk::key_id(topk::order_key(-2.5f, 128255)) == 128255);
}

TEST_CASE("the bitonic network sorts") {
    std::mt19937_64 rng(11);
    for (unsigned n = 2; n <= 4096; n *= 2) {
        for (int rep = 0; rep < 3; ++rep) {
            std::vector<uint64_t> v(n);
            for (auto& x : v) x = rep == 2 ? rng() % 5 : rng();  // rep 2: many equal keys
            std::vector<uint64_t> want = v;
            std::sort(want.begin(), want.end());
            bitonic_sort(v.data(), n);
            REQUIRE_MESSAGE(v == want, "n = ", n);
        }
    }
}

TEST_CASE("the round plan shrinks") {
    for (int k : {1, 2, 40, 255, 256, 257, 512, 1000, 1024}) {
        CAPTURE(k);
        const int c = topk::chunk_for(k);
        REQUIRE((c >= 1024 && c <= topk::kMaxChunk && (c & (c - 1)) == 0));
        REQUIRE(c >= 4 * k);
        int64_t n = 128256, rounds = 0;
        while (topk::round_blocks(n, c) > 1) {
            n = topk::round_output(n, c, k);
            ++rounds;
        }
        REQUIRE(rounds <= 4);
    }
}

// The whole GPU algorithm against the CPU backend's top_k on 128256-wide rows.
TEST_CASE("the rounds match the CPU top_k") {
    auto cpu = make_cpu_backend(1);
    std::mt19937 rng(3);
    const size_t vocab = 128256;
    for (int kind = 0; kind < 4; ++kind) {
        const std::vector<float> row = random_row(rng, vocab, kind);
        for (int k : {1, 2, 40, 1000, 1024}) {
            Tensor t = cpu->alloc(MemoryKind::Activations, DType::F32, static_cast<int64_t>(vocab), 1, "logits");
            cpu->upload(t, row.data(), row.size() * sizeof(float));
            std::vector<TopKCandidate> want(static_cast<size_t>(k)), got;
            int32_t count = -1;
            const TopKRow none;
            cpu->top_k(t, k, std::span(&none, 1), want, std::span(&count, 1));
            cpu->free(t);
            CAPTURE(kind);
            CAPTURE(k);
            REQUIRE(gpu_rounds(row, k, got) == count);
            for (int32_t i = 0; i < count; ++i) {
                const TopKCandidate& a = want[static_cast<size_t>(i)];
                const TopKCandidate& b = got[static_cast<size_t>(i)];
                if (a.id != b.id || std::memcmp(&a.logit, &b.logit, 4) != 0)
                    FAIL("kind ", kind, " k ", k, " rank ", i, ": cpu ", a.id, ", gpu rounds ", b.id);
            }
        }
    }
}

// The penalty arithmetic: the formula of the sampler before it moved into topk.h.
TEST_CASE("the penalty formula") {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (int i = 0; i < 10000; ++i) {
        const float l = normal(rng), rp = 0.5f + static_cast<float>(rng() % 100) / 50.0f;
        const float pres = normal(rng) / 4, freq = normal(rng) / 4;
        const int32_t n = static_cast<int32_t>(rng() % 9 + 1);
        float want = l > 0 ? l / rp : l * rp;
        want -= pres + freq * static_cast<float>(n);
        const float got = topk::penalized(l, n, rp, pres, freq);
        REQUIRE(std::memcmp(&want, &got, 4) == 0);
    }
}

// A NaN logit keeps its exact bits through the penalty and the bias: the GPU's arithmetic
// would give its canonical NaN, the CPU's the input's, and the adjusted rows must agree.
TEST_CASE("a NaN logit passes the penalty and the bias unchanged") {
    for (const uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0x7f800001u}) {
        float nan;
        std::memcpy(&nan, &bits, 4);
        const float p = topk::penalized(nan, 3, 1.3f, 0.5f, 0.25f), b = topk::biased(nan, -2.0f);
        uint32_t pb, bb;
        std::memcpy(&pb, &p, 4);
        std::memcpy(&bb, &b, 4);
        CHECK(pb == bits);
        CHECK(bb == bits);
    }
}
