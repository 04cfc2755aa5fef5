#include "engine/tokenizer/special_tokens.h"

#include <algorithm>

#include "engine/tokenizer/vocab.h"

namespace ember {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab, const std::vector<int32_t>& eog) : nodes_(1) {
    root_next_.fill(-1);
    for (int32_t id = 0; id < vocab.size(); ++id) {
        const TokenType t = vocab.type[id];
        if (t != TokenType::Control && t != TokenType::Unknown && t != TokenType::UserDefined) continue;
        const std::string& s = vocab.text[id];
        if (s.empty()) continue;
        int32_t node = 0;
        for (unsigned char c : s) {
            int32_t n = child(node, c);
            if (n < 0) {
                n = int32_t(nodes_.size());
                nodes_.emplace_back();
                if (node == 0) root_next_[c] = n;
                else nodes_[node].next.emplace_back(c, n);
            }
            node = n;
        }
        if (nodes_[node].token < 0) {  // the lowest id wins if a text repeats
            nodes_[node].token = id;
            nodes_[node].always = t == TokenType::UserDefined && !std::binary_search(eog.begin(), eog.end(), id);
        }
    }
}

int32_t SpecialTokenMatcher::child(int32_t node, unsigned char c) const {
    if (node == 0) return root_next_[c];
    for (const auto& [byte, n] : nodes_[node].next)
        if (byte == c) return n;
    return -1;
}

std::vector<SpecialTokenMatcher::Fragment> SpecialTokenMatcher::split(std::string_view text, bool parse_special) const {
    std::vector<Fragment> out;
    size_t plain_start = 0;
    for (size_t i = 0; i < text.size();) {
        // Longest candidate starting at i.
        int32_t best = -1;
        size_t best_end = 0;
        int32_t node = 0;
        for (size_t j = i; j < text.size(); ++j) {
            node = child(node, static_cast<unsigned char>(text[j]));
            if (node < 0) break;
            const Node& n = nodes_[node];
            if (n.token >= 0 && (parse_special || n.always)) {
                best = n.token;
                best_end = j + 1;
            }
        }
        if (best < 0) {
            ++i;
            continue;
        }
        if (i > plain_start) out.push_back({text.substr(plain_start, i - plain_start), -1});
        out.push_back({text.substr(i, best_end - i), best});
        i = plain_start = best_end;
    }
    if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
    return out;
}

}  // namespace ember
