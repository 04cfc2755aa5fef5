#include "engine/gguf/gguf_split.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "engine/gguf/gguf.h"
#include "kernels/common/error.h"

namespace ember {

std::optional<SplitName> split_name_of(std::string_view path) {
    constexpr size_t kTail = 20;  // "-00001-of-00003.gguf"
    if (path.size() <= kTail) return std::nullopt;
    std::string ext(path.substr(path.size() - 5));
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext != ".gguf") return std::nullopt;
    const std::string_view t = path.substr(path.size() - kTail, kTail - 5);  // "-00001-of-00003"
    auto digits = [](std::string_view d) {
        return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (t[0] != '-' || t.substr(6, 4) != "-of-" || !digits(t.substr(1, 5)) || !digits(t.substr(10, 5)))
        return std::nullopt;
    SplitName p;
    p.stem = std::string(path.substr(0, path.size() - kTail));
    p.index = static_cast<uint32_t>(std::stoul(std::string(t.substr(1, 5))));
    p.count = static_cast<uint32_t>(std::stoul(std::string(t.substr(10, 5))));
    if (p.index == 0 || p.count == 0 || p.index > p.count) return std::nullopt;
    return p;
}

std::string split_part_name(const std::string& stem, uint32_t index, uint32_t count) {
    char suffix[40];
    std::snprintf(suffix, sizeof suffix, "-%05u-of-%05u.gguf", index, count);
    return stem + suffix;
}

std::vector<std::string> split_part_paths(const std::string& first_part, uint32_t count) {
    const auto name = split_name_of(first_part);
    if (!name || name->index != 1 || name->count != count)
        throw Error(first_part + ": the first part of a " + std::to_string(count) +
                    "-part split model must be named <name>-00001-of-" + split_part_name("", count, count).substr(10));
    std::vector<std::string> out;
    for (uint32_t i = 2; i <= count; ++i) out.push_back(split_part_name(name->stem, i, count));
    return out;
}

uint32_t GgufFile::split_count() const {
    const uint64_t n = opt_u64(kSplitCountKey).value_or(1);
    if (n == 0 || n > 99999) throw Error(path_ + ": " + kSplitCountKey + " = " + std::to_string(n));
    return static_cast<uint32_t>(n);
}

GgufFile GgufFile::join_split(std::vector<GgufFile> parts) {
    if (parts.empty()) throw Error("a split model with no parts");
    GgufFile out = std::move(parts.front());
    const uint32_t count = out.split_count();
    if (parts.size() != count)
        throw Error(out.path_ + ": " + std::to_string(parts.size()) + " parts given for a " + std::to_string(count) +
                    "-part split model");
    for (uint32_t i = 0; i < count; ++i) {
        GgufFile& p = i == 0 ? out : parts[i];
        if (p.opt_u64(kSplitNoKey).value_or(0) != i || p.split_count() != count)
            throw Error(p.path_ + ": is not part " + std::to_string(i + 1) + " of " + std::to_string(count) + " (" +
                        kSplitNoKey + " " + std::to_string(p.opt_u64(kSplitNoKey).value_or(0)) + ", " + kSplitCountKey +
                        " " + std::to_string(p.split_count()) + ")");
        if (i == 0) continue;
        out.size_ += p.size_;
        for (GgufTensor& t : p.tensors_) {
            if (out.tensor_index_.count(t.name))
                throw Error(p.path_ + ": tensor '" + t.name + "' is also in an earlier part");
            out.tensor_index_.emplace(t.name, out.tensors_.size());
            out.tensors_.push_back(std::move(t));
        }
        for (auto& m : p.maps_) out.maps_.push_back(std::move(m));
    }
    if (const auto n = out.opt_u64(kSplitTensorsCountKey); n && *n != out.tensors_.size())
        throw Error(out.path_ + ": " + kSplitTensorsCountKey + " = " + std::to_string(*n) + " but the parts hold " +
                    std::to_string(out.tensors_.size()) + " tensors");
    return out;
}

}  // namespace ember
