#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant.h"

namespace ember::cpu {
namespace {

// f16 -> f32 through a 256 KiB table: branch-free and exact, built once.
const float* f16_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_f32(static_cast<uint16_t>(i));
        return t;
    }();
    return table.data();
}

size_t kv_row_bytes(const KvView& kv) {
    return row_bytes(*dtype_info(static_cast<uint32_t>(kv.type)), static_cast<uint64_t>(kv.kv_dim));
}

// Reads `n` values of one head (starting at element `first`) of a cache row as f32.
void load_head(const KvView& kv, const void* pool, int64_t slot, int64_t first, int n, float* dst) {
    const auto* row = static_cast<const uint8_t*>(pool) + static_cast<size_t>(slot) * kv_row_bytes(kv);
    if (kv.type == DType::F16) {
        const float* tab = f16_table();
        const auto* h = reinterpret_cast<const uint16_t*>(row) + first;
        for (int i = 0; i < n; ++i) dst[i] = tab[h[i]];
    } else {  // Q8_0: heads start on block boundaries (head_dim % 32 == 0 is checked by the caller)
        dequantize_row(kv.type, row + first / 32 * 34, dst, n);
    }
}

}  // namespace

void store_kv(const KvView& kv, const float* k, const float* v, const int32_t* slots, int n_tokens, ThreadPool&) {
    const size_t rb = kv_row_bytes(kv);
    for (int t = 0; t < n_tokens; ++t) {
        auto* kd = static_cast<uint8_t*>(kv.k) + static_cast<size_t>(slots[t]) * rb;
        auto* vd = static_cast<uint8_t*>(kv.v) + static_cast<size_t>(slots[t]) * rb;
        quantize_row(kv.type, k + static_cast<int64_t>(t) * kv.kv_dim, kd, kv.kv_dim);
        quantize_row(kv.type, v + static_cast<int64_t>(t) * kv.kv_dim, vd, kv.kv_dim);
    }
}

void attention(const KvView& kv, const AttentionBatch& b, const AttentionConfig& c, const float* q, float* out,
               ThreadPool& pool) {
    const int rep = c.n_heads / c.n_kv_heads;
    const int D = c.head_dim;
    const int64_t q_stride = int64_t{c.n_heads} * D;
    // One task per (token, kv head): each cached key/value row is loaded once for the `rep`
    // query heads that share it.
    pool.parallel_for_dynamic(int64_t{b.n_tokens} * c.n_kv_heads, 1, [&](int64_t begin, int64_t end, int) {
        std::vector<float> kf(static_cast<size_t>(D)), vf(static_cast<size_t>(D));
        std::vector<float> acc(static_cast<size_t>(rep * D)), m(static_cast<size_t>(rep)), l(static_cast<size_t>(rep));
        for (int64_t task = begin; task < end; ++task) {
            const int t = static_cast<int>(task / c.n_kv_heads);
            const int kvh = static_cast<int>(task % c.n_kv_heads);
            const int32_t pos = b.positions[t];
            const int32_t* table = b.block_table + static_cast<int64_t>(b.seq_of[t]) * b.max_blocks;
            const int32_t first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
            std::fill(acc.begin(), acc.end(), 0.0f);
            std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
            std::fill(l.begin(), l.end(), 0.0f);
            const float* qt = q + t * q_stride + int64_t{kvh} * rep * D;
            for (int32_t j = first; j <= pos; ++j) {
                const int64_t slot = int64_t{table[j / kv.block_tokens]} * kv.block_tokens + j % kv.block_tokens;
                load_head(kv, kv.k, slot, int64_t{kvh} * D, D, kf.data());
                load_head(kv, kv.v, slot, int64_t{kvh} * D, D, vf.data());
                for (int r = 0; r < rep; ++r) {
                    float s = vec_dot_f32(qt + r * D, kf.data(), D) * c.scale;
                    if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
                    // Online softmax: rescale the running sum when a new maximum appears.
                    const float m_new = std::max(m[static_cast<size_t>(r)], s);
                    const float corr = std::exp(m[static_cast<size_t>(r)] - m_new);
                    const float p = std::exp(s - m_new);
                    float* a = acc.data() + r * D;
                    for (int d = 0; d < D; ++d) a[d] = a[d] * corr + p * vf[static_cast<size_t>(d)];
                    l[static_cast<size_t>(r)] = l[static_cast<size_t>(r)] * corr + p;
                    m[static_cast<size_t>(r)] = m_new;
                }
            }
            float* ot = out + t * q_stride + int64_t{kvh} * rep * D;
            for (int r = 0; r < rep; ++r) {
                const float inv = 1.0f / l[static_cast<size_t>(r)];
                for (int d = 0; d < D; ++d) ot[r * D + d] = acc[static_cast<size_t>(r * D + d)] * inv;
            }
        }
    });
}

}  // namespace ember::cpu
