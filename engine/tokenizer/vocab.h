// The token table shared by the SPM and BPE models (internal to engine/tokenizer).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace ember {

// Hash that lets an unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Vocab {
    std::vector<std::string> text;
    std::vector<float> score;
    std::vector<TokenType> type;
    StringMap<int32_t> ids;  // text -> id (the lowest id if a text repeats)

    int32_t size() const { return int32_t(text.size()); }
    std::optional<int32_t> find(std::string_view s) const {
        auto it = ids.find(s);
        if (it == ids.end()) return std::nullopt;
        return it->second;
    }
};

}  // namespace ember
