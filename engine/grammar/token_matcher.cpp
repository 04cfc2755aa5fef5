// TokenVocab's trie and TokenMatcher's checks (engine/grammar/token_matcher.h). The trie is
// built from the pieces sorted bytewise, so each node's children are contiguous; the walk
// keeps one GrammarState per depth, reusing their buffers from walk to walk.
#include "engine/grammar/token_matcher.h"

#include <algorithm>
#include <numeric>

namespace ember::grammar {

std::shared_ptr<const TokenVocab> TokenVocab::build(const std::vector<std::string>& pieces,
                                                    const std::vector<bool>& usable, std::vector<int32_t> eog) {
    if (pieces.size() != usable.size()) throw Error("token vocab: pieces and usable flags differ in length");
    auto v = std::make_shared<TokenVocab>();
    v->n_vocab_ = static_cast<int32_t>(pieces.size());
    v->pieces_ = pieces;
    v->usable_ = usable;
    std::sort(eog.begin(), eog.end());
    v->eog_ = std::move(eog);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < pieces.size(); ++i)
        if (usable[i] && !pieces[i].empty() && !v->is_eog(static_cast<int32_t>(i)))
            ids.push_back(static_cast<int32_t>(i));
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        const std::string &pa = pieces[static_cast<size_t>(a)], &pb = pieces[static_cast<size_t>(b)];
        return pa != pb ? pa < pb : a < b;
    });
    // Breadth-first over ranges of `ids` sharing a prefix: node = (range, depth).
    struct Pending {
        size_t begin, end, depth;
    };
    std::vector<Pending> queue{{0, ids.size(), 0}};
    v->nodes_.push_back({});
    for (size_t q = 0; q < queue.size(); ++q) {
        auto [b, e, depth] = queue[q];
        TokenVocab::Node& node = v->nodes_[q];
        node.tok_begin = static_cast<uint32_t>(v->tok_.size());
        while (b < e && pieces[static_cast<size_t>(ids[b])].size() == depth) v->tok_.push_back(ids[b++]);
        node.tok_end = static_cast<uint32_t>(v->tok_.size());
        node.edge_begin = static_cast<uint32_t>(v->edge_byte_.size());
        while (b < e) {
            const auto byte = static_cast<uint8_t>(pieces[static_cast<size_t>(ids[b])][depth]);
            size_t m = b;
            while (m < e && static_cast<uint8_t>(pieces[static_cast<size_t>(ids[m])][depth]) == byte) ++m;
            v->edge_byte_.push_back(byte);
            v->edge_node_.push_back(static_cast<uint32_t>(queue.size()));
            queue.push_back({b, m, depth + 1});
            v->nodes_.push_back({});
            b = m;
        }
        v->nodes_[q].edge_end = static_cast<uint32_t>(v->edge_byte_.size());
    }
    return v;
}

bool TokenVocab::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

TokenMatcher::TokenMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab)
    : vocab_(std::move(vocab)), state_(std::move(grammar)) {
    if (!vocab_) throw Error("token matcher: no vocabulary");
}

bool TokenMatcher::allows(int32_t id) const {
    if (vocab_->is_eog(id)) return state_.can_end();
    if (!vocab_->usable(id) || vocab_->piece(id).empty()) return false;
    GrammarState s = state_;
    return s.accept_bytes(vocab_->piece(id));
}

void TokenMatcher::walk(uint32_t node, size_t depth, std::vector<int32_t>& out) const {
    const TokenVocab::Node& n = vocab_->nodes()[node];
    const std::vector<int32_t>& toks = vocab_->node_tokens();
    if (depth > 0) out.insert(out.end(), toks.begin() + n.tok_begin, toks.begin() + n.tok_end);
    if (n.edge_begin == n.edge_end) return;
    if (levels_.size() <= depth + 1) levels_.resize(depth + 2, state_);
    for (uint32_t e = n.edge_begin; e < n.edge_end; ++e) {
        GrammarState& next = levels_[depth + 1];
        next = levels_[depth];
        if (next.accept_byte(vocab_->edge_bytes()[e])) walk(vocab_->edge_nodes()[e], depth + 1, out);
    }
}

void TokenMatcher::allowed_tokens(std::vector<int32_t>& out) const {
    out.clear();
    if (levels_.empty()) levels_.push_back(state_);
    else levels_[0] = state_;
    walk(0, 0, out);
    if (state_.can_end())
        for (int32_t id = 0; id < vocab_->n_vocab(); ++id)
            if (vocab_->is_eog(id)) out.push_back(id);
    std::sort(out.begin(), out.end());
}

void TokenMatcher::accept(int32_t id) {
    if (vocab_->is_eog(id)) {
        if (!state_.can_end()) throw Error("grammar: end of generation where the grammar cannot end");
        return;
    }
    if (!vocab_->usable(id) || !state_.accept_bytes(vocab_->piece(id)))
        throw Error("grammar: token " + std::to_string(id) + " is not allowed here");
}

}  // namespace ember::grammar
