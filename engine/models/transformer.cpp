#include "engine/models/transformer.h"

#include <algorithm>
#include <cmath>

#include "engine/core/mapped_file.h"
#include "kernels/common/alloc_size.h"
#include "kernels/common/error.h"

namespace ember {

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& backend)
    : file_(std::move(file)), config_(read_model_config(*file_)) {
    devices_.resize(1);
    devices_[0].backend = &backend;
    const std::vector<int> all_first(static_cast<size_t>(config_.n_layers), 0);
    load_weights(all_first, all_first);
}

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& first, Backend& rest, int n_first_layers,
                         int n_first_expert_layers)
    : file_(std::move(file)), config_(read_model_config(*file_)) {
    if (!split_supported(config_, n_first_layers))
        throw Error(file_->path() + ": " + std::to_string(n_first_layers) +
                    " layers on the GPU would separate a layer from the layer whose K/V it shares; "
                    "put fewer or more layers on the GPU");
    devices_.resize(2);
    devices_[0].backend = &first;
    devices_[1].backend = &rest;
    std::vector<int> layer_device, expert_device;
    for (int i = 0; i < config_.n_layers; ++i) {
        layer_device.push_back(i < n_first_layers ? 0 : 1);
        const bool experts_first = n_first_expert_layers < 0 || !config_.moe() || i < n_first_expert_layers;
        expert_device.push_back(experts_first ? layer_device.back() : 1);
    }
    load_weights(layer_device, expert_device);
}

void Transformer::load_weights(const std::vector<int>& layer_device, const std::vector<int>& expert_device) {
    const ModelConfig& c = config_;
    Backend& first = *devices_[static_cast<size_t>(layer_device.front())].backend;
    Backend& last = *devices_[static_cast<size_t>(layer_device.back())].backend;
    tok_embd_ = weight(first, "token_embd.weight", c.n_embd, c.n_vocab);
    output_norm_ = weight(last, "output_norm.weight", c.n_embd, 1);
    output_ = weight(last, "output.weight", c.n_embd, c.n_vocab, false);
    if (!output_.data && &first == &last) output_ = tok_embd_;                            // tied embeddings
    if (!output_.data) output_ = weight(last, "token_embd.weight", c.n_embd, c.n_vocab);  // tied, a copy
    if (const GgufTensor* rf = file_->find_tensor("rope_freqs.weight")) {
        if (rf->type != DType::F32 || rf->n_elements != static_cast<uint64_t>(c.n_rot / 2))
            throw Error(file_->path() + ": rope_freqs.weight must be F32 with " + std::to_string(c.n_rot / 2) +
                        " elements");
        const auto* p = reinterpret_cast<const float*>(rf->data);
        rope_freq_factors_.assign(p, p + c.n_rot / 2);
    }
    ones_.assign(static_cast<size_t>(c.max_head_dim()), 1.0f);
    if (c.n_embd_per_layer > 0) load_per_layer_embeddings(first);
    for (size_t i = 0; i < layer_device.size(); ++i)
        layers_.push_back(load_layer(static_cast<int>(i), devices_[static_cast<size_t>(layer_device[i])],
                                     devices_[static_cast<size_t>(expert_device[i])]));
}

Transformer::Layer Transformer::load_layer(int index, Device& device, Device& expert_device) {
    const ModelConfig& c = config_;
    Backend& be = *device.backend;
    const std::string b = "blk." + std::to_string(index) + ".";
    Layer l;
    l.index = index;
    l.device = &device;
    l.expert_device = &expert_device;
    l.shape = c.layers[static_cast<size_t>(index)];
    const LayerShape& s = l.shape;
    l.kv_layer = kv_layer_of(c, index);
    l.stores_kv = c.owns_kv(index);

    // Sliding-window layers use their own rope base, unscaled (gemma3, gemma4) or scaled (gpt-oss).
    const bool sliding = c.layer_sliding[static_cast<size_t>(index)];
    const bool scaled = !sliding || c.rope_scale_local;
    l.rope_q.n_heads = s.n_heads;
    l.rope_q.head_dim = s.head_dim;
    l.rope_q.n_rot = s.n_rot;
    l.rope_q.neox = c.rope_neox;
    l.rope_q.freq_base = sliding ? c.rope_base_local : c.rope_base;
    l.rope_q.freq_scale = scaled ? c.rope_scale : 1.0f;
    if (scaled) {  // YaRN (gpt-oss); the defaults where a file has none
        l.rope_q.ext_factor = c.rope_ext_factor;
        l.rope_q.attn_factor = c.rope_attn_factor;
        l.rope_q.beta_fast = c.yarn_beta_fast;
        l.rope_q.beta_slow = c.yarn_beta_slow;
        l.rope_q.n_ctx_orig = c.n_ctx_orig;
    }
    l.rope_q.freq_factors = !sliding && !rope_freq_factors_.empty() ? rope_freq_factors_.data() : nullptr;
    l.rope_k = l.rope_q;
    l.rope_k.n_heads = s.n_kv_heads;
    l.attention.n_heads = s.n_heads;
    l.attention.n_kv_heads = s.n_kv_heads;
    l.attention.head_dim = s.head_dim;
    l.attention.scale = c.attn_scale;
    l.attention.window = sliding ? c.sliding_window : 0;

    l.attn_norm = weight(be, b + "attn_norm.weight", c.n_embd, 1);
    if (s.recurrent) {
        load_linear_attention(l, be, b);
    } else {
        load_attention(l, device, b);
    }
    l.ffn_norm = weight(be, b + c.ffn_norm + ".weight", c.n_embd, 1);
    load_layer_tail(l, be, b);
    if (c.moe()) {
        load_experts(l, *expert_device.backend, b);
        if (c.shared_expert) {
            l.ffn_gate_inp_shexp = weight(be, b + "ffn_gate_inp_shexp.weight", c.n_embd, 1);
            l.ffn_gate_shexp = weight(be, b + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shexp);
            l.ffn_up_shexp = weight(be, b + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shexp);
            l.ffn_down_shexp = weight(be, b + "ffn_down_shexp.weight", c.n_ff_shexp, c.n_embd);
        }
        if (!c.shared_ffn) return l;
        l.post_ffn_norm_1 = weight(be, b + "post_ffw_norm_1.weight", c.n_embd, 1);
    }
    l.w_gate = weight(be, b + "ffn_gate.weight", c.n_embd, s.n_ff);
    l.w_up = weight(be, b + "ffn_up.weight", c.n_embd, s.n_ff);
    l.w_down = weight(be, b + "ffn_down.weight", s.n_ff, c.n_embd);
    return l;
}

// The attention sublayer's weights (qwen35: q's rows hold each head's q and then its gate).
void Transformer::load_attention(Layer& l, Device& device, const std::string& b) {
    const ModelConfig& c = config_;
    Backend& be = *device.backend;
    const LayerShape& s = l.shape;
    l.wq = weight(be, b + "attn_q.weight", c.n_embd, int64_t{s.q_dim()} * (c.attn_gate ? 2 : 1));
    if (l.stores_kv) {
        l.wk = weight(be, b + "attn_k.weight", c.n_embd, s.kv_dim());
        l.wv = weight(be, b + "attn_v.weight", c.n_embd, s.kv_dim(), !c.v_norm);  // gemma4: absent = K's
    }
    l.wo = weight(be, b + "attn_output.weight", s.q_dim(), c.n_embd);
    if (c.out_bias) l.bo = weight(be, b + "attn_output.bias", c.n_embd, 1);
    if (c.attn_sinks) l.sinks = weight(be, b + "attn_sinks.weight", s.n_heads, 1);
    if (c.qkv_bias) {
        l.bq = weight(be, b + "attn_q.bias", s.q_dim(), 1);
        l.bk = weight(be, b + "attn_k.bias", s.kv_dim(), 1);
        l.bv = weight(be, b + "attn_v.bias", s.kv_dim(), 1);
    }
    if (c.qk_norm) {
        l.q_norm = weight(be, b + "attn_q_norm.weight", s.head_dim, 1);
        if (l.stores_kv) l.k_norm = weight(be, b + "attn_k_norm.weight", s.head_dim, 1);
    }
    if (c.v_norm && l.stores_kv) l.v_norm = ones(device, s.head_dim);
    if (c.post_norms) {
        l.post_attn_norm = weight(be, b + "post_attention_norm.weight", c.n_embd, 1);
        l.post_ffn_norm = weight(be, b + "post_ffw_norm.weight", c.n_embd, 1);
    }
}

// The router and experts, on `be` (the experts' device; fit::is_expert_tensor names the
// same tensors, so the planner counts them there).
void Transformer::load_experts(Layer& l, Backend& be, const std::string& b) {
    const ModelConfig& c = config_;
    l.ffn_gate_inp = weight(be, b + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
    if (c.expert_gate_up) {
        l.ffn_gate_up_exps = expert_weight(be, b + "ffn_gate_up_exps.weight", c.n_embd, 2 * int64_t{c.n_ff_exp});
    } else {
        l.ffn_gate_exps = expert_weight(be, b + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp);
        l.ffn_up_exps = expert_weight(be, b + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp);
    }
    l.ffn_down_exps = expert_weight(be, b + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd);
    if (c.expert_biases) {  // gpt-oss
        l.ffn_gate_inp_b = weight(be, b + "ffn_gate_inp.bias", c.n_expert, 1);
        l.ffn_gate_exps_b = weight(be, b + "ffn_gate_exps.bias", c.n_ff_exp, c.n_expert);
        l.ffn_up_exps_b = weight(be, b + "ffn_up_exps.bias", c.n_ff_exp, c.n_expert);
        l.ffn_down_exps_b = weight(be, b + "ffn_down_exps.bias", c.n_embd, c.n_expert);
    }
    if (!c.shared_ffn) return;
    l.ffn_gate_inp_scale = weight(be, b + "ffn_gate_inp.scale", c.n_embd, 1);
    l.ffn_down_exps_scale = weight(be, b + "ffn_down_exps.scale", c.n_expert, 1, false);
    l.pre_ffn_norm_2 = weight(be, b + "pre_ffw_norm_2.weight", c.n_embd, 1);
    l.post_ffn_norm_2 = weight(be, b + "post_ffw_norm_2.weight", c.n_embd, 1);
}

// A [head_dim] tensor of ones on the device, shared by its layers: RMS norm without a weight.
const Tensor& Transformer::ones(Device& d, int head_dim) {
    for (const auto& [dim, t] : d.ones)
        if (dim == head_dim) return t;
    d.ones.emplace_back(head_dim, d.backend->load_weight(ones_.data(), DType::F32, head_dim, 1, "ones"));
    return d.ones.back().second;
}

int32_t Transformer::kv_layer_of(const ModelConfig& c, int32_t layer) {
    const int32_t source = c.layers[static_cast<size_t>(layer)].kv_source;
    int32_t n = 0;
    for (int32_t i = 0; i < source; ++i) n += c.owns_kv(i) ? 1 : 0;
    return n;
}

int32_t Transformer::recurrent_layer_of(const ModelConfig& c, int32_t layer) {
    int32_t n = 0;
    for (int32_t i = 0; i < layer; ++i) n += c.layers[static_cast<size_t>(i)].recurrent ? 1 : 0;
    return n;
}

bool Transformer::split_supported(const ModelConfig& c, int32_t n_first_layers) {
    for (int32_t i = 0; i < c.n_layers; ++i)
        if ((i < n_first_layers) != (c.layers[static_cast<size_t>(i)].kv_source < n_first_layers)) return false;
    return true;
}

bool Transformer::skips_tensor(const ModelConfig& c, int32_t layer, const std::string& name) {
    if (layer < 0 || layer >= c.n_layers || c.owns_kv(layer)) return false;
    for (const char* kv : {".attn_k.", ".attn_v.", ".attn_k_norm."})
        if (name.find(kv) != std::string::npos) return true;
    return false;
}

Transformer::~Transformer() {
    for (Device& d : devices_) {
        free_scratch(d);
        for (auto& [dim, t] : d.ones) d.backend->free(t);
    }
    for (Layer& l : layers_) {
        for (Tensor* t : l.weights())
            if (t->data) l.device->backend->free(*t);
        for (Tensor* t : l.expert_weights())
            if (t->data) l.expert_device->backend->free(*t);
    }
    if (layers_.empty()) return;
    Backend& first = *layers_.front().device->backend;
    Backend& last = *layers_.back().device->backend;
    if (output_.data && output_.data != tok_embd_.data) last.free(output_);
    if (tok_embd_.data) first.free(tok_embd_);
    if (output_norm_.data) last.free(output_norm_);
    for (Tensor& t : ple_model_proj_) first.free(t);
    if (ple_proj_norm_.data) first.free(ple_proj_norm_);
}

std::vector<Backend*> Transformer::layer_backends() const {
    std::vector<Backend*> out;
    for (const Layer& l : layers_) out.push_back(l.device->backend);
    return out;
}

std::vector<Backend*> Transformer::recurrent_backends() const {
    std::vector<Backend*> out;
    for (const Layer& l : layers_)
        if (l.shape.recurrent) out.push_back(l.device->backend);
    return out;
}

std::vector<Backend*> Transformer::kv_backends() const {
    std::vector<Backend*> out;
    for (const Layer& l : layers_)
        if (l.stores_kv) out.push_back(l.device->backend);
    return out;
}

Tensor Transformer::weight(Backend& be, const std::string& name, int64_t cols, int64_t rows, bool required) {
    const GgufTensor* t = file_->find_tensor(name);
    if (!t) {
        if (required) throw Error(file_->path() + ": missing tensor '" + name + "'");
        return {};
    }
    if (static_cast<int64_t>(t->dims[0]) != cols || static_cast<int64_t>(t->rows()) != rows)
        throw Error(file_->path() + ": tensor '" + name + "' has shape " + std::to_string(t->dims[0]) + " x " +
                    std::to_string(t->rows()) + ", expected " + std::to_string(cols) + " x " + std::to_string(rows));
    try {
        Tensor w = be.load_weight(t->data, t->type, cols, rows, name.c_str());
        if (w.data != t->data) drop_mapped_pages(t->data, w.bytes());  // copied: the map's pages are not read again
        return w;
    } catch (const Error& e) {
        throw Error(file_->path() + ": tensor '" + name + "': " + e.what());
    }
}

Tensor Transformer::expert_weight(Backend& be, const std::string& name, int64_t cols, int64_t rows) {
    const int64_t n = config_.n_expert;
    const GgufTensor* t = file_->find_tensor(name);
    if (!t) throw Error(file_->path() + ": missing tensor '" + name + "'");
    if (t->dims.size() != 3 || t->dims[0] != static_cast<uint64_t>(cols) || t->dims[1] != static_cast<uint64_t>(rows) ||
        t->dims[2] != static_cast<uint64_t>(n))
        throw Error(file_->path() + ": tensor '" + name + "' is not " + std::to_string(n) + " experts of " +
                    std::to_string(cols) + " x " + std::to_string(rows));
    try {
        Tensor w = be.load_expert_weight(t->data, t->type, cols, rows, n, name.c_str());
        if (w.data != t->data) drop_mapped_pages(t->data, w.bytes());
        return w;
    } catch (const Error& e) {
        throw Error(file_->path() + ": tensor '" + name + "': " + e.what());
    }
}

KvCacheConfig Transformer::kv_config(int64_t n_ctx, int32_t n_seqs, DType kv_type) const {
    return kv_config(config_, n_ctx, n_seqs, kv_type);
}

// One cache layer per layer that keeps K/V of its own, each at its own shape (listed only
// where they differ).
KvCacheConfig Transformer::kv_config(const ModelConfig& c, int64_t n_ctx, int32_t n_seqs, DType kv_type) {
    KvCacheConfig k;
    k.n_kv_heads = c.n_kv_heads;
    k.head_dim = c.head_dim;
    bool uniform = true;
    for (int32_t i = 0; i < c.n_layers; ++i) {
        const LayerShape& s = c.layers[static_cast<size_t>(i)];
        if (!c.owns_kv(i)) continue;
        k.shapes.push_back({s.n_kv_heads, s.head_dim});
        uniform = uniform && s.n_kv_heads == c.n_kv_heads && s.head_dim == c.head_dim;
    }
    k.n_layers = static_cast<int32_t>(k.shapes.size());
    if (uniform) k.shapes.clear();
    if (c.recurrent()) {  // one state per sequence in each linear-attention layer
        for (const LayerShape& s : c.layers) k.n_recurrent_layers += s.recurrent ? 1 : 0;
        k.recurrent = {c.ssm_conv_kernel, c.ssm_conv_channels(), c.ssm_n_k_heads, c.ssm_n_v_heads, c.ssm_head_dim};
        k.state_slots = n_seqs;
    }
    k.type = kv_type;
    k.n_blocks = KvCacheConfig::blocks_for(n_ctx, n_seqs, k.block_tokens);
    return k;
}

std::vector<Transformer::ScratchBuffer> Transformer::scratch_layout(const ModelConfig& c, int64_t T, int64_t O) {
    const int64_t ff = c.moe() && !c.shared_ffn ? (c.shared_expert ? c.n_ff_shexp : 0) : c.max_ff(),
                  slots = T * c.n_expert_used;
    const int64_t gate_cols = c.expert_gate_up ? 2 * int64_t{c.n_ff_exp} : c.n_ff_exp;  // fused: gate | up
    std::vector<ScratchBuffer> b = {{"x", c.n_embd, T},       {"xn", c.n_embd, T},      {"q", c.max_q_dim(), T},
                                    {"k", c.max_kv_dim(), T}, {"v", c.max_kv_dim(), T}, {"attn", c.max_q_dim(), T},
                                    {"proj", c.n_embd, T},    {"gate", ff, T},          {"up", ff, T},
                                    {"out_x", c.n_embd, O},   {"logits", c.n_vocab, O}};
    if (c.moe()) {
        b.push_back({"router", c.n_expert, T});
        b.push_back({"expert_ids", c.n_expert_used, T, DType::I32});
        b.push_back({"expert_weights", c.n_expert_used, T});
        b.push_back({"expert_gate", gate_cols, slots});
        b.push_back({"expert_up", c.n_ff_exp, slots});
        b.push_back({"expert_down", c.n_embd, slots});
    }
    if (c.n_embd_per_layer > 0) {
        b.push_back({"ple", c.n_embd_per_layer, int64_t{c.n_layers} * T});
        b.push_back({"ple_tmp", c.n_embd_per_layer, T});
    }
    if (c.recurrent()) {
        const int32_t in_cols = c.ssm_in_fused ? c.ssm_qkvz_dim() : c.ssm_conv_channels();
        b.push_back({"lin_mix", std::max(in_cols, 2 * c.max_q_dim()), T});
        b.push_back({"lin_conv", c.ssm_conv_channels(), T});
        b.push_back({"lin_z", std::max(c.ssm_value_dim(), c.max_q_dim()), T});
        b.push_back({"lin_alpha", c.ssm_n_v_heads, T});
        b.push_back({"lin_beta", c.ssm_n_v_heads, T});
        b.push_back({"lin_out", c.ssm_value_dim(), T});
    }
    return b;
}

uint64_t Transformer::scratch_bytes(const ModelConfig& c, int64_t n_tokens, int64_t n_outputs, size_t alloc_align) {
    uint64_t total = 0;
    for (const ScratchBuffer& b : scratch_layout(c, n_tokens, n_outputs))
        total += padded_alloc_bytes(Tensor::shaped(b.type, b.cols, b.rows).bytes(), alloc_align);
    return total;
}

void Transformer::free_scratch(Device& d) {
    Scratch& s = d.scratch;
    for (Tensor* t : s.buffers())
        if (t->data) d.backend->free(*t);
    s = Scratch{};
    d.act = Activations{};
}

// Activation buffers sized for the largest batch so far; reused across passes.
void Transformer::ensure_scratch(Device& d, int64_t n_tokens, int64_t n_outputs) {
    Scratch& s = d.scratch;
    if (n_tokens <= s.tokens && n_outputs <= s.outputs) return;
    const int64_t T = std::max(n_tokens, s.tokens), O = std::max(n_outputs, s.outputs);
    free_scratch(d);
    const auto buffers = s.buffers();  // those the layout does not name stay empty
    for (const ScratchBuffer& b : scratch_layout(config_, T, O)) {
        const auto tag = std::find_if(Scratch::kTags.begin(), Scratch::kTags.end(),
                                      [&](const char* t) { return std::string_view(t) == b.tag; });
        *buffers[static_cast<size_t>(tag - Scratch::kTags.begin())] =
            d.backend->alloc(MemoryKind::Activations, b.type, b.cols, b.rows, b.tag);
    }
    s.tokens = T;
    s.outputs = O;
}

// Cuts the device's scratch to this pass's tokens and tells its backend the batch layout.
void Transformer::begin_pass(Device& d, const BatchInfo& batch) {
    const auto T = static_cast<int64_t>(batch.tokens.size());
    const auto O = static_cast<int64_t>(batch.output_rows.size());
    ensure_scratch(d, T, O);
    const Scratch& s = d.scratch;
    Activations& a = d.act;
    a.x = s.x.slice_rows(0, T);
    a.xn = s.xn.slice_rows(0, T);
    a.q = s.q.slice_rows(0, T);
    a.k = s.k.slice_rows(0, T);
    a.v = s.v.slice_rows(0, T);
    a.attn = s.attn.slice_rows(0, T);
    a.proj = s.proj.slice_rows(0, T);
    a.gate = s.gate.slice_rows(0, T);
    a.up = s.up.slice_rows(0, T);
    a.out_x = s.out_x.slice_rows(0, O);
    a.logits = s.logits.slice_rows(0, O);
    if (config_.moe()) {
        const int64_t slots = T * config_.n_expert_used;
        a.router = s.router.slice_rows(0, T);
        a.expert_ids = s.expert_ids.slice_rows(0, T);
        a.expert_weights = s.expert_weights.slice_rows(0, T);
        a.expert_gate = s.expert_gate.slice_rows(0, slots);
        a.expert_up = s.expert_up.slice_rows(0, slots);
        a.expert_down = s.expert_down.slice_rows(0, slots);
    }
    if (s.ple.data) {
        a.ple = s.ple.slice_rows(0, int64_t{config_.n_layers} * T);
        a.ple_tmp = s.ple_tmp.slice_rows(0, T);
    }
    if (s.lin_mix.data) {
        a.lin_mix = s.lin_mix.slice_rows(0, T);
        a.lin_conv = s.lin_conv.slice_rows(0, T);
        a.lin_z = s.lin_z.slice_rows(0, T);
        a.lin_alpha = s.lin_alpha.slice_rows(0, T);
        a.lin_beta = s.lin_beta.slice_rows(0, T);
        a.lin_out = s.lin_out.slice_rows(0, T);
    }
    d.backend->set_batch(batch);
}

Tensor Transformer::rows_of(const Tensor& buf, int64_t cols, int64_t rows) {
    Tensor t = buf;
    t.cols = cols;
    t.rows = rows;
    t.row_bytes = static_cast<size_t>(cols) * sizeof(float);
    return t;
}

namespace {

// x += post(y) (post: an optional post-norm of the sublayer's output y, in place), then
// out = norm(x): the end of a sublayer, one op either way.
void end_sublayer(Backend& be, Tensor& x, Tensor& y, const Tensor& post, const Tensor& norm, float eps, Tensor& out) {
    if (post.data) be.norm_add_rms_norm(x, y, post, norm, eps, out);
    else be.add_rms_norm(x, y, norm, eps, out);
}

}  // namespace

void Transformer::attention_block(const Layer& l, KvLayer& cache, Activations& a) {
    Backend& be = *l.device->backend;
    const float eps = config_.norm_eps;
    const LayerShape& s = l.shape;
    const int64_t T = a.x.rows;
    Tensor q = rows_of(a.q, s.q_dim(), T), attn = rows_of(a.attn, s.q_dim(), T);
    Tensor q_heads = q.reshape(s.head_dim);
    if (l.stores_kv) {
        Tensor k = rows_of(a.k, s.kv_dim(), T), v = rows_of(a.v, s.kv_dim(), T);
        const Tensor& wv = l.wv.data ? l.wv : l.wk;  // no V projection: V is K's, before K's norm
        if (config_.attn_gate) {
            Tensor qg = rows_of(a.lin_mix, 2 * int64_t{s.q_dim()}, T);
            const MatmulOut qkv[] = {{&l.wq, &qg, &l.bq}, {&l.wk, &k, &l.bk}, {&wv, &v, &l.bv}};
            be.matmul_shared(a.xn, qkv);
            project_gated_q(l, a, q);
        } else {
            const MatmulOut qkv[] = {{&l.wq, &q, &l.bq}, {&l.wk, &k, &l.bk}, {&wv, &v, &l.bv}};
            be.matmul_shared(a.xn, qkv);
        }
        Tensor k_heads = k.reshape(s.head_dim), v_heads = v.reshape(s.head_dim);
        if (l.q_norm.data) be.rms_norm(q_heads, l.q_norm, eps, q_heads);
        if (l.k_norm.data) be.rms_norm(k_heads, l.k_norm, eps, k_heads);
        if (l.v_norm.data) be.rms_norm(v_heads, l.v_norm, eps, v_heads);
        be.rope_store_kv(cache, q, k, v, l.rope_q, l.rope_k);
        dump_("q", l.index, q, be);
        dump_("k", l.index, k, be);
        dump_("v", l.index, v, be);
    } else {  // K/V shared with an earlier layer: only q is computed
        be.matmul(l.wq, a.xn, q);
        if (l.q_norm.data) be.rms_norm(q_heads, l.q_norm, eps, q_heads);
        be.rope(q_heads, l.rope_q);
        dump_("q", l.index, q, be);
    }
    AttentionParams attention = l.attention;
    attention.sinks = l.sinks.data ? &l.sinks : nullptr;  // not kept in l.attention: layers_ may move
    be.attention(cache, q, attention, attn);
    dump_("kqv_out", l.index, attn, be);
    if (config_.attn_gate) {  // attn * sigmoid(gate), into the gate's buffer
        Tensor gate = rows_of(a.lin_z, s.q_dim(), T);
        be.glu(gate, attn, GluAct::Sigmoid, gate);
        attn = gate;
    }
    be.matmul(l.wo, attn, a.proj, &l.bo);
    end_sublayer(be, a.x, a.proj, l.post_attn_norm, l.ffn_norm, eps, a.xn);
    dump_("attn_out", l.index, a.proj, be);
    dump_("ffn_inp", l.index, a.x, be);
    dump_("ffn_norm", l.index, a.xn, be);
}

void Transformer::dense_ffn(const Layer& l, Activations& a, Tensor& out) {
    Backend& be = *l.device->backend;
    const int64_t T = a.x.rows;
    Tensor gate = rows_of(a.gate, l.shape.n_ff, T), up = rows_of(a.up, l.shape.n_ff, T);
    const MatmulOut gate_up[] = {{&l.w_gate, &gate}, {&l.w_up, &up}};
    be.matmul_shared(a.xn, gate_up);
    dump_("ffn_gate", l.index, gate, be);
    dump_("ffn_up", l.index, up, be);
    be.glu(gate, up, glu_act(), gate);
    dump_("ffn_glu", l.index, gate, be);
    be.matmul(l.w_down, gate, out);
}

// llama.cpp's build_moe_ffn for qwen3moe: softmax router, top-k, renormalised weights, SwiGLU
// experts, the weighted sum (kernels/backend.h, "mixture of experts"). gpt-oss: biases on the
// router and the experts, softmax over the top-k logits, the clamped SwiGLU.
void Transformer::moe_ffn(const Layer& l, Activations& a) {
    Backend& be = *l.expert_device->backend;
    be.matmul(l.ffn_gate_inp, a.xn, a.router, &l.ffn_gate_inp_b);
    dump_("ffn_moe_logits", l.index, a.router, be);
    run_experts(l, a, a.xn, a.proj);
}

// out may be x's buffer: x is read by the gate/up products, out written by the last step.
void Transformer::run_experts(const Layer& l, Activations& a, const Tensor& x, Tensor& out) {
    Backend& be = *l.expert_device->backend;
    const ModelConfig& c = config_;
    const MoeGating gating = c.expert_softmax_top_k ? MoeGating::SoftmaxTopK : MoeGating::Softmax;
    const MoeRouting routing{c.n_expert_used, gating, c.expert_weights_norm, c.expert_weights_scale};
    // gemma4's per-expert output scale, folded into the weights moe_combine applies.
    const Tensor* down_scale = l.ffn_down_exps_scale.data ? &l.ffn_down_exps_scale : nullptr;
    be.moe_route(a.router, routing, a.expert_ids, a.expert_weights, down_scale);
    Tensor* act = &a.expert_gate;   // the glu's result, down's input
    if (l.ffn_gate_up_exps.data) {  // one product, then the glu of its halves into expert_up
        be.moe_matmul(l.ffn_gate_up_exps, c.n_expert, x, a.expert_ids, a.expert_gate);
        const Tensor gate = a.expert_gate.slice_cols(0, c.n_ff_exp),
                     up = a.expert_gate.slice_cols(c.n_ff_exp, c.n_ff_exp);
        dump_("ffn_moe_gate_up", l.index, a.expert_gate, be);
        be.glu(gate, up, glu_act(), a.expert_up);
        act = &a.expert_up;
    } else {
        be.moe_matmul(l.ffn_gate_exps, c.n_expert, x, a.expert_ids, a.expert_gate, &l.ffn_gate_exps_b);
        be.moe_matmul(l.ffn_up_exps, c.n_expert, x, a.expert_ids, a.expert_up, &l.ffn_up_exps_b);
        dump_("ffn_moe_gate", l.index, a.expert_gate, be);  // llama.cpp's names, the same [T*k x n] rows
        dump_("ffn_moe_up", l.index, a.expert_up, be);
        be.glu(a.expert_gate, a.expert_up, glu_act(), a.expert_gate);
    }
    be.moe_matmul(l.ffn_down_exps, c.n_expert, *act, a.expert_ids, a.expert_down, &l.ffn_down_exps_b);
    dump_("ffn_moe_down", l.index, a.expert_down, be);
    be.moe_combine(a.expert_down, a.expert_weights, out);
}

// llama.cpp's gemma4 graph for a layer with experts: the dense FFN (ffn_norm, GELU, its
// post-norm 1) and the experts (pre-norm 2, routed by the scaled norm of the attention output,
// post-norm 2), summed; ffn_block then applies the layer's FFN post-norm and the residual.
// The experts run first, into a.proj (on their device where that is another); the dense FFN's
// down product then goes to a.xn, whose normed input its gate/up products have already read.
void Transformer::gemma4_moe_ffn(const Layer& l, Activations& a) {
    Device& here = *l.device;
    Device& there = *l.expert_device;
    if (&here == &there) {
        gemma4_experts(l, a, a.x);
    } else {  // the attention output there, the experts' result back
        copy_rows(here, a.x, there, there.act.xn);
        gemma4_experts(l, there.act, there.act.xn);
        copy_rows(there, there.act.proj, here, a.proj);
    }
    Backend& be = *here.backend;
    dense_ffn(l, a, a.xn);
    be.rms_norm(a.xn, l.post_ffn_norm_1, config_.norm_eps, a.xn);
    dump_("ffn_mlp", l.index, a.xn, be);
    be.add(a.proj, a.xn);
}

void Transformer::gemma4_experts(const Layer& l, Activations& e, const Tensor& attn_out) {
    Backend& be = *l.expert_device->backend;
    const float eps = config_.norm_eps;
    be.rms_norm(attn_out, l.ffn_gate_inp_scale, eps, e.proj);  // the router's input
    be.scale(e.proj, 1.0f / std::sqrt(static_cast<float>(config_.n_embd)));
    be.matmul(l.ffn_gate_inp, e.proj, e.router);
    dump_("ffn_moe_logits", l.index, e.router, be);
    be.rms_norm(attn_out, l.pre_ffn_norm_2, eps, e.proj);
    dump_("ffn_norm_2", l.index, e.proj, be);
    run_experts(l, e, e.proj, e.proj);
    be.rms_norm(e.proj, l.post_ffn_norm_2, eps, e.proj);
    dump_("ffn_moe", l.index, e.proj, be);
}

// The experts in another device's memory (the CPU's, the attention on the GPU): the normed
// input goes there, the experts' weighted sum comes back.
void Transformer::remote_moe_ffn(const Layer& l, Activations& a) {
    Device& here = *l.device;
    Device& there = *l.expert_device;
    copy_rows(here, a.xn, there, there.act.xn);
    moe_ffn(l, there.act);
    copy_rows(there, there.act.proj, here, a.proj);
}

void Transformer::ffn_block(const Layer& l, const Layer* next, Activations& a) {
    Backend& be = *l.device->backend;
    const float eps = config_.norm_eps;
    if (l.ffn_gate_inp.data && config_.shared_ffn) gemma4_moe_ffn(l, a);
    else if (l.ffn_gate_inp.data && l.expert_device != l.device) remote_moe_ffn(l, a);
    else if (l.ffn_gate_inp.data) moe_ffn(l, a);
    else dense_ffn(l, a, a.proj);
    if (l.ffn_up_shexp.data) shared_expert_ffn(l, a);
    const bool ends_here = next && !l.has_tail();  // the next layer's norm follows the add
    if (ends_here) end_sublayer(be, a.x, a.proj, l.post_ffn_norm, next->attn_norm, eps, a.xn);
    else if (l.post_ffn_norm.data) be.rms_norm(a.proj, l.post_ffn_norm, eps, a.proj);
    dump_("ffn_out", l.index, a.proj, be);
    if (!ends_here) {
        be.add(a.x, a.proj);
        if (l.has_tail()) layer_tail(l, a);
        if (next) be.rms_norm(a.x, next->attn_norm, eps, a.xn);
    }
    dump_("l_out", l.index, a.x, be);
    if (next) dump_("attn_norm", next->index, a.xn, be);
}

// llama.cpp's qwen35moe: ffn_out = experts + sigmoid(x . gate_inp_shexp) * shared(x). a.xn
// (the FFN's input) is read by the shared expert's products, then holds its output.
void Transformer::shared_expert_ffn(const Layer& l, Activations& a) {
    Backend& be = *l.device->backend;
    const int64_t T = a.x.rows, ff = config_.n_ff_shexp;
    Tensor gate = rows_of(a.gate, ff, T), up = rows_of(a.up, ff, T), logit = rows_of(a.router, 1, T);
    const MatmulOut in[] = {{&l.ffn_gate_shexp, &gate}, {&l.ffn_up_shexp, &up}, {&l.ffn_gate_inp_shexp, &logit}};
    be.matmul_shared(a.xn, in);
    be.glu(gate, up, GluAct::Silu, gate);
    be.matmul(l.ffn_down_shexp, gate, a.xn);
    be.sigmoid_scale_rows(a.xn, logit);
    dump_("ffn_shexp_gated", l.index, a.xn, be);
    be.add(a.proj, a.xn);
}

// The residual stream of this pass, from one device to another, through the host.
void Transformer::move_activations(Device& from, Device& to) {
    for (auto [src, dst] : {std::pair{&from.act.x, &to.act.x}, std::pair{&from.act.ple, &to.act.ple}})
        if (src->data) copy_rows(from, *src, to, *dst);
}

void Transformer::copy_rows(Device& from, const Tensor& src, Device& to, Tensor& dst) {
    crossing_.resize(static_cast<size_t>(src.rows * src.cols));
    from.backend->download(src, crossing_.data(), src.bytes());
    to.backend->upload(dst, crossing_.data(), dst.bytes());
}

void Transformer::forward(const BatchInfo& batch, KvCache& kv, std::vector<float>& logits, const PassStop& stop) {
    const Tensor lg = forward_device(batch, kv, stop);
    if (!lg.data) {
        logits.clear();
        return;
    }
    logits.resize(static_cast<size_t>(lg.rows * lg.cols));
    output_backend().download(lg, logits.data(), logits.size() * sizeof(float));
}

Tensor Transformer::forward_device(const BatchInfo& batch, KvCache& kv, const PassStop& stop) {
    if (batch.tokens.empty()) throw Error("forward: empty batch");
    for (int32_t t : batch.tokens)
        if (t < 0 || t >= config_.n_vocab)
            throw Error("forward: token id " + std::to_string(t) + " outside the vocabulary");
    for (Device& d : devices_) begin_pass(d, batch);

    Device* cur = layers_.front().device;
    cur->backend->embed(tok_embd_, config_.embed_scale, cur->act.x);
    dump_("inp_embd", -1, cur->act.x, *cur->backend);
    if (ple_table_) per_layer_inputs(*cur, batch);
    for (size_t i = 0; i < layers_.size(); ++i) {
        const Layer& l = layers_[i];
        if (l.device != cur) {
            move_activations(*cur, *l.device);
            cur = l.device;
        }
        // act.xn already holds attn_norm(x) where the previous layer ran here: its last add made it.
        if (i == 0 || layers_[i - 1].device != cur) {
            cur->backend->rms_norm(cur->act.x, l.attn_norm, config_.norm_eps, cur->act.xn);
            dump_("attn_norm", l.index, cur->act.xn, *cur->backend);
        }
        const Layer* next = i + 1 < layers_.size() && layers_[i + 1].device == cur ? &layers_[i + 1] : nullptr;
        if (l.shape.recurrent) linear_attention_block(l, kv.recurrent(l.state_layer), cur->act);
        else attention_block(l, kv.layer(l.kv_layer), cur->act);
        ffn_block(l, next, cur->act);
        if (stop && i + 1 < layers_.size() && stop()) {
            for (Device& d : devices_) d.backend->synchronize();  // the scratch is free for the next pass
            throw PassStopped(static_cast<int32_t>(i + 1), static_cast<int32_t>(layers_.size()));
        }
    }

    Backend& be = *cur->backend;
    Activations& a = cur->act;
    if (batch.output_rows.empty()) {
        for (Device& d : devices_) d.backend->synchronize();
        return Tensor{};
    }
    be.gather_output_rows(a.x, a.out_x);
    be.rms_norm(a.out_x, output_norm_, config_.norm_eps, a.out_x);
    dump_("result_norm", -1, a.out_x, be);
    be.matmul(output_, a.out_x, a.logits);
    if (config_.final_softcap > 0.0f) be.softcap(a.logits, config_.final_softcap);
    dump_("logits", -1, a.logits, be);
    return a.logits;
}

}  // namespace ember
