// SentencePiece-style encoding (tokenizer.ggml.model = "llama"): start from single UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the vocab token with
// the highest score (leftmost on ties), then map what is left to ids, falling back to
// <0xXX> byte tokens (or the unknown token) for text the vocab lacks.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ember {

struct Vocab;

class SpmModel {
public:
    SpmModel(const Vocab& vocab, int32_t unk);
    // `text` is already escaped: spaces are U+2581 and any space prefix is in place.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    const Vocab& vocab_;
    std::array<int32_t, 256> byte_token_{};  // id for each raw byte, -1 if none
};

}  // namespace ember
