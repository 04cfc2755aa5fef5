// libFuzzer target for the tokenizer: random bytes (any text a user pastes or a file holds,
// invalid UTF-8 included) encoded and decoded with every vocabulary of llama.cpp's test set
// (SentencePiece and byte-level BPE with each pre-tokenizer, from EMBER_TESTDATA_DIR).
// The first input byte picks the vocabulary (low 4 bits) and the flags (bit 4: parse_special,
// bit 5: skip_special when streaming); the rest is the text.
//
// Invariants, as tokenizer.h and detokenizer.h state them:
//  - encode never throws and every id is in [0, n_vocab);
//  - add_special only adds BOS / EOS around the same ids;
//  - on a vocabulary that can spell every byte, decode(encode(text)) == text, with and
//    without parse_special (special tokens decode to their own text); except that SPM, like
//    SentencePiece, gives a U+2581 of the text back as a space (it is its space mark);
//  - the streaming detokenizer's output is valid UTF-8, and equals decode() whenever that
//    is valid UTF-8.
// Build with the `fuzz` preset; run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

#ifndef EMBER_FUZZ_TESTDATA_DIR
#define EMBER_FUZZ_TESTDATA_DIR "../shared/testdata"
#endif

const char* const kVocabs[] = {"llama-spm", "phi-3", "gpt-2", "qwen2", "deepseek-coder", "refact", "starcoder"};

struct Vocab {
    std::string name;
    std::unique_ptr<ember::Tokenizer> tok;
    bool spells_every_byte = false;
};

[[noreturn]] void fail(const Vocab& v, const std::string& what) {
    std::fprintf(stderr, "tokenizer %s: %s\n", v.name.c_str(), what.c_str());
    std::abort();
}

// Whether decode(encode(b)) == b for every single byte b (StarCoder-like vocabs lack some).
bool spells_every_byte(const ember::Tokenizer& tok) {
    for (int b = 0; b < 256; ++b) {
        const std::string s(1, static_cast<char>(b));
        if (tok.decode(tok.encode(s, false, false)) != s) return false;
    }
    return true;
}

std::vector<Vocab> load_vocabs() {
    const char* env = std::getenv("EMBER_TESTDATA_DIR");
    const std::string dir = env && *env ? env : EMBER_FUZZ_TESTDATA_DIR;
    std::vector<Vocab> out;
    for (const char* name : kVocabs) {
        const std::string path = dir + "/tokenizer/ggml-vocab-" + name + ".gguf";
        Vocab v;
        v.name = name;
        try {
            v.tok = ember::Tokenizer::from_gguf(ember::GgufFile::open(path));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cannot load %s: %s (set EMBER_TESTDATA_DIR)\n", path.c_str(), e.what());
            std::abort();  // a missing vocab fails loudly, never a silent no-op fuzzer
        }
        v.spells_every_byte = spells_every_byte(*v.tok);
        std::fprintf(stderr, "fuzz_tokenizer: %s (%s), every byte spelled: %s\n", name,
                     std::string(v.tok->kind()).c_str(), v.spells_every_byte ? "yes" : "no");
        out.push_back(std::move(v));
    }
    return out;
}

// What decode(encode(text)) must give: the text itself, with SPM's space mark as a space.
std::string round_trip_of(const Vocab& v, std::string_view text) {
    std::string out(text);
    if (v.tok->kind() != "spm") return out;
    const std::string_view mark = "\xE2\x96\x81";
    for (size_t at = out.find(mark); at != std::string::npos; at = out.find(mark, at + 1))
        out.replace(at, mark.size(), " ");
    return out;
}

// Valid UTF-8 as the detokenizer judges it: no overlongs, no surrogates, <= U+10FFFF.
bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int n = 0;
        uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else return false;
        if (i + static_cast<size_t>(n) >= s.size()) return false;  // cut off
        for (int k = 1; k <= n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += static_cast<size_t>(n) + 1;
    }
    return true;
}

void check_ids(const Vocab& v, const std::vector<int32_t>& ids) {
    for (int32_t id : ids)
        if (id < 0 || id >= v.tok->n_vocab()) fail(v, "id " + std::to_string(id) + " out of range");
}

void check_streaming(const Vocab& v, const std::vector<int32_t>& ids, bool skip_special) {
    ember::StreamingDetokenizer detok(*v.tok, skip_special);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id);
    streamed += detok.flush();
    if (!valid_utf8(streamed)) fail(v, "streamed text is not valid UTF-8");
    const std::string whole = v.tok->decode(ids, skip_special);
    if (valid_utf8(whole) && streamed != whole) fail(v, "streamed text differs from decode()");
}

const std::vector<Vocab>* g_vocabs = nullptr;

}  // namespace

// Loading seven vocabs under ASan takes seconds: done here, outside libFuzzer's per-input
// timeout (which would otherwise charge it to the first input).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_vocabs = new std::vector<Vocab>(load_vocabs());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::vector<Vocab>& vocabs = *g_vocabs;
    if (size == 0) return 0;
    const Vocab& v = vocabs[(data[0] & 0x0F) % vocabs.size()];
    const bool parse_special = (data[0] >> 4) & 1;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    const std::vector<int32_t> ids = v.tok->encode(text, false, parse_special);
    check_ids(v, ids);
    std::vector<int32_t> with_special = v.tok->encode(text, true, parse_special);
    std::vector<int32_t> expect;
    if (v.tok->add_bos()) expect.push_back(v.tok->bos());
    expect.insert(expect.end(), ids.begin(), ids.end());
    if (v.tok->add_eos()) expect.push_back(v.tok->eos());
    if (with_special != expect) fail(v, "add_special changed more than BOS/EOS");

    if (v.spells_every_byte && v.tok->decode(ids) != round_trip_of(v, text)) fail(v, "decode(encode(text)) != text");
    check_streaming(v, ids, (data[0] >> 5) & 1);
    return 0;
}
