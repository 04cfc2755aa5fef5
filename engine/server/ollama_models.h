// What Ollama's model endpoints (/api/tags, /api/show, /api/ps) say about the model a server
// serves, read once from its GGUF header (no weights touched), and how a client's model name
// is matched against it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ember::server {

struct ServedModel {
    std::string name;         // "<file stem>:latest", the way Ollama names models
    std::string path;         // the file
    uint64_t size = 0;        // bytes of the file
    std::string modified_at;  // the file's modification time (RFC 3339)
    // Ollama's digest is the SHA-256 of the whole file; hashing gigabytes would stall the first
    // client that lists models, so this is a 64-bit checksum (engine/core/checksum.h) of the
    // file's size and header (metadata and tensor directory): it changes when the file does.
    std::string digest;
    nlohmann::json details;     // format "gguf", family, families, parameter_size, quantization_level
    nlohmann::json model_info;  // the header's scalar metadata (arrays as null, as Ollama sends them)
    std::string chat_template;  // tokenizer.chat_template ("" when the file has none)
    uint64_t context_length = 0;
};

// Reads the file's header. Throws ember::Error naming the path when it cannot.
ServedModel describe_served_model(const std::string& model, const std::string& path);

// Whether a client's name means the served model: its own name, or Ollama's "name:latest".
bool model_name_matches(std::string_view asked, std::string_view served);

}  // namespace ember::server
