#include "engine/template/jinja_case.h"

#include "engine/template/jinja_value.h"

namespace ember::jinja {

namespace {

// Latin Extended-A pairs upper/lower as adjacent code points; which parity is upper
// depends on the block.
bool latin_a_upper_is_even(uint32_t cp) { return (cp >= 0x100 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177); }
bool latin_a_upper_is_odd(uint32_t cp) { return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E); }
bool cyrillic_pairs(uint32_t cp) { return (cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF); }

uint32_t upper_cp(uint32_t cp) {
    if (cp >= 'a' && cp <= 'z') return cp - 0x20;
    if (cp < 0x80) return cp;
    if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 0x20;
    if (cp == 0xFF) return 0x178;
    if (cp == 0xB5) return 0x39C;
    if (cp == 0x131) return 'I';  // dotless ı, inside the paired block below
    if (cp == 0x17F) return 'S';  // long ſ
    if (latin_a_upper_is_even(cp) && (cp & 1)) return cp - 1;
    if (latin_a_upper_is_odd(cp) && !(cp & 1)) return cp - 1;
    if ((cp >= 0x3B1 && cp <= 0x3C1) || (cp >= 0x3C3 && cp <= 0x3CB)) return cp - 0x20;
    if (cp == 0x3C2) return 0x3A3;
    if (cp == 0x3AC) return 0x386;
    if (cp >= 0x3AD && cp <= 0x3AF) return cp - 0x25;
    if (cp == 0x3CC) return 0x38C;
    if (cp == 0x3CD || cp == 0x3CE) return cp - 0x3F;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
    if (cyrillic_pairs(cp) && (cp & 1)) return cp - 1;
    return cp;
}

uint32_t lower_cp(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 0x20;
    if (cp < 0x80) return cp;
    if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;
    if (cp == 0x178) return 0xFF;
    if (cp == 0x130) return 'i';  // utf8_lower() writes Python's i + combining dot
    if (latin_a_upper_is_even(cp) && !(cp & 1)) return cp + 1;
    if (latin_a_upper_is_odd(cp) && (cp & 1)) return cp + 1;
    if ((cp >= 0x391 && cp <= 0x3A1) || (cp >= 0x3A3 && cp <= 0x3AB)) return cp + 0x20;
    if (cp == 0x386) return 0x3AC;
    if (cp >= 0x388 && cp <= 0x38A) return cp + 0x25;
    if (cp == 0x38C) return 0x3CC;
    if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
    if (cyrillic_pairs(cp) && !(cp & 1)) return cp + 1;
    return cp;
}

template <class Map>
std::string map_string(std::string_view s, Map map) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {  // fast path, and invalid bytes are never rewritten
            out += static_cast<char>(map(c));
            ++i;
            continue;
        }
        const size_t start = i;
        const uint32_t cp = next_code_point(s, i);
        if (cp == 0xFFFD) out.append(s.substr(start, i - start));
        else map(cp, out);
    }
    return out;
}

}  // namespace

uint32_t next_code_point(std::string_view s, size_t& i) {
    const std::vector<std::string_view> one = utf8_chars(s.substr(i, 4));
    const std::string_view ch = one.front();
    i += ch.size();
    return utf8_decode(ch);
}

std::string utf8_upper(std::string_view s) {
    struct {
        char operator()(unsigned char c) const { return static_cast<char>(upper_cp(c)); }
        void operator()(uint32_t cp, std::string& out) const {
            if (cp == 0xDF) out += "SS";  // Python: 'ß'.upper() == 'SS'
            else append_utf8(out, upper_cp(cp));
        }
    } map;
    return map_string(s, map);
}

std::string utf8_lower(std::string_view s) {
    struct {
        char operator()(unsigned char c) const { return static_cast<char>(lower_cp(c)); }
        void operator()(uint32_t cp, std::string& out) const {
            if (cp == 0x130) out += "i\xCC\x87";  // Python: 'İ'.lower() == 'i̇'
            else append_utf8(out, lower_cp(cp));
        }
    } map;
    return map_string(s, map);
}

bool is_upper_letter(uint32_t cp) { return lower_cp(cp) != cp || cp == 0x130; }
bool is_lower_letter(uint32_t cp) { return upper_cp(cp) != cp || cp == 0xDF; }
bool is_cased_letter(uint32_t cp) { return is_upper_letter(cp) || is_lower_letter(cp); }

}  // namespace ember::jinja
