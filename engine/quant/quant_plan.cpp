#include "engine/quant/quant_plan.h"

#include <charconv>

#include "kernels/common/error.h"

namespace ember {

namespace {

struct SchemeRow {
    const char* name;
    DType base;
    QuantMix mix;
    uint32_t file_type;
};

// file_type values are llama.cpp's llama_ftype (MOSTLY_Q4_K_S = 14 is "mostly Q4_K").
const SchemeRow kSchemes[] = {
    {"F32", DType::F32, QuantMix::Pure, 0},    {"F16", DType::F16, QuantMix::Pure, 1},
    {"BF16", DType::BF16, QuantMix::Pure, 32}, {"Q8_0", DType::Q8_0, QuantMix::Pure, 7},
    {"Q4_0", DType::Q4_0, QuantMix::Pure, 2},  {"Q4_1", DType::Q4_1, QuantMix::Pure, 3},
    {"Q5_0", DType::Q5_0, QuantMix::Pure, 8},  {"Q5_1", DType::Q5_1, QuantMix::Pure, 9},
    {"Q4_K", DType::Q4_K, QuantMix::Pure, 14}, {"Q5_K", DType::Q5_K, QuantMix::Pure, 16},
    {"Q6_K", DType::Q6_K, QuantMix::Pure, 18}, {"Q4_K_M", DType::Q4_K, QuantMix::KM, 15},
    {"Q5_K_M", DType::Q5_K, QuantMix::KM, 17}, {"MXFP4_MOE", DType::MXFP4, QuantMix::MoeMxfp4, 38},
};

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "blk.12.ffn_down.weight" -> 12; -1 for tensors outside the layers.
int layer_of(std::string_view name) {
    if (name.substr(0, 4) != "blk.") return -1;
    int layer = -1;
    const auto* first = name.data() + 4;
    const auto [end, ec] = std::from_chars(first, name.data() + name.size(), layer);
    return ec == std::errc() && end != first && *end == '.' ? layer : -1;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third one
// in between, are the ones whose errors hurt most.
bool more_bits(int layer, int n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

uint32_t block_of(DType t) { return dtype_info(static_cast<uint32_t>(t))->block_elems; }

// The 32-block type a 256-block type falls back to (llama.cpp's table).
DType fallback_of(DType t) {
    switch (t) {
        case DType::Q4_K:
            return DType::Q5_0;
        case DType::Q5_K:
            return DType::Q5_1;
        case DType::Q6_K:
            return DType::Q8_0;
        default:
            return t;
    }
}

}  // namespace

QuantScheme quant_scheme(std::string_view name) {
    for (const auto& s : kSchemes)
        if (name == s.name) return {s.name, s.base, s.mix, s.file_type};
    std::string known;
    for (const auto& n : quant_scheme_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown quantization type '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> quant_scheme_names() {
    std::vector<std::string> names;
    for (const auto& s : kSchemes) names.emplace_back(s.name);
    return names;
}

bool is_quantizable_weight(std::string_view name, size_t n_dims) {
    // The experts' router stays as it is (llama.cpp's rule: it is small and its errors move
    // every token's choice of experts); so does a linear-attention layer's convolution
    // (qwen35's ssm_conv1d: a few taps per channel, and llama.cpp's ssm_conv reads F32 only).
    return n_dims >= 2 && ends_with(name, ".weight") && name.find("norm") == std::string_view::npos &&
           name.find("ffn_gate_inp") == std::string_view::npos && name.find("ssm_conv1d") == std::string_view::npos;
}

QuantPlanner::QuantPlanner(QuantScheme scheme, int n_layers, bool tied_embeddings)
    : scheme_(std::move(scheme)), n_layers_(n_layers), tied_(tied_embeddings) {}

DType QuantPlanner::mix_type(const TensorPlanInput& t) const {
    const std::string_view name = t.name;
    if (scheme_.mix == QuantMix::MoeMxfp4) return t.dims.size() >= 3 && t.dims[2] > 1 ? DType::MXFP4 : DType::Q8_0;
    if (scheme_.mix != QuantMix::KM) return scheme_.base;
    if (name == "output.weight" || (tied_ && name == "token_embd.weight")) return DType::Q6_K;
    const int layer = layer_of(name);
    const bool more = layer >= 0 && more_bits(layer, n_layers_);
    // ffn_down_exps like ffn_down (llama.cpp matches "ffn_down" in the name).
    if (more && (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight") ||
                 ends_with(name, ".ffn_down_exps.weight")))
        return DType::Q6_K;
    return scheme_.base;
}

TensorChoice QuantPlanner::choose(const TensorPlanInput& t) const {
    const bool weight = is_quantizable_weight(t.name, t.dims.size());
    // A float target also expands quantized tensors that are not weight matrices (none in the
    // models Ember runs, but a file may have them): the output then holds no quantized data.
    const bool quantized_source = block_of(t.type) > 1;
    if (!weight && !(scheme_.is_float() && quantized_source)) return {t.type, false, false};
    if (scheme_.is_float()) return {scheme_.base, true, false};
    const uint64_t cols = t.dims.empty() ? 0 : t.dims[0];
    DType type = mix_type(t);
    const bool is_output = t.name == "output.weight" || (tied_ && t.name == "token_embd.weight");
    if (cols % block_of(type) == 0) return {type, true, false};
    // llama.cpp picks Q8_0 for an output matrix whose rows do not fit its type.
    type = is_output && scheme_.mix == QuantMix::KM ? DType::Q8_0 : fallback_of(type);
    if (cols % block_of(type) != 0) type = DType::F16;
    return {type, true, true};
}

}  // namespace ember
