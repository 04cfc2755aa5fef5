// RoPE frequencies with YaRN (the context extension gpt-oss and others ship with), shared by
// the CPU tables (kernels/cpu/ops.cpp) and the CUDA backend's table upload, so both rotate
// by the same angles. The math is ggml's rope_yarn / ggml_rope_yarn_corr_dims:
//   theta_extrap = pos * base^(-2i/n_rot) / ff_i,  theta_interp = freq_scale * theta_extrap
//   ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1),  mix_i = ramp_i * ext_factor
//   theta = theta_interp * (1 - mix_i) + theta_extrap * mix_i          (linear in pos)
//   low/high = floor/ceil of n_rot * ln(n_ctx_orig / (beta * 2 pi)) / (2 ln base) for
//   beta_fast/beta_slow, clamped to [0, n_rot - 1]
//   cos and sin are multiplied by attn_factor, and by 1 + 0.1 ln(1 / freq_scale) when
//   ext_factor != 0 (YaRN's magnitude correction).
// With ext_factor = 0 and attn_factor = 1 this is plain RoPE with linear scaling. P is any
// struct with the fields n_rot, freq_base, freq_scale, ext_factor, attn_factor, beta_fast,
// beta_slow, n_ctx_orig (RopeParams, cpu::ops::RopeSpec). Computed in double, once per table.
#pragma once
#include <algorithm>
#include <cmath>

namespace ember {

// One YaRN correction dimension: the pair index whose wavelength fits n_ctx_orig / beta turns.
inline double yarn_corr_dim(int n_rot, int n_ctx_orig, double beta, double base) {
    return n_rot * std::log(n_ctx_orig / (beta * 2.0 * M_PI)) / (2.0 * std::log(base));
}

// The angle per position of pair i (ff: its Llama 3 style frequency divisor, 1 if none).
template <class P>
double rope_pair_freq(const P& p, int i, double ff) {
    const double pw = std::pow(double(p.freq_base), -2.0 * i / p.n_rot);
    if (p.ext_factor == 0.0f) return p.freq_scale * pw / ff;
    const double extrap = pw / ff;
    const double low = std::max(0.0, std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    const double high =
        std::min(double(p.n_rot - 1), std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
    const double y = (i - low) / std::max(0.001, high - low);
    const double mix = (1.0 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
    return p.freq_scale * extrap * (1.0 - mix) + extrap * mix;
}

// The factor cos and sin are multiplied by.
template <class P>
double rope_magnitude(const P& p) {
    const double m = p.attn_factor;
    return p.ext_factor != 0.0f ? m * (1.0 + 0.1 * std::log(1.0 / p.freq_scale)) : m;
}

}  // namespace ember
