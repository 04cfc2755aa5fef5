// What a model file needs that this build of Ember lacks, read from its header alone (no
// weights are touched): `ember info` prints it, so a user learns why a download will not run
// before loading gigabytes.
//
// Each check asks the one place that defines support, so the answer follows the code as
// architectures, weight types and tokenizers are added: supported_architectures()
// (model_config.h), cpu::matmul_supports() (kernels/cpu/matmul.h), is_supported_tokenizer_model()
// and PreTokenizer::known_names() (engine/tokenizer).
#pragma once
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace ember {

struct MissingSupport {
    std::string what;    // "architecture 'gpt-oss'", "tensor type MXFP4", "pre-tokenizer 'x'"
    std::string detail;  // what uses it or what Ember has instead, for a person to read
};

// Empty when Ember has everything the file names (the configuration itself is checked by
// read_model_config). One entry per missing architecture, tensor type (listing the tensors
// that use it), tokenizer model or pre-tokenizer.
std::vector<MissingSupport> missing_support(const GgufFile& f);

}  // namespace ember
