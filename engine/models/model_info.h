// A model file's vital statistics, read from GGUF metadata only (no weights touched).
// Shared by `ember info`, the app's model list and (later) the VRAM fit planner.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "engine/gguf/gguf.h"
#include "kernels/common/format.h"

namespace ember {

struct ModelInfo {
    std::string name;          // general.name, or the file name
    std::string architecture;  // general.architecture
    uint64_t n_params = 0;     // sum of tensor elements
    uint64_t file_size = 0;
    uint64_t tensor_bytes = 0;
    std::optional<uint64_t> context_length, n_layers, n_heads, n_kv_heads, embedding_length, ffn_length, head_dim;
    uint64_t vocab_size = 0;
    std::string tokenizer_model;  // tokenizer.ggml.model ("llama" = SentencePiece, "gpt2" = BPE)
    std::string tokenizer_pre;    // tokenizer.ggml.pre
    bool has_chat_template = false;
    std::string file_type;                         // the dominant quantization, e.g. "Q4_K" (by bytes)
    std::map<std::string, uint64_t> tensor_types;  // type name -> tensor count
    std::map<std::string, uint64_t> tensor_type_bytes;
};

ModelInfo describe_model(const GgufFile& f);

// "135M", "1.2B": the way model sizes are usually written.
std::string format_param_count(uint64_t n);
// format_bytes ("98.4 MiB"): kernels/common/format.h, included above.

}  // namespace ember
