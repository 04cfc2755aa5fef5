#include "engine/models/transformer.h"

#include <algorithm>

#include "kernels/common/error.h"

namespace ember {

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& backend)
    : file_(std::move(file)), devices_{&backend}, config_(read_model_config(*file_)) {
    layer_dev_.assign(static_cast<size_t>(config_.n_layers), 0);
    load_weights();
}

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& first, Backend& rest, int n_first_layers)
    : file_(std::move(file)), devices_{&first, &rest}, config_(read_model_config(*file_)) {
    for (int i = 0; i < config_.n_layers; ++i) layer_dev_.push_back(i < n_first_layers ? 0 : 1);
    load_weights();
}

void Transformer::load_weights() {
    const ModelConfig& c = config_;
    scratch_.resize(devices_.size());
    const int embed_dev = layer_dev_.front(), out_dev = layer_dev_.back();
    tok_embd_ = weight(embed_dev, "token_embd.weight", c.n_embd, c.n_vocab);
    output_norm_ = weight(out_dev, "output_norm.weight", c.n_embd, 1);
    output_ = weight(out_dev, "output.weight", c.n_embd, c.n_vocab, false);
    if (!output_.data && out_dev == embed_dev) output_ = tok_embd_;  // tied embeddings
    if (!output_.data) output_ = output_embd_ = weight(out_dev, "token_embd.weight", c.n_embd, c.n_vocab);
    if (const GgufTensor* rf = file_->find_tensor("rope_freqs.weight")) {
        if (rf->type != DType::F32 || rf->n_elements != static_cast<uint64_t>(c.n_rot / 2))
            throw Error(file_->path() + ": rope_freqs.weight must be F32 with " + std::to_string(c.n_rot / 2) + " elements");
        const auto* p = reinterpret_cast<const float*>(rf->data);
        rope_freq_factors_.assign(p, p + c.n_rot / 2);
    }
    for (int i = 0; i < c.n_layers; ++i) {
        const int d = layer_dev_[static_cast<size_t>(i)];
        const std::string b = "blk." + std::to_string(i) + ".";
        Layer l;
        l.attn_norm = weight(d, b + "attn_norm.weight", c.n_embd, 1);
        l.wq = weight(d, b + "attn_q.weight", c.n_embd, c.q_dim());
        l.wk = weight(d, b + "attn_k.weight", c.n_embd, c.kv_dim());
        l.wv = weight(d, b + "attn_v.weight", c.n_embd, c.kv_dim());
        l.wo = weight(d, b + "attn_output.weight", c.q_dim(), c.n_embd);
        if (c.qkv_bias) {
            l.bq = weight(d, b + "attn_q.bias", c.q_dim(), 1);
            l.bk = weight(d, b + "attn_k.bias", c.kv_dim(), 1);
            l.bv = weight(d, b + "attn_v.bias", c.kv_dim(), 1);
        }
        if (c.qk_norm) {
            l.q_norm = weight(d, b + "attn_q_norm.weight", c.head_dim, 1);
            l.k_norm = weight(d, b + "attn_k_norm.weight", c.head_dim, 1);
        }
        if (c.post_norms) {
            l.post_attn_norm = weight(d, b + "post_attention_norm.weight", c.n_embd, 1);
            l.post_ffn_norm = weight(d, b + "post_ffw_norm.weight", c.n_embd, 1);
        }
        l.ffn_norm = weight(d, b + "ffn_norm.weight", c.n_embd, 1);
        l.w_gate = weight(d, b + "ffn_gate.weight", c.n_embd, c.n_ff);
        l.w_up = weight(d, b + "ffn_up.weight", c.n_embd, c.n_ff);
        l.w_down = weight(d, b + "ffn_down.weight", c.n_ff, c.n_embd);
        layers_.push_back(l);
    }
}

Transformer::~Transformer() {
    for (int d = 0; d < static_cast<int>(devices_.size()); ++d) free_scratch(d);
    for (size_t i = 0; i < layers_.size(); ++i) {
        Layer& l = layers_[i];
        for (Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
                          &l.post_attn_norm, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down, &l.post_ffn_norm})
            free_weight(layer_dev_[i], *t);
    }
    const int embed_dev = layer_dev_.front(), out_dev = layer_dev_.back();
    if (output_.data != tok_embd_.data) free_weight(out_dev, output_);
    free_weight(embed_dev, tok_embd_);
    free_weight(out_dev, output_norm_);
}

std::vector<Backend*> Transformer::layer_backends() const {
    std::vector<Backend*> out;
    for (int d : layer_dev_) out.push_back(devices_[static_cast<size_t>(d)]);
    return out;
}

void Transformer::free_weight(int dev, Tensor& t) {
    if (t.data) devices_[static_cast<size_t>(dev)]->free(t);
}

Tensor Transformer::weight(int dev, const std::string& name, int64_t cols, int64_t rows, bool required) {
    const GgufTensor* t = file_->find_tensor(name);
    if (!t) {
        if (required) throw Error(file_->path() + ": missing tensor '" + name + "'");
        return {};
    }
    if (static_cast<int64_t>(t->dims[0]) != cols || static_cast<int64_t>(t->rows()) != rows)
        throw Error(file_->path() + ": tensor '" + name + "' has shape " + std::to_string(t->dims[0]) + " x " +
                    std::to_string(t->rows()) + ", expected " + std::to_string(cols) + " x " + std::to_string(rows));
    try {
        return devices_[static_cast<size_t>(dev)]->load_weight(t->data, t->type, cols, rows, name.c_str());
    } catch (const Error& e) {
        throw Error(file_->path() + ": tensor '" + name + "': " + e.what());
    }
}

KvCacheConfig Transformer::kv_config(int64_t n_ctx, int32_t n_seqs, DType kv_type) const {
    KvCacheConfig k;
    k.n_layers = config_.n_layers;
    k.n_kv_heads = config_.n_kv_heads;
    k.head_dim = config_.head_dim;
    k.type = kv_type;
    k.n_blocks = KvCacheConfig::blocks_for(n_ctx, n_seqs, k.block_tokens);
    return k;
}

void Transformer::free_scratch(int dev) {
    Scratch& s = scratch_[static_cast<size_t>(dev)];
    for (Tensor* t : {&s.x, &s.xn, &s.q, &s.k, &s.v, &s.attn, &s.proj, &s.gate, &s.up, &s.out_x, &s.logits})
        if (t->data) devices_[static_cast<size_t>(dev)]->free(*t);
    s = Scratch{};
}

// Activation buffers sized for the largest batch so far; reused across passes.
void Transformer::ensure_scratch(int dev, int64_t n_tokens, int64_t n_outputs) {
    Scratch& s = scratch_[static_cast<size_t>(dev)];
    if (n_tokens <= s.tokens && n_outputs <= s.outputs) return;
    const int64_t T = std::max(n_tokens, s.tokens), O = std::max(n_outputs, s.outputs);
    free_scratch(dev);
    const ModelConfig& c = config_;
    auto act = [&](int64_t cols, int64_t rows, const char* tag) {
        return devices_[static_cast<size_t>(dev)]->alloc(MemoryKind::Activations, DType::F32, cols, rows, tag);
    };
    s.x = act(c.n_embd, T, "x");
    s.xn = act(c.n_embd, T, "xn");
    s.q = act(c.q_dim(), T, "q");
    s.k = act(c.kv_dim(), T, "k");
    s.v = act(c.kv_dim(), T, "v");
    s.attn = act(c.q_dim(), T, "attn");
    s.proj = act(c.n_embd, T, "proj");
    s.gate = act(c.n_ff, T, "gate");
    s.up = act(c.n_ff, T, "up");
    s.out_x = act(c.n_embd, O, "out_x");
    s.logits = act(c.n_vocab, O, "logits");
    s.tokens = T;
    s.outputs = O;
}

void Transformer::attention_block(int il, const BatchInfo& batch, KvCache& kv, Scratch& s) {
    const ModelConfig& c = config_;
    Backend& be = *devices_[static_cast<size_t>(layer_dev_[static_cast<size_t>(il)])];
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t T = static_cast<int64_t>(batch.tokens.size());
    Tensor xn = s.xn.slice_rows(0, T), q = s.q.slice_rows(0, T), k = s.k.slice_rows(0, T), v = s.v.slice_rows(0, T);
    Tensor attn = s.attn.slice_rows(0, T), proj = s.proj.slice_rows(0, T), x = s.x.slice_rows(0, T);

    be.rms_norm(x, l.attn_norm, c.norm_eps, xn);
    be.matmul(l.wq, xn, q, c.qkv_bias ? &l.bq : nullptr);
    be.matmul(l.wk, xn, k, c.qkv_bias ? &l.bk : nullptr);
    be.matmul(l.wv, xn, v, c.qkv_bias ? &l.bv : nullptr);
    Tensor qh = q.reshape(c.head_dim), kh = k.reshape(c.head_dim);
    if (c.qk_norm) {
        be.rms_norm(qh, l.q_norm, c.norm_eps, qh);
        be.rms_norm(kh, l.k_norm, c.norm_eps, kh);
    }
    const bool sliding = c.layer_sliding[static_cast<size_t>(il)];
    RopeParams rp;
    rp.head_dim = c.head_dim;
    rp.n_rot = c.n_rot;
    rp.neox = c.rope_neox;
    rp.freq_base = sliding ? c.rope_base_local : c.rope_base;
    rp.freq_scale = sliding ? 1.0f : c.rope_scale;
    rp.freq_factors = !sliding && !rope_freq_factors_.empty() ? rope_freq_factors_.data() : nullptr;
    rp.n_heads = c.n_heads;
    be.rope(qh, rp);
    rp.n_heads = c.n_kv_heads;
    be.rope(kh, rp);

    KvLayer& cache = kv.layer(il);
    be.store_kv(cache, k, v);
    AttentionParams ap;
    ap.n_heads = c.n_heads;
    ap.n_kv_heads = c.n_kv_heads;
    ap.head_dim = c.head_dim;
    ap.scale = c.attn_scale;
    ap.window = sliding ? c.sliding_window : 0;
    be.attention(cache, q, ap, attn);
    be.matmul(l.wo, attn, proj);
    if (c.post_norms) be.rms_norm(proj, l.post_attn_norm, c.norm_eps, proj);
    be.add(x, proj);
}

void Transformer::ffn_block(int il, Scratch& s) {
    const ModelConfig& c = config_;
    Backend& be = *devices_[static_cast<size_t>(layer_dev_[static_cast<size_t>(il)])];
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t T = s.tokens_in_pass;
    Tensor x = s.x.slice_rows(0, T), xn = s.xn.slice_rows(0, T), proj = s.proj.slice_rows(0, T);
    Tensor gate = s.gate.slice_rows(0, T), up = s.up.slice_rows(0, T);
    be.rms_norm(x, l.ffn_norm, c.norm_eps, xn);
    be.matmul(l.w_gate, xn, gate);
    be.matmul(l.w_up, xn, up);
    be.glu(gate, up, c.gelu, gate);
    be.matmul(l.w_down, gate, proj);
    if (c.post_norms) be.rms_norm(proj, l.post_ffn_norm, c.norm_eps, proj);
    be.add(x, proj);
}

// The residual stream of this pass, from one device's scratch to another's.
void Transformer::move_activations(int from, int to, int64_t n_tokens) {
    const Tensor src = scratch_[static_cast<size_t>(from)].x.slice_rows(0, n_tokens);
    Tensor dst = scratch_[static_cast<size_t>(to)].x.slice_rows(0, n_tokens);
    crossing_.resize(static_cast<size_t>(n_tokens * config_.n_embd));
    devices_[static_cast<size_t>(from)]->download(src, crossing_.data(), src.bytes());
    devices_[static_cast<size_t>(to)]->upload(dst, crossing_.data(), dst.bytes());
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
    const ModelConfig& c = config_;
    const int64_t T = static_cast<int64_t>(batch.tokens.size());
    const int64_t O = static_cast<int64_t>(batch.output_rows.size());
    if (T == 0) throw Error("forward: empty batch");
    for (int32_t t : batch.tokens)
        if (t < 0 || t >= c.n_vocab) throw Error("forward: token id " + std::to_string(t) + " outside the vocabulary");
    for (int d = 0; d < static_cast<int>(devices_.size()); ++d) {
        ensure_scratch(d, T, O);
        scratch_[static_cast<size_t>(d)].tokens_in_pass = T;
        devices_[static_cast<size_t>(d)]->set_batch(batch);
    }
    int cur = layer_dev_.front();
    Tensor x0 = scratch_[static_cast<size_t>(cur)].x.slice_rows(0, T);
    devices_[static_cast<size_t>(cur)]->embed(tok_embd_, c.embed_scale, x0);
    for (int il = 0; il < c.n_layers; ++il) {
        const int d = layer_dev_[static_cast<size_t>(il)];
        if (d != cur) {
            move_activations(cur, d, T);
            cur = d;
        }
        attention_block(il, batch, kv, scratch_[static_cast<size_t>(d)]);
        ffn_block(il, scratch_[static_cast<size_t>(d)]);
    }
    Backend& out = *devices_[static_cast<size_t>(cur)];
    Scratch& s = scratch_[static_cast<size_t>(cur)];
    if (O == 0) {
        for (Backend* b : devices_) b->synchronize();
        return Tensor{};
    }
    Tensor x = s.x.slice_rows(0, T), out_x = s.out_x.slice_rows(0, O), lg = s.logits.slice_rows(0, O);
    out.gather_output_rows(x, out_x);
    out.rms_norm(out_x, output_norm_, c.norm_eps, out_x);
    out.matmul(output_, out_x, lg);
    return lg;
}

}  // namespace ember
