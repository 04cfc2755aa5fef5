// Finds special tokens written in input text, so they become single ids instead of being
// tokenized as text. Control and unknown tokens are candidates only when the caller asks
// (parse_special); user-defined tokens always are, except end-of-generation ones (e.g.
// Phi-3's "</s>"), which are treated like control tokens so that plain text can never end a
// turn (llama.cpp does the same). Leftmost-longest matching over a trie.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ember {

struct Vocab;

class SpecialTokenMatcher {
public:
    // eog: sorted end-of-generation ids.
    SpecialTokenMatcher(const Vocab& vocab, const std::vector<int32_t>& eog);

    struct Fragment {
        std::string_view text;  // plain text when token < 0
        int32_t token = -1;
    };
    std::vector<Fragment> split(std::string_view text, bool parse_special) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> next;  // byte -> node
        int32_t token = -1;
        bool always = false;  // user-defined: matched even without parse_special
    };
    int32_t child(int32_t node, unsigned char c) const;
    std::vector<Node> nodes_;  // nodes_[0] is the root
    std::array<int32_t, 256> root_next_{};
};

}  // namespace ember
