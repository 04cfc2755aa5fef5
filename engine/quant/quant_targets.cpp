#include "engine/quant/quant_targets.h"

#include <algorithm>
#include <map>

#include "engine/fit/quant_choice.h"
#include "engine/gguf/gguf.h"
#include "engine/quant/quant_plan.h"
#include "engine/quant/quantizer.h"
#include "kernels/cpu/quant.h"

namespace ember {
namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
DTypeInfo info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
double bits_per_weight(DType t) { return 8.0 * info(t).block_bytes / info(t).block_elems; }

// The type holding the most weight elements: what people call the file's type.
DType dominant_weight_type(const GgufFile& in) {
    std::map<DType, uint64_t> elements;
    for (const GgufTensor& t : in.tensors())
        if (is_quantizable_weight(t.name, t.dims.size())) elements[t.type] += t.n_elements;
    DType best = DType::F32;
    uint64_t most = 0;
    for (const auto& [type, n] : elements)
        if (n > most) best = type, most = n;
    return best;
}

// Whether the quantizer can read every weight it would convert and write `scheme`'s types.
bool readable(const GgufFile& in) {
    for (const GgufTensor& t : in.tensors())
        if (is_quantizable_weight(t.name, t.dims.size()) && !cpu::can_dequantize(t.type)) return false;
    return true;
}

// Whether the file holds mixture-of-experts tensors (3-D, more than one expert).
bool has_experts(const GgufFile& in) {
    for (const GgufTensor& t : in.tensors())
        if (t.dims.size() >= 3 && t.dims[2] > 1) return true;
    return false;
}

}  // namespace

QuantOffer quant_offer(const GgufFile& in) {
    QuantOffer o;
    o.source = dominant_weight_type(in);
    o.requantize = !is_float(o.source);
    o.readable = readable(in);
    o.source_bytes = in.file_size();
    if (!o.readable) return o;
    for (const std::string& name : quant_scheme_names()) {
        const QuantScheme s = quant_scheme(name);
        if (!cpu::can_quantize(s.base) || s.base == o.source) continue;
        if (s.mix == QuantMix::MoeMxfp4 && !has_experts(in)) continue;  // all Q8_0 there: Q8_0's offer
        const double bits = bits_per_weight(s.base), source_bits = bits_per_weight(o.source);
        const uint64_t bytes = quantized_file_size(in, name);
        // From floats: fewer bits per weight (F32 -> F16/BF16, 16-bit -> quantized). From a
        // quantized file: a quantized type of no more bits, whose file is smaller.
        const bool offered =
            o.requantize ? !s.is_float() && bits <= source_bits && bytes < o.source_bytes : bits < source_bits;
        if (offered) o.targets.push_back({name, bytes});
    }
    std::stable_sort(o.targets.begin(), o.targets.end(), [](const QuantTarget& a, const QuantTarget& b) {
        const int qa = fit::quant_quality(a.scheme), qb = fit::quant_quality(b.scheme);
        return qa != qb ? qa > qb : a.bytes > b.bytes;
    });
    // Q4_K_M is the usual balance of size and quality; from a quantized file, the best offered.
    const auto km = std::find_if(o.targets.begin(), o.targets.end(), [](auto& t) { return t.scheme == "Q4_K_M"; });
    if (!o.requantize && km != o.targets.end()) o.recommended = km->scheme;
    else if (!o.targets.empty()) o.recommended = o.targets.front().scheme;
    return o;
}

}  // namespace ember
