#include "engine/tokenizer/pretokenizer.h"

#include <algorithm>
#include <utility>

#include "kernels/common/error.h"
#include "engine/tokenizer/unicode.h"

namespace ember {

namespace {
using namespace unicode;

constexpr char32_t kNone = 0xFFFFFFFF;  // "code point" past the end of a piece

// The input as code points, with their classes and byte offsets.
struct CodepointText {
    std::vector<char32_t> cps;
    std::vector<uint16_t> fl;
    std::vector<size_t> offset;  // byte offset of each code point, plus the end

    explicit CodepointText(std::string_view s) {
        cps.reserve(s.size());
        fl.reserve(s.size());
        offset.reserve(s.size() + 1);
        for (size_t pos = 0; pos < s.size();) {
            const Utf8Step st = decode_utf8(s, pos);
            // An invalid or truncated sequence: one byte at a time, classed as U+FFFD.
            const bool ok = st.status == Utf8Step::Ok;
            const char32_t cp = ok ? st.cp : 0xFFFD;
            cps.push_back(cp);
            fl.push_back(flags(cp));
            offset.push_back(pos);
            pos += ok ? st.len : 1;
        }
        offset.push_back(s.size());
    }
};

// A view of one piece [.., end) of the text; everything at or past `end` reads as nothing.
struct Piece {
    const CodepointText& t;
    size_t end;

    char32_t cp(size_t i) const { return i < end ? t.cps[i] : kNone; }
    bool is(size_t i, uint16_t mask) const { return i < end && (t.fl[i] & mask); }
    bool letter(size_t i) const { return is(i, kLetter); }
    bool number(size_t i) const { return is(i, kNumber); }
    bool space(size_t i) const { return is(i, kWhitespace); }
    bool crlf(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }
    // [^\s\p{L}\p{N}]
    bool other(size_t i) const { return i < end && !(t.fl[i] & (kWhitespace | kLetter | kNumber)); }

    template <class Pred>
    size_t run(size_t i, Pred pred) const {
        while (i < end && pred(i)) ++i;
        return i;
    }
    // Like run(), but at most `max` code points (so a long run is not rescanned per match).
    template <class Pred>
    size_t run_max(size_t i, size_t max, Pred pred) const {
        const size_t stop = std::min(end, i + max);
        while (i < stop && pred(i)) ++i;
        return i;
    }
};

// A set of code point ranges, like a regex character class.
class CharClass {
public:
    using Range = std::pair<char32_t, char32_t>;
    explicit CharClass(std::vector<Range> ranges) : ranges_(std::move(ranges)) { finish(); }
    // Written the way a regex class is, e.g. "A-Za-z". Only for characters that Unicode
    // normalization leaves alone: an editor may silently replace e.g. U+212A KELVIN SIGN by
    // 'K', so such classes are written as numeric ranges instead.
    explicit CharClass(std::string_view spec) {
        std::vector<char32_t> cps;
        for (size_t pos = 0; pos < spec.size();) {
            const Utf8Step st = decode_utf8(spec, pos);
            cps.push_back(st.cp);
            pos += st.len;
        }
        for (size_t i = 0; i < cps.size(); ++i) {
            if (i + 2 < cps.size() && cps[i + 1] == '-') {
                ranges_.emplace_back(cps[i], cps[i + 2]);
                i += 2;
            } else {
                ranges_.emplace_back(cps[i], cps[i]);
            }
        }
        finish();
    }
    bool contains(char32_t cp) const {
        // llama.cpp turns non-ASCII whitespace into U+000B before matching such classes, so
        // e.g. U+3000 is never part of "[ࠀ-一]" there; keep its results.
        if (cp >= 0x80 && is_whitespace(cp)) return false;
        auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(cp, kNone));
        return it != ranges_.begin() && cp <= std::prev(it)->second;
    }

private:
    void finish() {
        for (const Range& r : ranges_)
            if (r.first > r.second) throw Error("pre-tokenizer: reversed character range (a bug)");
        std::sort(ranges_.begin(), ranges_.end());
    }
    std::vector<Range> ranges_;
};

// ---- pieces of patterns, shared by several variants ---------------------------------------
// Each returns the end of its match at `pos`, or `pos` when it does not match.

// 's|'t|'re|'ve|'m|'ll|'d, optionally ignoring ASCII case. Only ASCII letters lower-case to
// these letters (U+212A KELVIN SIGN lower-cases to 'k', not needed), so ASCII folding is exact.
size_t contraction(const Piece& p, size_t pos, bool any_case) {
    if (p.cp(pos) != '\'') return pos;
    auto low = [&](size_t i) {
        const char32_t c = p.cp(i);
        return any_case && c >= 'A' && c <= 'Z' ? c + 32 : c;
    };
    const char32_t a = low(pos + 1), b = low(pos + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    return pos;
}

// \s*[\r\n]+ (when newline_rule) | \s+(?!\S) | \s+
size_t whitespace(const Piece& p, size_t pos, bool newline_rule) {
    const size_t w = p.run(pos, [&](size_t i) { return p.space(i); });
    if (w == pos) return pos;
    if (newline_rule)
        for (size_t k = w; k > pos; --k)
            if (p.crlf(k - 1)) return k;         // up to the last CR/LF of the run
    if (w - pos > 1 && w < p.end) return w - 1;  // leave one space for the next word
    return w;
}

// \s?X+ for a class X.
template <class Pred>
size_t opt_space_then_run(const Piece& p, size_t pos, Pred in_class) {
    size_t q = pos;
    if (p.space(q) && q + 1 < p.end && in_class(q + 1)) ++q;
    return in_class(q) ? p.run(q, in_class) : pos;
}

// ---- whole patterns (anchored at pos) -----------------------------------------------------

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
size_t gpt2(const Piece& p, size_t pos) {
    if (size_t e = contraction(p, pos, false); e > pos) return e;
    const size_t q = p.cp(pos) == ' ' ? pos + 1 : pos;
    if (p.letter(q)) return p.run(q, [&](size_t i) { return p.letter(i); });
    if (p.number(q)) return p.run(q, [&](size_t i) { return p.number(i); });
    if (p.other(q)) return p.run(q, [&](size_t i) { return p.other(i); });
    return whitespace(p, pos, false);
}

// Llama 3 (max_digits 3) and Qwen 2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
// |\s*[\r\n]+|\s+(?!\S)|\s+
size_t llama3_like(const Piece& p, size_t pos, size_t max_digits) {
    if (size_t e = contraction(p, pos, true); e > pos) return e;
    auto letters = [&](size_t i) { return p.letter(i); };
    if (p.letter(pos)) return p.run(pos, letters);
    if (!p.crlf(pos) && !p.number(pos) && p.letter(pos + 1)) return p.run(pos + 1, letters);
    if (p.number(pos)) return p.run_max(pos, max_digits, [&](size_t i) { return p.number(i); });
    const size_t q = p.cp(pos) == ' ' ? pos + 1 : pos;
    if (p.other(q)) {
        const size_t e = p.run(q, [&](size_t i) { return p.other(i); });
        return p.run(e, [&](size_t i) { return p.crlf(i); });
    }
    return whitespace(p, pos, true);
}
size_t llama3(const Piece& p, size_t pos) { return llama3_like(p, pos, 3); }
size_t qwen2(const Piece& p, size_t pos) { return llama3_like(p, pos, 1); }

// Qwen 3.5: Qwen 2's pattern with combining marks kept in words:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*
// |\s*[\r\n]+|\s+(?!\S)|\s+
size_t qwen35(const Piece& p, size_t pos) {
    if (size_t e = contraction(p, pos, true); e > pos) return e;
    auto word = [&](size_t i) { return p.is(i, kLetter | kMark); };
    if (word(pos)) return p.run(pos, word);
    if (!p.crlf(pos) && !p.number(pos) && word(pos + 1)) return p.run(pos + 1, word);
    if (p.number(pos)) return pos + 1;
    auto other = [&](size_t i) { return i < p.end && !p.is(i, kWhitespace | kLetter | kMark | kNumber); };
    const size_t q = p.cp(pos) == ' ' ? pos + 1 : pos;
    if (other(q)) {
        const size_t e = p.run(q, other);
        return p.run(e, [&](size_t i) { return p.crlf(i); });
    }
    return whitespace(p, pos, true);
}

// GPT-4o (o200k; gpt-oss), as llama.cpp runs it: its std::regex form
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(contraction)?
// |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(contraction)?
// |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// "Upper" is a letter other than a-z, "lower" a letter other than A-Z (so a non-ASCII letter
// is both, and marks are not letters), matched with the regex's backtracking order.
bool gpt4o_upper(const Piece& p, size_t i) { return p.letter(i) && !(p.cp(i) >= 'a' && p.cp(i) <= 'z'); }
bool gpt4o_lower(const Piece& p, size_t i) { return p.letter(i) && !(p.cp(i) >= 'A' && p.cp(i) <= 'Z'); }

// The two letter alternatives at `q` (after the optional prefix); returns q when neither matches.
size_t gpt4o_word(const Piece& p, size_t q) {
    auto upper = [&](size_t i) { return gpt4o_upper(p, i); };
    auto lower = [&](size_t i) { return gpt4o_lower(p, i); };
    const size_t u = p.run(q, upper);
    // upper* lower+: the longest run of uppers that still leaves at least one lower after it
    for (size_t k = u + 1; k-- > q;)
        if (lower(k)) {
            const size_t e = p.run(k, lower);
            return std::max(e, contraction(p, e, true));
        }
    if (u > q) {  // upper+ lower*
        const size_t e = p.run(u, lower);
        return std::max(e, contraction(p, e, true));
    }
    return q;
}

size_t gpt4o(const Piece& p, size_t pos) {
    const bool prefix = pos < p.end && !p.crlf(pos) && !p.letter(pos) && !p.number(pos);
    if (prefix)
        if (size_t e = gpt4o_word(p, pos + 1); e > pos + 1) return e;
    if (size_t e = gpt4o_word(p, pos); e > pos) return e;
    if (p.number(pos)) return p.run_max(pos, 3, [&](size_t i) { return p.number(i); });
    const size_t q = p.cp(pos) == ' ' ? pos + 1 : pos;
    if (p.other(q)) {
        const size_t e = p.run(q, [&](size_t i) { return p.other(i); });
        return p.run(e, [&](size_t i) { return p.crlf(i) || p.cp(i) == '/'; });
    }
    return whitespace(p, pos, true);
}

// Gemma 4: [^\n]+|[\n]+ (its BPE runs on whole lines; newline runs are pieces of their own).
size_t newline_runs(const Piece& p, size_t pos) {
    if (pos >= p.end) return pos;
    const bool nl = p.cp(pos) == '\n';
    return p.run(pos, [&](size_t i) { return (p.cp(i) == '\n') == nl; });
}

size_t one_number(const Piece& p, size_t pos) { return p.number(pos) ? pos + 1 : pos; }  // \p{N}
size_t numbers(const Piece& p, size_t pos) {                                             // \p{N}+
    return p.run(pos, [&](size_t i) { return p.number(i); });
}
size_t up_to_3_numbers(const Piece& p, size_t pos) {  // \p{N}{1,3}
    return p.run_max(pos, 3, [&](size_t i) { return p.number(i); });
}
size_t three_ascii_digits(const Piece& p, size_t pos) {  // [0-9][0-9][0-9]
    for (size_t i = pos; i < pos + 3; ++i)
        if (p.cp(i) < '0' || p.cp(i) > '9') return pos;
    return pos + 3;
}
size_t one_crlf(const Piece& p, size_t pos) { return p.crlf(pos) ? pos + 1 : pos; }  // [\r\n]

bool ascii_in(char32_t c, std::string_view set) { return c < 128 && set.find(char(c)) != set.npos; }

size_t punct_run(const Piece& p, size_t pos) {  // [\p{P}\$\+<=>\^~\|]+
    return p.run(pos, [&](size_t i) { return p.is(i, kPunct) || ascii_in(p.cp(i), "$+<=>^~|"); });
}
size_t falcon_punct_run(const Piece& p, size_t pos) {  // [\p{P}\$\+<=>\^~\|`]+
    return p.run(pos, [&](size_t i) { return p.is(i, kPunct) || ascii_in(p.cp(i), "$+<=>^~|`"); });
}

// [一-龥ࠀ-一가-퟿]+ (DeepSeek's CJK / Hangul runs)
const CharClass& deepseek_cjk() {
    static const CharClass c("一-龥ࠀ-一가-퟿");
    return c;
}
size_t cjk_run(const Piece& p, size_t pos) {
    return p.run(pos, [&](size_t i) { return deepseek_cjk().contains(p.cp(i)); });
}

size_t space_letters(const Piece& p, size_t pos) {  // \s?\p{L}+
    return opt_space_then_run(p, pos, [&](size_t i) { return p.letter(i); });
}
size_t space_puncts(const Piece& p, size_t pos) {  // \s?\p{P}+
    return opt_space_then_run(p, pos, [&](size_t i) { return p.is(i, kPunct); });
}

// DeepSeek LLM's letter class, from its tokenizer.json pattern
// \s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚ...]+
// (the cased letters of some Unicode version), as numeric ranges: several of its characters
// (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A) do not survive Unicode normalization.
const CharClass& deepseek_letters() {
    static const CharClass c({
        {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},   {0x00D8, 0x00F6},
        {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},   {0x0295, 0x02AF},   {0x0370, 0x0373},
        {0x0376, 0x0377},   {0x037B, 0x037D},   {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},
        {0x038C, 0x038C},   {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
        {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
        {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
        {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
        {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
        {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
        {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
        {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
        {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
        {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
        {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
        {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
        {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
        {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
    });
    return c;
}
const CharClass& deepseek_puncts() {
    static const CharClass c("!-/:-~！-／：-～‘-‟　-。");
    return c;
}
size_t deepseek_llm_letters(const Piece& p, size_t pos) {  // \s?[A-Za-z...]+
    return opt_space_then_run(p, pos, [&](size_t i) { return deepseek_letters().contains(p.cp(i)); });
}
size_t deepseek_llm_puncts(const Piece& p, size_t pos) {  // \s?[!-/:-~...]+
    return opt_space_then_run(p, pos, [&](size_t i) { return deepseek_puncts().contains(p.cp(i)); });
}

// [一-龥぀-ゟ゠-ヿ]+ (DeepSeek V3: CJK and kana runs)
size_t cjk_kana_run(const Piece& p, size_t pos) {
    static const CharClass c("一-龥぀-ゟ゠-ヿ");
    return p.run(pos, [&](size_t i) { return c.contains(p.cp(i)); });
}

// DeepSeek V3: [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
// | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t deepseek_v3(const Piece& p, size_t pos) {
    auto ascii_letter = [&](size_t i) {
        const char32_t c = p.cp(i);
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    };
    const char32_t c = p.cp(pos);
    if (c < 128 && p.is(pos, kPunct | kSymbol) && ascii_letter(pos + 1)) return p.run(pos + 1, ascii_letter);
    auto letter_mark = [&](size_t i) { return p.is(i, kLetter | kMark); };
    if (!p.crlf(pos) && !p.is(pos, kLetter | kPunct | kSymbol) && letter_mark(pos + 1))
        return p.run(pos + 1, letter_mark);
    if (letter_mark(pos)) return p.run(pos, letter_mark);
    const size_t q = c == ' ' ? pos + 1 : pos;
    if (p.is(q, kPunct | kSymbol)) {
        const size_t e = p.run(q, [&](size_t i) { return p.is(i, kPunct | kSymbol); });
        return p.run(e, [&](size_t i) { return p.crlf(i); });
    }
    return whitespace(p, pos, true);
}

// Poro / BLOOM / GPT-3 Finnish:  ?[^(\s|.,!?…。，、।۔،)]+
size_t poro(const Piece& p, size_t pos) {
    static const CharClass stop("(|.,!?…。，、।۔،)");
    auto word = [&](size_t i) { return !p.space(i) && !stop.contains(p.cp(i)); };
    const size_t q = p.cp(pos) == ' ' && word(pos + 1) ? pos + 1 : pos;
    return word(q) ? p.run(q, word) : pos;
}

// ---- searching and splitting --------------------------------------------------------------

struct Span {
    size_t begin, end;
};
using Anchored = size_t (*)(const Piece&, size_t);
// Finds the leftmost match in [from, piece end), like one std::regex_search step.
using Finder = bool (*)(const Piece&, size_t from, Span& match);

template <Anchored M>
bool search(const Piece& p, size_t from, Span& m) {
    for (size_t pos = from; pos < p.end; ++pos)
        if (size_t e = M(p, pos); e > pos) {
            m = {pos, e};
            return true;
        }
    return false;
}

// \s+$ : the piece's trailing whitespace run (searching it directly keeps this linear).
bool trailing_space(const Piece& p, size_t from, Span& m) {
    size_t k = p.end;
    while (k > from && p.space(k - 1)) --k;
    if (k == p.end) return false;
    m = {k, p.end};
    return true;
}

}  // namespace

struct PreTokenizerVariant {
    const char* name;
    std::vector<const char*> aliases;  // tokenizer.ggml.pre values that select it
    std::vector<Finder> patterns;
    bool ignore_merges = false;
};

namespace {

// Every alias below was checked against llama.cpp (same ids on the GPT-2 vocab with
// tokenizer.ggml.pre set to it).
const std::vector<PreTokenizerVariant>& variants() {
    static const std::vector<PreTokenizerVariant> v = {
        // llama.cpp's fallback for a BPE vocab without a pre-tokenizer name.
        {"default", {"default", ""}, {search<punct_run>, search<gpt2>, search<numbers>, search<three_ascii_digits>}},
        {"gpt-2",
         {"gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es",
          "jina-v2-de", "jina-v2-code", "gigachat", "trillion"},
         {search<gpt2>}},
        {"llama3", {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral"}, {search<llama3>}, true},
        {"llama3-merges", {"dbrx", "smaug-bpe"}, {search<llama3>}},
        {"qwen2", {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {search<qwen2>}},
        {"qwen35", {"qwen35"}, {search<qwen35>}},
        {"gpt-4o", {"gpt-4o", "llama4"}, {search<gpt4o>}},
        {"gemma4", {"gemma4"}, {search<newline_runs>}},
        {"starcoder",
         {"starcoder", "refact", "smollm", "command-r", "codeshell", "exaone", "minerva-7b"},
         {search<one_number>, search<gpt2>}},
        {"falcon", {"falcon"}, {search<falcon_punct_run>, search<gpt2>, search<three_ascii_digits>}},
        {"deepseek-llm",
         {"deepseek-llm"},
         {search<one_crlf>, search<deepseek_llm_letters>, search<deepseek_llm_puncts>, trailing_space, search<cjk_run>,
          search<numbers>}},
        {"deepseek-coder",
         {"deepseek-coder"},
         {search<one_crlf>, search<space_letters>, search<space_puncts>, search<cjk_run>, search<one_number>}},
        {"deepseek-v3", {"deepseek-v3"}, {search<up_to_3_numbers>, search<cjk_kana_run>, search<deepseek_v3>}},
        {"poro", {"poro-chat", "bloom", "gpt3-finnish"}, {search<poro>}},
    };
    return v;
}

}  // namespace

PreTokenizer::PreTokenizer(std::string_view pre_name) : name_(pre_name), variant_(nullptr) {
    for (const auto& v : variants())
        for (const char* alias : v.aliases)
            if (pre_name == alias) variant_ = &v;
    if (!variant_) {
        std::string known;
        for (const auto& n : known_names()) known += (known.empty() ? "" : ", ") + n;
        throw Error("unknown pre-tokenizer '" + std::string(pre_name) + "' (tokenizer.ggml.pre); known: " + known);
    }
}

std::string_view PreTokenizer::variant() const { return variant_->name; }
bool PreTokenizer::ignore_merges() const { return variant_->ignore_merges; }

std::vector<std::string> PreTokenizer::known_names() {
    std::vector<std::string> names;
    for (const auto& v : variants())
        for (const char* alias : v.aliases)
            if (*alias) names.emplace_back(alias);
    return names;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    if (text.empty()) return {};
    const CodepointText t(text);
    std::vector<Span> pieces{{0, t.cps.size()}}, next;
    for (Finder find : variant_->patterns) {
        next.clear();
        for (const Span& piece : pieces) {
            const Piece p{t, piece.end};
            size_t pos = piece.begin;
            Span m{};
            while (pos < piece.end && find(p, pos, m)) {
                if (m.begin > pos) next.push_back({pos, m.begin});  // the unmatched gap
                next.push_back(m);
                pos = m.end;
            }
            if (pos < piece.end) next.push_back({pos, piece.end});
        }
        pieces.swap(next);
    }
    std::vector<std::string_view> out;
    out.reserve(pieces.size());
    for (const Span& s : pieces) out.push_back(text.substr(t.offset[s.begin], t.offset[s.end] - t.offset[s.begin]));
    return out;
}

}  // namespace ember
