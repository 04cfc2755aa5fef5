// A debug dump of the forward pass's named intermediates, in the spirit of llama.cpp's graph
// callback: `EMBER_DUMP=attn_norm,ffn_out ember run ...` prints, per layer, each named
// tensor's shape, a few statistics and its first values to stderr. Off by default; when off
// the forward pass pays one null check per named tensor.
//
// Names (per layer unless marked; shapes are rows x cols, T = tokens in the pass, O = output
// rows): inp_embd* [T x n_embd], attn_norm [T x n_embd], q [T x q_dim] and k [T x kv_dim]
// (after the q/k norms and rope: what attention reads), v [T x kv_dim], kqv_out [T x q_dim]
// (attention output), attn_out [T x n_embd] (after the output projection and post-norm),
// ffn_inp [T x n_embd] (residual after attention), ffn_norm, ffn_gate and ffn_up [T x n_ff],
// ffn_glu [T x n_ff], ffn_out [T x n_embd], l_out [T x n_embd] (the layer's output),
// result_norm* [O x n_embd], logits* [O x n_vocab]. (* once per pass, layer -1.)
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ember {

// Called with each selected tensor as soon as it is computed (before its buffer is reused);
// `backend` holds it (download from there). layer is -1 for the tensors outside the layers.
using DumpSink = std::function<void(const std::string& name, int layer, const Tensor& t, Backend& backend)>;

class TensorDump {
public:
    TensorDump() = default;
    // `names`: the names to pass to `sink`; "all" selects every name.
    TensorDump(std::vector<std::string> names, DumpSink sink);
    // From $EMBER_DUMP (comma-separated names): a dump printing to stderr; inactive if unset.
    static TensorDump from_env();

    bool active() const { return static_cast<bool>(sink_); }
    // Hands `t` to the sink if `name` is selected.
    void operator()(const char* name, int layer, const Tensor& t, Backend& backend) const {
        if (sink_) pass_on(name, layer, t, backend);
    }

private:
    void pass_on(const char* name, int layer, const Tensor& t, Backend& backend) const;  // (not "emit": a Qt macro)
    std::vector<std::string> names_;
    bool all_ = false;
    DumpSink sink_;
};

// A sink printing one line per tensor to `out`: layer, name, shape, mean, rms, min, max and
// the first `n_values` values.
DumpSink print_dump_sink(std::FILE* out, int n_values = 6);

}  // namespace ember
