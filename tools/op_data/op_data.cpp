#include "tools/op_data/op_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/common/fp16.h"
#include "kernels/cpu/kv_layout.h"
#include "kernels/cpu/quant.h"

namespace ember::opdata {

namespace {
uint32_t g_seed = 1;
}

void set_seed(uint32_t seed) { g_seed = seed; }
uint32_t next_seed() { return g_seed = g_seed * 1664525u + 1013904223u; }

std::vector<float> random_floats_seeded(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(-1.0f, 1.0f);
    std::vector<float> v(n);
    float s = scale;
    for (size_t i = 0; i < n; ++i) {
        if (i % 32 == 0) s = scale * std::pow(10.0f, mag(rng));
        v[i] = normal(rng) * s * (i % 97 == 13 ? 4.0f : 1.0f);
    }
    return v;
}

std::vector<float> random_floats(size_t n, float scale) { return random_floats_seeded(n, next_seed(), scale); }

size_t type_row_bytes(DType t, int64_t cols) {
    return row_bytes(*dtype_info(static_cast<uint32_t>(t)), static_cast<uint64_t>(cols));
}

std::vector<int> half_fields(DType t) {
    switch (t) {
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q8_0:
            return {0};
        case DType::Q4_1:
        case DType::Q5_1:
        case DType::Q4_K:
        case DType::Q5_K:
            return {0, 2};
        case DType::Q2_K:
            return {80, 82};
        case DType::Q3_K:
            return {108};
        case DType::Q6_K:
            return {208};
        default:
            return {};
    }
}

std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols) {
    const size_t rb = type_row_bytes(type, cols);
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    if (cpu::can_quantize(type)) {
        const auto f = random_floats(static_cast<size_t>(rows * cols), 0.05f);
        for (int64_t r = 0; r < rows; ++r)
            cpu::quantize_row(type, f.data() + r * cols, w.data() + static_cast<size_t>(r) * rb, cols);
        return w;
    }
    std::mt19937 rng(next_seed());
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const auto info = *dtype_info(static_cast<uint32_t>(type));
    const std::vector<int> halves = half_fields(type);
    for (size_t blk = 0; blk < w.size() / info.block_bytes; ++blk) {
        for (int off : halves) {
            const uint16_t h = f32_to_fp16(std::ldexp(static_cast<float>(rng() % 1000 + 1) / 1000.0f, -9));
            std::memcpy(&w[blk * info.block_bytes + static_cast<size_t>(off)], &h, 2);
        }
    }
    return w;
}

std::vector<float> dequantize_matrix(DType type, const uint8_t* data, int64_t rows, int64_t cols) {
    const size_t rb = type_row_bytes(type, cols);
    std::vector<float> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
        cpu::dequantize_row(type, data + static_cast<size_t>(r) * rb, out.data() + r * cols, cols);
    return out;
}

Tensor put(Backend& b, const std::vector<float>& v, int64_t cols, int64_t rows, MemoryKind kind) {
    Tensor t = b.alloc(kind, DType::F32, cols, rows, "check");
    b.upload(t, v.data(), v.size() * sizeof(float));
    return t;
}

std::vector<float> get(Backend& b, const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.rows * t.cols));
    b.download(t, v.data(), v.size() * sizeof(float));
    return v;
}

void poison(Backend& b, Tensor& t) {
    std::vector<float> nan(static_cast<size_t>(t.rows * t.cols), std::numeric_limits<float>::quiet_NaN());
    b.upload(t, nan.data(), nan.size() * sizeof(float));
}

BatchInfo Batch::info() const {
    BatchInfo b;
    b.tokens = tokens;
    b.positions = positions;
    b.seq_of = seq_of;
    b.kv_slot = kv_slot;
    b.block_table = block_table;
    b.n_seqs = n_seqs;
    b.max_blocks = max_blocks;
    b.output_rows = output_rows;
    return b;
}

Batch simple_batch(int64_t n, const std::vector<int32_t>& positions) {
    Batch b;
    for (int64_t i = 0; i < n; ++i) {
        b.tokens.push_back(0);
        b.positions.push_back(positions.empty() ? static_cast<int32_t>(i) : positions[static_cast<size_t>(i)]);
        b.seq_of.push_back(0);
        b.kv_slot.push_back(static_cast<int32_t>(i));
    }
    b.block_table = {0};
    b.max_blocks = 1;
    return b;
}

RopeInputs random_rope_inputs(int64_t n, int n_rot) {
    RopeInputs in;
    std::mt19937 rng(next_seed());
    in.pos.resize(static_cast<size_t>(n));
    for (auto& v : in.pos) v = static_cast<int32_t>(rng() % 200000);
    // Positions 0 and 1 always among them (the angles' exact cases), as far as n allows.
    if (n > 0) in.pos[0] = 0;
    if (n > 1) in.pos[1] = 1;
    in.factors.resize(static_cast<size_t>(n_rot / 2));
    for (auto& f : in.factors) f = 1.0f + static_cast<float>(rng() % 700) / 100.0f;
    return in;
}

RopeParams rope_params(int n_heads, int head_dim, int n_rot, bool neox, float base, float scale, const float* factors) {
    RopeParams rp;
    rp.n_heads = n_heads;
    rp.head_dim = head_dim;
    rp.n_rot = n_rot;
    rp.neox = neox;
    rp.freq_base = base;
    rp.freq_scale = scale;
    rp.freq_factors = factors;
    return rp;
}

PagedSeqs::PagedSeqs(int n_blocks, int max_blocks, int block_tokens, const std::vector<int>& first_block,
                     const std::vector<int>& n_own)
    : max_blocks_(max_blocks),
      block_tokens_(block_tokens),
      table_(first_block.size() * static_cast<size_t>(max_blocks), 0),
      len_(first_block.size(), 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937 rng(next_seed());
    std::shuffle(ids.begin(), ids.end(), rng);
    for (size_t s = 0; s < first_block.size(); ++s)
        for (int j = 0; j < n_own[s]; ++j)
            table_[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(j)] =
                ids[static_cast<size_t>(first_block[s] + j)];
}

Batch PagedSeqs::batch(const std::vector<std::pair<int, int>>& parts) {
    Batch b;
    for (auto [s, k] : parts) {
        for (int i = 0; i < k; ++i) {
            const int32_t pos = len_[static_cast<size_t>(s)]++;
            b.tokens.push_back(0);
            b.positions.push_back(pos);
            b.seq_of.push_back(s);
            b.kv_slot.push_back(table_[static_cast<size_t>(s * max_blocks_ + pos / block_tokens_)] * block_tokens_ +
                                pos % block_tokens_);
        }
    }
    b.block_table = table_;
    b.n_seqs = static_cast<int32_t>(len_.size());
    b.max_blocks = max_blocks_;
    return b;
}

KvLayer alloc_kv_layer(Backend& be, DType type, int n_kv_heads, int head_dim, int block_tokens, int n_blocks) {
    const int64_t kv_dim = int64_t{n_kv_heads} * head_dim;
    KvLayer l;
    l.block_tokens = block_tokens;
    l.n_kv_heads = n_kv_heads;  // the CPU backend reads the layout from the layer
    l.head_dim = head_dim;
    l.k = be.alloc(MemoryKind::KvCache, type, kv_dim, int64_t{n_blocks} * block_tokens, "k");
    l.v = be.alloc(MemoryKind::KvCache, type, kv_dim, int64_t{n_blocks} * block_tokens, "v");
    return l;
}

std::vector<uint8_t> cpu_cache_as_rows(const KvLayer& layer, const std::vector<uint8_t>& pool, bool keys) {
    cpu::KvCacheView kv;
    kv.type = layer.k.type;
    kv.k = pool.data();
    kv.row_bytes = layer.k.row_bytes;
    kv.n_kv_heads = layer.n_kv_heads;
    kv.head_dim = layer.head_dim;
    kv.block_tokens = layer.block_tokens;
    const size_t head_bytes = cpu::kv_row_bytes(kv.type, kv.head_dim);
    std::vector<uint8_t> rows(pool.size());
    for (int64_t slot = 0; slot < layer.k.rows; ++slot)
        for (int32_t h = 0; h < kv.n_kv_heads; ++h) {
            uint8_t* out = rows.data() + static_cast<size_t>(slot) * kv.row_bytes + h * head_bytes;
            if (!keys || kv.type != DType::F16) {
                std::memcpy(out, cpu::head_row(kv, pool.data(), slot, h), head_bytes);
                continue;
            }
            for (int32_t d = 0; d < kv.head_dim; ++d) {
                const uint16_t x = cpu::key_f16(kv, slot, h)[int64_t{d} * kv.block_tokens];
                std::memcpy(out + 2 * d, &x, 2);
            }
        }
    return rows;
}

AttentionParams attention_params(int n_heads, int n_kv_heads, int head_dim, int window, float softcap) {
    AttentionParams ap;
    ap.n_heads = n_heads;
    ap.n_kv_heads = n_kv_heads;
    ap.head_dim = head_dim;
    ap.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    ap.window = window;
    ap.softcap = softcap;
    return ap;
}

namespace {

// Row 0: logits rounded to 1/8 (many ties). Row 1: 700 finite values among -inf (and a few
// NaN). Row 2: 25 finite values among NaN.
void shape_top_k_logits(std::vector<float>& logits, int64_t vocab, std::mt19937& rng) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < vocab; ++i) {
        float& r0 = logits[static_cast<size_t>(i)];
        r0 = std::round(r0 * 8) / 8;
        float& r1 = logits[static_cast<size_t>(vocab + i)];
        if (rng() % vocab >= 700) r1 = rng() % 1000 ? -inf : nan;
        float& r2 = logits[static_cast<size_t>(2 * vocab + i)];
        if (rng() % vocab >= 25) r2 = nan;
    }
}

}  // namespace

TopKCase make_top_k_case(int64_t vocab, int n_rows) {
    TopKCase c;
    std::mt19937 rng(next_seed());
    c.logits = random_floats(static_cast<size_t>(vocab * n_rows), 3.0f);
    shape_top_k_logits(c.logits, vocab, rng);
    const float inf = std::numeric_limits<float>::infinity();
    c.pen.resize(static_cast<size_t>(n_rows));
    c.bias.resize(static_cast<size_t>(n_rows));
    for (size_t r = 0; r < c.pen.size(); ++r) {
        std::vector<int32_t> ids(static_cast<size_t>(vocab));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), rng);
        for (size_t i = 0; i < 64; ++i) c.pen[r].push_back({ids[i], static_cast<int32_t>(rng() % 5 + 1)});
        for (int i = 64; i < 74; ++i)  // ids[0..3] are penalized too: penalty, then bias
            c.bias[r].push_back(
                {ids[static_cast<size_t>(i % 70)], i % 3 == 0 ? -inf : 5.0f - static_cast<float>(i % 7)});
        c.bias[r].push_back({static_cast<int32_t>(vocab + 5), 1.0f});  // outside the row: ignored
    }
    for (size_t r = 0; r < c.pen.size(); ++r) {
        TopKRow row;
        const float fr = static_cast<float>(r);
        row.repeat_penalty = 1.0f + 0.15f * (fr + 1);
        row.presence_penalty = 0.25f * fr;
        row.frequency_penalty = 0.125f + 0.1f * fr;
        row.penalized = c.pen[r];
        row.bias = c.bias[r];
        c.rows.push_back(row);
    }
    return c;
}

}  // namespace ember::opdata
