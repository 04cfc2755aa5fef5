#include "engine/tokenizer/bpe.h"

#include "engine/tokenizer/pair_merge.h"
#include "engine/tokenizer/unicode.h"

namespace ember {

BpeModel::BpeModel(const Vocab& vocab, const std::vector<std::string>& merges, bool ignore_merges, int32_t unk,
                   Alphabet alphabet)
    : vocab_(vocab), ignore_merges_(ignore_merges), unk_(unk), alphabet_(alphabet) {
    ranks_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) ranks_.emplace(merges[i], int32_t(i));  // first wins
    for (int b = 0; b < 256; ++b) append_utf8(byte_sym_[b], unicode::byte_to_cp(uint8_t(b)));
}

int32_t BpeModel::rank(std::string_view left, std::string_view right, std::string& scratch) const {
    scratch.assign(left);
    scratch += ' ';
    scratch += right;
    auto it = ranks_.find(std::string_view(scratch));
    return it == ranks_.end() ? -1 : it->second;
}

std::optional<int32_t> BpeModel::token_for(std::string_view symbol) const {
    // Special tokens come only from matching their text in the input: a merged symbol that
    // happens to equal one (DeepSeek Coder adds 'ø' for the byte 0xF8 as a user-defined
    // token, decoded as the text "ø") would not decode back to the bytes it came from.
    auto id = vocab_.find(symbol);
    if (id) {
        const TokenType t = vocab_.type[*id];
        if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) return std::nullopt;
    }
    return id;
}

void BpeModel::emit(std::string_view symbol, std::vector<int32_t>& out) const {
    if (auto id = token_for(symbol)) {
        out.push_back(*id);
        return;
    }
    if (alphabet_ == Alphabet::Utf8) {
        emit_byte_tokens(symbol, out);
        return;
    }
    // Not a token (a vocab with gaps): fall back to one token per byte symbol; a byte the vocab
    // lacks (StarCoder has none for 0xF5..0xFF, which UTF-8 never uses) becomes the unknown
    // token, or nothing when there is none.
    for (size_t pos = 0; pos < symbol.size();) {
        const auto st = unicode::decode_utf8(symbol, pos);
        const size_t len = st.status == unicode::Utf8Step::Ok ? st.len : 1;
        if (auto id = token_for(symbol.substr(pos, len))) out.push_back(*id);
        else if (unk_ >= 0) out.push_back(unk_);
        pos += len;
    }
}

// <0xXX> per byte (SentencePiece's byte fallback); a byte without one is dropped, as llama.cpp
// does.
void BpeModel::emit_byte_tokens(std::string_view raw, std::vector<int32_t>& out) const {
    static const char* const kHex = "0123456789ABCDEF";
    for (unsigned char c : raw) {
        const char name[6] = {'<', '0', 'x', kHex[c >> 4], kHex[c & 15], '>'};
        if (auto id = vocab_.find(std::string_view(name, 6))) out.push_back(*id);
    }
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
    if (bytes.empty()) return;
    std::string word;
    std::vector<MergeSymbol> sym;
    sym.reserve(bytes.size());
    if (alphabet_ == Alphabet::Utf8) {
        word.assign(bytes);
        for (size_t pos = 0; pos < bytes.size();) {  // a character per symbol; an invalid byte alone
            const auto st = unicode::decode_utf8(bytes, pos);
            const size_t len = st.status == unicode::Utf8Step::Ok ? st.len : 1;
            sym.push_back({pos, len, 0, 0});
            pos += len;
        }
    } else {
        for (unsigned char c : bytes) {
            sym.push_back({word.size(), byte_sym_[c].size(), 0, 0});
            word += byte_sym_[c];
        }
    }
    if (ignore_merges_ && token_for(word)) {
        emit(word, out);
        return;
    }

    const std::string_view w = word;
    std::string scratch;
    // Lowest merge rank first (priority = -rank).
    merge_pairs<int32_t>(sym, [&](int l, int r) -> std::optional<int32_t> {
        const int32_t rk = rank(w.substr(sym[l].begin, sym[l].len), w.substr(sym[r].begin, sym[r].len), scratch);
        return rk >= 0 ? std::optional<int32_t>(-rk) : std::nullopt;
    });
    for (int i = 0; i >= 0; i = sym[i].next) emit(w.substr(sym[i].begin, sym[i].len), out);
}

}  // namespace ember
