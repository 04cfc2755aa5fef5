// Writes GGUF v3 files: metadata in insertion order, tensors aligned to general.alignment.
// Used by the quantizer, the synthetic-model tool and tests that build hostile files.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace ember {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t alignment = 32) : alignment_(alignment) {}

    void set(const std::string& key, GgufValue value);  // replaces an existing key in place
    // Adds a tensor whose bytes are copied now. dims[0] is the row length.
    void add_tensor(const std::string& name, DType type, std::vector<uint64_t> dims, std::vector<uint8_t> bytes);
    // Adds a tensor whose bytes are produced at write time (large synthetic models).
    using Producer = std::function<void(uint8_t* dst, size_t n_bytes)>;
    void add_tensor_lazy(const std::string& name, DType type, std::vector<uint64_t> dims, Producer produce);

    // Serialises everything. Writes to path + ".tmp" then renames, so a crash never leaves
    // a half-written file under the final name. Throws ember::Error on I/O failure.
    void write_file(const std::string& path) const;
    std::vector<uint8_t> to_bytes() const;  // whole file in memory (small files, tests)
    // The header alone (metadata, tensor infos, padding: what precedes the tensor data) and
    // the size the whole file would have: a multi-GB model's table without writing it (the
    // fit planner's tests).
    std::vector<uint8_t> header_bytes() const;
    uint64_t file_size() const;

    // The same model as `n_parts` writers, as llama.cpp's gguf-split lays it out
    // (engine/gguf/gguf_split.h): the tensors in order, about equally many per part; all
    // metadata in the first part; the split.* keys in every part. Write part i (0-based) to
    // split_part_name(stem, i + 1, n_parts).
    std::vector<GgufWriter> split(uint32_t n_parts) const;

private:
    struct Tensor {
        std::string name;
        DType type;
        std::vector<uint64_t> dims;
        uint64_t n_bytes;
        std::vector<uint8_t> bytes;
        Producer produce;
    };
    template <class Sink>
    void serialize(Sink& sink, bool with_data = true) const;  // not "emit": Qt defines that macro
    uint32_t alignment_;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::vector<Tensor> tensors_;
};

}  // namespace ember
