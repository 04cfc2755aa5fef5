// The merge loop SentencePiece and BPE share: the symbols of a word form a linked list,
// candidate adjacent pairs wait in a priority queue, and the best pair (highest priority,
// then leftmost) is merged until none may merge. Entries made stale by an earlier merge are
// recognised by their length and skipped, so each merge costs O(log n).
#pragma once
#include <cstddef>
#include <optional>
#include <queue>
#include <vector>

namespace ember {

struct MergeSymbol {
    size_t begin, len;  // bytes of the text; len 0 once merged into its left neighbour
    int prev, next;
};

// Links `sym` (prev/next are set here) and merges it in place. `priority(l, r)` gives the
// priority of merging symbols l and r (higher first) or nullopt if they may not merge.
// Afterwards the surviving symbols are reached from 0 through `next`.
template <class P, class Priority>
void merge_pairs(std::vector<MergeSymbol>& sym, Priority&& priority) {
    if (sym.empty()) return;
    for (size_t i = 0; i < sym.size(); ++i) {
        sym[i].prev = static_cast<int>(i) - 1;
        sym[i].next = i + 1 < sym.size() ? static_cast<int>(i) + 1 : -1;
    }
    struct Pair {
        P priority;
        int left, right;
        size_t len;  // left.len + right.len when queued; stale if that no longer holds
    };
    auto worse = [](const Pair& a, const Pair& b) {
        return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    };
    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
    auto try_add = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        if (const std::optional<P> p = priority(l, r)) queue.push({*p, l, r, sym[l].len + sym[r].len});
    };
    for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
    while (!queue.empty()) {
        const Pair b = queue.top();
        queue.pop();
        MergeSymbol& l = sym[b.left];
        MergeSymbol& r = sym[b.right];
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = b.left;
        try_add(l.prev, b.left);
        try_add(b.left, l.next);
    }
}

}  // namespace ember
