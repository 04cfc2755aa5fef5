#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace ember::unicode {

namespace {
#include "engine/tokenizer/unicode_tables.inc"

// The White_Space property (Unicode PropList.txt). It is not in Python's unicodedata, and
// it is what regex engines (and llama.cpp) mean by \s; note U+001C..U+001F are not in it.
bool white_space(char32_t cp) {
    switch (cp) {
        case 0x09:
        case 0x0A:
        case 0x0B:
        case 0x0C:
        case 0x0D:
        case 0x20:
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

uint16_t flags_of(Category c) {
    switch (c) {
        case Category::Lu:
            return kLetter | kUpper;
        case Category::Ll:
            return kLetter | kLower;
        case Category::Lt:
            return kLetter | kTitle;
        case Category::Lm:
            return kLetter | kModifier;
        case Category::Lo:
            return kLetter | kOtherLetter;
        case Category::Mn:
        case Category::Mc:
        case Category::Me:
            return kMark;
        case Category::Nd:
        case Category::Nl:
        case Category::No:
            return kNumber;
        case Category::Pc:
        case Category::Pd:
        case Category::Ps:
        case Category::Pe:
        case Category::Pi:
        case Category::Pf:
        case Category::Po:
            return kPunct;
        case Category::Sm:
        case Category::Sc:
        case Category::Sk:
        case Category::So:
            return kSymbol;
        default:
            return 0;
    }
}

// Flags of the first 256 code points, looked up on every ASCII/Latin-1 character.
const std::array<uint16_t, 256>& latin1_flags() {
    static const auto table = [] {
        std::array<uint16_t, 256> t{};
        for (char32_t cp = 0; cp < 256; ++cp) t[cp] = flags_of(category(cp)) | (white_space(cp) ? kWhitespace : 0);
        return t;
    }();
    return table;
}

struct ByteMap {
    std::array<char32_t, 256> to_cp{};
    std::array<int16_t, 324> to_byte{};  // every mapped code point is below 256 + 68
};

const ByteMap& byte_map() {
    static const ByteMap map = [] {
        ByteMap m;
        m.to_byte.fill(-1);
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            m.to_cp[b] = printable ? char32_t(b) : next++;
            m.to_byte[m.to_cp[b]] = int16_t(b);
        }
        return m;
    }();
    return map;
}
}  // namespace

Category category(char32_t cp) {
    if (cp > 0x10FFFF) return Category::Cn;
    // Last entry whose first code point is <= cp.
    const uint32_t key = (uint32_t(cp) << 5) | 31;
    auto it = std::upper_bound(std::begin(kCategoryRanges), std::end(kCategoryRanges), key);
    return Category(*(it - 1) & 31);
}

uint16_t flags(char32_t cp) {
    if (cp < 256) return latin1_flags()[cp];
    return flags_of(category(cp)) | (white_space(cp) ? kWhitespace : 0);
}

bool is_whitespace(char32_t cp) { return white_space(cp); }

Utf8Step decode_utf8(std::string_view s, size_t pos) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
    const size_t avail = s.size() - pos;
    const unsigned char b0 = p[0];
    if (b0 < 0x80) return {Utf8Step::Ok, b0, 1};
    int need;
    char32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;       // no overlongs
        else if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;       // no overlongs
        else if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return {Utf8Step::Invalid, 0, 1};
    }
    for (int i = 1; i <= need; ++i) {
        if (size_t(i) >= avail) return {Utf8Step::Incomplete, 0, uint8_t(i)};
        const unsigned char b = p[i];
        const unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
        if (b < min || b > max) return {Utf8Step::Invalid, 0, uint8_t(i)};
        cp = (cp << 6) | (b & 0x3F);
    }
    return {Utf8Step::Ok, cp, uint8_t(need + 1)};
}

size_t append_complete_utf8(std::string_view in, std::string& out) {
    size_t pos = 0;
    while (pos < in.size()) {
        const Utf8Step st = decode_utf8(in, pos);
        if (st.status == Utf8Step::Incomplete) break;
        if (st.status == Utf8Step::Ok) out.append(in.substr(pos, st.len));
        else out += "\xEF\xBF\xBD";  // U+FFFD
        pos += st.len;
    }
    return pos;
}

char32_t byte_to_cp(uint8_t b) { return byte_map().to_cp[b]; }

int cp_to_byte(char32_t cp) {
    const auto& m = byte_map();
    return cp < m.to_byte.size() ? m.to_byte[cp] : -1;
}

}  // namespace ember::unicode
