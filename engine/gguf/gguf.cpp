// GGUF reader. The parser trusts nothing: every count, length and offset is checked against
// the bytes that remain before anything is allocated or dereferenced.
#include "engine/gguf/gguf.h"

#include "engine/gguf/gguf_split.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "kernels/common/error.h"

namespace ember {
namespace {

constexpr uint32_t kMagic = 0x46554747;             // "GGUF" little-endian
constexpr int kMaxNesting = 4;                      // arrays of arrays of ... (real files use 1)
constexpr uint64_t kMaxMetadataValues = 16u << 20;  // bounds memory on hostile files
constexpr uint64_t kMaxStringBytes = 64u << 20;     // a chat template is ~10 KB
constexpr uint32_t kMaxDims = 4;                    // ggml's GGML_MAX_DIMS
// Memory the parsed directory may take: a fixed allowance (the largest real tokenizers,
// 262k tokens with scores and types, take ~45 MB) plus twice the file size. Without it a
// file of 12-byte empty arrays costs ~120 bytes of heap per array (value, array, vector).
constexpr uint64_t kBaseMemoryBudget = 64u << 20;
constexpr uint64_t kMemoryBudgetPerFileByte = 2;
// What one parsed item costs on the heap, estimated from above (libstdc++ sizes, plus a
// malloc header per block): counted before the item is allocated.
constexpr uint64_t kMallocOverhead = 16;
constexpr uint64_t kSsoChars = 15;  // std::string keeps up to this many chars inline
constexpr uint64_t kArrayCost = sizeof(GgufArray) + 2 * kMallocOverhead + 16;  // make_shared block
// A key: its map node, and kv_order_'s copy (x3: a growing vector holds old and new).
constexpr uint64_t kMapNodeCost =
    32 + sizeof(std::string) + sizeof(GgufValue) + kMallocOverhead + 3 * sizeof(std::string);
// A tensor: tensors_ (x3, as above), its dims, its index node and by_offset's pointer.
constexpr uint64_t kTensorCost = 3 * sizeof(GgufTensor) + 8 * kMaxDims + kMallocOverhead + 32 + sizeof(std::string) +
                                 sizeof(size_t) + kMallocOverhead + 3 * sizeof(void*);

size_t primitive_size(GgufType t) {
    switch (t) {
        case GgufType::U8:
        case GgufType::I8:
        case GgufType::BOOL:
            return 1;
        case GgufType::U16:
        case GgufType::I16:
            return 2;
        case GgufType::U32:
        case GgufType::I32:
        case GgufType::F32:
            return 4;
        case GgufType::U64:
        case GgufType::I64:
        case GgufType::F64:
            return 8;
        default:
            return 0;
    }
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

std::string hex(uint64_t v) {
    std::ostringstream s;
    s << "0x" << std::hex << v;
    return s.str();
}

}  // namespace

// Cursor over the raw bytes; each read checks bounds first.
class GgufParser {
public:
    GgufParser(const uint8_t* data, size_t size, std::string name)
        : data_(data),
          size_(size),
          avail_(size),
          budget_(kBaseMemoryBudget + kMemoryBudgetPerFileByte * uint64_t{size}),
          name_(std::move(name)) {}
    // Prefix mode: only the first `avail` bytes of a file of `file_size` bytes are at hand.
    // Counts and bounds are checked against the whole file; a read past the prefix throws
    // NeedMore instead of failing; tensors get no data pointers.
    GgufParser(const uint8_t* data, size_t avail, uint64_t file_size, std::string name)
        : data_(data),
          size_(static_cast<size_t>(file_size)),
          avail_(avail),
          prefix_(true),
          budget_(kBaseMemoryBudget + kMemoryBudgetPerFileByte * uint64_t{avail}),
          name_(std::move(name)) {}

    // Thrown in prefix mode: the header needs at least `total` bytes of the file.
    struct NeedMore {
        uint64_t total;
    };

    void parse(GgufFile& f) {
        f.size_ = size_;
        f.path_ = name_;
        parse_header(f);
        const uint64_t n_tensors = read_u64("tensor count");
        const uint64_t n_kv = read_u64("metadata count");
        // Smallest possible entries: kv = key len(8) + type(4) + 1 byte; tensor info = 32 bytes.
        check_count(n_kv, 13, "metadata count");
        check_count(n_tensors, 32, "tensor count");
        for (uint64_t i = 0; i < n_kv; ++i) parse_kv(f, i);
        parse_alignment(f);
        for (uint64_t i = 0; i < n_tensors; ++i) parse_tensor_info(f, i);
        const uint64_t data_start = align_up(pos_, f.alignment_);
        if (data_start > size_ && !f.tensors_.empty()) fail("file ends before the tensor data section");
        f.data_offset_ = data_start;
        place_tensors(f);
    }

private:
    [[noreturn]] void fail(const std::string& what) const { throw Error(name_ + ": invalid GGUF: " + what); }

    void need(uint64_t n, const char* what) const {
        if (prefix_ && n <= size_ - pos_ && n > avail_ - pos_) throw NeedMore{pos_ + n};
        if (n > size_ - pos_)
            fail(std::string("truncated while reading ") + what + " at offset " + std::to_string(pos_) + " (need " +
                 std::to_string(n) + " bytes, " + std::to_string(size_ - pos_) + " left)");
    }

    template <class T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    uint32_t read_u32(const char* what) { return read<uint32_t>(what); }
    uint64_t read_u64(const char* what) { return read<uint64_t>(what); }

    std::string read_string(const char* what) {
        const uint64_t len = read_u64(what);
        if (len > kMaxStringBytes) fail(std::string(what) + ": string length " + std::to_string(len) + " is absurd");
        need(len, what);
        if (len > kSsoChars) charge(len + 1 + kMallocOverhead, what);
        std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
        pos_ += len;
        return s;
    }

    void check_count(uint64_t n, uint64_t min_entry_bytes, const std::string& what) const {
        if (n > (size_ - pos_) / min_entry_bytes)
            fail(what + " " + std::to_string(n) + " cannot fit in the " + std::to_string(size_ - pos_) +
                 " bytes that remain");
    }

    static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

    // Counts heap bytes about to be allocated against the budget, so a hostile file fails
    // before its directory outgrows a small multiple of the file itself. `what` names the
    // item in the error.
    void charge(uint64_t bytes, std::string_view what) {
        if (bytes > budget_ - used_) fail_memory(what);
        used_ += bytes;
    }
    [[noreturn]] void fail_memory(std::string_view what) const {
        fail(std::string(what) + ": holding the file's metadata would take more than " + std::to_string(budget_ >> 20) +
             " MiB of memory (the limit is 64 MiB + 2 x the file size)");
    }

    void parse_header(GgufFile& f) {
        if (size_ < 4 || read_u32("magic") != kMagic) {
            fail("bad magic (not a GGUF file)");
        }
        const uint32_t version = read_u32("version");
        if (version == 1) fail("GGUF version 1 is not supported (re-convert the model)");
        if ((version & 0xffff) == 0 && version != 0) fail("big-endian GGUF files are not supported");
        if (version != 2 && version != 3) fail("unsupported GGUF version " + std::to_string(version));
        f.version_ = version;
    }

    GgufValue parse_value(GgufType type, int depth, const std::string& key) {
        if (++values_ > kMaxMetadataValues)
            fail("too many metadata values (limit " + std::to_string(kMaxMetadataValues) + ")");
        GgufValue v;
        v.type = type;
        switch (type) {
            case GgufType::U8:
                v.v = uint64_t{read<uint8_t>(key.c_str())};
                break;
            case GgufType::U16:
                v.v = uint64_t{read<uint16_t>(key.c_str())};
                break;
            case GgufType::U32:
                v.v = uint64_t{read<uint32_t>(key.c_str())};
                break;
            case GgufType::U64:
                v.v = read<uint64_t>(key.c_str());
                break;
            case GgufType::I8:
                v.v = int64_t{read<int8_t>(key.c_str())};
                break;
            case GgufType::I16:
                v.v = int64_t{read<int16_t>(key.c_str())};
                break;
            case GgufType::I32:
                v.v = int64_t{read<int32_t>(key.c_str())};
                break;
            case GgufType::I64:
                v.v = read<int64_t>(key.c_str());
                break;
            case GgufType::F32:
                v.v = double{read<float>(key.c_str())};
                break;
            case GgufType::F64:
                v.v = read<double>(key.c_str());
                break;
            case GgufType::BOOL: {
                const uint8_t b = read<uint8_t>(key.c_str());
                if (b > 1) fail("metadata '" + key + "': bool value " + std::to_string(b) + " is not 0 or 1");
                v.v = b == 1;
                break;
            }
            case GgufType::STRING:
                v.v = read_string(key.c_str());
                break;
            case GgufType::ARRAY:
                v.v = parse_array(depth, key);
                break;
        }
        return v;
    }

    std::shared_ptr<GgufArray> parse_array(int depth, const std::string& key) {
        if (depth >= kMaxNesting) fail("metadata '" + key + "': arrays nested too deeply");
        const uint32_t et = read_u32(key.c_str());
        if (!valid_type(et)) fail("metadata '" + key + "': unknown array element type " + std::to_string(et));
        const auto elem = static_cast<GgufType>(et);
        const uint64_t n = read_u64(key.c_str());
        const size_t min_size = elem == GgufType::STRING ? 8 : elem == GgufType::ARRAY ? 12 : primitive_size(elem);
        if (n > (size_ - pos_) / min_size) check_count(n, min_size, "metadata '" + key + "': array length");
        // A prefix must hold the array's smallest possible encoding before it is reserved
        // (tokenizer arrays can be megabytes).
        if (prefix_ && n * min_size > avail_ - pos_) throw NeedMore{pos_ + n * min_size};
        const uint64_t cost = kArrayCost + n * sizeof(GgufValue);  // n < file size: no overflow
        if (cost > budget_ - used_) fail_memory("metadata '" + key + "'");
        used_ += cost;
        auto arr = std::make_shared<GgufArray>();
        arr->elem_type = elem;
        arr->items.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) {
            try {
                arr->items.push_back(parse_value(elem, depth + 1, key));
            } catch (const NeedMore& m) {
                // The items after this one need their smallest encodings too: asking for them
                // now makes a prefix grow in a few steps, not one string at a time.
                const uint64_t rest = (n - i - 1) * min_size;
                if (rest > size_ - m.total)
                    fail("metadata '" + key + "': " + std::to_string(n) + " array items run past the end of the file");
                throw NeedMore{m.total + rest};
            }
        }
        return arr;
    }

    void parse_kv(GgufFile& f, uint64_t index) {
        std::string key = read_string("metadata key");
        if (key.empty()) fail("metadata entry " + std::to_string(index) + " has an empty key");
        // The map node and the kv_order_ copy (its heap part, if any, charged again here).
        charge(
            kMapNodeCost + sizeof(std::string) + (key.size() > kSsoChars ? 2 * (key.size() + 1 + kMallocOverhead) : 0),
            "metadata '" + key + "'");
        const uint32_t t = read_u32("metadata type");
        if (!valid_type(t)) fail("metadata '" + key + "': unknown value type " + std::to_string(t));
        GgufValue v = parse_value(static_cast<GgufType>(t), 0, key);
        if (!f.kv_.emplace(key, std::move(v)).second) fail("duplicate metadata key '" + key + "'");
        f.kv_order_.push_back(std::move(key));
    }

    void parse_alignment(GgufFile& f) {
        const GgufValue* a = f.find("general.alignment");
        if (!a) return;
        if (a->type != GgufType::U32) fail("general.alignment must be a uint32");
        const uint64_t al = a->as_u64();
        if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
            fail("general.alignment " + std::to_string(al) + " is not a power of two in [1, 1 MiB]");
        f.alignment_ = al;
    }

    void parse_tensor_info(GgufFile& f, uint64_t index) {
        GgufTensor t;
        t.name = read_string("tensor name");
        if (t.name.empty()) fail("tensor " + std::to_string(index) + " has an empty name");
        charge(kTensorCost + (t.name.size() > kSsoChars ? t.name.size() + 1 + kMallocOverhead : 0),
               "tensor '" + t.name + "'");
        const uint32_t n_dims = read_u32("tensor dimensions");
        if (n_dims == 0 || n_dims > kMaxDims)
            fail("tensor '" + t.name + "': " + std::to_string(n_dims) + " dimensions (must be 1.." +
                 std::to_string(kMaxDims) + ")");
        uint64_t n = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const uint64_t dim = read_u64("tensor shape");
            if (dim == 0) fail("tensor '" + t.name + "': dimension " + std::to_string(d) + " is zero");
            if (dim > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(n, dim, &n) ||
                n > uint64_t(std::numeric_limits<int64_t>::max()))
                fail("tensor '" + t.name + "': element count overflows");
            t.dims.push_back(dim);
        }
        t.n_elements = n;
        const uint32_t type_id = read_u32("tensor type");
        const auto info = dtype_info(type_id);
        if (!info) fail("tensor '" + t.name + "': unknown tensor type " + std::to_string(type_id));
        t.type = static_cast<DType>(type_id);
        if (t.dims[0] % info->block_elems != 0)
            fail("tensor '" + t.name + "': row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                 std::string(info->name) + " block size " + std::to_string(info->block_elems));
        if (__builtin_mul_overflow(n / info->block_elems, uint64_t{info->block_bytes}, &t.n_bytes))
            fail("tensor '" + t.name + "': byte size overflows");
        t.offset = read_u64("tensor offset");
        if (t.offset % f.alignment_ != 0)
            fail("tensor '" + t.name + "': offset " + hex(t.offset) + " is not aligned to " +
                 std::to_string(f.alignment_));
        if (f.tensor_index_.count(t.name)) fail("duplicate tensor name '" + t.name + "'");
        f.tensor_index_.emplace(t.name, f.tensors_.size());
        f.tensors_.push_back(std::move(t));
    }

    // Bounds and overlap checks, then the zero-copy data pointers.
    void place_tensors(GgufFile& f) {
        std::vector<const GgufTensor*> by_offset;
        for (auto& t : f.tensors_) {
            const uint64_t avail = f.data_offset_ <= size_ ? size_ - f.data_offset_ : 0;
            if (t.offset > avail || t.n_bytes > avail - t.offset)
                fail("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
                     ") lies beyond the end of the file (data section holds " + std::to_string(avail) + " bytes)");
            t.data = prefix_ ? nullptr : data_ + f.data_offset_ + t.offset;
            by_offset.push_back(&t);
        }
        std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
        for (size_t i = 1; i < by_offset.size(); ++i) {
            const GgufTensor* a = by_offset[i - 1];
            const GgufTensor* b = by_offset[i];
            if (a->offset + a->n_bytes > b->offset) fail("tensors '" + a->name + "' and '" + b->name + "' overlap");
        }
    }

    const uint8_t* data_;
    size_t size_;   // bytes of the file
    size_t avail_;  // of which at hand (== size_ unless prefix_)
    bool prefix_ = false;
    size_t pos_ = 0;
    uint64_t values_ = 0;
    uint64_t budget_;    // heap bytes the parsed directory may take
    uint64_t used_ = 0;  // of which charged so far
    std::string name_;
};

// ---- GgufValue -------------------------------------------------------------------------

std::string_view gguf_type_name(GgufType t) {
    static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<uint32_t>(t);
    return i < std::size(names) ? names[i] : "unknown";
}

GgufValue GgufValue::array(GgufType elem, std::vector<GgufValue> items) {
    auto a = std::make_shared<GgufArray>();
    a->elem_type = elem;
    a->items = std::move(items);
    return {GgufType::ARRAY, std::move(a)};
}

bool GgufValue::is_int() const { return std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v); }
bool GgufValue::is_number() const { return is_int() || std::holds_alternative<double>(v); }

uint64_t GgufValue::as_u64() const {
    if (auto* u = std::get_if<uint64_t>(&v)) return *u;
    if (auto* i = std::get_if<int64_t>(&v); i && *i >= 0) return static_cast<uint64_t>(*i);
    throw Error("metadata value of type " + std::string(gguf_type_name(type)) + " is not a non-negative integer");
}

int64_t GgufValue::as_i64() const {
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    if (auto* u = std::get_if<uint64_t>(&v); u && *u <= uint64_t(std::numeric_limits<int64_t>::max()))
        return static_cast<int64_t>(*u);
    throw Error("metadata value of type " + std::string(gguf_type_name(type)) + " is not a (64-bit signed) integer");
}

double GgufValue::as_f64() const {
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
    if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    throw Error("metadata value of type " + std::string(gguf_type_name(type)) + " is not a number");
}

bool GgufValue::as_bool() const {
    if (auto* b = std::get_if<bool>(&v)) return *b;
    throw Error("metadata value of type " + std::string(gguf_type_name(type)) + " is not a bool");
}

const std::string& GgufValue::as_string() const {
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    throw Error("metadata value of type " + std::string(gguf_type_name(type)) + " is not a string");
}

const GgufArray& GgufValue::as_array() const {
    if (auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v)) return **a;
    throw Error("metadata value of type " + std::string(gguf_type_name(type)) + " is not an array");
}

std::string GgufValue::to_display(size_t max_items) const {
    std::ostringstream s;
    if (auto* u = std::get_if<uint64_t>(&v)) s << *u;
    else if (auto* i = std::get_if<int64_t>(&v)) s << *i;
    else if (auto* d = std::get_if<double>(&v)) s << *d;
    else if (auto* b = std::get_if<bool>(&v)) s << (*b ? "true" : "false");
    else if (auto* str = std::get_if<std::string>(&v)) {
        std::string t = str->size() > 60 ? str->substr(0, 57) + "..." : *str;
        std::replace(t.begin(), t.end(), '\n', ' ');
        s << '"' << t << '"';
    } else {
        const auto& a = as_array();
        s << '[';
        for (size_t k = 0; k < a.items.size() && k < max_items; ++k)
            s << (k ? ", " : "") << a.items[k].to_display(max_items);
        if (a.items.size() > max_items) s << ", ... (" << a.items.size() << " items)";
        s << ']';
    }
    return s.str();
}

// ---- GgufTensor / GgufFile -------------------------------------------------------------

uint64_t GgufTensor::rows() const {
    uint64_t r = 1;
    for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
}

GgufFile GgufFile::open(const std::string& path, bool huge_pages) {
    const auto open_one = [huge_pages](const std::string& p) {
        auto map = std::make_shared<MappedFile>(p, huge_pages);
        GgufFile f = parse(map->data(), map->size(), p);
        f.maps_.push_back(std::move(map));
        return f;
    };
    GgufFile f = open_one(path);
    if (f.split_count() <= 1 || f.opt_u64(kSplitNoKey).value_or(0) != 0) return f;
    // The first part of a split model opens the others beside it: the engine sees one model.
    std::vector<GgufFile> parts;
    parts.push_back(std::move(f));
    for (const std::string& p : split_part_paths(path, parts.front().split_count())) parts.push_back(open_one(p));
    return join_split(std::move(parts));
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
    GgufFile f;
    GgufParser(data, size, name).parse(f);
    return f;
}

GgufPrefix GgufFile::parse_prefix(const uint8_t* data, size_t prefix_size, uint64_t file_size,
                                  const std::string& name) {
    if (prefix_size > file_size) throw Error(name + ": the prefix is longer than the file");
    GgufPrefix out;
    try {
        GgufFile f;
        GgufParser(data, prefix_size, file_size, name).parse(f);
        out.file = std::move(f);
    } catch (const GgufParser::NeedMore& m) {
        out.need_bytes = m.total;
    }
    return out;
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = kv_.find(std::string(key));
    return it == kv_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::get(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) throw Error(path_ + ": missing metadata key '" + std::string(key) + "'");
    return *v;
}

namespace {
template <class F>
auto with_key(const std::string& path, std::string_view key, F&& f) {
    try {
        return f();
    } catch (const Error& e) {
        throw Error(path + ": metadata '" + std::string(key) + "': " + e.what());
    }
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
    return with_key(path_, key, [&] { return get(key).as_string(); });
}
uint64_t GgufFile::get_u64(std::string_view key) const {
    return with_key(path_, key, [&] { return get(key).as_u64(); });
}
double GgufFile::get_f64(std::string_view key) const {
    return with_key(path_, key, [&] { return get(key).as_f64(); });
}
std::optional<std::string> GgufFile::opt_string(std::string_view key) const {
    return has(key) ? std::optional(get_string(key)) : std::nullopt;
}
std::optional<uint64_t> GgufFile::opt_u64(std::string_view key) const {
    return has(key) ? std::optional(get_u64(key)) : std::nullopt;
}
std::optional<double> GgufFile::opt_f64(std::string_view key) const {
    return has(key) ? std::optional(get_f64(key)) : std::nullopt;
}
std::optional<bool> GgufFile::opt_bool(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    return with_key(path_, key, [&] { return get(key).as_bool(); });
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
    return with_key(path_, key, [&] {
        std::vector<std::string> out;
        const auto& a = get(key).as_array();
        out.reserve(a.items.size());
        for (const auto& item : a.items) out.push_back(item.as_string());
        return out;
    });
}

std::vector<double> GgufFile::get_number_array(std::string_view key) const {
    return with_key(path_, key, [&] {
        std::vector<double> out;
        const auto& a = get(key).as_array();
        out.reserve(a.items.size());
        for (const auto& item : a.items) out.push_back(item.as_f64());
        return out;
    });
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
    const GgufTensor* t = find_tensor(name);
    if (!t) throw Error(path_ + ": missing tensor '" + std::string(name) + "'");
    return *t;
}

std::string GgufFile::architecture() const { return opt_string("general.architecture").value_or(""); }

bool GgufFile::populate(uint64_t max_bytes) const {
    uint64_t total = 0;
    for (const auto& m : maps_) total += m->size();
    if (maps_.empty() || total > max_bytes) return false;
    for (const auto& m : maps_) m->populate(max_bytes);
    return true;
}

void GgufFile::check_unchanged() const {
    for (const auto& m : maps_)
        if (m->changed_underneath())
            throw Error(m->path() + ": the model file was truncated or changed while in use; reload the model");
}

}  // namespace ember
