// Grammar-constrained decoding, the token level. TokenVocab is built once per tokenizer (a
// byte trie of every token's decoded bytes); TokenMatcher is one sequence's grammar
// position over it: whether a token may come next (one token: cheap, for the sampler's
// pick or the backend's top candidates) and the full set of allowed tokens (a walk of the
// trie with the grammar state that prunes every subtree the grammar refuses at its first
// byte: what sampling falls back to when no candidate is allowed). Full masks are kept per
// grammar position (a JSON grammar revisits the same positions: every string's inside, every
// comma), so a position's walk is done once per request.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"

namespace ember::grammar {

class TokenVocab {
public:
    // pieces[id]: token id's exact bytes. usable[id] false: never allowed inside a grammar
    // (control / special tokens). eog: end-of-generation ids, allowed only where the
    // grammar can end.
    static std::shared_ptr<const TokenVocab> build(const std::vector<std::string>& pieces,
                                                   const std::vector<bool>& usable, std::vector<int32_t> eog);

    int32_t n_vocab() const { return n_vocab_; }
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return eog_; }  // ascending
    bool usable(int32_t id) const { return id >= 0 && id < n_vocab_ && usable_[static_cast<size_t>(id)]; }
    const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

    struct Node {
        uint32_t edge_begin, edge_end;  // children: edge_byte_/edge_node_ [begin, end)
        uint32_t tok_begin, tok_end;    // tokens whose bytes end here: tok_ [begin, end)
    };
    const std::vector<Node>& nodes() const { return nodes_; }
    const std::vector<uint8_t>& edge_bytes() const { return edge_byte_; }
    const std::vector<uint32_t>& edge_nodes() const { return edge_node_; }
    const std::vector<int32_t>& node_tokens() const { return tok_; }

private:
    int32_t n_vocab_ = 0;
    std::vector<std::string> pieces_;
    std::vector<bool> usable_;
    std::vector<int32_t> eog_;
    std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
    std::vector<uint8_t> edge_byte_;
    std::vector<uint32_t> edge_node_;
    std::vector<int32_t> tok_;
};

class TokenMatcher {
public:
    TokenMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);

    // Token `id` may come next: its bytes are accepted, or it ends generation here.
    bool allows(int32_t id) const;
    // Every token that may come next, in no particular order (the full mask): from the
    // masks kept per position, else by walk_mask() (then kept).
    void allowed_tokens(std::vector<int32_t>& out) const;
    // The full mask by a trie walk, always (no kept masks read or written), in trie order.
    void walk_mask(std::vector<int32_t>& out) const;
    // Advances past `id` (an end-of-generation id leaves the state as it is). Throws
    // ember::Error when the grammar does not allow it.
    void accept(int32_t id);
    // Text already generated (a forced prefix): false, state unchanged, when not allowed.
    bool accept_bytes(std::string_view text) {
        current_ = -1;
        return state_.accept_bytes(text);
    }
    bool can_end() const { return state_.can_end(); }
    const GrammarState& state() const { return state_; }
    const TokenVocab& vocab() const { return *vocab_; }

    struct MaskStats {
        int64_t walked = 0;  // full masks computed by a trie walk
        int64_t kept = 0;    // full masks taken from those kept per position
    };
    const MaskStats& mask_stats() const { return mask_stats_; }

private:
    void walk(uint32_t node, int32_t state, std::vector<int32_t>& out) const;
    // Positions met so far, numbered, with their transitions by byte (memoised: a trie walk
    // meets the same few positions at thousands of nodes, inside a string nearly always the
    // same one). -1: the byte is refused.
    int32_t intern(const GrammarState& s) const;
    int32_t step(int32_t state, uint8_t byte) const;
    void reset_cache_if_full() const;
    int32_t current() const;  // state_'s number among the interned positions

    std::shared_ptr<const TokenVocab> vocab_;
    GrammarState state_;
    mutable std::vector<GrammarState> states_;
    mutable std::unordered_map<std::string, int32_t> ids_;
    mutable std::vector<int32_t> next_;  // next_[state * 256 + byte]: -2 not known yet
    mutable int32_t current_ = -1;       // state_'s number; -1: not interned since it changed
    // Full masks by position (GrammarState::key()), as bitsets of n_vocab bits: a few KiB
    // each, so hundreds fit where id lists would take ~200 KiB inside a string.
    mutable std::unordered_map<std::string, std::vector<uint64_t>> masks_;
    mutable MaskStats mask_stats_;
};

}  // namespace ember::grammar
