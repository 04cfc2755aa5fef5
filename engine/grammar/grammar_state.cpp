// GrammarState: the set of parse stacks a text so far leaves open (a nondeterministic
// pushdown matcher, as llama.cpp's). Every stack's top is a character set to match next;
// matching one pops it, pushes what follows in its sequence and expands rule references
// until a character set is on top again. Identical stacks are merged, so an ambiguous
// grammar costs only as many stacks as it has distinct positions.
#include <algorithm>
#include <cstring>

#include "engine/grammar/grammar.h"

namespace ember::grammar {
namespace {

bool sequence_over(const Elem& e) { return e.kind == Elem::End || e.kind == Elem::Alt; }

}  // namespace

GrammarState::GrammarState(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
    if (!g_) throw Error("grammar state: no grammar");
    std::vector<uint32_t> start;
    // The root rule's alternatives, each as a stack.
    const std::vector<Elem>& el = g_->elems();
    for (uint32_t p = g_->rule_start(g_->root());; ++p) {
        start.clear();
        if (!sequence_over(el[p])) start.push_back(p);
        expand(start);
        while (!sequence_over(el[p])) ++p;
        if (el[p].kind == Elem::End) break;
    }
    data_ = std::move(scratch_data_);
    ends_ = std::move(scratch_ends_);
    scratch_data_.clear();
    scratch_ends_.clear();
}

// Adds the stack [b, e) to the scratch set unless it is there already.
void GrammarState::add_stack(const uint32_t* b, const uint32_t* e) {
    const size_t n = static_cast<size_t>(e - b);
    uint32_t prev = 0;
    for (uint32_t end : scratch_ends_) {
        if (end - prev == n && std::equal(b, e, scratch_data_.begin() + prev)) return;
        prev = end;
    }
    if (scratch_ends_.size() >= kMaxStacks) return;  // counted as refusal by the caller
    scratch_data_.insert(scratch_data_.end(), b, e);
    scratch_ends_.push_back(static_cast<uint32_t>(scratch_data_.size()));
}

// Replaces rule references on top of `stack` by each of the rule's alternatives, until
// every resulting stack has a character set on top (or is empty: the root has finished).
void GrammarState::expand(std::vector<uint32_t>& stack) {
    const std::vector<Elem>& el = g_->elems();
    if (stack.empty() || el[stack.back()].kind == Elem::Char) {
        add_stack(stack.data(), stack.data() + stack.size());
        return;
    }
    const uint32_t top = stack.back();
    stack.pop_back();
    const bool more = !sequence_over(el[top + 1]);
    if (more) stack.push_back(top + 1);  // what follows the reference
    const size_t base = stack.size();
    for (uint32_t p = g_->rule_start(el[top].value);; ++p) {
        stack.resize(base);
        if (!sequence_over(el[p])) stack.push_back(p);
        expand(stack);
        while (!sequence_over(el[p])) ++p;
        if (el[p].kind == Elem::End) break;
    }
    stack.resize(base);
    if (more) stack.pop_back();
    stack.push_back(top);
}

// any: the character is known to match every stack (settle_partial), whatever its value.
bool GrammarState::accept_code_point(uint32_t cp, bool any) {
    const std::vector<Elem>& el = g_->elems();
    const std::vector<CharSet>& sets = g_->char_sets();
    scratch_data_.clear();
    scratch_ends_.clear();
    std::vector<uint32_t>& stack = scratch_stack_;  // reused: no allocation per character
    uint32_t prev = 0;
    for (uint32_t end : ends_) {
        const uint32_t b = prev;
        prev = end;
        if (end == b) continue;  // finished: nothing more to match
        const uint32_t top = data_[end - 1];
        if (!any && !sets[el[top].value].matches(cp)) continue;
        stack.assign(data_.begin() + b, data_.begin() + end - 1);
        if (!sequence_over(el[top + 1])) stack.push_back(top + 1);
        expand(stack);
    }
    stack.clear();
    if (scratch_ends_.empty() || scratch_ends_.size() >= kMaxStacks) {
        scratch_data_.clear();
        scratch_ends_.clear();
        return false;
    }
    std::swap(data_, scratch_data_);
    std::swap(ends_, scratch_ends_);
    scratch_data_.clear();
    scratch_ends_.clear();
    return true;
}

// Some stack may match a code point in [lo, hi] (the bytes of a character read so far).
// `length`: the character's bytes in all; its shortest form sets the least code point (an
// overlong encoding is never valid UTF-8).
bool GrammarState::partial_possible(uint32_t lo, uint32_t hi, int length) const {
    static constexpr uint32_t kLeast[5] = {0, 0, 0x80, 0x800, 0x10000};
    lo = std::max(lo, kLeast[length]);
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) return false;
    const std::vector<Elem>& el = g_->elems();
    uint32_t prev = 0;
    for (uint32_t end : ends_) {
        if (end > prev && g_->char_sets()[el[data_[end - 1]].value].may_match(lo, hi)) return true;
        prev = end;
    }
    return false;
}

bool GrammarState::accept_byte(uint8_t b) {
    if (need_ == 0) {
        if (b < 0x80) return accept_code_point(b);
        const int n = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
        if (n < 0) return false;  // a continuation byte or 0xF8.. without a lead
        const uint32_t cp = b & (0x3Fu >> n);
        const uint32_t shift = 6u * static_cast<uint32_t>(n);
        if (!partial_possible(cp << shift, (cp << shift) | ((1u << shift) - 1), n + 1)) return false;
        cp_ = cp;
        need_ = static_cast<uint8_t>(n);
        bytes_ = 1;
        if (n == 1) settle_partial(cp << shift, (cp << shift) | ((1u << shift) - 1), 2);
        return true;
    }
    if ((b & 0xC0) != 0x80) return false;
    if (any_) {  // every stack takes the character whatever its last bytes are
        ++bytes_;
        if (--need_ > 0) return true;
        bytes_ = 0;
        any_ = false;
        return accept_code_point(0, true) || (need_ = 1, bytes_ = 1, any_ = true, false);
    }
    const uint32_t cp = (cp_ << 6) | (b & 0x3F);
    if (need_ == 1) {
        const uint32_t min = bytes_ == 1 ? 0x80 : bytes_ == 2 ? 0x800 : 0x10000;  // no overlong forms
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || !accept_code_point(cp)) return false;
        need_ = 0;
        bytes_ = 0;
        return true;
    }
    const uint32_t shift = 6u * (need_ - 1u);
    const uint32_t lo = cp << shift, hi = lo | ((1u << shift) - 1);
    if (!partial_possible(lo, hi, bytes_ + need_)) return false;
    cp_ = cp;
    --need_;
    ++bytes_;
    settle_partial(lo, hi, bytes_ + need_);
    return true;
}

// A character whose last bytes cannot change which stacks take it (every completion is valid
// UTF-8 and each stack's set holds all of [lo, hi] or none of it): the stacks that refuse it
// go now and its value is forgotten, so the many partial characters a vocabulary's tokens
// end in reach a few positions instead of one per prefix (TokenMatcher caches positions).
void GrammarState::settle_partial(uint32_t lo, uint32_t hi, int length) {
    static constexpr uint32_t kLeast[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (lo < kLeast[length] || hi > 0x10FFFF || (lo <= 0xDFFF && hi >= 0xD800)) return;
    const std::vector<Elem>& el = g_->elems();
    const std::vector<CharSet>& sets = g_->char_sets();
    scratch_data_.clear();
    scratch_ends_.clear();
    uint32_t prev = 0;
    for (uint32_t end : ends_) {
        const uint32_t b = prev;
        prev = end;
        if (end == b) continue;  // a finished stack takes no character
        const CharSet& set = sets[el[data_[end - 1]].value];
        if (set.covers(lo, hi)) {
            scratch_data_.insert(scratch_data_.end(), data_.begin() + b, data_.begin() + end);
            scratch_ends_.push_back(static_cast<uint32_t>(scratch_data_.size()));
        } else if (set.may_match(lo, hi)) {
            scratch_data_.clear();  // this stack depends on the exact character
            scratch_ends_.clear();
            return;
        }
    }
    if (scratch_ends_.empty()) return;
    std::swap(data_, scratch_data_);
    std::swap(ends_, scratch_ends_);
    scratch_data_.clear();
    scratch_ends_.clear();
    cp_ = 0;
    any_ = true;
}

bool GrammarState::accept_bytes(std::string_view text) {
    if (text.size() == 1) return accept_byte(static_cast<uint8_t>(text[0]));  // no copy needed
    GrammarState next = *this;
    for (char c : text)
        if (!next.accept_byte(static_cast<uint8_t>(c))) return false;
    *this = std::move(next);
    return true;
}

bool GrammarState::must_end() const {
    if (need_ != 0 || ends_.empty()) return false;
    return std::all_of(ends_.begin(), ends_.end(), [](uint32_t e) { return e == 0; });
}

bool GrammarState::can_end() const {
    if (need_ != 0) return false;
    uint32_t prev = 0;
    for (uint32_t end : ends_) {
        if (end == prev) return true;
        prev = end;
    }
    return false;
}

}  // namespace ember::grammar

namespace ember::grammar {

std::string GrammarState::key() const {
    std::string k;
    k.reserve(4 * (data_.size() + ends_.size()) + 8);
    auto put = [&](uint32_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(static_cast<uint32_t>(ends_.size()));
    for (uint32_t e : ends_) put(e);
    for (uint32_t d : data_) put(d);
    put(cp_);
    put(static_cast<uint32_t>(any_) << 16 | static_cast<uint32_t>(need_) << 8 | bytes_);
    return k;
}

}  // namespace ember::grammar
