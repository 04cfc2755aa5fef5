// BPE: one pre-tokenized piece at a time, split into symbols, then repeatedly merge the
// adjacent pair with the best (lowest) rank in tokenizer.ggml.merges, leftmost on ties. A
// priority queue over a linked list of symbols keeps this O(n log n) per piece.
//  - Byte level (tokenizer.ggml.model = "gpt2"): a symbol per byte, in GPT-2's printable
//    alphabet; a symbol that is no token falls back to its byte symbols.
//  - UTF-8 (tokenizer.ggml.model = "gemma4"): a symbol per character, raw UTF-8 (the caller
//    has put U+2581 for spaces); a symbol that is no token falls back to <0xXX> byte tokens.
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
    enum class Alphabet { ByteLevel, Utf8 };
    // merges: "left right" strings in the alphabet's symbols, best first.
    // ignore_merges: a piece that is already a token is emitted as is (Llama 3).
    // unk: id for bytes the vocab lacks, or -1 to drop them.
    BpeModel(const Vocab& vocab, const std::vector<std::string>& merges, bool ignore_merges, int32_t unk,
             Alphabet alphabet = Alphabet::ByteLevel);

    // Appends the ids of one piece of raw input bytes.
    void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

    size_t n_merges() const { return ranks_.size(); }

private:
    int32_t rank(std::string_view left, std::string_view right, std::string& scratch) const;
    std::optional<int32_t> token_for(std::string_view symbol) const;
    void emit(std::string_view symbol, std::vector<int32_t>& out) const;
    void emit_byte_tokens(std::string_view raw, std::vector<int32_t>& out) const;

    const Vocab& vocab_;
    StringMap<int32_t> ranks_;  // "left right" -> position in the merges list
    bool ignore_merges_;
    int32_t unk_;
    Alphabet alphabet_;
    std::array<std::string, 256> byte_sym_;  // UTF-8 of each byte's alphabet code point
};

}  // namespace ember
