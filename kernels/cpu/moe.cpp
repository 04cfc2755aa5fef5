// The CPU backend's mixture-of-experts kernels (moe.h).
#include "kernels/cpu/moe.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/moe_route.h"

namespace ember::cpu::moe {

void route(const float* logits, int64_t n_tokens, int n_expert, int k, int gating, bool normalize, float scale,
           const float* expert_scale, int32_t* ids, float* weights, ThreadPool& pool) {
    auto run = [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t)
            ember::moe::route_row(logits + t * n_expert, n_expert, k, gating, normalize, scale, expert_scale,
                                  ids + t * k, weights + t * k);
    };
    if (n_tokens >= 16) pool.parallel_for(n_tokens, run);
    else run(0, n_tokens, 0);  // a decode step: waking the pool costs more than routing
}

namespace {

// The slots of each expert, in slot order: slots[first[e] .. first[e + 1]).
struct Groups {
    std::vector<int64_t> first;
    std::vector<int64_t> slots;
};

Groups group_by_expert(const int32_t* ids, int64_t n_slots, int64_t n_expert) {
    Groups g;
    g.first.assign(static_cast<size_t>(n_expert) + 1, 0);
    for (int64_t s = 0; s < n_slots; ++s) {
        if (ids[s] < 0 || ids[s] >= n_expert)
            throw Error("moe_matmul: expert id " + std::to_string(ids[s]) + " outside 0.." +
                        std::to_string(n_expert - 1));
        ++g.first[static_cast<size_t>(ids[s]) + 1];
    }
    for (size_t e = 0; e < static_cast<size_t>(n_expert); ++e) g.first[e + 1] += g.first[e];
    std::vector<int64_t> at(g.first.begin(), g.first.end() - 1);
    g.slots.resize(static_cast<size_t>(n_slots));
    for (int64_t s = 0; s < n_slots; ++s) g.slots[static_cast<size_t>(at[static_cast<size_t>(ids[s])]++)] = s;
    return g;
}

// Expert e's rows of W: a matrix of its own (Backend::load_expert_weight keeps it one).
WeightMatrix expert(const WeightMatrix& W, int64_t n_expert, int64_t e) {
    WeightMatrix m = W;
    m.rows = W.rows / n_expert;
    m.data = static_cast<const uint8_t*>(W.data) + static_cast<size_t>(e * m.rows) * W.row_bytes;
    return m;
}

}  // namespace

void matmul(const WeightMatrix& W, int64_t n_expert, const float* X, bool x_per_token, int k, const int32_t* ids,
            int64_t n_slots, float* Y, const float* bias, ThreadPool& pool) {
    const Groups g = group_by_expert(ids, n_slots, n_expert);
    const int64_t rows = W.rows / n_expert, cols = W.cols;
    // Every slot's X row gathered in expert order, the results likewise: group e's rows are
    // [first[e], first[e + 1]) of both.
    thread_local std::vector<float> xg, yg;
    xg.resize(static_cast<size_t>(n_slots * cols));
    yg.resize(static_cast<size_t>(n_slots * rows));
    for (int64_t i = 0; i < n_slots; ++i) {
        const int64_t s = g.slots[static_cast<size_t>(i)], xr = x_per_token ? s / k : s;
        std::memcpy(xg.data() + i * cols, X + xr * cols, static_cast<size_t>(cols) * sizeof(float));
    }
    std::vector<GroupedMatmul> groups;
    for (int64_t e = 0; e < n_expert; ++e) {
        const int64_t b = g.first[static_cast<size_t>(e)], n = g.first[static_cast<size_t>(e) + 1] - b;
        if (n > 0) groups.push_back({expert(W, n_expert, e), xg.data() + b * cols, n, yg.data() + b * rows});
    }
    matmul_grouped(groups.data(), static_cast<int>(groups.size()), pool);
    for (int64_t i = 0; i < n_slots; ++i) {
        const int64_t s = g.slots[static_cast<size_t>(i)];
        float* y = Y + s * rows;
        const float* src = yg.data() + i * rows;
        if (bias) {
            const float* be = bias + static_cast<int64_t>(ids[s]) * rows;
            for (int64_t r = 0; r < rows; ++r) y[r] = src[r] + be[r];
        } else {
            std::memcpy(y, src, static_cast<size_t>(rows) * sizeof(float));
        }
    }
}

void sigmoid_scale_rows(float* x, const float* s, int64_t n_tokens, int64_t cols, ThreadPool& pool) {
    auto run = [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            const float g = 1.0f / (1.0f + std::exp(-s[t]));
            for (int64_t c = 0; c < cols; ++c) x[t * cols + c] *= g;
        }
    };
    if (n_tokens >= 16) pool.parallel_for(n_tokens, run);
    else run(0, n_tokens, 0);
}

void combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t cols, float* out,
             ThreadPool& pool) {
    auto run = [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* o = out + t * cols;
            const float* w = weights + t * k;
            const float* yt = y + t * k * cols;
            for (int64_t c = 0; c < cols; ++c) o[c] = w[0] * yt[c];
            for (int j = 1; j < k; ++j)
                for (int64_t c = 0; c < cols; ++c) o[c] += w[j] * yt[j * cols + c];
        }
    };
    if (n_tokens >= 16) pool.parallel_for(n_tokens, run);
    else run(0, n_tokens, 0);
}

}  // namespace ember::cpu::moe
