#include "engine/models/transformer.h"

#include <algorithm>

#include "engine/core/mapped_file.h"
#include "kernels/common/alloc_size.h"
#include "kernels/common/error.h"

namespace ember {

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& backend)
    : file_(std::move(file)), config_(read_model_config(*file_)) {
    devices_.resize(1);
    devices_[0].backend = &backend;
    load_weights(std::vector<int>(static_cast<size_t>(config_.n_layers), 0));
}

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& first, Backend& rest, int n_first_layers)
    : file_(std::move(file)), config_(read_model_config(*file_)) {
    devices_.resize(2);
    devices_[0].backend = &first;
    devices_[1].backend = &rest;
    std::vector<int> layer_device;
    for (int i = 0; i < config_.n_layers; ++i) layer_device.push_back(i < n_first_layers ? 0 : 1);
    load_weights(layer_device);
}

void Transformer::load_weights(const std::vector<int>& layer_device) {
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
    for (size_t i = 0; i < layer_device.size(); ++i)
        layers_.push_back(load_layer(static_cast<int>(i), devices_[static_cast<size_t>(layer_device[i])]));
}

Transformer::Layer Transformer::load_layer(int index, Device& device) {
    const ModelConfig& c = config_;
    Backend& be = *device.backend;
    const std::string b = "blk." + std::to_string(index) + ".";
    Layer l;
    l.index = index;
    l.device = &device;

    // Sliding-window layers use their own rope base, unscaled (gemma3) or scaled (gpt-oss).
    const bool sliding = c.layer_sliding[static_cast<size_t>(index)];
    const bool scaled = !sliding || c.rope_scale_local;
    l.rope_q.n_heads = c.n_heads;
    l.rope_q.head_dim = c.head_dim;
    l.rope_q.n_rot = c.n_rot;
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
    l.rope_k.n_heads = c.n_kv_heads;
    l.attention.n_heads = c.n_heads;
    l.attention.n_kv_heads = c.n_kv_heads;
    l.attention.head_dim = c.head_dim;
    l.attention.scale = c.attn_scale;
    l.attention.window = sliding ? c.sliding_window : 0;

    l.attn_norm = weight(be, b + "attn_norm.weight", c.n_embd, 1);
    l.wq = weight(be, b + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = weight(be, b + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = weight(be, b + "attn_v.weight", c.n_embd, c.kv_dim());
    l.wo = weight(be, b + "attn_output.weight", c.q_dim(), c.n_embd);
    if (c.out_bias) l.bo = weight(be, b + "attn_output.bias", c.n_embd, 1);
    if (c.attn_sinks) l.sinks = weight(be, b + "attn_sinks.weight", c.n_heads, 1);
    if (c.qkv_bias) {
        l.bq = weight(be, b + "attn_q.bias", c.q_dim(), 1);
        l.bk = weight(be, b + "attn_k.bias", c.kv_dim(), 1);
        l.bv = weight(be, b + "attn_v.bias", c.kv_dim(), 1);
    }
    if (c.qk_norm) {
        l.q_norm = weight(be, b + "attn_q_norm.weight", c.head_dim, 1);
        l.k_norm = weight(be, b + "attn_k_norm.weight", c.head_dim, 1);
    }
    if (c.post_norms) {
        l.post_attn_norm = weight(be, b + "post_attention_norm.weight", c.n_embd, 1);
        l.post_ffn_norm = weight(be, b + "post_ffw_norm.weight", c.n_embd, 1);
    }
    l.ffn_norm = weight(be, b + c.ffn_norm + ".weight", c.n_embd, 1);
    if (c.moe()) {
        l.ffn_gate_inp = weight(be, b + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
        l.ffn_gate_exps = expert_weight(be, b + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp);
        l.ffn_up_exps = expert_weight(be, b + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp);
        l.ffn_down_exps = expert_weight(be, b + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd);
        if (c.expert_biases) {
            l.ffn_gate_inp_b = weight(be, b + "ffn_gate_inp.bias", c.n_expert, 1);
            l.ffn_gate_exps_b = weight(be, b + "ffn_gate_exps.bias", c.n_ff_exp, c.n_expert);
            l.ffn_up_exps_b = weight(be, b + "ffn_up_exps.bias", c.n_ff_exp, c.n_expert);
            l.ffn_down_exps_b = weight(be, b + "ffn_down_exps.bias", c.n_embd, c.n_expert);
        }
        return l;
    }
    l.w_gate = weight(be, b + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = weight(be, b + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = weight(be, b + "ffn_down.weight", c.n_ff, c.n_embd);
    return l;
}

Transformer::~Transformer() {
    for (Device& d : devices_) free_scratch(d);
    for (Layer& l : layers_)
        for (Tensor* t : l.weights())
            if (t->data) l.device->backend->free(*t);
    if (layers_.empty()) return;
    Backend& first = *layers_.front().device->backend;
    Backend& last = *layers_.back().device->backend;
    if (output_.data && output_.data != tok_embd_.data) last.free(output_);
    if (tok_embd_.data) first.free(tok_embd_);
    if (output_norm_.data) last.free(output_norm_);
}

std::vector<Backend*> Transformer::layer_backends() const {
    std::vector<Backend*> out;
    for (const Layer& l : layers_) out.push_back(l.device->backend);
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

KvCacheConfig Transformer::kv_config(const ModelConfig& c, int64_t n_ctx, int32_t n_seqs, DType kv_type) {
    KvCacheConfig k;
    k.n_layers = c.n_layers;
    k.n_kv_heads = c.n_kv_heads;
    k.head_dim = c.head_dim;
    k.type = kv_type;
    k.n_blocks = KvCacheConfig::blocks_for(n_ctx, n_seqs, k.block_tokens);
    return k;
}

std::vector<Transformer::ScratchBuffer> Transformer::scratch_layout(const ModelConfig& c, int64_t T, int64_t O) {
    const int64_t ff = c.moe() ? 0 : c.n_ff, slots = T * c.n_expert_used;
    std::vector<ScratchBuffer> b = {{"x", c.n_embd, T},     {"xn", c.n_embd, T},     {"q", c.q_dim(), T},
                                    {"k", c.kv_dim(), T},   {"v", c.kv_dim(), T},    {"attn", c.q_dim(), T},
                                    {"proj", c.n_embd, T},  {"gate", ff, T},         {"up", ff, T},
                                    {"out_x", c.n_embd, O}, {"logits", c.n_vocab, O}};
    if (c.moe()) {
        b.push_back({"router", c.n_expert, T});
        b.push_back({"expert_ids", c.n_expert_used, T, DType::I32});
        b.push_back({"expert_weights", c.n_expert_used, T});
        b.push_back({"expert_gate", c.n_ff_exp, slots});
        b.push_back({"expert_up", c.n_ff_exp, slots});
        b.push_back({"expert_down", c.n_embd, slots});
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
    const auto layout = scratch_layout(config_, T, O);
    const auto buffers = s.buffers();
    for (size_t i = 0; i < layout.size(); ++i)
        *buffers[i] =
            d.backend->alloc(MemoryKind::Activations, layout[i].type, layout[i].cols, layout[i].rows, layout[i].tag);
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
    a.q_heads = a.q.reshape(config_.head_dim);
    a.k_heads = a.k.reshape(config_.head_dim);
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
    d.backend->set_batch(batch);
}

void Transformer::attention_block(const Layer& l, KvLayer& cache, Activations& a) {
    Backend& be = *l.device->backend;
    const float eps = config_.norm_eps;
    const MatmulOut qkv[] = {{&l.wq, &a.q, &l.bq}, {&l.wk, &a.k, &l.bk}, {&l.wv, &a.v, &l.bv}};
    be.matmul_shared(a.xn, qkv);
    if (l.q_norm.data) be.rms_norm(a.q_heads, l.q_norm, eps, a.q_heads);
    if (l.k_norm.data) be.rms_norm(a.k_heads, l.k_norm, eps, a.k_heads);
    be.rope(a.q_heads, l.rope_q);
    be.rope(a.k_heads, l.rope_k);
    dump_("q", l.index, a.q, be);
    dump_("k", l.index, a.k, be);
    dump_("v", l.index, a.v, be);
    be.store_kv(cache, a.k, a.v);
    AttentionParams attention = l.attention;
    attention.sinks = l.sinks.data ? &l.sinks : nullptr;  // not kept in l.attention: layers_ may move
    be.attention(cache, a.q, attention, a.attn);
    dump_("kqv_out", l.index, a.attn, be);
    be.matmul(l.wo, a.attn, a.proj, &l.bo);
    if (l.post_attn_norm.data) be.rms_norm(a.proj, l.post_attn_norm, eps, a.proj);
    dump_("attn_out", l.index, a.proj, be);
    be.add_rms_norm(a.x, a.proj, l.ffn_norm, eps, a.xn);
    dump_("ffn_inp", l.index, a.x, be);
    dump_("ffn_norm", l.index, a.xn, be);
}

void Transformer::dense_ffn(const Layer& l, Activations& a) {
    Backend& be = *l.device->backend;
    const MatmulOut gate_up[] = {{&l.w_gate, &a.gate}, {&l.w_up, &a.up}};
    be.matmul_shared(a.xn, gate_up);
    dump_("ffn_gate", l.index, a.gate, be);
    dump_("ffn_up", l.index, a.up, be);
    be.glu(a.gate, a.up, glu_act(), a.gate);
    dump_("ffn_glu", l.index, a.gate, be);
    be.matmul(l.w_down, a.gate, a.proj);
}

// llama.cpp's build_moe_ffn for qwen3moe: softmax router, top-k, renormalised weights, SwiGLU
// experts, the weighted sum (kernels/backend.h, "mixture of experts"). gpt-oss: biases on the
// router and the experts, softmax over the top-k logits, the clamped SwiGLU.
void Transformer::moe_ffn(const Layer& l, Activations& a) {
    Backend& be = *l.device->backend;
    const ModelConfig& c = config_;
    be.matmul(l.ffn_gate_inp, a.xn, a.router, &l.ffn_gate_inp_b);
    dump_("ffn_moe_logits", l.index, a.router, be);
    const MoeGating gating = c.expert_softmax_top_k ? MoeGating::SoftmaxTopK : MoeGating::Softmax;
    const MoeRouting routing{c.n_expert_used, gating, c.expert_weights_norm, c.expert_weights_scale};
    be.moe_route(a.router, routing, a.expert_ids, a.expert_weights);
    be.moe_matmul(l.ffn_gate_exps, c.n_expert, a.xn, a.expert_ids, a.expert_gate, &l.ffn_gate_exps_b);
    be.moe_matmul(l.ffn_up_exps, c.n_expert, a.xn, a.expert_ids, a.expert_up, &l.ffn_up_exps_b);
    be.glu(a.expert_gate, a.expert_up, glu_act(), a.expert_gate);
    be.moe_matmul(l.ffn_down_exps, c.n_expert, a.expert_gate, a.expert_ids, a.expert_down, &l.ffn_down_exps_b);
    be.moe_combine(a.expert_down, a.expert_weights, a.proj);
}

void Transformer::ffn_block(const Layer& l, const Layer* next, Activations& a) {
    Backend& be = *l.device->backend;
    const float eps = config_.norm_eps;
    if (l.ffn_gate_inp.data) moe_ffn(l, a);
    else dense_ffn(l, a);
    if (l.post_ffn_norm.data) be.rms_norm(a.proj, l.post_ffn_norm, eps, a.proj);
    dump_("ffn_out", l.index, a.proj, be);
    if (next) be.add_rms_norm(a.x, a.proj, next->attn_norm, eps, a.xn);
    else be.add(a.x, a.proj);
    dump_("l_out", l.index, a.x, be);
    if (next) dump_("attn_norm", next->index, a.xn, be);
}

// The residual stream of this pass, from one device to another, through the host.
void Transformer::move_activations(Device& from, Device& to) {
    crossing_.resize(static_cast<size_t>(from.act.x.rows * from.act.x.cols));
    from.backend->download(from.act.x, crossing_.data(), from.act.x.bytes());
    to.backend->upload(to.act.x, crossing_.data(), to.act.x.bytes());
}

void Transformer::forward(const BatchInfo& batch, KvCache& kv, std::vector<float>& logits) {
    const Tensor lg = forward_device(batch, kv);
    if (!lg.data) {
        logits.clear();
        return;
    }
    logits.resize(static_cast<size_t>(lg.rows * lg.cols));
    output_backend().download(lg, logits.data(), logits.size() * sizeof(float));
}

Tensor Transformer::forward_device(const BatchInfo& batch, KvCache& kv) {
    if (batch.tokens.empty()) throw Error("forward: empty batch");
    for (int32_t t : batch.tokens)
        if (t < 0 || t >= config_.n_vocab)
            throw Error("forward: token id " + std::to_string(t) + " outside the vocabulary");
    for (Device& d : devices_) begin_pass(d, batch);

    Device* cur = layers_.front().device;
    cur->backend->embed(tok_embd_, config_.embed_scale, cur->act.x);
    dump_("inp_embd", -1, cur->act.x, *cur->backend);
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
        attention_block(l, kv.layer(l.index), cur->act);
        ffn_block(l, next, cur->act);
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
    dump_("logits", -1, a.logits, be);
    return a.logits;
}

}  // namespace ember
