// Unicode facts the tokenizer needs: strict UTF-8 decoding, general categories (from the
// generated table), the White_Space property, and GPT-2's byte <-> code point mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/utf8.h"  // append_utf8

namespace ember::unicode {

// Unicode general categories. Order matches scripts/gen-unicode-tables.py.
enum class Category : uint8_t {
    Cn,
    Lu,
    Ll,
    Lt,
    Lm,
    Lo,
    Mn,
    Mc,
    Me,
    Nd,
    Nl,
    No,
    Pc,
    Pd,
    Ps,
    Pe,
    Pi,
    Pf,
    Po,
    Sm,
    Sc,
    Sk,
    So,
    Zs,
    Zl,
    Zp,
    Cc,
    Cf,
    Cs,
    Co,
};
Category category(char32_t cp);

// Character classes as bits, so a pattern can test several at once.
enum Flag : uint16_t {
    kLetter = 1 << 0,        // \p{L}
    kNumber = 1 << 1,        // \p{N}
    kPunct = 1 << 2,         // \p{P}
    kSymbol = 1 << 3,        // \p{S}
    kMark = 1 << 4,          // \p{M}
    kWhitespace = 1 << 5,    // \s: the White_Space property
    kUpper = 1 << 6,         // Lu
    kLower = 1 << 7,         // Ll
    kTitle = 1 << 8,         // Lt
    kModifier = 1 << 9,      // Lm
    kOtherLetter = 1 << 10,  // Lo
};
uint16_t flags(char32_t cp);
bool is_whitespace(char32_t cp);

// One step of strict UTF-8 decoding (no overlongs, surrogates or values above U+10FFFF).
struct Utf8Step {
    enum Status : uint8_t { Ok, Incomplete, Invalid } status;
    char32_t cp;  // valid only when status == Ok
    uint8_t len;  // Ok: bytes consumed. Incomplete: bytes present (a valid prefix that runs
                  // off the end). Invalid: length of the maximal invalid subpart (>= 1).
};
Utf8Step decode_utf8(std::string_view s, size_t pos);

// Appends the longest prefix of `in` that is complete UTF-8 to `out`, replacing each maximal
// invalid subpart with U+FFFD. Returns how many bytes were used: a trailing incomplete
// sequence is left unused so the caller can wait for the rest of it.
size_t append_complete_utf8(std::string_view in, std::string& out);

// GPT-2's byte-level BPE alphabet: every byte maps to one printable code point
// (printable Latin-1 bytes map to themselves, the rest to U+0100 and up).
char32_t byte_to_cp(uint8_t b);
// Inverse of byte_to_cp; returns -1 for a code point outside the alphabet.
int cp_to_byte(char32_t cp);

}  // namespace ember::unicode
