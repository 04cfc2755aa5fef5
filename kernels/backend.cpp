#include "kernels/backend.h"

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/topk.h"

namespace ember {

Tensor Tensor::shaped(DType type, int64_t cols, int64_t rows) {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    if (!info) throw Error("unknown tensor type " + std::to_string(static_cast<uint32_t>(type)));
    if (cols < 0 || rows < 0 || cols % info->block_elems != 0)
        throw Error(std::to_string(cols) + " columns is not a whole number of " + std::string(info->name) + " blocks");
    Tensor t;
    t.type = type;
    t.cols = cols;
    t.rows = rows;
    t.row_bytes = ember::row_bytes(*info, static_cast<uint64_t>(cols));
    return t;
}

Tensor Tensor::slice_rows(int64_t first, int64_t n) const {
    Tensor t = *this;
    t.data = static_cast<uint8_t*>(data) + static_cast<size_t>(first) * row_bytes;
    t.rows = n;
    return t;
}

// Only for contiguous plain-float tensors: the per-head view of q/k activations.
Tensor Tensor::slice_cols(int64_t first, int64_t n) const {
    Tensor t = *this;
    t.data = static_cast<uint8_t*>(data) + static_cast<size_t>(first) * sizeof(float);
    t.cols = n;
    return t;
}

Tensor Tensor::reshape(int64_t new_cols) const {
    Tensor t = *this;
    const int64_t total = cols * rows;
    t.cols = new_cols;
    t.rows = total / new_cols;
    t.row_bytes = row_bytes / static_cast<size_t>(cols) * static_cast<size_t>(new_cols);
    return t;
}

void apply_adjustments(std::span<float> row, const TopKRow& adj) {
    const auto n = static_cast<int64_t>(row.size());
    for (const TokenCount& p : adj.penalized)
        if (p.id >= 0 && p.id < n)
            row[static_cast<size_t>(p.id)] =
                topk::penalized(row[static_cast<size_t>(p.id)], p.count, adj.repeat_penalty, adj.presence_penalty,
                                adj.frequency_penalty);
    for (const TokenBias& b : adj.bias)
        if (b.id >= 0 && b.id < n)
            row[static_cast<size_t>(b.id)] = topk::biased(row[static_cast<size_t>(b.id)], b.bias);
}

}  // namespace ember

// ---- the contract's checks ------------------------------------------------------------
namespace ember {
namespace {

std::string shape(const Tensor& t) {
    return std::to_string(t.rows) + " x " + std::to_string(t.cols) + " " + std::string(dtype_name(t.type));
}

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string(op) + ": " + what); }

// Activations are contiguous F32 rows (every backend reads them as one float array).
void require_activation(const Tensor& t, const char* op, const char* name) {
    if (!t.data) fail(op, std::string(name) + " has no data");
    if (t.type != DType::F32 || t.row_bytes != static_cast<size_t>(t.cols) * sizeof(float))
        fail(op, std::string(name) + " (" + shape(t) + ") must be contiguous F32 rows");
}

// F32 rows at least `cols` floats apart (a slice_cols view allowed).
void require_f32_rows(const Tensor& t, const char* op, const char* name) {
    if (!t.data) fail(op, std::string(name) + " has no data");
    if (t.type != DType::F32 || t.row_bytes < static_cast<size_t>(t.cols) * sizeof(float) ||
        t.row_bytes % sizeof(float))
        fail(op, std::string(name) + " (" + shape(t) + ") must be F32 rows");
}

void require_rows(const Tensor& t, int64_t rows, const char* op, const char* name) {
    if (t.rows < rows)
        fail(op, std::string(name) + " (" + shape(t) + ") has fewer than the " + std::to_string(rows) + " rows needed");
}

void require_cols(const Tensor& t, int64_t cols, const char* op, const char* name, const char* why) {
    if (t.cols != cols)
        fail(op,
             std::string(name) + " (" + shape(t) + ") must have " + std::to_string(cols) + " columns (" + why + ")");
}

bool is_kv_type(DType t) { return t == DType::F16 || t == DType::Q8_0; }

// y: the normalized rows, named y_name in errors.
void check_rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const char* op, const char* y_name) {
    require_activation(x, op, "x");
    require_activation(y, op, y_name);
    if (!w.data || w.type != DType::F32 || w.cols * w.rows != x.cols)
        fail(op, "weight (" + shape(w) + ") must be " + std::to_string(x.cols) + " F32 values (x " + shape(x) + ")");
    require_cols(y, x.cols, op, y_name, "x's");
    require_rows(y, x.rows, op, y_name);
}

void check_add(const Tensor& x, const Tensor& y, const char* op) {
    require_activation(x, op, "x");
    require_activation(y, op, "y");
    if (y.cols != x.cols || y.rows != x.rows) fail(op, "x (" + shape(x) + ") and y (" + shape(y) + ") differ");
}

}  // namespace

void Backend::upload(Tensor& dst, const void* src, size_t n_bytes) {
    if (n_bytes > dst.bytes())
        fail("upload", std::to_string(n_bytes) + " bytes into a tensor of " + std::to_string(dst.bytes()));
    if (n_bytes && (!dst.data || !src)) fail("upload", "null tensor or source");
    do_upload(dst, src, n_bytes);
}

void Backend::download(const Tensor& src, void* dst, size_t n_bytes) {
    if (n_bytes > src.bytes())
        fail("download", std::to_string(n_bytes) + " bytes from a tensor of " + std::to_string(src.bytes()));
    if (n_bytes && (!src.data || !dst)) fail("download", "null tensor or destination");
    do_download(src, dst, n_bytes);
}

void Backend::set_batch(const BatchInfo& b) {
    const size_t n = b.tokens.size();
    if (b.positions.size() != n || b.seq_of.size() != n || b.kv_slot.size() != n)
        fail("set_batch", "positions, seq_of and kv_slot must have one entry per token (" + std::to_string(n) +
                              " tokens; " + std::to_string(b.positions.size()) + ", " +
                              std::to_string(b.seq_of.size()) + ", " + std::to_string(b.kv_slot.size()) + ")");
    if (b.n_seqs < 0 || b.max_blocks < 0 ||
        b.block_table.size() < static_cast<size_t>(b.n_seqs) * static_cast<size_t>(b.max_blocks))
        fail("set_batch", "block_table has " + std::to_string(b.block_table.size()) + " entries, fewer than n_seqs " +
                              std::to_string(b.n_seqs) + " x max_blocks " + std::to_string(b.max_blocks));
    for (size_t t = 0; t < n; ++t) {
        if (b.seq_of[t] < 0 || b.seq_of[t] >= b.n_seqs)
            fail("set_batch", "token " + std::to_string(t) + " belongs to sequence " + std::to_string(b.seq_of[t]) +
                                  " of " + std::to_string(b.n_seqs));
        if (b.positions[t] < 0 || b.kv_slot[t] < 0)
            fail("set_batch", "token " + std::to_string(t) + " has a negative position or KV slot");
    }
    for (int32_t r : b.output_rows)
        if (r < 0 || static_cast<size_t>(r) >= n)
            fail("set_batch",
                 "output row " + std::to_string(r) + " outside the batch's " + std::to_string(n) + " tokens");
    if (!b.state_slot.empty() && b.state_slot.size() != static_cast<size_t>(b.n_seqs))
        fail("set_batch", "state_slot has " + std::to_string(b.state_slot.size()) + " entries for " +
                              std::to_string(b.n_seqs) + " sequences");
    for (int32_t s : b.state_slot)
        if (s < 0) fail("set_batch", "a negative state slot");
    batch_ = b;
    do_set_batch(b);
}

void Backend::embed(const Tensor& table, float scale, Tensor& out) {
    require_activation(out, "embed", "out");
    require_cols(out, table.cols, "embed", "out", "the table's row length");
    require_rows(out, batch_tokens(), "embed", "out");
    if (!table.data) fail("embed", "the table has no data");
    for (int32_t id : batch_.tokens)
        if (id < 0 || id >= table.rows)
            fail("embed",
                 "token id " + std::to_string(id) + " outside the table's " + std::to_string(table.rows) + " rows");
    do_embed(table, scale, out);
}

namespace {

// The checked form of one matmul: its bias, or null where there is none.
const Tensor* check_matmul(const Tensor& w, const Tensor& x, const Tensor& y, const Tensor* bias) {
    require_activation(x, "matmul", "x");
    require_activation(y, "matmul", "y");
    if (!w.data) fail("matmul", "W has no data");
    if (x.cols != w.cols || y.cols != w.rows || y.rows < x.rows)
        fail("matmul", "shapes do not match: W " + shape(w) + ", x " + shape(x) + ", y " + shape(y) +
                           " (need x.cols = W.cols, y.cols = W.rows, y.rows >= x.rows)");
    if (bias && !bias->data) bias = nullptr;
    if (bias && (bias->type != DType::F32 || bias->cols * bias->rows != w.rows))
        fail("matmul", "bias (" + shape(*bias) + ") must be " + std::to_string(w.rows) + " F32 values");
    return bias;
}

}  // namespace

void Backend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
    do_matmul(w, x, y, check_matmul(w, x, y, bias));
}

void Backend::matmul_shared(const Tensor& x, std::span<const MatmulOut> outs) {
    std::vector<MatmulOut> checked(outs.begin(), outs.end());
    for (MatmulOut& o : checked) {
        if (!o.w || !o.y) fail("matmul", "an output without its weight or result tensor");
        o.bias = check_matmul(*o.w, x, *o.y, o.bias);
    }
    do_matmul_shared(x, checked);
}

void Backend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
    check_rms_norm(x, w, y, "rms_norm", "y");
    do_rms_norm(x, w, eps, y);
}

namespace {

void check_rope(const Tensor& x, const RopeParams& p, int64_t batch_tokens) {
    require_activation(x, "rope", "x");
    if (p.n_heads <= 0 || p.head_dim <= 0 || p.n_rot < 0 || p.n_rot > p.head_dim || p.n_rot % 2)
        fail("rope", "n_heads " + std::to_string(p.n_heads) + ", head_dim " + std::to_string(p.head_dim) + ", n_rot " +
                         std::to_string(p.n_rot) + " (need n_heads > 0 and an even n_rot <= head_dim)");
    if (p.ext_factor != 0.0f && (p.n_ctx_orig <= 0 || !(p.freq_scale > 0.0f) || !(p.freq_base > 1.0f)))
        fail("rope", "YaRN (ext_factor " + std::to_string(p.ext_factor) + ") needs n_ctx_orig > 0 (got " +
                         std::to_string(p.n_ctx_orig) + "), freq_scale > 0 and freq_base > 1");
    require_cols(x, p.head_dim, "rope", "x", "head_dim");
    if (x.rows % p.n_heads != 0 || x.rows / p.n_heads > batch_tokens)
        fail("rope", "x (" + shape(x) + ") is not n_tokens x " + std::to_string(p.n_heads) + " heads for a batch of " +
                         std::to_string(batch_tokens) + " tokens");
}

}  // namespace

void Backend::rope(Tensor& x, const RopeParams& p) {
    check_rope(x, p, batch_tokens());
    do_rope(x, p);
}

void Backend::glu(const Tensor& gate, const Tensor& up, GluAct act, Tensor& out) {
    require_f32_rows(gate, "glu", "gate");
    require_f32_rows(up, "glu", "up");
    require_activation(out, "glu", "out");
    if (up.cols != gate.cols || up.rows != gate.rows)
        fail("glu", "gate (" + shape(gate) + ") and up (" + shape(up) + ") differ");
    require_cols(out, gate.cols, "glu", "out", "gate's");
    require_rows(out, gate.rows, "glu", "out");
    if (act != GluAct::Silu && act != GluAct::GeluTanh && act != GluAct::SwigluOai && act != GluAct::Sigmoid)
        fail("glu", "unknown activation " + std::to_string(static_cast<int>(act)));
    do_glu(gate, up, act, out);
}

void Backend::moe_route(const Tensor& logits, const MoeRouting& r, Tensor& ids, Tensor& weights,
                        const Tensor* expert_scale) {
    require_activation(logits, "moe_route", "logits");
    require_activation(weights, "moe_route", "weights");
    if (r.n_used < 1 || r.n_used > logits.cols)
        fail("moe_route", "n_used = " + std::to_string(r.n_used) + " is outside 1.." + std::to_string(logits.cols) +
                              " (the logits' experts)");
    if (r.gating != MoeGating::Softmax && r.gating != MoeGating::SoftmaxTopK) fail("moe_route", "unknown gating");
    if (!ids.data || ids.type != DType::I32 || ids.row_bytes != static_cast<size_t>(ids.cols) * sizeof(int32_t))
        fail("moe_route", "ids (" + shape(ids) + ") must be contiguous I32 rows");
    require_cols(ids, r.n_used, "moe_route", "ids", "n_used");
    require_cols(weights, r.n_used, "moe_route", "weights", "n_used");
    require_rows(ids, logits.rows, "moe_route", "ids");
    require_rows(weights, logits.rows, "moe_route", "weights");
    if (expert_scale) {
        require_f32_rows(*expert_scale, "moe_route", "expert_scale");
        if (expert_scale->rows * expert_scale->cols != logits.cols)
            fail("moe_route", "expert_scale (" + shape(*expert_scale) + ") must hold one factor per expert (" +
                                  std::to_string(logits.cols) + ")");
    }
    do_moe_route(logits, r, ids, weights, expert_scale);
}

void Backend::moe_matmul(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, Tensor& y,
                         const Tensor* bias) {
    require_activation(x, "moe_matmul", "x");
    require_activation(y, "moe_matmul", "y");
    if (!w.data) fail("moe_matmul", "W has no data");
    if (n_expert < 1 || w.rows % n_expert != 0)
        fail("moe_matmul", "W (" + shape(w) + ") is not " + std::to_string(n_expert) + " experts of equal rows");
    if (!ids.data || ids.type != DType::I32 || ids.row_bytes != static_cast<size_t>(ids.cols) * sizeof(int32_t))
        fail("moe_matmul", "ids (" + shape(ids) + ") must be contiguous I32 rows");
    const int64_t rows = w.rows / n_expert, slots = ids.rows * ids.cols;
    if (x.cols != w.cols || (x.rows != ids.rows && x.rows != slots) || y.cols != rows || y.rows < slots)
        fail("moe_matmul", "shapes do not match: W " + shape(w) + " (" + std::to_string(n_expert) + " experts), x " +
                               shape(x) + ", ids " + shape(ids) + ", y " + shape(y) +
                               " (need x.cols = W.cols, x.rows = ids.rows or ids.rows*ids.cols, y.cols = W.rows / "
                               "n_expert, y.rows >= ids.rows*ids.cols)");
    if (bias && !bias->data) bias = nullptr;
    if (bias && (bias->type != DType::F32 || bias->cols * bias->rows != w.rows))
        fail("moe_matmul", "bias (" + shape(*bias) + ") must be " + std::to_string(w.rows) + " F32 values");
    do_moe_matmul(w, n_expert, x, ids, y, bias);
}

void Backend::moe_combine(const Tensor& y, const Tensor& weights, Tensor& out) {
    require_activation(y, "moe_combine", "y");
    require_activation(weights, "moe_combine", "weights");
    require_activation(out, "moe_combine", "out");
    if (weights.cols < 1 || y.rows < weights.rows * weights.cols)
        fail("moe_combine",
             "y (" + shape(y) + ") must have weights.rows x weights.cols rows (weights " + shape(weights) + ")");
    require_cols(out, y.cols, "moe_combine", "out", "y's");
    require_rows(out, weights.rows, "moe_combine", "out");
    do_moe_combine(y, weights, out);
}

void Backend::sigmoid_scale_rows(Tensor& x, const Tensor& s) {
    require_activation(x, "sigmoid_scale_rows", "x");
    require_activation(s, "sigmoid_scale_rows", "s");
    if (s.cols != 1 || s.rows != x.rows)
        fail("sigmoid_scale_rows", "s (" + shape(s) + ") must be one value per row of x (" + shape(x) + ")");
    do_sigmoid_scale_rows(x, s);
}

void Backend::add(Tensor& x, const Tensor& y) {
    check_add(x, y, "add");
    do_add(x, y);
}

void Backend::scale(Tensor& x, float s) {
    require_activation(x, "scale", "x");
    if (!std::isfinite(s)) fail("scale", "the factor " + std::to_string(s) + " is not finite");
    do_scale(x, s);
}

void Backend::softcap(Tensor& x, float cap) {
    require_activation(x, "softcap", "x");
    if (!(cap > 0.0f) || !std::isfinite(cap)) fail("softcap", "the cap " + std::to_string(cap) + " must be positive");
    do_softcap(x, cap);
}

void Backend::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
    check_add(x, y, "add_rms_norm");
    check_rms_norm(x, w, out, "add_rms_norm", "out");
    do_add_rms_norm(x, y, w, eps, out);
}

void Backend::norm_add_rms_norm(Tensor& x, Tensor& y, const Tensor& wy, const Tensor& w, float eps, Tensor& out) {
    check_rms_norm(y, wy, y, "norm_add_rms_norm", "y");
    check_add(x, y, "norm_add_rms_norm");
    check_rms_norm(x, w, out, "norm_add_rms_norm", "out");
    do_norm_add_rms_norm(x, y, wy, w, eps, out);
}

void Backend::copy(const Tensor& src, Tensor& dst) {
    require_f32_rows(src, "copy", "src");
    require_f32_rows(dst, "copy", "dst");
    if (dst.cols != src.cols || dst.rows != src.rows)
        fail("copy", "src (" + shape(src) + ") and dst (" + shape(dst) + ") differ");
    do_copy(src, dst);
}

namespace {

// The recurrent state's tensors are F32 with the shape its fields give, and the batch's
// sequences name slots it has.
void check_recurrent(const RecurrentLayer& s, const BatchInfo& b, const char* op) {
    const bool ok = s.n_slots > 0 && s.conv_kernel > 1 && s.conv_channels > 0 && s.n_k_heads > 0 &&
                    s.n_v_heads % s.n_k_heads == 0 && s.head_dim > 0 && s.conv.data && s.delta.data &&
                    s.conv.type == DType::F32 && s.delta.type == DType::F32 && s.conv.cols == s.conv_channels &&
                    s.conv.rows == int64_t{s.n_slots} * (s.conv_kernel - 1) && s.delta.cols == s.head_dim &&
                    s.delta.rows == int64_t{s.n_slots} * s.n_v_heads * s.head_dim;
    if (!ok)
        fail(op, "the recurrent state (conv " + shape(s.conv) + ", delta " + shape(s.delta) + ") does not match " +
                     std::to_string(s.n_slots) + " slots of kernel " + std::to_string(s.conv_kernel) + ", " +
                     std::to_string(s.conv_channels) + " channels, " + std::to_string(s.n_k_heads) + "/" +
                     std::to_string(s.n_v_heads) + " heads of " + std::to_string(s.head_dim));
    if (b.state_slot.size() != static_cast<size_t>(b.n_seqs))
        fail(op, "the batch names no state slot for its sequences (BatchInfo::state_slot)");
    for (int32_t slot : b.state_slot)
        if (slot >= s.n_slots)
            fail(op, "state slot " + std::to_string(slot) + " outside the state's " + std::to_string(s.n_slots));
}

}  // namespace

void Backend::ssm_conv(RecurrentLayer& state, const Tensor& x, const Tensor& w, Tensor& out) {
    check_recurrent(state, batch_, "ssm_conv");
    require_activation(x, "ssm_conv", "x");
    require_activation(out, "ssm_conv", "out");
    require_cols(x, state.conv_channels, "ssm_conv", "x", "conv_channels");
    require_cols(out, x.cols, "ssm_conv", "out", "x's");
    if (x.rows != batch_tokens())
        fail("ssm_conv",
             "x (" + shape(x) + ") must have one row per token of the batch (" + std::to_string(batch_tokens()) + ")");
    require_rows(out, x.rows, "ssm_conv", "out");
    if (!w.data || w.type != DType::F32 || w.layout != 0 || w.cols != state.conv_kernel || w.rows != x.cols)
        fail("ssm_conv", "w (" + shape(w) + ") must be F32 rows of conv_channels x conv_kernel (" +
                             std::to_string(x.cols) + " x " + std::to_string(state.conv_kernel) + ")");
    do_ssm_conv(state, x, w, out);
}

void Backend::gated_delta_rule(RecurrentLayer& state, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& alpha, const Tensor& beta, const DeltaRuleParams& p, Tensor& out) {
    const char* op = "gated_delta_rule";
    check_recurrent(state, batch_, op);
    const int64_t T = batch_tokens(), kd = int64_t{state.n_k_heads} * state.head_dim,
                  vd = int64_t{state.n_v_heads} * state.head_dim;
    for (auto [t, name, cols] : {std::tuple{&q, "q", kd}, std::tuple{&k, "k", kd}, std::tuple{&v, "v", vd}}) {
        require_f32_rows(*t, op, name);
        require_cols(*t, cols, op, name, "heads x head_dim");
        if (t->rows != T) fail(op, std::string(name) + " (" + shape(*t) + ") must have one row per token");
    }
    for (auto [t, name] : {std::pair{&alpha, "alpha"}, std::pair{&beta, "beta"}}) {
        require_activation(*t, op, name);
        require_cols(*t, state.n_v_heads, op, name, "n_v_heads");
        require_rows(*t, T, op, name);
    }
    require_activation(out, op, "out");
    require_cols(out, vd, op, "out", "n_v_heads x head_dim");
    require_rows(out, T, op, "out");
    for (auto [t, name] : {std::pair{p.dt_bias, "dt_bias"}, std::pair{p.a, "a"}})
        if (!t || !t->data || t->type != DType::F32 || t->cols * t->rows != state.n_v_heads)
            fail(op, std::string(name) + " must be " + std::to_string(state.n_v_heads) + " F32 values");
    if (!(p.l2_eps >= 0.0f)) fail(op, "l2_eps must be >= 0");
    do_gated_delta_rule(state, q, k, v, alpha, beta, p, out);
}

// store_kv's and load_kv's checks: a cache layer of a KV type, rows of its width, one per
// token of the batch at most, every slot inside the cache.
void Backend::check_kv_rows(const KvLayer& layer, const Tensor& k, const Tensor& v, const char* op) const {
    require_activation(k, op, "k");
    require_activation(v, op, "v");
    if (!is_kv_type(layer.k.type) || layer.v.type != layer.k.type || !layer.k.data || !layer.v.data)
        fail(op, "the KV cache must be F16 or Q8_0 (K " + shape(layer.k) + ", V " + shape(layer.v) + ")");
    if (layer.k.cols != int64_t{layer.n_kv_heads} * layer.head_dim || layer.v.cols != layer.k.cols)
        fail(op, "the cache rows are not n_kv_heads x head_dim = " + std::to_string(layer.n_kv_heads) + " x " +
                     std::to_string(layer.head_dim));
    require_cols(k, layer.k.cols, op, "k", "n_kv_heads x head_dim");
    require_cols(v, layer.v.cols, op, "v", "n_kv_heads x head_dim");
    if (k.rows != v.rows || k.rows > batch_tokens())
        fail(op, "k (" + shape(k) + ") and v (" + shape(v) + ") must have one row per token of the batch (" +
                     std::to_string(batch_tokens()) + ")");
    for (int64_t t = 0; t < k.rows; ++t)
        if (batch_.kv_slot[static_cast<size_t>(t)] >= layer.k.rows)
            fail(op, "KV slot " + std::to_string(batch_.kv_slot[static_cast<size_t>(t)]) + " outside the cache's " +
                         std::to_string(layer.k.rows) + " slots");
}

void Backend::store_kv(KvLayer& layer, const Tensor& k, const Tensor& v) {
    check_kv_rows(layer, k, v, "store_kv");
    do_store_kv(layer, k, v);
}

void Backend::rope_store_kv(KvLayer& layer, Tensor& q, Tensor& k, const Tensor& v, const RopeParams& pq,
                            const RopeParams& pk) {
    require_activation(q, "rope_store_kv", "q");
    require_activation(k, "rope_store_kv", "k");
    if (pq.head_dim <= 0 || pk.head_dim <= 0 || q.cols % pq.head_dim || k.cols % pk.head_dim || q.rows != k.rows ||
        q.cols / pq.head_dim != pq.n_heads || k.cols / pk.head_dim != pk.n_heads)
        fail("rope_store_kv", "q (" + shape(q) + ") and k (" + shape(k) + ") are not token rows of " +
                                  std::to_string(pq.n_heads) + " x " + std::to_string(pq.head_dim) + " and " +
                                  std::to_string(pk.n_heads) + " x " + std::to_string(pk.head_dim) + " values");
    Tensor q_heads = q.reshape(pq.head_dim), k_heads = k.reshape(pk.head_dim);
    check_rope(q_heads, pq, batch_tokens());
    check_rope(k_heads, pk, batch_tokens());
    check_kv_rows(layer, k, v, "rope_store_kv");
    do_rope_store_kv(layer, q_heads, k_heads, k, v, pq, pk);
}

void Backend::load_kv(const KvLayer& layer, Tensor& k, Tensor& v) {
    check_kv_rows(layer, k, v, "load_kv");
    do_load_kv(layer, k, v);
}

void Backend::attention(const KvLayer& layer, const Tensor& q, const AttentionParams& p, Tensor& out) {
    require_activation(q, "attention", "q");
    require_activation(out, "attention", "out");
    if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads || p.head_dim <= 0 || p.window < 0)
        fail("attention", "n_heads " + std::to_string(p.n_heads) + ", n_kv_heads " + std::to_string(p.n_kv_heads) +
                              ", head_dim " + std::to_string(p.head_dim) + ", window " + std::to_string(p.window) +
                              " (n_heads must be a positive multiple of n_kv_heads)");
    if (p.n_kv_heads != layer.n_kv_heads || p.head_dim != layer.head_dim ||
        layer.k.cols != int64_t{p.n_kv_heads} * p.head_dim || layer.v.cols != layer.k.cols)
        fail("attention", "the cache layer (" + std::to_string(layer.n_kv_heads) + " heads x " +
                              std::to_string(layer.head_dim) + ", K " + shape(layer.k) + ") does not match the params");
    if (!is_kv_type(layer.k.type) || layer.v.type != layer.k.type || (layer.k.type == DType::Q8_0 && p.head_dim % 32))
        fail("attention",
             "the KV cache must be F16, or Q8_0 with head_dim a multiple of 32 (K " + shape(layer.k) + ")");
    require_cols(q, int64_t{p.n_heads} * p.head_dim, "attention", "q", "n_heads x head_dim");
    if (q.rows != batch_tokens())
        fail("attention",
             "q (" + shape(q) + ") must have one row per token of the batch (" + std::to_string(batch_tokens()) + ")");
    require_cols(out, q.cols, "attention", "out", "q's");
    require_rows(out, q.rows, "attention", "out");
    if (p.sinks && (!p.sinks->data || p.sinks->type != DType::F32 || p.sinks->cols * p.sinks->rows != p.n_heads))
        fail("attention", "sinks (" + shape(*p.sinks) + ") must be " + std::to_string(p.n_heads) +
                              " F32 values, one per query head");
    do_attention(layer, q, p, out);
}

void Backend::gather_output_rows(const Tensor& x, Tensor& out) {
    require_activation(x, "gather_output_rows", "x");
    require_activation(out, "gather_output_rows", "out");
    require_cols(out, x.cols, "gather_output_rows", "out", "x's");
    require_rows(out, static_cast<int64_t>(batch_.output_rows.size()), "gather_output_rows", "out");
    for (int32_t r : batch_.output_rows)
        if (r >= x.rows)
            fail("gather_output_rows", "output row " + std::to_string(r) + " outside x (" + shape(x) + ")");
    do_gather_output_rows(x, out);
}

void Backend::top_k(Tensor& logits, int32_t k, std::span<const TopKRow> rows, std::span<TopKCandidate> out,
                    std::span<int32_t> counts) {
    require_activation(logits, "top_k", "logits");
    if (k < 1 || k > kMaxTopK) fail("top_k", "k = " + std::to_string(k) + " is outside 1.." + std::to_string(kMaxTopK));
    if (rows.size() > static_cast<size_t>(logits.rows))
        fail("top_k", std::to_string(rows.size()) + " rows asked of logits " + shape(logits));
    if (out.size() < rows.size() * static_cast<size_t>(k) || counts.size() < rows.size())
        fail("top_k",
             "output spans too small for " + std::to_string(rows.size()) + " rows of k = " + std::to_string(k));
    do_top_k(logits, k, rows, out, counts);
}

}  // namespace ember
