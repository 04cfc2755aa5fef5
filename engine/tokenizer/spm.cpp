#include "engine/tokenizer/spm.h"

#include <cstdio>

#include "engine/tokenizer/pair_merge.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace ember {

SpmModel::SpmModel(const Vocab& vocab, int32_t unk) : vocab_(vocab) {
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        auto id = vocab.find(hex);
        if (!id) id = vocab.find(std::string(1, char(b)));  // vocabs that store bytes as text
        byte_token_[b] = id ? *id : unk;
    }
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
    // One symbol per UTF-8 character; an invalid byte is a symbol of its own.
    std::vector<MergeSymbol> sym;
    for (size_t pos = 0; pos < text.size();) {
        const auto st = unicode::decode_utf8(text, pos);
        const size_t len = st.status == unicode::Utf8Step::Ok ? st.len : 1;
        sym.push_back({pos, len, 0, 0});
        pos += len;
    }
    if (sym.empty()) return;
    // Highest vocabulary score first.
    merge_pairs<float>(sym, [&](int l, int r) -> std::optional<float> {
        const auto id = vocab_.find(text.substr(sym[l].begin, sym[l].len + sym[r].len));
        return id ? std::optional<float>(vocab_.score[*id]) : std::nullopt;
    });
    for (int i = 0; i >= 0; i = sym[i].next) {
        const std::string_view piece = text.substr(sym[i].begin, sym[i].len);
        if (auto id = vocab_.find(piece)) {
            out.push_back(*id);
            continue;
        }
        for (unsigned char c : piece)  // byte fallback
            if (byte_token_[c] >= 0) out.push_back(byte_token_[c]);
    }
}

}  // namespace ember
