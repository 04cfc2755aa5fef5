// Byte-level BPE (tokenizer.ggml.model = "gpt2"): one pre-tokenized piece at a time, map its
// bytes to GPT-2's printable alphabet, then repeatedly merge the adjacent pair with the best
// (lowest) rank in tokenizer.ggml.merges, leftmost on ties. A priority queue over a linked
// list of symbols keeps this O(n log n) per piece.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/vocab.h"

namespace ember {

class BpeModel {
public:
    // merges: "left right" strings in the byte-level alphabet, best first.
    // ignore_merges: a piece that is already a token is emitted as is (Llama 3).
    // unk: id for bytes the vocab lacks, or -1 to drop them.
    BpeModel(const Vocab& vocab, const std::vector<std::string>& merges, bool ignore_merges, int32_t unk);

    // Appends the ids of one piece of raw input bytes.
    void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

    size_t n_merges() const { return ranks_.size(); }

private:
    int32_t rank(std::string_view left, std::string_view right, std::string& scratch) const;
    std::optional<int32_t> token_for(std::string_view symbol) const;
    void emit(std::string_view symbol, std::vector<int32_t>& out) const;

    const Vocab& vocab_;
    StringMap<int32_t> ranks_;  // "left right" -> position in the merges list
    bool ignore_merges_;
    int32_t unk_;
    std::array<std::string, 256> byte_sym_;  // UTF-8 of each byte's alphabet code point
};

}  // namespace ember
