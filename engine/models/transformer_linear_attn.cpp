// qwen35's and qwen3next's layers besides the shared blocks (llama.cpp's llama_model_qwen35
// and llama_model_qwen3next, read for the math): the linear-attention sublayer (Gated
// DeltaNet) that three of every four layers run instead of attention, and the gated q
// projection of the others.
//
// A linear-attention sublayer, for the batch's T tokens (widths: ModelConfig::ssm_*):
//   mix = x W_in                     [T x conv]   q | k | v, before the convolution
//   z = x W_z, alpha = x W_alpha, beta = x W_beta   (qwen3next: alpha, beta from x W_ba)
//   c = silu(causal_conv(mix))       the convolution's last inputs kept per sequence
//   o = gated_delta_rule(c's q, k, v, alpha, beta)   the per-head state kept per sequence
//   o = rms_norm(o per head) * silu(z);  out = o W_out
#include <array>
#include <span>
#include <tuple>

#include "engine/models/transformer.h"

namespace ember {

void Transformer::load_linear_attention(Layer& l, Backend& be, const std::string& b) {
    const ModelConfig& c = config_;
    l.state_layer = recurrent_layer_of(c, l.index);
    if (c.ssm_in_fused) {
        l.ssm_in = weight(be, b + "ssm_in.weight", c.n_embd, c.ssm_qkvz_dim());
    } else {
        l.ssm_in = weight(be, b + "attn_qkv.weight", c.n_embd, c.ssm_conv_channels());
        l.ssm_z = weight(be, b + "attn_gate.weight", c.n_embd, c.ssm_value_dim());
    }
    if (c.ssm_ba) {
        l.ssm_ba = weight(be, b + "ssm_ba.weight", c.n_embd, 2 * int64_t{c.ssm_n_v_heads});
    } else {
        l.ssm_alpha = weight(be, b + "ssm_alpha.weight", c.n_embd, c.ssm_n_v_heads);
        l.ssm_beta = weight(be, b + "ssm_beta.weight", c.n_embd, c.ssm_n_v_heads);
    }
    l.ssm_conv1d = weight(be, b + "ssm_conv1d.weight", c.ssm_conv_kernel, c.ssm_conv_channels());
    l.ssm_dt = weight(be, b + "ssm_dt.bias", c.ssm_n_v_heads, 1);
    l.ssm_a = weight(be, b + "ssm_a", c.ssm_n_v_heads, 1);
    l.ssm_norm = weight(be, b + "ssm_norm.weight", c.ssm_head_dim, 1);
    l.ssm_out = weight(be, b + "ssm_out.weight", c.ssm_value_dim(), c.n_embd);
}

void Transformer::linear_attention_block(const Layer& l, RecurrentLayer& state, Activations& a) {
    Backend& be = *l.device->backend;
    const ModelConfig& c = config_;
    const float eps = c.norm_eps;
    const int64_t T = a.x.rows, key = c.ssm_key_dim(), value = c.ssm_value_dim();
    Tensor mix = rows_of(a.lin_mix, c.ssm_conv_channels(), T), conv = rows_of(a.lin_conv, c.ssm_conv_channels(), T);
    Tensor z = rows_of(a.lin_z, value, T), out = rows_of(a.lin_out, value, T);
    project_linear_inputs(l, a, mix, z);
    dump_("linear_attn_qkv_mixed", l.index, mix, be);
    be.ssm_conv(state, mix, l.ssm_conv1d, conv);
    dump_("conv_output_silu", l.index, conv, be);
    const DeltaRuleParams p{eps, &l.ssm_dt, &l.ssm_a, c.ssm_grouped_heads};
    be.gated_delta_rule(state, conv.slice_cols(0, key), conv.slice_cols(key, key), conv.slice_cols(2 * key, value),
                        a.lin_alpha, a.lin_beta, p, out);
    dump_("attn_output", l.index, out, be);
    Tensor out_heads = out.reshape(c.ssm_head_dim), z_heads = z.reshape(c.ssm_head_dim);
    be.rms_norm(out_heads, l.ssm_norm, eps, out_heads);
    be.glu(z_heads, out_heads, GluAct::Silu, z_heads);  // norm(o) * silu(z), into z
    be.matmul(l.ssm_out, z, a.proj);
    dump_("linear_attn_out", l.index, a.proj, be);
    be.add_rms_norm(a.x, a.proj, l.ffn_norm, eps, a.xn);
    dump_("ffn_inp", l.index, a.x, be);
    dump_("ffn_norm", l.index, a.xn, be);
}

// a.lin_mix holds [q_h | gate_h] per head h (2 head_dim each): q's halves to q, the gates'
// to a.lin_z (attention_block multiplies its output by their sigmoid).
void Transformer::project_gated_q(const Layer& l, Activations& a, Tensor& q) {
    Backend& be = *l.device->backend;
    const LayerShape& s = l.shape;
    const int64_t T = a.x.rows, D = s.head_dim;
    const Tensor both = rows_of(a.lin_mix, 2 * int64_t{s.q_dim()}, T).reshape(2 * D);
    Tensor q_heads = q.reshape(D), gate = rows_of(a.lin_z, s.q_dim(), T).reshape(D);
    be.copy(both.slice_cols(0, D), q_heads);
    be.copy(both.slice_cols(D, D), gate);
}

// One product of a.xn with every input projection. qwen3next's alpha and beta go through
// lin_out (the delta rule writes it later), its first conversions' fused q/k/v/z through lin_mix.
void Transformer::project_linear_inputs(const Layer& l, Activations& a, Tensor& mix, Tensor& z) {
    const ModelConfig& c = config_;
    const int64_t T = a.x.rows;
    Tensor ba = rows_of(a.lin_out, 2 * int64_t{c.ssm_n_v_heads}, T), qkvz = rows_of(a.lin_mix, c.ssm_qkvz_dim(), T);
    std::array<MatmulOut, 4> outs{};
    size_t n = 0;
    if (l.ssm_z.data) {
        outs[n++] = {&l.ssm_in, &mix};
        outs[n++] = {&l.ssm_z, &z};
    } else {
        outs[n++] = {&l.ssm_in, &qkvz};
    }
    if (l.ssm_ba.data) {
        outs[n++] = {&l.ssm_ba, &ba};
    } else {
        outs[n++] = {&l.ssm_alpha, &a.lin_alpha};
        outs[n++] = {&l.ssm_beta, &a.lin_beta};
    }
    l.device->backend->matmul_shared(a.xn, std::span<const MatmulOut>(outs.data(), n));
    if (!l.ssm_z.data) split_qkvz(l, a, mix, z);
    if (l.ssm_ba.data) split_beta_alpha(l, ba, a);
}

// ssm_in's row holds, per key head g, [q_g | k_g | v of its r value heads | their z] (D each,
// r = n_v_heads / n_k_heads): as [T*n_k x (2 + 2r) D] rows, column slices give every key
// head's q (then k, v, z) in head order. z goes to z directly; q, k and v to three blocks of
// lin_conv, then into mix's columns, which overwrite the fused rows only once all are read.
void Transformer::split_qkvz(const Layer& l, Activations& a, Tensor& mix, Tensor& z) {
    Backend& be = *l.device->backend;
    const ModelConfig& c = config_;
    const int64_t T = a.x.rows, D = c.ssm_head_dim, nk = c.ssm_n_k_heads, r = c.ssm_n_v_heads / nk;
    const int64_t key = c.ssm_key_dim(), value = c.ssm_value_dim();
    const Tensor groups = rows_of(a.lin_mix, c.ssm_qkvz_dim(), T).reshape((2 + 2 * r) * D);
    Tensor z_groups = z.reshape(r * D);
    be.copy(groups.slice_cols((2 + r) * D, r * D), z_groups);
    const Tensor cells = rows_of(a.lin_conv, D, T * (2 * nk + nk * r));  // head-sized rows
    Tensor q = cells.slice_rows(0, T * nk), k = cells.slice_rows(T * nk, T * nk);
    Tensor v = cells.slice_rows(2 * T * nk, T * nk * r).reshape(r * D);
    be.copy(groups.slice_cols(0, D), q);
    be.copy(groups.slice_cols(D, D), k);
    be.copy(groups.slice_cols(2 * D, r * D), v);
    for (auto [part, first, cols] :
         {std::tuple{&q, int64_t{0}, key}, std::tuple{&k, key, key}, std::tuple{&v, 2 * key, value}}) {
        Tensor dst = mix.slice_cols(first, cols);
        be.copy(part->reshape(cols), dst);
    }
}

// ssm_ba's row holds, per key head g, the betas of value heads g*r .. g*r+r-1 and then their
// alphas (r = n_v_heads / n_k_heads): as [T*n_k x 2r] rows, the first r columns are the
// betas and the last r the alphas, each in value-head order once copied out.
void Transformer::split_beta_alpha(const Layer& l, const Tensor& ba, Activations& a) {
    Backend& be = *l.device->backend;
    const int64_t r = config_.ssm_n_v_heads / config_.ssm_n_k_heads;
    const Tensor groups = ba.reshape(2 * r);
    Tensor beta = a.lin_beta.reshape(r), alpha = a.lin_alpha.reshape(r);
    be.copy(groups.slice_cols(0, r), beta);
    be.copy(groups.slice_cols(r, r), alpha);
}

}  // namespace ember
