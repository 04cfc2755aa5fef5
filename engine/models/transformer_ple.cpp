// Per-layer token embeddings (gemma4 E2B/E4B) and the per-layer tail that consumes them:
// every layer gets an input of its own (n_embd_per_layer wide) made from a per-layer
// embedding table row of the token and a projection of the token's ordinary embedding;
// after the layer's FFN that input gates a small projection added to the residual stream,
// and the layer's output is scaled (layer_output_scale).
//
// The table is large ([n_vocab x n_layers*n_embd_per_layer]: several GB in E2B/E4B) and only
// the batch's rows are read per pass, so it stays in the file map on the host (as llama.cpp
// keeps it in host memory): the rows are dequantized on the host and uploaded, n_layers x
// n_embd_per_layer floats per token, laid out layer-major so that each layer's rows are one
// contiguous [T x n_embd_per_layer] slice.
#include <cmath>
#include <cstring>

#include "engine/models/transformer.h"
#include "kernels/common/error.h"
#include "kernels/cpu/quant.h"

namespace ember {

int32_t Transformer::load_pieces(const ModelConfig& c, const std::string& name) {
    return name == "per_layer_model_proj.weight" && c.n_embd_per_layer > 0 ? c.n_layers : 1;
}

void Transformer::load_per_layer_embeddings(Backend& first) {
    const ModelConfig& c = config_;
    const int64_t P = c.n_embd_per_layer, L = c.n_layers;
    const std::string table = "per_layer_token_embd.weight", proj = "per_layer_model_proj.weight";
    ple_table_ = file_->find_tensor(table);
    if (!ple_table_) throw Error(file_->path() + ": missing tensor '" + table + "'");
    if (ple_table_->dims[0] != static_cast<uint64_t>(L * P) || ple_table_->rows() != static_cast<uint64_t>(c.n_vocab) ||
        !cpu::can_dequantize(ple_table_->type))
        throw Error(file_->path() + ": tensor '" + table + "' must be " + std::to_string(c.n_vocab) + " rows of " +
                    std::to_string(L * P) + " of a type the CPU reads (it is " + std::to_string(ple_table_->dims[0]) +
                    " x " + std::to_string(ple_table_->rows()) + " " + std::string(dtype_name(ple_table_->type)) + ")");
    // The projection's rows for layer i are its output columns [i*P, (i+1)*P): one matrix each.
    const GgufTensor* pm = file_->find_tensor(proj);
    if (!pm) throw Error(file_->path() + ": missing tensor '" + proj + "'");
    if (pm->dims[0] != static_cast<uint64_t>(c.n_embd) || pm->rows() != static_cast<uint64_t>(L * P))
        throw Error(file_->path() + ": tensor '" + proj + "' has shape " + std::to_string(pm->dims[0]) + " x " +
                    std::to_string(pm->rows()) + ", expected " + std::to_string(c.n_embd) + " x " +
                    std::to_string(L * P));
    const size_t piece_bytes = Tensor::shaped(pm->type, c.n_embd, P).bytes();
    for (int64_t i = 0; i < L; ++i) {
        const auto* host = static_cast<const uint8_t*>(pm->data) + static_cast<size_t>(i) * piece_bytes;
        const std::string tag = proj + "[" + std::to_string(i) + "]";
        try {
            ple_model_proj_.push_back(first.load_weight(host, pm->type, c.n_embd, P, tag.c_str()));
        } catch (const Error& e) {
            throw Error(file_->path() + ": tensor '" + proj + "': " + e.what());
        }
    }
    ple_proj_norm_ = weight(first, "per_layer_proj_norm.weight", P, 1);
}

// The layer's per-layer embedding weights and output scale, where the file has them.
void Transformer::load_layer_tail(Layer& l, Backend& be, const std::string& prefix) {
    const ModelConfig& c = config_;
    if (c.n_embd_per_layer > 0) {
        l.pl_gate = weight(be, prefix + "inp_gate.weight", c.n_embd, c.n_embd_per_layer);
        l.pl_proj = weight(be, prefix + "proj.weight", c.n_embd_per_layer, c.n_embd);
        l.pl_post_norm = weight(be, prefix + "post_norm.weight", c.n_embd, 1);
    }
    const std::string scale = prefix + "layer_output_scale.weight";
    if (const GgufTensor* t = file_->find_tensor(scale)) {
        if (t->type != DType::F32 || t->n_elements != 1)
            throw Error(file_->path() + ": tensor '" + scale + "' must be one F32 value");
        std::memcpy(&l.out_scale, t->data, sizeof(float));
        if (!std::isfinite(l.out_scale)) throw Error(file_->path() + ": tensor '" + scale + "' is not finite");
    }
}

void Transformer::per_layer_inputs(Device& d, const BatchInfo& batch) {
    const ModelConfig& c = config_;
    Backend& be = *d.backend;
    Activations& a = d.act;
    const auto T = static_cast<int64_t>(batch.tokens.size());
    const int64_t L = c.n_layers, P = c.n_embd_per_layer;
    // The batch's table rows, * sqrt(P), regrouped [layer][token][P].
    const float table_scale = std::sqrt(static_cast<float>(P));
    std::vector<float> row(static_cast<size_t>(L * P));
    ple_host_.resize(static_cast<size_t>(L * T * P));
    const size_t row_bytes = Tensor::shaped(ple_table_->type, L * P, 1).bytes();
    for (int64_t t = 0; t < T; ++t) {
        const auto* src = static_cast<const uint8_t*>(ple_table_->data) +
                          static_cast<size_t>(batch.tokens[static_cast<size_t>(t)]) * row_bytes;
        cpu::dequantize_row(ple_table_->type, src, row.data(), L * P);
        for (int64_t i = 0; i < L; ++i)
            for (int64_t p = 0; p < P; ++p)
                ple_host_[static_cast<size_t>((i * T + t) * P + p)] = row[static_cast<size_t>(i * P + p)] * table_scale;
    }
    be.upload(a.ple, ple_host_.data(), ple_host_.size() * sizeof(float));
    // + rms_norm(proj_i(x) / sqrt(n_embd)), then / sqrt(2): layer i's input.
    const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd)), mix = 1.0f / std::sqrt(2.0f);
    for (int64_t i = 0; i < L; ++i) {
        be.matmul(ple_model_proj_[static_cast<size_t>(i)], a.x, a.ple_tmp);
        be.scale(a.ple_tmp, proj_scale);
        be.rms_norm(a.ple_tmp, ple_proj_norm_, c.norm_eps, a.ple_tmp);
        Tensor input = a.ple.slice_rows(i * T, T);
        be.add(input, a.ple_tmp);
        be.scale(input, mix);
        dump_("inp_per_layer", static_cast<int>(i), input, be);
    }
}

// x += post_norm(proj(gelu(inp_gate(x)) * input_i)); x *= out_scale.
void Transformer::layer_tail(const Layer& l, Activations& a) {
    Backend& be = *l.device->backend;
    if (l.pl_gate.data) {
        const int64_t T = a.x.rows;
        const Tensor input = a.ple.slice_rows(int64_t{l.index} * T, T);
        be.matmul(l.pl_gate, a.x, a.ple_tmp);
        be.glu(a.ple_tmp, input, true, a.ple_tmp);
        be.matmul(l.pl_proj, a.ple_tmp, a.proj);
        be.rms_norm(a.proj, l.pl_post_norm, config_.norm_eps, a.proj);
        dump_("per_layer_embd_out", l.index, a.proj, be);
        be.add(a.x, a.proj);
    }
    if (l.out_scale != 1.0f) be.scale(a.x, l.out_scale);
}

}  // namespace ember
