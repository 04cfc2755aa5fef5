// Which type each tensor gets when a model is quantized to a named scheme ("Q4_0", "Q4_K_M",
// "F16", ...). One place for the per-tensor choices people know from llama.cpp's quantizer,
// used by both `ember quantize` (engine/quant/quantizer.h) and `ember synth`
// (engine/models/synthetic.h), so that a synthetic Q4_K_M file has the same layout as a real one.
//
// The rules (llama.cpp's, for the dense architectures Ember runs):
//  - Only 2-D "*.weight" tensors that are not norms are quantized; the rest keep their type.
//  - Plain types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) are "pure": every quantized
//    tensor gets that type, like `llama-quantize --pure`.
//  - Q4_K_M / Q5_K_M: Q4_K / Q5_K, except Q6_K for the output matrix (or the token embedding
//    when it doubles as the output), and for attn_v and ffn_down of the layers where
//    more_bits(layer) holds (the first and last eighth, and every third layer between).
//  - MXFP4_MOE (gpt-oss's layout): MXFP4 for the expert tensors (3-D, more than one expert:
//    blk.N.ffn_{gate,up,down}_exps.weight), Q8_0 for every other weight matrix, the output
//    included.
//  - A row length that is not a multiple of the type's block falls back to a 32-block type
//    (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; the output rule picks Q8_0 directly), and to
//    F16 when not even 32 divides it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/dtype.h"

namespace ember {

enum class QuantMix { Pure, KM, MoeMxfp4 };  // KM: the Q4_K_M / Q5_K_M rules; MoeMxfp4: MXFP4_MOE

struct QuantScheme {
    std::string name;    // "Q4_K_M"
    DType base;          // Q4_K
    QuantMix mix;        //
    uint32_t file_type;  // general.file_type (llama.cpp's llama_ftype)
    bool is_float() const { return base == DType::F32 || base == DType::F16 || base == DType::BF16; }
};

// Throws ember::Error listing the known names.
QuantScheme quant_scheme(std::string_view name);
std::vector<std::string> quant_scheme_names();

// The tensor facts the choice depends on.
struct TensorPlanInput {
    std::string_view name;       // "blk.3.attn_v.weight"
    std::vector<uint64_t> dims;  // dims[0] is the row length
    DType type;                  // its type in the source
};

struct TensorChoice {
    DType type;
    bool quantize;  // false: copied as it is (norms, biases, 1-D tensors)
    bool fallback;  // true: the scheme's type did not fit the row length
};

class QuantPlanner {
public:
    // n_layers: the model's block count; tied: no output.weight (the embedding is the output).
    QuantPlanner(QuantScheme scheme, int n_layers, bool tied_embeddings);
    TensorChoice choose(const TensorPlanInput& t) const;
    const QuantScheme& scheme() const { return scheme_; }

private:
    DType mix_type(const TensorPlanInput& t) const;
    QuantScheme scheme_;
    int n_layers_;
    bool tied_;
};

// True for a weight matrix a quantizer converts (2-D, "*.weight", not a norm).
bool is_quantizable_weight(std::string_view name, size_t n_dims);

}  // namespace ember
