// GGUF v2/v3 model files: parsed metadata, tensor directory, zero-copy tensor data.
//
// GgufFile::open() maps the file and validates every byte it will ever hand out: counts,
// string lengths, nesting, tensor shapes, types, alignment and bounds. Any violation throws
// ember::Error("<path>: <what is wrong>"), never crashes or allocates without bound.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/core/mapped_file.h"
#include "kernels/common/dtype.h"

namespace ember {

// Metadata value type ids as stored in the file.
enum class GgufType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};
std::string_view gguf_type_name(GgufType t);

struct GgufValue;
struct GgufArray {
    GgufType elem_type = GgufType::U8;
    std::vector<GgufValue> items;
};

// One metadata value. Integers keep their exact width in `type`; accessors convert.
struct GgufValue {
    GgufType type = GgufType::U8;
    std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;

    bool is_int() const;      // any integer type
    bool is_number() const;   // integer or float
    uint64_t as_u64() const;  // throws unless a non-negative integer
    int64_t as_i64() const;   // throws unless an integer that fits
    double as_f64() const;    // throws unless a number
    bool as_bool() const;
    const std::string& as_string() const;
    const GgufArray& as_array() const;
    std::string to_display(size_t max_items = 8) const;  // short human-readable form

    static GgufValue u32(uint32_t x) { return {GgufType::U32, uint64_t{x}}; }
    static GgufValue u64(uint64_t x) { return {GgufType::U64, x}; }
    static GgufValue i32(int32_t x) { return {GgufType::I32, int64_t{x}}; }
    static GgufValue f32(float x) { return {GgufType::F32, double{x}}; }
    static GgufValue boolean(bool x) { return {GgufType::BOOL, x}; }
    static GgufValue str(std::string s) { return {GgufType::STRING, std::move(s)}; }
    static GgufValue array(GgufType elem, std::vector<GgufValue> items);
};

struct GgufTensor {
    std::string name;
    DType type = DType::F32;
    std::vector<uint64_t> dims;  // dims[0] is the contiguous (row) dimension, as in ggml
    uint64_t offset = 0;         // relative to the data section
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // points into the mapped file

    uint64_t rows() const;  // product of dims[1..]
    std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(n_bytes)}; }
};

class GgufFile;
struct GgufPrefix;

class GgufFile {
public:
    // Maps and validates the file. Throws ember::Error naming the path and the problem.
    // huge_pages: map for streaming the weights on the CPU (see MappedFile).
    static GgufFile open(const std::string& path, bool huge_pages = false);
    // Parses a buffer the caller keeps alive (fuzzing, tests). `name` is used in errors.
    static GgufFile parse(const uint8_t* data, size_t size, const std::string& name);
    // The header (metadata and tensor directory) from the first `prefix_size` bytes of a file
    // of `file_size` bytes, e.g. a remote file fetched by range (engine/fit). Either the
    // parsed header, whose tensors have no data pointers (check_unchanged is a no-op), or the
    // number of leading bytes that are needed at least (fetch them and call again; the next
    // answer may ask for more: each array is only bounded by its smallest encoding). Invalid
    // bytes throw ember::Error as parse() does.
    static GgufPrefix parse_prefix(const uint8_t* data, size_t prefix_size, uint64_t file_size,
                                   const std::string& name);
    // The parts of a split model (engine/gguf/gguf_split.h), in order, as one file: the first
    // part's metadata and path, every part's tensors (their data stays in each part's map),
    // the parts' sizes summed. Works on mapped parts and on prefix-parsed headers alike.
    // Throws ember::Error when the parts do not make one model (count, order, tensor names).
    static GgufFile join_split(std::vector<GgufFile> parts);

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    uint64_t file_size() const { return size_; }
    const std::string& path() const { return path_; }

    const std::map<std::string, GgufValue>& metadata() const { return kv_; }
    const std::vector<std::string>& metadata_order() const { return kv_order_; }
    const GgufValue* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }
    // Typed lookups: throw ember::Error naming the key when missing or of the wrong kind.
    const GgufValue& get(std::string_view key) const;
    std::string get_string(std::string_view key) const;
    uint64_t get_u64(std::string_view key) const;
    double get_f64(std::string_view key) const;
    std::optional<std::string> opt_string(std::string_view key) const;
    std::optional<uint64_t> opt_u64(std::string_view key) const;
    std::optional<double> opt_f64(std::string_view key) const;
    std::optional<bool> opt_bool(std::string_view key) const;
    // Array of strings / numbers, e.g. tokenizer.ggml.tokens or .scores.
    std::vector<std::string> get_string_array(std::string_view key) const;
    std::vector<double> get_number_array(std::string_view key) const;

    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* find_tensor(std::string_view name) const;
    const GgufTensor& tensor(std::string_view name) const;  // throws if missing

    // "general.architecture", or "" if absent.
    std::string architecture() const;
    // "split.count" (the number of parts of a split model); 1 for a single-file model.
    uint32_t split_count() const;

    // Throws ember::Error when the mapped file was truncated or rewritten since it was opened
    // (its tensor data may then read as zeros or as other bytes). The engine calls it after
    // each forward pass; a parsed buffer never changes.
    void check_unchanged() const;
    // Every mapped part read in and mapped now (MappedFile::populate) when all of them together
    // fit in `max_bytes`; false (nothing done) otherwise or for a parsed buffer.
    bool populate(uint64_t max_bytes) const;

private:
    friend class GgufParser;
    // The mapped files (all parts of a split model); empty when parsing a caller-owned buffer.
    std::vector<std::shared_ptr<MappedFile>> maps_;
    std::string path_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    uint64_t size_ = 0;
    std::map<std::string, GgufValue> kv_;
    std::vector<std::string> kv_order_;
    std::vector<GgufTensor> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

struct GgufPrefix {
    std::optional<GgufFile> file;  // set when the prefix held the whole header
    uint64_t need_bytes = 0;       // otherwise: the prefix must be at least this long
};

}  // namespace ember
