// matmul dispatcher: validates, picks the ISA kernel table, quantizes the activations once,
// and splits rows (decode) or 32-row panels (prefill) over the thread pool.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>
#include "kernels/common/error.h"
#include "kernels/common/fp16.h"
#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/weight_panels.h"
#include "kernels/cpu/quant.h"

namespace ember::cpu {

namespace detail {

bool int8_kind(DType type, Int8Kind* kind) {
    switch (type) {
        case DType::Q4_0:
            *kind = {.G = 32, .offset = 8, .has_min = false, .half_scale = true};
            return true;
        case DType::Q4_1:
            *kind = {.G = 32, .offset = 0, .has_min = true, .half_scale = true};
            return true;
        case DType::Q5_0:
            *kind = {.G = 32, .offset = 16, .has_min = false, .half_scale = true};
            return true;
        case DType::Q5_1:
            *kind = {.G = 32, .offset = 0, .has_min = true, .half_scale = true};
            return true;
        case DType::Q8_0:
            *kind = {.G = 32, .offset = 128, .has_min = false, .half_scale = true};
            return true;
        case DType::Q2_K:
            *kind = {.G = 16, .offset = 0, .has_min = true};
            return true;
        case DType::Q3_K:
            *kind = {.G = 16, .offset = 4, .has_min = false};
            return true;
        case DType::Q4_K:
            *kind = {.G = 32, .offset = 0, .has_min = true};
            return true;
        case DType::Q5_K:
            *kind = {.G = 32, .offset = 0, .has_min = true};
            return true;
        case DType::Q6_K:
            *kind = {.G = 16, .offset = 32, .has_min = false};
            return true;
        case DType::MXFP4:  // codes kMxfp4Values + 12 (0..24), scale 2^(e - 128)
            *kind = {.G = 32, .offset = 12, .has_min = false, .half_scale = true};
            return true;
        default:
            return false;
    }
}

void pack_x_tiles(const float* X, int64_t n, int64_t K, int tile, int64_t t0, int64_t t1, float* out) {
    const int64_t kq = lane_cols(K), positions = kLanes * kq;
    for (int64_t t = t0; t < t1; t += tile) {
        float* dst = out + t / tile * positions * tile;
        std::fill(dst, dst + positions * tile, 0.0f);
        for (int j = 0; j < tile && t + j < n; ++j) {
            const float* x = X + (t + j) * K;
            for (int64_t k = 0; k < K; ++k) dst[lane_pos(k, kq) * tile + j] = x[k];
        }
    }
}

}  // namespace detail

namespace {

using detail::ActQ8;
using detail::Int8Kind;
using detail::KernelTable;

// A growable 64-byte aligned buffer; one per thread and purpose, never shrinks, so steady
// state inference allocates nothing.
class AlignedBuffer {
public:
    ~AlignedBuffer() { std::free(ptr_); }
    uint8_t* get(size_t bytes) {
        if (bytes > size_) {
            std::free(ptr_);
            size_ = (bytes + 4095) & ~size_t{4095};
            ptr_ = static_cast<uint8_t*>(std::aligned_alloc(64, size_));
            if (!ptr_) {
                size_ = 0;
                throw std::bad_alloc();
            }
        }
        return ptr_;
    }

private:
    uint8_t* ptr_ = nullptr;
    size_t size_ = 0;
};

const KernelTable& table() {
    switch (active_isa()) {
        case Isa::Avx512:
            if (auto* t = detail::kernels_avx512()) return *t;
            [[fallthrough]];
        case Isa::Avx2:
            if (auto* t = detail::kernels_avx2()) return *t;
            [[fallthrough]];
        case Isa::Scalar:
            break;
    }
    return detail::kernels_scalar();
}

detail::Scratch thread_scratch(const KernelTable& k, const WeightMatrix& W, int64_t n_tokens) {
    thread_local AlignedBuffer buf;
    const size_t bytes = k.scratch_bytes(W, n_tokens);
    return {buf.get(bytes), bytes};
}

// Q4_0 / Q4_1 / Q8_0 with rows of exactly their blocks: what the panel layout holds.
bool packed_for_panels(const WeightMatrix& W) {
    return weight_panels::supports(W.type) && W.cols % 32 == 0 &&
           W.row_bytes == static_cast<size_t>(W.cols / 32 * weight_panels::block_bytes(W.type));
}

void validate(const WeightMatrix& W, const float* X, int64_t n_tokens, const float* Y) {
    const auto info = dtype_info(static_cast<uint32_t>(W.type));
    if (!info || !matmul_supports(W.type)) {
        throw Error("matmul: unsupported weight type " + std::string(dtype_name(W.type)));
    }
    if (W.rows < 0 || W.cols <= 0 || W.cols % info->block_elems != 0 || n_tokens < 0) {
        throw Error("matmul: bad shape (cols " + std::to_string(W.cols) + ")");
    }
    if (W.row_bytes < row_bytes(*info, static_cast<uint64_t>(W.cols))) {
        throw Error("matmul: row_bytes smaller than a row");
    }
    if ((W.rows > 0 && !W.data) || (n_tokens > 0 && (!X || !Y))) {
        throw Error("matmul: null pointer");
    }
    if (W.layout == WeightLayout::Panels && !packed_for_panels(W)) {
        throw Error("matmul: the panel layout needs packed Q4_0, Q4_1 or Q8_0 rows");
    }
}

// Smallest claim of the guided gemv schedule (about 32 KiB of weights): gemv streams the
// weights with software prefetch, so long contiguous ranges per thread beat fine-grained
// dynamic tasks (measured +5-8 % decode on the 1B shape; docs/BENCHMARKS.md).
int64_t gemv_min_rows(const WeightMatrix& W) {
    return std::clamp<int64_t>(32768 / static_cast<int64_t>(std::max<size_t>(W.row_bytes, 1)), 4, 256);
}

// An untiled ActQ8's bytes (n_tokens, cols, kpad and G set): codes, then d, init, dsum.
size_t row_act_bytes(const ActQ8& a) {
    const size_t qs_bytes = static_cast<size_t>(a.n_tokens * a.kpad);
    return qs_bytes + 3 * static_cast<size_t>(a.n_tokens * a.nb()) * 4 + 64;
}
void place_rows(ActQ8& a, uint8_t* p) {
    const size_t qs_bytes = static_cast<size_t>(a.n_tokens * a.kpad);
    a.qs = reinterpret_cast<int8_t*>(p);
    a.d = reinterpret_cast<float*>(p + ((qs_bytes + 63) & ~size_t{63}));
    a.init = reinterpret_cast<int32_t*>(a.d + a.n_tokens * a.nb());
    a.dsum = reinterpret_cast<float*>(a.init + a.n_tokens * a.nb());
}

// Rounds tokens [t0, t1)'s activation scales d and dsum to half floats (Int8Kind::half_scale).
void round_half_scales(ActQ8& a, int64_t t0, int64_t t1) {
    auto half = [](float& v) { v = fp16_to_f32(f32_to_fp16(v)); };
    const int64_t nb = a.nb();
    for (int64_t t = t0; t < t1; ++t) {
        for (int64_t b = 0; b < nb; ++b) {
            if (a.tile == 0) {
                half(a.d[t * nb + b]);
                half(a.dsum[t * nb + b]);
                continue;
            }
            uint8_t* rec = a.tiled + (t / a.tile) * a.tile_bytes() + static_cast<size_t>(b) * a.rec_bytes();
            auto* dp = reinterpret_cast<float*>(rec + a.G * a.tile);  // d[tile], init[tile], dsum[tile]
            half(dp[t % a.tile]);
            half(dp[2 * a.tile + t % a.tile]);
        }
    }
}

// The ISA's activation quantization of tokens [t0, t1), then ggml's half scales where it has them.
void quantize_rows(const KernelTable& k, const float* X, int64_t t0, int64_t t1, const Int8Kind& kind, ActQ8& a) {
    k.quantize_act(X, t0, t1, kind, a);
    if (kind.half_scale) round_half_scales(a, t0, t1);
}

// Quantizes X once for the whole call, in the layout the chosen kernel reads (see ActQ8).
ActQ8 quantize_activations(const KernelTable& k, const Int8Kind& kind, const float* X, int64_t n_tokens, int64_t cols,
                           int tile, ThreadPool& pool) {
    thread_local AlignedBuffer buf;
    ActQ8 a;
    a.n_tokens = n_tokens;
    a.cols = cols;
    a.kpad = (cols + detail::kChunk - 1) / detail::kChunk * detail::kChunk;
    a.G = kind.G;
    a.tile = tile;
    int64_t units = n_tokens;  // what the quantization is split over: tokens or tiles
    if (tile > 0) {
        a.tiled = buf.get(a.tile_bytes() * static_cast<size_t>(a.n_tiles()));
        units = a.n_tiles();
    } else {
        place_rows(a, buf.get(row_act_bytes(a)));
    }
    const int64_t per_unit = tile > 0 ? tile : 1;
    auto run = [&](int64_t u0, int64_t u1, int) {
        quantize_rows(k, X, u0 * per_unit, std::min(n_tokens, u1 * per_unit), kind, a);
    };
    if (n_tokens >= 8) pool.parallel_for(units, run);
    else run(0, units, 0);
    return a;
}

// X in the tile layout gemm_f32 reads (once per call, shared by all row panels).
const float* pack_x(const KernelTable& k, const float* X, int64_t n, int64_t K, ThreadPool& pool) {
    const int tile = k.f32_tile;
    if (tile == 0) return X;
    thread_local AlignedBuffer buf;
    const int64_t n_tiles = (n + tile - 1) / tile;
    const int64_t positions = detail::kLanes * detail::lane_cols(K);
    float* out = reinterpret_cast<float*>(buf.get(static_cast<size_t>(n_tiles * tile * positions) * 4));
    pool.parallel_for(n_tiles, [&](int64_t a, int64_t b, int) {
        detail::pack_x_tiles(X, n, K, tile, a * tile, std::min(n, b * tile), out);
    });
    return out;
}

}  // namespace

WeightMatrix make_weight_matrix(DType type, int64_t rows, int64_t cols, const void* data) {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    if (!info) throw Error("make_weight_matrix: unknown type");
    return {type, rows, cols, data, row_bytes(*info, static_cast<uint64_t>(cols))};
}

bool matmul_supports(DType type) {
    Int8Kind kind;
    return type == DType::F32 || type == DType::F16 || type == DType::BF16 || detail::int8_kind(type, &kind);
}

namespace {

// Whether matmul_shared can quantize X once for all outs and run them as one job.
bool share_panels(const KernelTable& k, const SharedOut* outs, int n_outs, Int8Kind* kind) {
    if (!k.gemm_panels || n_outs < 1) return false;
    for (int i = 0; i < n_outs; ++i) {
        Int8Kind ki;
        const WeightMatrix& W = outs[i].W;
        if (W.layout != WeightLayout::Panels || !detail::int8_kind(W.type, &ki) || W.cols != outs[0].W.cols)
            return false;
        if (i == 0) *kind = ki;
        else if (ki.G != kind->G || ki.offset != kind->offset || ki.half_scale != kind->half_scale)
            return false;  // the activation blocks differ
    }
    return true;
}

// Panels: every token count through the ISA's panel kernel on tiled activations, X
// quantized once for all outs, whose panels are numbered one after another (a task's range
// [p0, p1) may cover the end of one matrix and the start of the next). Every call streams the
// weights like gemv: long contiguous ranges per thread (guided). Claiming one panel at a time
// made a 16-token decode batch's two threads take alternate panels, each prefetching into the
// other's (SmolLM2's 16-sequence step 6 % slower).
void matmul_panels(const KernelTable& k, const SharedOut* outs, int n_outs, const Int8Kind& kind, const float* X,
                   int64_t n_tokens, ThreadPool& pool) {
    const ActQ8 act = quantize_activations(k, kind, X, n_tokens, outs[0].W.cols, k.gemm_tile, pool);
    const int64_t pr = weight_panels::kRows;
    std::vector<int64_t> first(static_cast<size_t>(n_outs) + 1, 0);  // first global panel of each out
    int64_t min_chunk = INT64_MAX;
    for (int i = 0; i < n_outs; ++i) {
        first[static_cast<size_t>(i) + 1] = first[static_cast<size_t>(i)] + (outs[i].W.rows + pr - 1) / pr;
        min_chunk = std::min(min_chunk, std::max<int64_t>(1, gemv_min_rows(outs[i].W) / pr));
    }
    auto run = [&](int64_t p0, int64_t p1, int) {
        for (int i = 0; i < n_outs && p0 < p1; ++i) {
            const int64_t b = first[static_cast<size_t>(i)], e = first[static_cast<size_t>(i) + 1];
            if (p0 >= e) continue;
            const WeightMatrix& W = outs[i].W;
            const int64_t q1 = std::min(p1, e);
            detail::Scratch s = thread_scratch(k, W, n_tokens);
            k.gemm_panels(W, act, (p0 - b) * pr, std::min(W.rows, (q1 - b) * pr), outs[i].Y, s);
            p0 = q1;
        }
    };
    const int64_t n_panels = first.back();
    pool.parallel_for_guided(n_panels, min_chunk, run);
}

// The matrix back in rows, for an ISA without panel kernels (tests force one).
void matmul_from_rows(const WeightMatrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool) {
    thread_local AlignedBuffer buf;
    uint8_t* rows = buf.get(static_cast<size_t>(W.rows) * W.row_bytes);
    for (int64_t r = 0; r < W.rows; ++r)
        weight_panels::read_row(W.type, W.data, W.rows, W.cols, r, rows + r * W.row_bytes);
    WeightMatrix R = W;
    R.data = rows;
    R.layout = WeightLayout::Rows;
    matmul(R, X, n_tokens, Y, pool);
}

}  // namespace

WeightLayout preferred_layout(DType type, int64_t rows, int64_t cols) {
    const bool panels = weight_panels::supports(type) && rows >= weight_panels::kRows && cols % 32 == 0 && cols > 0;
    return panels && table().gemm_panels ? WeightLayout::Panels : WeightLayout::Rows;
}

void repack_weight(const WeightMatrix& W, WeightLayout layout, void* dst, ThreadPool& pool) {
    if (W.layout != WeightLayout::Rows) throw Error("repack_weight: the source must be in rows");
    if (layout == WeightLayout::Rows) {
        std::memcpy(dst, W.data, static_cast<size_t>(W.rows) * W.row_bytes);
        return;
    }
    if (!packed_for_panels(W)) throw Error("repack_weight: the panel layout needs packed Q4_0, Q4_1 or Q8_0 rows");
    weight_panels::repack(W.type, W.data, W.rows, W.cols, dst, pool);
}

void matmul(const WeightMatrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool) {
    validate(W, X, n_tokens, Y);
    if (n_tokens == 0 || W.rows == 0) return;
    const KernelTable& k = table();
    if (W.layout == WeightLayout::Panels) {
        if (!k.gemm_panels) return matmul_from_rows(W, X, n_tokens, Y, pool);
        Int8Kind kind;
        detail::int8_kind(W.type, &kind);
        const SharedOut one{W, Y};
        return matmul_panels(k, &one, 1, kind, X, n_tokens, pool);
    }
    // Few tokens: each weight row is streamed once and dotted with every token (weights
    // dominate the bytes moved). More: panels are repacked and register-tiled.
    const bool gemv = n_tokens <= k.gemv_max_tokens;
    Int8Kind kind;
    if (detail::int8_kind(W.type, &kind)) {
        const ActQ8 act = quantize_activations(k, kind, X, n_tokens, W.cols, gemv ? 0 : k.gemm_tile, pool);
        if (gemv) {
            pool.parallel_for_guided(W.rows, gemv_min_rows(W), [&](int64_t r0, int64_t r1, int) {
                detail::Scratch s = thread_scratch(k, W, n_tokens);
                k.gemv_q8(W, kind, act, r0, r1, Y, s);
            });
        } else {
            const int64_t pr = k.panel_rows;
            pool.parallel_for_dynamic((W.rows + pr - 1) / pr, 1, [&](int64_t p0, int64_t p1, int) {
                detail::Scratch s = thread_scratch(k, W, n_tokens);
                k.gemm_q8(W, kind, act, p0 * pr, std::min(W.rows, p1 * pr), Y, s);
            });
        }
        return;
    }
    if (gemv) {
        pool.parallel_for_guided(W.rows, gemv_min_rows(W), [&](int64_t r0, int64_t r1, int) {
            detail::Scratch s = thread_scratch(k, W, n_tokens);
            k.gemv_f32(W, X, n_tokens, r0, r1, Y, s);
        });
    } else {
        const float* xt = pack_x(k, X, n_tokens, W.cols, pool);
        const int64_t pr = k.panel_rows;
        pool.parallel_for_dynamic((W.rows + pr - 1) / pr, 1, [&](int64_t p0, int64_t p1, int) {
            detail::Scratch s = thread_scratch(k, W, n_tokens);
            k.gemm_f32(W, xt, n_tokens, p0 * pr, std::min(W.rows, p1 * pr), Y, s);
        });
    }
}

void matmul_shared(const SharedOut* outs, int n_outs, const float* X, int64_t n_tokens, ThreadPool& pool) {
    for (int i = 0; i < n_outs; ++i) validate(outs[i].W, X, n_tokens, outs[i].Y);
    if (n_tokens == 0) return;
    const KernelTable& k = table();
    Int8Kind kind;
    if (!share_panels(k, outs, n_outs, &kind)) {
        for (int i = 0; i < n_outs; ++i) matmul(outs[i].W, X, n_tokens, outs[i].Y, pool);
        return;
    }
    matmul_panels(k, outs, n_outs, kind, X, n_tokens, pool);
}

namespace {

// Whether a group runs in matmul_grouped's shared decode job: rows-layout weights of one
// int8 kind, few enough tokens for the gemv kernel.
bool gemv_group(const KernelTable& k, const GroupedMatmul& g, DType type) {
    Int8Kind kind;
    return g.W.layout == WeightLayout::Rows && g.W.type == type && detail::int8_kind(type, &kind) && g.n_tokens > 0 &&
           g.n_tokens <= k.gemv_max_tokens;
}

}  // namespace

void matmul_grouped(const GroupedMatmul* groups, int n_groups, ThreadPool& pool) {
    for (int i = 0; i < n_groups; ++i) validate(groups[i].W, groups[i].X, groups[i].n_tokens, groups[i].Y);
    if (n_groups == 0) return;
    const KernelTable& k = table();
    const DType type = groups[0].W.type;
    std::vector<const GroupedMatmul*> job;
    for (int i = 0; i < n_groups; ++i) {
        if (gemv_group(k, groups[i], type)) job.push_back(&groups[i]);
        else matmul(groups[i].W, groups[i].X, groups[i].n_tokens, groups[i].Y, pool);
    }
    if (job.empty()) return;
    Int8Kind kind;
    detail::int8_kind(type, &kind);
    // Each group's activations quantized as matmul() would (so the same bits), into one buffer.
    std::vector<ActQ8> acts(job.size());
    std::vector<size_t> offset(job.size() + 1, 0);
    std::vector<int64_t> first(job.size() + 1, 0);  // first row of each group in the job's numbering
    for (size_t i = 0; i < job.size(); ++i) {
        ActQ8& a = acts[i];
        a.n_tokens = job[i]->n_tokens;
        a.cols = job[i]->W.cols;
        a.kpad = (a.cols + detail::kChunk - 1) / detail::kChunk * detail::kChunk;
        a.G = kind.G;
        offset[i + 1] = offset[i] + (row_act_bytes(a) + 63) / 64 * 64;
        first[i + 1] = first[i] + job[i]->W.rows;
    }
    thread_local AlignedBuffer buf;
    uint8_t* base = buf.get(offset.back());
    for (size_t i = 0; i < job.size(); ++i) {
        place_rows(acts[i], base + offset[i]);
        quantize_rows(k, job[i]->X, 0, acts[i].n_tokens, kind, acts[i]);
    }
    pool.parallel_for_guided(first.back(), gemv_min_rows(job[0]->W), [&](int64_t r0, int64_t r1, int) {
        for (size_t i = 0; i < job.size() && r0 < r1; ++i) {
            if (r0 >= first[i + 1]) continue;
            const int64_t e = std::min(r1, first[i + 1]);
            detail::Scratch s = thread_scratch(k, job[i]->W, job[i]->n_tokens);
            k.gemv_q8(job[i]->W, kind, acts[i], r0 - first[i], e - first[i], job[i]->Y, s);
            r0 = e;
        }
    });
}

float vec_dot_f32(const float* a, const float* b, int64_t n) { return table().dot_f32(a, b, n); }

void get_rows(const WeightMatrix& table_, const int32_t* ids, int n, float* out) {
    const auto* base = static_cast<const uint8_t*>(table_.data);
    std::vector<uint8_t> row;
    if (table_.layout != WeightLayout::Rows) row.resize(table_.row_bytes);
    for (int i = 0; i < n; ++i) {
        if (ids[i] < 0 || ids[i] >= table_.rows) throw Error("get_rows: row id out of range");
        const uint8_t* src = base + static_cast<size_t>(ids[i]) * table_.row_bytes;
        if (table_.layout == WeightLayout::Panels) {
            weight_panels::read_row(table_.type, table_.data, table_.rows, table_.cols, ids[i], row.data());
            src = row.data();
        }
        dequantize_row(table_.type, src, out + i * table_.cols, table_.cols);
    }
}

}  // namespace ember::cpu
