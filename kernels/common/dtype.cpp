#include "kernels/common/dtype.h"

namespace ember {

std::optional<DTypeInfo> dtype_info(uint32_t id) {
    switch (static_cast<DType>(id)) {
        case DType::F32:
            return DTypeInfo{"F32", 1, 4};
        case DType::F16:
            return DTypeInfo{"F16", 1, 2};
        case DType::Q4_0:
            return DTypeInfo{"Q4_0", 32, 18};
        case DType::Q4_1:
            return DTypeInfo{"Q4_1", 32, 20};
        case DType::Q5_0:
            return DTypeInfo{"Q5_0", 32, 22};
        case DType::Q5_1:
            return DTypeInfo{"Q5_1", 32, 24};
        case DType::Q8_0:
            return DTypeInfo{"Q8_0", 32, 34};
        case DType::Q8_1:
            return DTypeInfo{"Q8_1", 32, 36};
        case DType::Q2_K:
            return DTypeInfo{"Q2_K", 256, 84};
        case DType::Q3_K:
            return DTypeInfo{"Q3_K", 256, 110};
        case DType::Q4_K:
            return DTypeInfo{"Q4_K", 256, 144};
        case DType::Q5_K:
            return DTypeInfo{"Q5_K", 256, 176};
        case DType::Q6_K:
            return DTypeInfo{"Q6_K", 256, 210};
        case DType::Q8_K:
            return DTypeInfo{"Q8_K", 256, 292};
        case DType::IQ2_XXS:
            return DTypeInfo{"IQ2_XXS", 256, 66};
        case DType::IQ2_XS:
            return DTypeInfo{"IQ2_XS", 256, 74};
        case DType::IQ3_XXS:
            return DTypeInfo{"IQ3_XXS", 256, 98};
        case DType::IQ1_S:
            return DTypeInfo{"IQ1_S", 256, 50};
        case DType::IQ4_NL:
            return DTypeInfo{"IQ4_NL", 32, 18};
        case DType::IQ3_S:
            return DTypeInfo{"IQ3_S", 256, 110};
        case DType::IQ2_S:
            return DTypeInfo{"IQ2_S", 256, 82};
        case DType::IQ4_XS:
            return DTypeInfo{"IQ4_XS", 256, 136};
        case DType::I8:
            return DTypeInfo{"I8", 1, 1};
        case DType::I16:
            return DTypeInfo{"I16", 1, 2};
        case DType::I32:
            return DTypeInfo{"I32", 1, 4};
        case DType::I64:
            return DTypeInfo{"I64", 1, 8};
        case DType::F64:
            return DTypeInfo{"F64", 1, 8};
        case DType::IQ1_M:
            return DTypeInfo{"IQ1_M", 256, 56};
        case DType::BF16:
            return DTypeInfo{"BF16", 1, 2};
        case DType::TQ1_0:
            return DTypeInfo{"TQ1_0", 256, 54};
        case DType::TQ2_0:
            return DTypeInfo{"TQ2_0", 256, 66};
        case DType::MXFP4:
            return DTypeInfo{"MXFP4", 32, 17};
    }
    return std::nullopt;
}

std::string_view dtype_name(DType t) {
    auto info = dtype_info(static_cast<uint32_t>(t));
    return info ? info->name : std::string_view("unknown");
}

}  // namespace ember
