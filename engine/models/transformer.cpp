#include "engine/models/transformer.h"

#include <algorithm>

#include "kernels/common/error.h"

namespace ember {

Transformer::Transformer(std::shared_ptr<const GgufFile> file, Backend& backend)
    : file_(std::move(file)), backend_(backend), config_(read_model_config(*file_)) {
    const ModelConfig& c = config_;
    tok_embd_ = weight("token_embd.weight", c.n_embd, c.n_vocab);
    output_norm_ = weight("output_norm.weight", c.n_embd, 1);
    output_ = weight("output.weight", c.n_embd, c.n_vocab, false);
    if (!output_.data) output_ = tok_embd_;  // tied embeddings
    if (const GgufTensor* rf = file_->find_tensor("rope_freqs.weight")) {
        if (rf->type != DType::F32 || rf->n_elements != static_cast<uint64_t>(c.n_rot / 2))
            throw Error(file_->path() + ": rope_freqs.weight must be F32 with " + std::to_string(c.n_rot / 2) + " elements");
        const auto* p = reinterpret_cast<const float*>(rf->data);
        rope_freq_factors_.assign(p, p + c.n_rot / 2);
    }
    for (int i = 0; i < c.n_layers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        Layer l;
        l.attn_norm = weight(b + "attn_norm.weight", c.n_embd, 1);
        l.wq = weight(b + "attn_q.weight", c.n_embd, c.q_dim());
        l.wk = weight(b + "attn_k.weight", c.n_embd, c.kv_dim());
        l.wv = weight(b + "attn_v.weight", c.n_embd, c.kv_dim());
        l.wo = weight(b + "attn_output.weight", c.q_dim(), c.n_embd);
        if (c.qkv_bias) {
            l.bq = weight(b + "attn_q.bias", c.q_dim(), 1);
            l.bk = weight(b + "attn_k.bias", c.kv_dim(), 1);
            l.bv = weight(b + "attn_v.bias", c.kv_dim(), 1);
        }
        if (c.qk_norm) {
            l.q_norm = weight(b + "attn_q_norm.weight", c.head_dim, 1);
            l.k_norm = weight(b + "attn_k_norm.weight", c.head_dim, 1);
        }
        if (c.post_norms) {
            l.post_attn_norm = weight(b + "post_attention_norm.weight", c.n_embd, 1);
            l.post_ffn_norm = weight(b + "post_ffw_norm.weight", c.n_embd, 1);
        }
        l.ffn_norm = weight(b + "ffn_norm.weight", c.n_embd, 1);
        l.w_gate = weight(b + "ffn_gate.weight", c.n_embd, c.n_ff);
        l.w_up = weight(b + "ffn_up.weight", c.n_embd, c.n_ff);
        l.w_down = weight(b + "ffn_down.weight", c.n_ff, c.n_embd);
        layers_.push_back(l);
    }
}

Transformer::~Transformer() {
    free_scratch();
    // Weights are released with the backend's own bookkeeping (CPU: file map views).
    auto drop = [&](Tensor& t) { if (t.data) backend_.free(t); };
    for (auto& l : layers_) {
        for (Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
                          &l.post_attn_norm, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down, &l.post_ffn_norm})
            drop(*t);
    }
    if (output_.data != tok_embd_.data) drop(output_);
    drop(tok_embd_);
    drop(output_norm_);
}

Tensor Transformer::weight(const std::string& name, int64_t cols, int64_t rows, bool required) {
    const GgufTensor* t = file_->find_tensor(name);
    if (!t) {
        if (required) throw Error(file_->path() + ": missing tensor '" + name + "'");
        return {};
    }
    if (static_cast<int64_t>(t->dims[0]) != cols || static_cast<int64_t>(t->rows()) != rows)
        throw Error(file_->path() + ": tensor '" + name + "' has shape " + std::to_string(t->dims[0]) + " x " +
                    std::to_string(t->rows()) + ", expected " + std::to_string(cols) + " x " + std::to_string(rows));
    try {
        return backend_.load_weight(t->data, t->type, cols, rows, name.c_str());
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

void Transformer::free_scratch() {
    Scratch& s = scratch_;
    for (Tensor* t : {&s.x, &s.xn, &s.q, &s.k, &s.v, &s.attn, &s.proj, &s.gate, &s.up, &s.out_x, &s.logits})
        if (t->data) backend_.free(*t);
    s = Scratch{};
}

// Activation buffers sized for the largest batch so far; reused across passes.
void Transformer::ensure_scratch(int64_t n_tokens, int64_t n_outputs) {
    Scratch& s = scratch_;
    if (n_tokens <= s.tokens && n_outputs <= s.outputs) return;
    const int64_t T = std::max(n_tokens, s.tokens), O = std::max(n_outputs, s.outputs);
    free_scratch();
    const ModelConfig& c = config_;
    auto act = [&](int64_t cols, int64_t rows, const char* tag) {
        return backend_.alloc(MemoryKind::Activations, DType::F32, cols, rows, tag);
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
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t T = static_cast<int64_t>(batch.tokens.size());
    Tensor xn = s.xn.slice_rows(0, T), q = s.q.slice_rows(0, T), k = s.k.slice_rows(0, T), v = s.v.slice_rows(0, T);
    Tensor attn = s.attn.slice_rows(0, T), proj = s.proj.slice_rows(0, T), x = s.x.slice_rows(0, T);

    backend_.rms_norm(x, l.attn_norm, c.norm_eps, xn);
    backend_.matmul(l.wq, xn, q, c.qkv_bias ? &l.bq : nullptr);
    backend_.matmul(l.wk, xn, k, c.qkv_bias ? &l.bk : nullptr);
    backend_.matmul(l.wv, xn, v, c.qkv_bias ? &l.bv : nullptr);
    Tensor qh = q.reshape(c.head_dim), kh = k.reshape(c.head_dim);
    if (c.qk_norm) {
        backend_.rms_norm(qh, l.q_norm, c.norm_eps, qh);
        backend_.rms_norm(kh, l.k_norm, c.norm_eps, kh);
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
    backend_.rope(qh, rp);
    rp.n_heads = c.n_kv_heads;
    backend_.rope(kh, rp);

    KvLayer& cache = kv.layer(il);
    backend_.store_kv(cache, k, v);
    AttentionParams ap;
    ap.n_heads = c.n_heads;
    ap.n_kv_heads = c.n_kv_heads;
    ap.head_dim = c.head_dim;
    ap.scale = c.attn_scale;
    ap.window = sliding ? c.sliding_window : 0;
    backend_.attention(cache, q, ap, attn);
    backend_.matmul(l.wo, attn, proj);
    if (c.post_norms) backend_.rms_norm(proj, l.post_attn_norm, c.norm_eps, proj);
    backend_.add(x, proj);
}

void Transformer::ffn_block(int il, Scratch& s) {
    const ModelConfig& c = config_;
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t T = s.tokens_in_pass;
    Tensor x = s.x.slice_rows(0, T), xn = s.xn.slice_rows(0, T), proj = s.proj.slice_rows(0, T);
    Tensor gate = s.gate.slice_rows(0, T), up = s.up.slice_rows(0, T);
    backend_.rms_norm(x, l.ffn_norm, c.norm_eps, xn);
    backend_.matmul(l.w_gate, xn, gate);
    backend_.matmul(l.w_up, xn, up);
    backend_.glu(gate, up, c.gelu, gate);
    backend_.matmul(l.w_down, gate, proj);
    if (c.post_norms) backend_.rms_norm(proj, l.post_ffn_norm, c.norm_eps, proj);
    backend_.add(x, proj);
}

void Transformer::forward(const BatchInfo& batch, KvCache& kv, std::vector<float>& logits) {
    const ModelConfig& c = config_;
    const int64_t T = static_cast<int64_t>(batch.tokens.size());
    const int64_t O = static_cast<int64_t>(batch.output_rows.size());
    if (T == 0) throw Error("forward: empty batch");
    for (int32_t t : batch.tokens)
        if (t < 0 || t >= c.n_vocab) throw Error("forward: token id " + std::to_string(t) + " outside the vocabulary");
    ensure_scratch(T, O);
    Scratch& s = scratch_;
    s.tokens_in_pass = T;
    backend_.set_batch(batch);
    Tensor x = s.x.slice_rows(0, T);
    backend_.embed(tok_embd_, c.embed_scale, x);
    for (int il = 0; il < c.n_layers; ++il) {
        attention_block(il, batch, kv, s);
        ffn_block(il, s);
    }
    if (O == 0) {
        backend_.synchronize();
        logits.clear();
        return;
    }
    Tensor out_x = s.out_x.slice_rows(0, O), lg = s.logits.slice_rows(0, O);
    backend_.gather_output_rows(x, out_x);
    backend_.rms_norm(out_x, output_norm_, c.norm_eps, out_x);
    backend_.matmul(output_, out_x, lg);
    logits.resize(static_cast<size_t>(O * c.n_vocab));
    backend_.download(lg, logits.data(), logits.size() * sizeof(float));
}

}  // namespace ember
