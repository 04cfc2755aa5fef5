// Split GGUF models, as llama.cpp's gguf-split writes them: parts named
// "<stem>-00001-of-00003.gguf" ... "-00003-of-00003.gguf"; the first part holds all metadata,
// every part holds "split.no" (0-based), "split.count" and its share of the tensors, and the
// first part "split.tensors.count" (the total). GgufFile::open of a first part opens the
// others beside it and joins them (GgufFile::join_split): the engine loads one model.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

inline constexpr const char* kSplitNoKey = "split.no";
inline constexpr const char* kSplitCountKey = "split.count";
inline constexpr const char* kSplitTensorsCountKey = "split.tensors.count";

// "<stem>-00002-of-00005.gguf" -> {stem, 2, 5}; nullopt for any other name (or a part number
// of 0 or above the count). Read from the end without a regex: names come from servers.
struct SplitName {
    std::string stem;
    uint32_t index = 0;  // 1-based
    uint32_t count = 0;
};
std::optional<SplitName> split_name_of(std::string_view path);

// "<stem>-0000<index>-of-0000<count>.gguf"
std::string split_part_name(const std::string& stem, uint32_t index, uint32_t count);

// The paths of parts 2..count beside a first part's path. Throws ember::Error when the path
// is not named as the first of `count` parts.
std::vector<std::string> split_part_paths(const std::string& first_part, uint32_t count);

}  // namespace ember
