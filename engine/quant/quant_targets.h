// Which quantization schemes are worth offering for one model file, and how large each
// output would be: what the app's Quantize dialog lists (the CLI still accepts any scheme).
//
// A target is offered only when it can make a useful file from this source:
//  - from float weights (F32/F16/BF16): every scheme with fewer bits than the source (never
//    the source's own type, never F16 <-> BF16: same size, no gain);
//  - from quantized weights: only other quantized schemes of no more bits per weight than
//    the source's type, whose file is smaller. A larger or float target cannot gain back
//    what the source's rounding lost; a smaller one is a requantization (the quantizer's
//    allow_requantize), its quality capped by the source's.
// The sizes come from the quantizer's own layout (quantized_file_size): exact.
// Nothing is offered when the quantizer cannot read the source's weight types.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"

namespace ember {

class GgufFile;

struct QuantTarget {
    std::string scheme;  // quant_scheme_names(): "Q4_K_M"
    uint64_t bytes = 0;  // the output file's size
};

struct QuantOffer {
    DType source = DType::F32;         // the type holding most of the source's weight elements
    bool requantize = false;           // the source's weights are already quantized
    bool readable = true;              // false: the quantizer cannot read a weight type here
    uint64_t source_bytes = 0;         // the source file (all parts)
    std::vector<QuantTarget> targets;  // best quality (largest) first
    std::string recommended;           // one of targets' schemes ("" when there is none)
};

// Plans every scheme against the file's tensors (engine/quant/quant_plan.h); reads the
// header only.
QuantOffer quant_offer(const GgufFile& in);

}  // namespace ember
