#include "engine/fit/fit_model.h"

#include <charconv>

#include "engine/models/model_info.h"

namespace ember::fit {
namespace {

int32_t layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    int32_t i = -1;
    const char* end = name.data() + name.size();
    auto [p, ec] = std::from_chars(name.data() + 4, end, i);
    return ec == std::errc() && p != end && *p == '.' ? i : -1;
}

}  // namespace

FitModel fit_model(const GgufFile& f) {
    FitModel m;
    m.config = read_model_config(f);
    const ModelInfo info = describe_model(f);
    m.name = info.name;
    m.n_params = info.n_params;
    m.file_bytes = f.file_size();
    m.quant = info.file_type;
    for (const GgufTensor& t : f.tensors()) {
        const int64_t matrices = t.dims.size() > 2 ? static_cast<int64_t>(t.rows() / t.dims[1]) : 1;
        m.tensors.push_back({t.name, t.type, static_cast<int64_t>(t.dims[0]), static_cast<int64_t>(t.rows()), t.n_bytes,
                             layer_of(t.name), matrices});
    }
    return m;
}

}  // namespace ember::fit
