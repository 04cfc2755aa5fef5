// ops dispatcher: picks the ISA build of the op kernels and splits work over the pool.
#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include "kernels/common/error.h"
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/common/rope_yarn.h"

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/ops_internal.h"
#include "kernels/cpu/quant.h"

namespace ember::cpu::ops {

namespace {

using detail::OpsTable;

const OpsTable& table() {
    switch (active_isa()) {
        case Isa::Avx512:
            if (auto* t = detail::ops_table_avx512()) return *t;
            [[fallthrough]];
        case Isa::Avx2:
            if (auto* t = detail::ops_table_avx2()) return *t;
            [[fallthrough]];
        case Isa::Scalar:
            break;
    }
    return *detail::ops_table_scalar();
}

// Below this many elements a job runs on the caller: waking the pool (its threads poll, so
// well under a microsecond) costs more than half the work. One token's norms and adds (576 to
// 2048 elements) stay on the caller; a 16-sequence step's (9216 for SmolLM2) run on both
// threads: at 32K, the other thread waited through them, ~8 % of that step.
constexpr int64_t kParallelElems = 1 << 12;

// Runs fn(begin, end) over [0, n) items of `item_elems` elements each, on the pool when the
// total is large enough.
template <class F>
void split(ThreadPool* pool, int64_t n, int64_t item_elems, F&& fn) {
    if (!pool || pool->size() == 1 || n < 2 || n * item_elems < kParallelElems) {
        if (n > 0) fn(int64_t{0}, n);
        return;
    }
    pool->parallel_for(n, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

// Element-wise ops: split into cache-line aligned ranges.
template <class F>
void split_elems(ThreadPool* pool, int64_t n, F&& fn) {
    const int64_t chunks = (n + 1023) / 1024;
    split(pool, chunks, 1024, [&](int64_t b, int64_t e) {
        const int64_t lo = b * 1024, hi = std::min(n, e * 1024);
        fn(lo, hi - lo);
    });
}

void check_kv(const KvCacheView& kv) {
    if (kv.type != DType::F16 && !(kv.type == DType::Q8_0 && kv.head_dim % 32 == 0)) {
        throw Error("attention: KV type must be F16, or Q8_0 with head_dim % 32 == 0");
    }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps, ThreadPool* pool) {
    const OpsTable& k = table();
    split(pool, rows, cols, [&](int64_t b, int64_t e) { k.rms_norm_rows(x, w, y, b, e, cols, eps); });
}

void add_rms_norm(float* x, const float* b, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                  ThreadPool* pool) {
    const OpsTable& k = table();
    split(pool, rows, cols, [&](int64_t r0, int64_t r1) {
        k.add(x + r0 * cols, b + r0 * cols, x + r0 * cols, (r1 - r0) * cols);
        k.rms_norm_rows(x, w, y, r0, r1, cols, eps);
    });
}

// cos / sin of every (token, pair) for rope, [token][cos x half, sin x half], times YaRN's
// magnitude factor (1 without YaRN: the same bits). A decode step
// rotates q and then k of every layer at the same positions with the same spec, so the last
// tables are kept (per thread) and reused while spec and positions are unchanged: the per-pair
// frequencies (pow) and the angles (double cos / sin: positions up to ~1e6 keep full float
// accuracy) are computed once per step instead of 2 x layers times.
const float* rope_tables(int64_t n_tokens, const int32_t* positions, const RopeSpec& spec) {
    struct Tables {
        int n_rot = 0;
        float freq_base = 0, freq_scale = 0;
        float yarn[4] = {};  // ext_factor, attn_factor, beta_fast, beta_slow
        int32_t n_ctx_orig = 0;
        bool reverse = false;
        double mscale = 1.0;
        std::vector<float> factors;  // a copy: the same address may later hold another model's
        std::vector<double> freq;
        std::vector<int32_t> pos;
        std::vector<float> cs;
    };
    thread_local Tables t;
    const int half = spec.n_rot / 2;
    const auto same_factors = [&] {
        if (!spec.freq_factors) return t.factors.empty();
        return t.factors.size() == static_cast<size_t>(half) &&
               std::equal(t.factors.begin(), t.factors.end(), spec.freq_factors);
    };
    const float yarn[4] = {spec.ext_factor, spec.attn_factor, spec.beta_fast, spec.beta_slow};
    if (t.n_rot != spec.n_rot || t.freq_base != spec.freq_base || t.freq_scale != spec.freq_scale || !same_factors() ||
        !std::equal(yarn, yarn + 4, t.yarn) || t.n_ctx_orig != spec.n_ctx_orig || t.reverse != spec.reverse) {
        t.n_rot = spec.n_rot;
        t.freq_base = spec.freq_base;
        t.freq_scale = spec.freq_scale;
        std::copy(yarn, yarn + 4, t.yarn);
        t.n_ctx_orig = spec.n_ctx_orig;
        t.reverse = spec.reverse;
        t.mscale = rope_magnitude(spec);
        if (spec.freq_factors) t.factors.assign(spec.freq_factors, spec.freq_factors + half);
        else t.factors.clear();
        t.freq.resize(static_cast<size_t>(half));
        for (int i = 0; i < half; ++i) {
            t.freq[static_cast<size_t>(i)] =
                rope_pair_freq(spec, i, spec.freq_factors ? spec.freq_factors[i] : 1.0) * (spec.reverse ? -1.0 : 1.0);
        }
        t.pos.clear();
    }
    if (t.pos.size() == static_cast<size_t>(n_tokens) && std::equal(t.pos.begin(), t.pos.end(), positions))
        return t.cs.data();
    t.pos.assign(positions, positions + n_tokens);
    t.cs.resize(static_cast<size_t>(n_tokens * 2 * half));
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
        float* c = t.cs.data() + tok * 2 * half;
        for (int i = 0; i < half; ++i) {
            const double theta = positions[tok] * t.freq[static_cast<size_t>(i)];
            c[i] = static_cast<float>(std::cos(theta) * t.mscale);
            c[half + i] = static_cast<float>(std::sin(theta) * t.mscale);
        }
    }
    return t.cs.data();
}

void rope(float* x, int64_t n_tokens, int32_t n_heads, const int32_t* positions, const RopeSpec& spec,
          ThreadPool* pool) {
    if (spec.n_rot <= 0 || spec.n_rot % 2 != 0 || spec.n_rot > spec.head_dim) {
        throw Error("rope: n_rot must be even and <= head_dim");
    }
    const float* csp = rope_tables(n_tokens, positions, spec);
    const OpsTable& k = table();
    split(pool, n_tokens, int64_t{n_heads} * spec.head_dim,
          [&](int64_t b, int64_t e) { k.rope_tokens(x, b, e, n_heads, spec, csp); });
}

void delta_rule_token(float* S, int32_t D, const float* k, const float* q, const float* v, float decay, float beta,
                      float q_scale, float* o) {
    table().delta_token(S, D, k, q, v, decay, beta, q_scale, o);
}

void softmax(float* x, int64_t rows, int64_t cols, ThreadPool* pool) {
    const OpsTable& k = table();
    split(pool, rows, cols, [&](int64_t b, int64_t e) { k.softmax_rows(x, b, e, cols); });
}

void swiglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool) {
    const OpsTable& k = table();
    split_elems(pool, n, [&](int64_t o, int64_t len) { k.swiglu(gate + o, up + o, out + o, len); });
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool) {
    const OpsTable& k = table();
    split_elems(pool, n, [&](int64_t o, int64_t len) { k.swiglu_oai(gate + o, up + o, out + o, len); });
}

void geglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool) {
    const OpsTable& k = table();
    split_elems(pool, n, [&](int64_t o, int64_t len) { k.geglu(gate + o, up + o, out + o, len); });
}

void add(const float* a, const float* b, float* out, int64_t n, ThreadPool* pool) {
    const OpsTable& k = table();
    split_elems(pool, n, [&](int64_t o, int64_t len) { k.add(a + o, b + o, out + o, len); });
}

void mul(const float* a, const float* b, float* out, int64_t n, ThreadPool* pool) {
    const OpsTable& k = table();
    split_elems(pool, n, [&](int64_t o, int64_t len) { k.mul(a + o, b + o, out + o, len); });
}

void scale(float* x, float s, int64_t n, ThreadPool* pool) {
    const OpsTable& k = table();
    split_elems(pool, n, [&](int64_t o, int64_t len) { k.scale(x + o, s, len); });
}

void softcap(float* x, float cap, int64_t n, ThreadPool* pool) {
    const float inv = 1.0f / cap;
    split_elems(pool, n, [&](int64_t o, int64_t len) {
        for (int64_t i = o; i < o + len; ++i) x[i] = cap * std::tanh(x[i] * inv);
    });
}

void attention_head(const KvCacheView& kv, const AttentionHeadArgs& args) {
    check_kv(kv);
    table().attention_head(kv, args);
}

namespace {

int64_t visible_start(const AttentionBatchArgs& a, int64_t pos) {
    return a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
}

// Per (token, KV head) with the head kernel (ISAs without a tile kernel, or groups wider
// than a tile).
void attention_by_head(const OpsTable& k, const KvCacheView& kv, const AttentionBatchArgs& a, ThreadPool* pool) {
    const int rep = a.n_heads / kv.n_kv_heads;
    const int64_t D = kv.head_dim, stride = int64_t{a.n_heads} * D;
    auto task = [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const int64_t t = i / kv.n_kv_heads;
            const int32_t h = static_cast<int32_t>(i % kv.n_kv_heads);
            AttentionHeadArgs h_args;
            h_args.q = a.q + t * stride + int64_t{h} * rep * D;
            h_args.out = a.out + t * stride + int64_t{h} * rep * D;
            h_args.n_rep = rep;
            h_args.kv_head = h;
            h_args.block_table = a.block_table + int64_t{a.seq_of ? a.seq_of[t] : 0} * a.max_blocks;
            h_args.n_kv = a.positions[t] + 1;
            h_args.kv_start = visible_start(a, a.positions[t]);
            h_args.scale = a.scale;
            h_args.softcap = a.softcap;
            h_args.sinks = a.sinks ? a.sinks + int64_t{h} * rep : nullptr;
            k.attention_head(kv, h_args);
        }
    };
    const int64_t n_tasks = a.n_tokens * kv.n_kv_heads;
    if (!pool || pool->size() == 1 || n_tasks < 2) return task(0, n_tasks);
    pool->parallel_for_dynamic(n_tasks, 1, [&](int64_t b, int64_t e, int) { task(b, e); });
}

}  // namespace

namespace {

// Into how many parts each task's query heads are split (1 = not). A single sequence's
// decode has only n_kv_heads tasks: fewer than the threads (Gemma 3 270M has 1) leaves
// threads idle. Parts of a KV head's query heads run on several threads; each part reads and
// converts the same keys and values again, which costs about as much as two heads'
// arithmetic (ember-bench-ops, head_dim 64, F16 cache, AVX-512: a 9/3-head decode at 4096
// keys took 0.132 ms in 3 tasks and 0.200 ms split into 9; a 4/1-head one 0.077 ms in 1
// task and 0.052 ms in 2). So the split minimises the span ceil(tasks * s / threads) *
// (2 + heads per part), the smallest s on a tie; many tasks never split. A head's result
// does not depend on which heads share its task (the kernels compute each head alone, in
// the same order), so no bit changes.
int head_split(int64_t tasks, int threads, int rep) {
    if (threads <= 1 || tasks >= 4 * int64_t{threads}) return 1;
    constexpr int kKvCost = 2;  // a part's keys and values, in heads' arithmetic
    const auto span = [&](int s, int per) { return (tasks * s + threads - 1) / threads * (kKvCost + per); };
    int best = 1;
    int64_t best_span = span(1, rep);
    for (int s = 2; s <= rep; ++s) {
        const int per = (rep + s - 1) / s;
        if ((rep + per - 1) / per != s) continue;  // s parts of `per` heads would leave one empty
        if (span(s, per) < best_span) {
            best = s;
            best_span = span(s, per);
        }
    }
    return best;
}

}  // namespace

void attention(const KvCacheView& kv, const AttentionBatchArgs& a, ThreadPool* pool) {
    if (kv.n_kv_heads <= 0 || a.n_heads % kv.n_kv_heads != 0) {
        throw Error("attention: n_heads must be a multiple of n_kv_heads");
    }
    check_kv(kv);
    const OpsTable& k = table();
    const int rep = a.n_heads / kv.n_kv_heads;
    if (!k.attention_tile || rep > k.tile_rows) return attention_by_head(k, kv, a, pool);
    // Tiles: runs of consecutive tokens of one sequence. The kernel takes them in sub-tiles
    // of tile_rows / rep tokens (one row per lane) and converts each key once for all of a
    // tile's sub-tiles, so a tile holds several (up to kMaxTileTokens tokens) unless that
    // leaves fewer than 4 tasks per thread.
    const int threads = pool ? pool->size() : 1;
    const int per_sub = std::min(detail::kMaxTileTokens, k.tile_rows / rep);
    int subs_per_tile = std::max(1, detail::kMaxTileTokens / per_sub);
    while (subs_per_tile > 1 && a.n_tokens / (per_sub * subs_per_tile) * kv.n_kv_heads < 4 * threads) --subs_per_tile;
    const int per_tile = per_sub * subs_per_tile;
    std::vector<std::pair<int64_t, int>> tiles;  // first token, count
    for (int64_t t = 0; t < a.n_tokens;) {
        const int32_t seq = a.seq_of ? a.seq_of[t] : 0;
        int n = 1;
        while (n < per_tile && t + n < a.n_tokens && (a.seq_of ? a.seq_of[t + n] : 0) == seq) ++n;
        tiles.emplace_back(t, n);
        t += n;
    }
    const int64_t D = kv.head_dim, stride = int64_t{a.n_heads} * D;
    // A task is one tile's query heads of one KV head, or a part of them (split below).
    const int split = head_split(static_cast<int64_t>(tiles.size()) * kv.n_kv_heads, threads, rep);
    const int per_part = (rep + split - 1) / split;  // query heads per task
    const int64_t n_tiles = static_cast<int64_t>(tiles.size());
    // Task i: KV head h = i / (n_tiles * split), then the tile, then the part. KV head major:
    // the tiles that follow one another read the same keys and values (a long history's, 1 MiB
    // per KV head at 4k tokens of SmolLM2, stays in L2 from one tile to the next).
    const auto kv_head_of = [&](int64_t i) { return static_cast<int32_t>(i / (n_tiles * split)); };
    const auto tile_of = [&](int64_t i) { return tiles[static_cast<size_t>(i / split % n_tiles)]; };
    // The first keys of task i, requested from memory while task i - 1 runs (the kernels
    // request their later keys themselves, a group or two ahead).
    auto prefetch_first_keys = [&](int64_t i) {
        const int64_t t0 = tile_of(i).first;
        const int64_t j0 = visible_start(a, a.positions[t0]);
        const int32_t* table = a.block_table + int64_t{a.seq_of ? a.seq_of[t0] : 0} * a.max_blocks;
        prefetch_kv(kv, table, kv_head_of(i), j0, std::min<int64_t>(a.positions[t0] + 1, j0 + kv.block_tokens));
    };
    auto task = [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            if (i + 1 < e) prefetch_first_keys(i + 1);
            const auto [t0, n] = tile_of(i);
            const int32_t h = kv_head_of(i);
            const int r0 = static_cast<int>(i % split) * per_part;  // first query head of the part
            const int64_t head0 = int64_t{h} * rep + r0;
            detail::AttnTile tile;
            tile.q = a.q + t0 * stride + head0 * D;
            tile.out = a.out + t0 * stride + head0 * D;
            tile.q_stride = stride;
            tile.n_tok = n;
            tile.n_rep = std::min(per_part, rep - r0);
            tile.kv_head = h;
            tile.block_table = a.block_table + int64_t{a.seq_of ? a.seq_of[t0] : 0} * a.max_blocks;
            tile.scale = a.scale;
            tile.softcap = a.softcap;
            tile.sinks = a.sinks ? a.sinks + head0 : nullptr;
            for (int j = 0; j < n; ++j) {
                tile.kv_end[j] = a.positions[t0 + j] + 1;
                tile.kv_start[j] = visible_start(a, a.positions[t0 + j]);
            }
            k.attention_tile(kv, tile);
        }
    };
    const int64_t n_tasks = n_tiles * kv.n_kv_heads * split;
    if (threads == 1 || n_tasks < 2) return task(0, n_tasks);
    // Later tiles of a prompt see more keys: small dynamic chunks balance the threads. A chunk
    // is up to one tile's worth of tasks (a task can request the next one's keys only within
    // its chunk), and at least 4 chunks per thread.
    const int64_t grain = std::clamp<int64_t>(n_tasks / (4 * threads), 1, int64_t{kv.n_kv_heads} * split);
    pool->parallel_for_dynamic(n_tasks, grain, [&](int64_t b, int64_t e, int) { task(b, e); });
}

void store_kv(const KvCacheView& kv, void* k_pool, void* v_pool, const float* k, const float* v, const int32_t* slots,
              int64_t n_tokens, ThreadPool* pool) {
    const int64_t dim = int64_t{kv.n_kv_heads} * kv.head_dim, D = kv.head_dim;
    const OpsTable& ops = table();
    // Values and Q8_0 keys: each head's part to its place in the block (kv_layout.h).
    const auto store = [&](const float* x, void* pool, int64_t slot) {
        for (int32_t head = 0; head < kv.n_kv_heads; ++head) {
            uint8_t* dst = static_cast<uint8_t*>(pool) + head_row_offset(kv, slot, head);
            if (kv.type == DType::F16) ops.f32_to_f16(x + head * D, reinterpret_cast<uint16_t*>(dst), D);
            else quantize_row(kv.type, x + head * D, dst, D);
        }
    };
    // F16 keys go to their column of the block's transposed matrix (kv_layout.h).
    const auto store_key_f16 = [&](const float* x, int64_t slot) {
        thread_local std::vector<uint16_t> h;
        h.resize(static_cast<size_t>(dim));
        ops.f32_to_f16(x, h.data(), dim);
        const int64_t B = kv.block_tokens;
        for (int32_t head = 0; head < kv.n_kv_heads; ++head) {
            uint16_t* dst = static_cast<uint16_t*>(k_pool) + key_f16_index(kv, slot, head);
            for (int64_t d = 0; d < D; ++d) dst[d * B] = h[static_cast<size_t>(head * D + d)];
        }
    };
    split(pool, n_tokens, 4 * dim, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            if (kv.type == DType::F16) store_key_f16(k + t * dim, slots[t]);
            else store(k + t * dim, k_pool, slots[t]);
            store(v + t * dim, v_pool, slots[t]);
        }
    });
}

void load_kv(const KvCacheView& kv, float* k, float* v, const int32_t* slots, int64_t n_tokens, ThreadPool* pool) {
    const int64_t dim = int64_t{kv.n_kv_heads} * kv.head_dim, D = kv.head_dim;
    const auto load = [&](const void* pool_bytes, float* x, int64_t slot) {
        for (int32_t head = 0; head < kv.n_kv_heads; ++head)
            dequantize_row(kv.type, static_cast<const uint8_t*>(pool_bytes) + head_row_offset(kv, slot, head),
                           x + head * D, D);
    };
    const auto load_key_f16 = [&](float* x, int64_t slot) {
        const int64_t B = kv.block_tokens;
        for (int32_t head = 0; head < kv.n_kv_heads; ++head) {
            const uint16_t* src = key_f16(kv, slot, head);
            for (int64_t d = 0; d < D; ++d) x[head * D + d] = fp16_to_f32(src[d * B]);
        }
    };
    split(pool, n_tokens, 4 * dim, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            if (kv.type == DType::F16) load_key_f16(k + t * dim, slots[t]);
            else load(kv.k, k + t * dim, slots[t]);
            load(kv.v, v + t * dim, slots[t]);
        }
    });
}

}  // namespace ember::cpu::ops
