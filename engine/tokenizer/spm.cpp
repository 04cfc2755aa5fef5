#include "engine/tokenizer/spm.h"

#include <cstdio>
#include <queue>

#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace ember {

namespace {
struct Symbol {
    size_t begin, len;  // bytes of the text; len 0 once merged into its left neighbour
    int prev, next;
};
struct Bigram {
    float score;
    int left, right;
    size_t len;  // left.len + right.len when queued; stale if that no longer holds
};
struct WorseBigram {  // priority: higher score, then the leftmost pair
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};
}  // namespace

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
    std::vector<Symbol> sym;
    for (size_t pos = 0; pos < text.size();) {
        const auto st = unicode::decode_utf8(text, pos);
        const size_t len = st.status == unicode::Utf8Step::Ok ? st.len : 1;
        sym.push_back({pos, len, int(sym.size()) - 1, int(sym.size()) + 1});
        pos += len;
    }
    if (sym.empty()) return;
    sym.back().next = -1;

    std::priority_queue<Bigram, std::vector<Bigram>, WorseBigram> queue;
    auto try_add = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        const size_t len = sym[l].len + sym[r].len;
        if (auto id = vocab_.find(text.substr(sym[l].begin, len)))
            queue.push({vocab_.score[*id], l, r, len});
    };
    for (size_t i = 1; i < sym.size(); ++i) try_add(int(i) - 1, int(i));

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol& l = sym[b.left];
        Symbol& r = sym[b.right];
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = b.left;
        try_add(l.prev, b.left);
        try_add(b.left, l.next);
    }

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
