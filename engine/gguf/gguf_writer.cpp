// GGUF v3 writer. Layout: header, metadata, tensor infos, padding, tensor data (each tensor
// padded to the alignment), matching what the reader (and llama.cpp) expect.
#include "engine/gguf/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/gguf/gguf_split.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

// Byte sink that appends to a vector (tests) or streams to a FILE (models of many GB).
struct VectorSink {
    std::vector<uint8_t>& out;
    void write(const void* p, size_t n) {
        // resize + memcpy rather than insert(): GCC 12 warns falsely (-Wstringop-overflow) on
        // the inlined insert of small fixed-size values.
        const size_t old = out.size();
        out.resize(old + n);
        if (n) std::memcpy(out.data() + old, p, n);
    }
    uint64_t pos() const { return out.size(); }
};

struct FileSink {
    std::FILE* f;
    std::string path;
    uint64_t written = 0;
    void write(const void* p, size_t n) {
        if (n && std::fwrite(p, 1, n, f) != n) throw Error(path + ": write failed (disk full?)");
        written += n;
    }
    uint64_t pos() const { return written; }
};

template <class Sink, class T>
void put(Sink& s, T v) {
    s.write(&v, sizeof v);
}

template <class Sink>
void put_string(Sink& s, const std::string& str) {
    put<Sink, uint64_t>(s, str.size());
    s.write(str.data(), str.size());
}

template <class Sink>
void put_value(Sink& s, const GgufValue& v) {
    switch (v.type) {
        case GgufType::U8:
            put<Sink, uint8_t>(s, static_cast<uint8_t>(v.as_u64()));
            break;
        case GgufType::U16:
            put<Sink, uint16_t>(s, static_cast<uint16_t>(v.as_u64()));
            break;
        case GgufType::U32:
            put<Sink, uint32_t>(s, static_cast<uint32_t>(v.as_u64()));
            break;
        case GgufType::U64:
            put<Sink, uint64_t>(s, v.as_u64());
            break;
        case GgufType::I8:
            put<Sink, int8_t>(s, static_cast<int8_t>(v.as_i64()));
            break;
        case GgufType::I16:
            put<Sink, int16_t>(s, static_cast<int16_t>(v.as_i64()));
            break;
        case GgufType::I32:
            put<Sink, int32_t>(s, static_cast<int32_t>(v.as_i64()));
            break;
        case GgufType::I64:
            put<Sink, int64_t>(s, v.as_i64());
            break;
        case GgufType::F32:
            put<Sink, float>(s, static_cast<float>(v.as_f64()));
            break;
        case GgufType::F64:
            put<Sink, double>(s, v.as_f64());
            break;
        case GgufType::BOOL:
            put<Sink, uint8_t>(s, v.as_bool() ? 1 : 0);
            break;
        case GgufType::STRING:
            put_string(s, v.as_string());
            break;
        case GgufType::ARRAY: {
            const auto& a = v.as_array();
            put<Sink, uint32_t>(s, static_cast<uint32_t>(a.elem_type));
            put<Sink, uint64_t>(s, a.items.size());
            for (const auto& item : a.items) put_value(s, item);
            break;
        }
    }
}

template <class Sink>
void pad_to(Sink& s, uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    uint64_t n = (alignment - s.pos() % alignment) % alignment;
    while (n > 0) {
        const size_t k = n < sizeof zeros ? static_cast<size_t>(n) : sizeof zeros;
        s.write(zeros, k);
        n -= k;
    }
}

uint64_t tensor_bytes(const std::string& name, DType type, const std::vector<uint64_t>& dims) {
    const auto info = dtype_info(static_cast<uint32_t>(type));
    if (!info) throw Error("tensor '" + name + "': unknown type");
    if (dims.empty() || dims.size() > 4) throw Error("tensor '" + name + "': needs 1..4 dimensions");
    if (dims[0] % info->block_elems) throw Error("tensor '" + name + "': row length not a multiple of the block size");
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    return n / info->block_elems * info->block_bytes;
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
    for (auto& [k, v] : kv_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<uint64_t> dims,
                            std::vector<uint8_t> bytes) {
    const uint64_t n = tensor_bytes(name, type, dims);
    if (bytes.size() != n)
        throw Error("tensor '" + name + "': got " + std::to_string(bytes.size()) + " bytes, shape needs " +
                    std::to_string(n));
    tensors_.push_back({name, type, std::move(dims), n, std::move(bytes), nullptr});
}

void GgufWriter::add_tensor_lazy(const std::string& name, DType type, std::vector<uint64_t> dims, Producer produce) {
    const uint64_t n = tensor_bytes(name, type, dims);
    tensors_.push_back({name, type, std::move(dims), n, {}, std::move(produce)});
}

template <class Sink>
void GgufWriter::serialize(Sink& s, bool with_data) const {
    put<Sink, uint32_t>(s, 0x46554747);
    put<Sink, uint32_t>(s, 3);
    put<Sink, uint64_t>(s, tensors_.size());
    const bool has_alignment =
        std::any_of(kv_.begin(), kv_.end(), [](auto& kv) { return kv.first == "general.alignment"; });
    put<Sink, uint64_t>(s, kv_.size() + (has_alignment || alignment_ == 32 ? 0 : 1));
    for (const auto& [k, v] : kv_) {
        put_string(s, k);
        put<Sink, uint32_t>(s, static_cast<uint32_t>(v.type));
        put_value(s, v);
    }
    if (!has_alignment && alignment_ != 32) {
        put_string(s, std::string("general.alignment"));
        put<Sink, uint32_t>(s, static_cast<uint32_t>(GgufType::U32));
        put<Sink, uint32_t>(s, alignment_);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        put_string(s, t.name);
        put<Sink, uint32_t>(s, static_cast<uint32_t>(t.dims.size()));
        for (auto d : t.dims) put<Sink, uint64_t>(s, d);
        put<Sink, uint32_t>(s, static_cast<uint32_t>(t.type));
        put<Sink, uint64_t>(s, offset);
        offset += (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
    }
    pad_to(s, alignment_);
    if (!with_data) return;
    std::vector<uint8_t> scratch;
    for (const auto& t : tensors_) {
        if (t.produce) {
            scratch.resize(static_cast<size_t>(t.n_bytes));
            t.produce(scratch.data(), scratch.size());
            s.write(scratch.data(), scratch.size());
        } else {
            s.write(t.bytes.data(), t.bytes.size());
        }
        pad_to(s, alignment_);
    }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out;
    VectorSink sink{out};
    serialize(sink);
    return out;
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
    std::vector<uint8_t> out;
    VectorSink sink{out};
    serialize(sink, false);
    return out;
}

uint64_t GgufWriter::file_size() const {
    uint64_t n = header_bytes().size();
    for (const auto& t : tensors_) n += (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
    return n;
}

void GgufWriter::write_file(const std::string& path) const {
    const std::string tmp = path + ".tmp";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "wb"), std::fclose);
    if (!f) throw Error(tmp + ": cannot create: " + std::strerror(errno));
    FileSink sink{f.get(), tmp};
    try {
        serialize(sink);
        if (std::fflush(f.get()) != 0) throw Error(tmp + ": write failed (disk full?)");
    } catch (...) {
        f.reset();
        std::remove(tmp.c_str());
        throw;
    }
    f.reset();
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw Error(path + ": cannot rename from " + tmp + ": " + ec.message());
}

std::vector<GgufWriter> GgufWriter::split(uint32_t n_parts) const {
    if (n_parts == 0 || n_parts > tensors_.size())
        throw Error("cannot split " + std::to_string(tensors_.size()) + " tensors into " + std::to_string(n_parts) +
                    " parts");
    std::vector<GgufWriter> parts(n_parts, GgufWriter(alignment_));
    for (uint32_t i = 0; i < n_parts; ++i) {
        GgufWriter& w = parts[i];
        if (i == 0) w.kv_ = kv_;
        w.set(kSplitNoKey, GgufValue{GgufType::U16, uint64_t{i}});
        w.set(kSplitCountKey, GgufValue{GgufType::U16, uint64_t{n_parts}});
        if (i == 0) w.set(kSplitTensorsCountKey, GgufValue::i32(static_cast<int32_t>(tensors_.size())));
        const size_t begin = tensors_.size() * i / n_parts, end = tensors_.size() * (i + 1) / n_parts;
        w.tensors_.assign(tensors_.begin() + static_cast<ptrdiff_t>(begin),
                          tensors_.begin() + static_cast<ptrdiff_t>(end));
    }
    return parts;
}

}  // namespace ember
