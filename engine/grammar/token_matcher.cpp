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

namespace {
constexpr int32_t kUnknown = -2, kRefused = -1;
constexpr size_t kMaxCachedStates = 4096;  // 4 MiB of transitions; then the cache starts again
constexpr size_t kMaxMaskBytes = 8 << 20;  // kept full masks per matcher; then they start again
}  // namespace

int32_t TokenMatcher::intern(const GrammarState& s) const {
    auto [it, fresh] = ids_.try_emplace(s.key(), static_cast<int32_t>(states_.size()));
    if (fresh) {
        states_.push_back(s);
        next_.resize(states_.size() * 256, kUnknown);
    }
    return it->second;
}

int32_t TokenMatcher::step(int32_t state, uint8_t byte) const {
    int32_t& to = next_[static_cast<size_t>(state) * 256 + byte];
    if (to != kUnknown) return to;
    GrammarState s = states_[static_cast<size_t>(state)];
    const int32_t result = s.accept_byte(byte) ? intern(s) : kRefused;
    next_[static_cast<size_t>(state) * 256 + byte] = result;  // `to` may dangle: intern grew next_
    return result;
}

void TokenMatcher::reset_cache_if_full() const {
    if (states_.size() < kMaxCachedStates) return;
    states_.clear();
    ids_.clear();
    next_.clear();
    current_ = -1;
}

int32_t TokenMatcher::current() const {
    reset_cache_if_full();
    if (current_ < 0) current_ = intern(state_);
    return current_;
}

bool TokenMatcher::allows(int32_t id) const {
    if (vocab_->is_eog(id)) return state_.can_end();
    if (!vocab_->usable(id) || vocab_->piece(id).empty()) return false;
    int32_t s = current();
    for (char c : vocab_->piece(id))
        if ((s = step(s, static_cast<uint8_t>(c))) == kRefused) return false;
    return true;
}

void TokenMatcher::walk(uint32_t node, int32_t state, std::vector<int32_t>& out) const {
    const TokenVocab::Node& n = vocab_->nodes()[node];
    const std::vector<int32_t>& toks = vocab_->node_tokens();
    if (node != 0) out.insert(out.end(), toks.begin() + n.tok_begin, toks.begin() + n.tok_end);
    for (uint32_t e = n.edge_begin; e < n.edge_end; ++e) {
        const int32_t next = step(state, vocab_->edge_bytes()[e]);
        if (next != kRefused) walk(vocab_->edge_nodes()[e], next, out);
    }
}

void TokenMatcher::walk_mask(std::vector<int32_t>& out) const {
    out.clear();
    walk(0, current(), out);
    if (state_.can_end()) out.insert(out.end(), vocab_->eog_ids().begin(), vocab_->eog_ids().end());
}

void TokenMatcher::allowed_tokens(std::vector<int32_t>& out) const {
    const std::string key = state_.key();
    if (const auto it = masks_.find(key); it != masks_.end()) {
        ++mask_stats_.kept;
        out.clear();
        const std::vector<uint64_t>& bits = it->second;
        for (size_t w = 0; w < bits.size(); ++w)
            for (uint64_t b = bits[w]; b; b &= b - 1)
                out.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b))));
        return;
    }
    ++mask_stats_.walked;
    walk_mask(out);
    const size_t words = (static_cast<size_t>(vocab_->n_vocab()) + 63) / 64;
    if ((masks_.size() + 1) * words * sizeof(uint64_t) > kMaxMaskBytes) masks_.clear();
    std::vector<uint64_t>& bits = masks_[key];
    bits.assign(words, 0);
    for (int32_t id : out) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
}

void TokenMatcher::accept(int32_t id) {
    current_ = -1;
    if (vocab_->is_eog(id)) {
        if (!state_.can_end()) throw Error("grammar: end of generation where the grammar cannot end");
        return;
    }
    if (!vocab_->usable(id) || !state_.accept_bytes(vocab_->piece(id)))
        throw Error("grammar: token " + std::to_string(id) + " is not allowed here");
}

}  // namespace ember::grammar
