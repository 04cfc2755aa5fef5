#include "engine/quant/quant_targets.h"

#include <algorithm>
#include <map>

#include "engine/fit/quant_choice.h"
#include "engine/gguf/gguf.h"
#include "engine/quant/quant_plan.h"
#include "kernels/cpu/quant.h"

namespace ember {
namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
const DTypeInfo& info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
uint64_t align_up(uint64_t n, uint64_t a) { return a ? (n + a - 1) / a * a : n; }

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

// The output's size for one scheme: the source's header (the quantizer copies the metadata)
// plus each tensor at the type the planner gives it, aligned as the quantizer writes it.
uint64_t expected_bytes(const GgufFile& in, const QuantScheme& scheme) {
    const int n_layers = static_cast<int>(in.opt_u64(in.architecture() + ".block_count").value_or(0));
    const QuantPlanner planner(scheme, n_layers, in.find_tensor("output.weight") == nullptr);
    uint64_t source_data = 0, data = 0;
    for (const GgufTensor& t : in.tensors()) {
        source_data += align_up(t.n_bytes, in.alignment());
        const TensorChoice c = planner.choose({t.name, t.dims, t.type});
        const uint64_t bytes = c.quantize ? row_bytes(info(c.type), t.dims[0]) * t.rows() : t.n_bytes;
        data += align_up(bytes, in.alignment());
    }
    const uint64_t header = in.file_size() > source_data ? in.file_size() - source_data : 0;
    return header + data;
}

// Whether the quantizer can read every weight it would convert and write `scheme`'s types.
bool readable(const GgufFile& in) {
    for (const GgufTensor& t : in.tensors())
        if (is_quantizable_weight(t.name, t.dims.size()) && !cpu::can_dequantize(t.type)) return false;
    return true;
}

}  // namespace

QuantOffer quant_offer(const GgufFile& in) {
    QuantOffer o;
    o.source = dominant_weight_type(in);
    o.requantize = !is_float(o.source);
    o.readable = readable(in);
    o.source_bytes = in.file_size();
    if (!o.readable) return o;
    const uint32_t source_bits = info(o.source).block_bytes * 8 / info(o.source).block_elems;
    for (const std::string& name : quant_scheme_names()) {
        const QuantScheme s = quant_scheme(name);
        if (!cpu::can_quantize(s.base)) continue;
        const uint64_t bytes = expected_bytes(in, s);
        // From floats: fewer bits per weight only (F32 -> F16/BF16, 16-bit -> quantized).
        const bool fewer_bits = !s.is_float() || info(s.base).block_bytes * 8 < source_bits;
        const bool offered = o.requantize ? !s.is_float() && bytes < o.source_bytes : fewer_bits;
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
