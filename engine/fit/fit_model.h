// What the fit planner knows about a model file before loading it: the architecture's
// shape (ModelConfig, from the metadata) and the tensor table (name, type, shape, bytes).
// Made from a mapped GgufFile, from a header-only parse of the first bytes of a remote file
// (GgufFile::parse_prefix), or from the joined headers of a split model's parts
// (GgufFile::join_split). Nothing here reads tensor data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/models/model_config.h"

namespace ember::fit {

struct FitTensor {
    std::string name;
    DType type = DType::F32;
    int64_t cols = 0, rows = 0;  // dims[0], product of the rest
    uint64_t bytes = 0;          // in the file; what a zero-copy backend maps
    int32_t layer = -1;          // "blk.<layer>." tensors; -1 outside the blocks
    int64_t matrices = 1;        // dims[2..]: a 3-D expert tensor's experts, rows/matrices rows each
};

struct FitModel {
    std::string name;    // general.name, else the file name
    std::string quant;   // "Q4_K_M", "Q8_0", ... (ModelInfo::file_type)
    ModelConfig config;  // checked as the loader checks it (read_model_config)
    std::vector<FitTensor> tensors;
    uint64_t file_bytes = 0;  // on disk
    uint64_t n_params = 0;
};

// Throws ember::Error (naming the file) for a file the engine would not load: an
// unsupported architecture, a missing tensor, inconsistent shapes.
FitModel fit_model(const GgufFile& f);

}  // namespace ember::fit
