// Tokenizer tests: Unicode helpers, pre-tokenizers, SPM and BPE on small hand-made vocabs,
// special tokens, streaming detokenization, llama.cpp's vocab test vectors, and two real
// models (SmolLM2: byte-level BPE, Gemma 3: SentencePiece-style).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>

#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "llama_peer.h"
#include "test_data.h"

using namespace ember;
using Ids = std::vector<int32_t>;

namespace {

using test::read_file;

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
        if (i) out += sep;
        out += parts[i];
    }
    return out;
}

std::string show(const Ids& ids) {
    std::vector<std::string> s;
    for (int32_t id : ids) s.push_back(std::to_string(id));
    return join(s, " ");
}

std::string show_pieces(const std::vector<std::string_view>& pieces) {
    std::vector<std::string> s;
    for (auto p : pieces) {
        std::string piece = "[";
        piece.append(p);
        s.push_back(piece + "]");
    }
    return join(s, " ");
}

std::string to_hex(const std::string& bytes) {
    static const char* const digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
    return out;
}

std::string from_hex(const std::string& hex) {
    if (hex.size() % 2) throw std::runtime_error("odd-length hex: " + hex);
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> f;
    for (size_t pos = 0;;) {
        const size_t tab = line.find('\t', pos);
        f.push_back(line.substr(pos, tab - pos));
        if (tab == std::string::npos) return f;
        pos = tab + 1;
    }
}

std::vector<std::string_view> split(std::string_view pre, std::string_view text) {
    return PreTokenizer(pre).split(text);
}

// llama.cpp's .inp/.out vector files: inputs separated by "\n__ggml_vocab_test__\n" (most
// files end with one); line i of .out is the ids of input i.
struct Vectors {
    std::vector<std::string> inputs;
    std::vector<Ids> outputs;
};

Vectors load_vectors(const std::string& gguf_path) {
    Vectors v;
    const std::string inp = read_file(gguf_path + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp.size();) {
        size_t hit = inp.find(sep, pos);
        if (hit == std::string::npos) {  // Gemma 4's file does not end with a separator
            v.inputs.push_back(inp.substr(pos));
            break;
        }
        v.inputs.push_back(inp.substr(pos, hit - pos));
        pos = hit + sep.size();
    }
    std::istringstream out(read_file(gguf_path + ".out"));
    for (std::string line; std::getline(out, line);) {
        std::istringstream ls(line);
        Ids ids;
        for (int32_t id; ls >> id;) ids.push_back(id);
        v.outputs.push_back(ids);
    }
    return v;
}

std::unique_ptr<Tokenizer> load(const std::string& path) { return Tokenizer::from_gguf(GgufFile::open(path)); }

// A small SentencePiece-style vocab: specials, 256 byte tokens, then scored pieces.
TokenizerData tiny_spm() {
    TokenizerData d;
    d.model = "llama";
    d.tokens = {"<unk>", "<s>", "</s>"};
    d.token_types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        d.tokens.push_back(buf);
        d.token_types.push_back(6);
    }
    d.scores.assign(d.tokens.size(), 0.0f);
    // piece, score: higher scores merge first.
    const std::pair<const char*, float> pieces[] = {
        {"\u2581", -1},      {"h", -2},           {"e", -2},
        {"l", -2},           {"o", -2},           {"w", -2},
        {"r", -2},           {"d", -2},           {"ll", -3},
        {"he", -4},          {"\u2581h", -5},     {"llo", -3.5f},
        {"\u2581he", -4.5f}, {"hello", -6},       {"\u2581hello", -2.5f},
        {"\u2581w", -5},     {"or", -5},          {"\u2581wor", -5.5f},
        {"ld", -5},          {"\u2581world", -3}, {"\u2581wo", -5},
        {"\u2581worl", -5},  {"orld", -6},        {"<|user|>", 0},
    };
    for (auto [p, s] : pieces) {
        d.tokens.push_back(p);
        d.scores.push_back(s);
        d.token_types.push_back(std::string_view(p) == "<|user|>" ? 4 : 1);
    }
    return d;
}

// A small byte-level BPE vocab: the 256 byte symbols, some merges, two special tokens.
TokenizerData tiny_bpe() {
    TokenizerData d;
    d.model = "gpt2";
    d.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) {
        std::string s;
        ember::append_utf8(s, unicode::byte_to_cp(uint8_t(b)));
        d.tokens.push_back(s);
    }
    d.merges = {"h e", "l l", "he ll", "hell o", "\u0120 w", "o r", "\u0120w or", "l d", "\u0120wor ld"};
    for (const std::string& m : d.merges) {
        std::string joined = m;
        joined.erase(joined.find(' '), 1);
        d.tokens.push_back(joined);
    }
    d.tokens.push_back("<|im_start|>");  // control
    d.tokens.push_back("<think>");       // user-defined
    d.token_types.assign(d.tokens.size(), 1);
    d.token_types[d.tokens.size() - 2] = 3;
    d.token_types[d.tokens.size() - 1] = 4;
    d.eos = int32_t(d.tokens.size() - 2);
    return d;
}

int32_t id_of(const Tokenizer& t, std::string_view text) {
    auto id = t.find_token(text);
    if (!id) throw std::runtime_error("no token '" + std::string(text) + "'");
    return *id;
}

// Deterministic arbitrary inputs: random bytes (mostly invalid UTF-8), random picks of
// characters from many scripts, and mixtures of both.
std::vector<std::string> random_texts(uint32_t seed, int n) {
    static const char* const pieces[] = {
        "a",      "Z",      "7",          " ",      "  ",           "\n",     "\r\n",         "\t",
        "'s",     "!",      "...",        "\u00e9", "e\u0301",      "\u00df", "\u6c49",       "\u3002",
        "\ud55c", "\u30ab", "\U0001F999", "\u200d", "\u00a0",       "\u3000", "\u0663",       "\u00bd",
        "\uff21", "\u0430", "\u03bb",     "\u0639", "\u0939\u093f", "<s>",    "<|im_start|>", "0123",
    };
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    };
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
        std::string s;
        const int len = int(next() % 48);
        const uint32_t mode = next() % 3;
        for (int j = 0; j < len; ++j) {
            if (mode == 0 || (mode == 2 && next() % 4 == 0)) s += char(next() & 0xFF);
            else s += pieces[next() % std::size(pieces)];
        }
        out.push_back(s);
    }
    return out;
}

// What a stream of decoded bytes looks like once made valid UTF-8 (see detokenizer.h).
std::string made_valid(const std::string& bytes) {
    std::string out;
    if (unicode::append_complete_utf8(bytes, out) < bytes.size()) out += "\xEF\xBF\xBD";
    return out;
}

const char* const kRoundTripTexts[] = {
    "Hello, world!",
    "  leading and trailing spaces  ",
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, na\u00efve fa\u00e7ade \u00c5ngstr\u00f6m",
    "\u6c49\u5b57\u548c\u4eee\u540d\u4ea4\u3058\u308a\u6587\u3002\ud55c\uad6d\uc5b4\u3002",
    "Emoji: \U0001F999\U0001F600 \U0001F468\u200D\U0001F469\u200D\U0001F467 \u2705",
    "int main() {\n    return x->y[0] != 42; // done\n}\n\t\ttabs\r\n",
    "numbers 3.14159 1,000,000 and 0xFF",
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u0395\u03bb\u03bb\u03ac\u03b4\u03b1 "
    "\u0639\u0631\u0628\u064a",
};

}  // namespace

// ---- Unicode helpers -----------------------------------------------------------------
TEST_CASE("unicode categories") {
    using unicode::Category;
    REQUIRE_EQ(unicode::category('A'), Category::Lu);
    REQUIRE_EQ(unicode::category('z'), Category::Ll);
    REQUIRE_EQ(unicode::category('7'), Category::Nd);
    REQUIRE_EQ(unicode::category(0xBD), Category::No);  // ½
    REQUIRE_EQ(unicode::category(' '), Category::Zs);
    REQUIRE_EQ(unicode::category('!'), Category::Po);
    REQUIRE_EQ(unicode::category('$'), Category::Sc);
    REQUIRE_EQ(unicode::category(0x4E00), Category::Lo);   // 一
    REQUIRE_EQ(unicode::category(0x0301), Category::Mn);   // combining acute
    REQUIRE_EQ(unicode::category(0x1F600), Category::So);  // 😀
    REQUIRE_EQ(unicode::category(0xE000), Category::Co);
    REQUIRE_EQ(unicode::category(0x0378), Category::Cn);  // unassigned
    REQUIRE_EQ(unicode::category(0x10FFFF), Category::Cn);
    REQUIRE_EQ(unicode::category(0x110000), Category::Cn);
    REQUIRE(unicode::is_whitespace(0x3000));
    REQUIRE(unicode::is_whitespace(0x85));
    REQUIRE(!unicode::is_whitespace(0x1C));
    REQUIRE(!unicode::is_whitespace(0x200B));  // zero width space is Cf, not White_Space
    REQUIRE((unicode::flags(0x00E9) & unicode::kLetter) != 0);
    REQUIRE((unicode::flags(0x0661) & unicode::kNumber) != 0);  // Arabic-Indic one
}

TEST_CASE("utf8 decoding") {
    using unicode::Utf8Step;
    auto st = unicode::decode_utf8("\xF0\x9F\xA6\x99", 0);  // 🦙
    REQUIRE_EQ(st.status, Utf8Step::Ok);
    REQUIRE_EQ(st.cp, char32_t(0x1F999));
    REQUIRE_EQ(int(st.len), 4);
    REQUIRE_EQ(unicode::decode_utf8("\xC0\x80", 0).status, Utf8Step::Invalid);      // overlong
    REQUIRE_EQ(unicode::decode_utf8("\xE0\x80\x80", 0).status, Utf8Step::Invalid);  // overlong
    REQUIRE_EQ(unicode::decode_utf8("\xED\xA0\x80", 0).status, Utf8Step::Invalid);  // surrogate
    REQUIRE_EQ(unicode::decode_utf8("\xF4\x90\x80\x80", 0).status, Utf8Step::Invalid);
    REQUIRE_EQ(unicode::decode_utf8("\xE2\x28\xA1", 0).len, uint8_t(1));
    st = unicode::decode_utf8("\xE2\x82", 0);
    REQUIRE_EQ(st.status, Utf8Step::Incomplete);
    REQUIRE_EQ(int(st.len), 2);

    std::string out;
    REQUIRE_EQ(unicode::append_complete_utf8("a\xE2\x82\xAC"
                                             "b\xE2\x82",
                                             out),
               size_t(5));
    REQUIRE_EQ(out, std::string("a\xE2\x82\xAC"
                                "b"));
    out.clear();
    REQUIRE_EQ(unicode::append_complete_utf8("x\xFFy\xE2\x28", out), size_t(5));
    REQUIRE_EQ(out, std::string("x\xEF\xBF\xBDy\xEF\xBF\xBD("));
}

TEST_CASE("byte level alphabet") {
    REQUIRE_EQ(unicode::byte_to_cp('A'), char32_t('A'));
    REQUIRE_EQ(unicode::byte_to_cp(' '), char32_t(0x120));   // Ġ
    REQUIRE_EQ(unicode::byte_to_cp('\n'), char32_t(0x10A));  // Ċ
    REQUIRE_EQ(unicode::byte_to_cp(0xAD), char32_t(0x143));
    for (int b = 0; b < 256; ++b) REQUIRE_EQ(unicode::cp_to_byte(unicode::byte_to_cp(uint8_t(b))), b);
    REQUIRE_EQ(unicode::cp_to_byte(0x2581), -1);
}

// ---- Pre-tokenizers ------------------------------------------------------------------
TEST_CASE("pre tokenizers") {
    struct Row {
        const char *name, *pre, *text, *expected;
    };
    const Row rows[] = {
        {"gpt2", "gpt-2", "Hello world's  test 123 !!\n", "[Hello] [ world] ['s] [ ] [ test] [ 123] [ !!] [\n]"},
        {"gpt2 no case folding", "gpt-2", "I'M", "[I] ['] [M]"},
        {"llama3", "llama-bpe", "Hello 12345 I'M ok\n\n  x", "[Hello] [ ] [123] [45] [ I] ['M] [ ok] [\n\n] [ ] [ x]"},
        {"llama3 punct", "llama-bpe", "a...\n\nb", "[a] [...\n\n] [b]"},
        {"qwen2", "qwen2", "x 2025!", "[x] [ ] [2] [0] [2] [5] [!]"},
        {"starcoder", "smollm", "abc 123", "[abc] [ ] [1] [2] [3]"},
        {"deepseek-coder", "deepseek-coder", "ied 4 \u00bd months", "[ied] [ ] [4] [ ] [\u00bd] [ months]"},
        {"deepseek-llm", "deepseek-llm", "Hi, \u4f60\u597d 42  ", "[Hi] [,] [ ] [\u4f60\u597d] [ ] [42] [  ]"},
        {"default", "default", "x+=1234", "[x] [+=] [123] [4]"},
        {"falcon", "falcon", "a`b 12345", "[a] [`] [b] [ ] [123] [45]"},
        // Qwen 3.5 keeps combining marks (U+0301) in words; Qwen 2 splits them off.
        {"qwen35 marks", "qwen35", "cafe\u0301 x1", "[cafe\u0301] [ x] [1]"},
        {"qwen2 marks", "qwen2", "cafe\u0301", "[cafe] [\u0301]"},
        // gpt-4o: case changes split words, a non-ASCII letter is both cases, contractions
        // stick to the word, numbers go by three, '/' joins a punctuation run.
        {"gpt-4o case", "gpt-4o", "HelloWorld HELLOworld don'T", "[Hello] [World] [ HELLOworld] [ don'T]"},
        {"gpt-4o upper tail", "gpt-4o", "\u00c9A \u00e9A", "[\u00c9] [A] [ \u00e9] [A]"},
        {"gpt-4o numbers", "gpt-4o", "1234567 a//b\n", "[123] [456] [7] [ a] [//] [b] [\n]"},
        {"gemma4 lines", "gemma4", "a b\n\nc\n", "[a b] [\n\n] [c] [\n]"},
    };
    for (const Row& r : rows) SUBCASE(r.name) {
            REQUIRE_EQ(show_pieces(split(r.pre, r.text)), std::string(r.expected));
        }
}

TEST_CASE("pre tokenizer invalid utf8") {
    // Every byte is kept; invalid ones act like U+FFFD (a symbol), nothing throws.
    const std::string bad =
        "a\xFF"
        "b \xE2\x82 c\xC0";
    std::vector<std::string> pieces;
    for (auto p : split("gpt-2", bad)) pieces.emplace_back(p);
    const std::vector<std::string> want = {"a", "\xFF", "b", " \xE2\x82", " c", "\xC0"};
    REQUIRE_EQ(pieces, want);
}

TEST_CASE("unknown pre tokenizer throws") {
    REQUIRE_THROWS_AS(PreTokenizer("no-such-pre"), Error);
    REQUIRE(!PreTokenizer::known_names().empty());
}

// ---- SPM on a tiny vocab -------------------------------------------------------------
TEST_CASE("spm merges by score") {
    auto t = Tokenizer::from_data(tiny_spm());
    REQUIRE_EQ(t->kind(), std::string_view("spm"));
    REQUIRE(t->add_bos());
    REQUIRE(t->add_space_prefix());
    const Ids ids = t->encode("hello world", false, false);
    REQUIRE_EQ(show(ids), show({id_of(*t, "\u2581hello"), id_of(*t, "\u2581world")}));
    REQUIRE_EQ(t->decode(ids), std::string("hello world"));
    // BOS via add_special; decode drops nothing but renders control text unless skipped.
    const Ids with_bos = t->encode("hello", true, false);
    REQUIRE_EQ(with_bos.front(), t->bos());
    REQUIRE_EQ(t->decode(with_bos, true), std::string("hello"));
    REQUIRE_EQ(t->decode(with_bos, false), std::string("<s>hello"));
}

TEST_CASE("spm byte fallback") {
    auto t = Tokenizer::from_data(tiny_spm());
    const Ids ids = t->encode("h\u00e9", false, false);  // é is not in the vocab
    REQUIRE_EQ(show(ids), show({id_of(*t, "\u2581h"), id_of(*t, "<0xC3>"), id_of(*t, "<0xA9>")}));
    REQUIRE_EQ(t->decode(ids), std::string("h\u00e9"));
    REQUIRE_EQ(t->token_to_piece(id_of(*t, "<0xC3>")), std::string("\xC3"));
    REQUIRE_EQ(t->token_to_piece(id_of(*t, "\u2581hello")), std::string(" hello"));
    // Invalid UTF-8 goes through as bytes, and comes back exactly.
    const std::string bad = "he\xFF\xE2\x82";
    REQUIRE_EQ(t->decode(t->encode(bad, false, false)), bad);
}

TEST_CASE("spm space prefix after special") {
    auto t = Tokenizer::from_data(tiny_spm());
    // "<|user|>" is user-defined: always matched; text after it gets the space prefix.
    const Ids ids = t->encode("hello<|user|>world", false, false);
    REQUIRE_EQ(show(ids), show({id_of(*t, "\u2581hello"), id_of(*t, "<|user|>"), id_of(*t, "\u2581world")}));
    REQUIRE_EQ(t->decode(ids), std::string("hello<|user|>world"));
    REQUIRE(t->encode("", false, false).empty());
    REQUIRE_EQ(show(t->encode("", true, false)), show({t->bos()}));
}

// ---- BPE on a tiny vocab -------------------------------------------------------------
TEST_CASE("bpe merges by rank") {
    auto t = Tokenizer::from_data(tiny_bpe());
    REQUIRE_EQ(t->kind(), std::string_view("bpe/gpt-2"));
    REQUIRE(!t->add_bos());
    const Ids ids = t->encode("hello world", false, false);
    REQUIRE_EQ(show(ids), show({id_of(*t, "hello"), id_of(*t, "\u0120world")}));
    REQUIRE_EQ(t->decode(ids), std::string("hello world"));
    // "hel": h+e merges first (rank 0), then nothing joins "he" and "l".
    REQUIRE_EQ(show(t->encode("hel", false, false)), show({id_of(*t, "he"), id_of(*t, "l")}));
    const std::string bad = "\xFF\xFEhello\xE2\x82";
    REQUIRE_EQ(t->decode(t->encode(bad, false, false)), bad);
    REQUIRE_EQ(t->token_to_piece(id_of(*t, "\u0120world")), std::string(" world"));
}

// Gemma 4's BPE: U+2581 for spaces, merges over UTF-8 characters, a newline run that is a token
// taken whole, <0xXX> for what no token spells, BOS added although the file says not to.
TEST_CASE("gemma4 bpe") {
    TokenizerData d;
    d.model = "gemma4";
    d.pre = "anything";  // ignored: gemma4 splits on newlines only
    d.tokens = {"<pad>", "<eos>", "<bos>", "a", "b", "ab", "\u2581", "\u2581ab", "\n", "\n\n", "\u00e9"};
    d.token_types = {3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        d.tokens.push_back(buf);
        d.token_types.push_back(6);
    }
    d.merges = {"a b", "\u2581 ab"};
    d.bos = 2, d.eos = 1, d.add_bos = false;
    auto t = Tokenizer::from_data(d);
    REQUIRE_EQ(t->kind(), std::string_view("bpe/gemma4"));
    REQUIRE(t->add_bos());
    const std::string text = "ab ab\n\n\u00e9x\n\n\n";
    const Ids ids = t->encode(text, true, false);
    const int32_t nl = id_of(*t, "\n"), nl2 = id_of(*t, "\n\n");
    REQUIRE_EQ(show(ids), show({2, id_of(*t, "ab"), id_of(*t, "\u2581ab"), nl2, id_of(*t, "\u00e9"),
                                id_of(*t, "<0x78>"), nl, nl, nl}));
    REQUIRE_EQ(t->decode(ids, true), text);
    REQUIRE_EQ(t->token_to_piece(id_of(*t, "\u2581ab")), std::string(" ab"));
}

TEST_CASE("special tokens") {
    auto t = Tokenizer::from_data(tiny_bpe());
    const int32_t start = id_of(*t, "<|im_start|>"), think = id_of(*t, "<think>");
    REQUIRE(t->is_control(start));
    REQUIRE(!t->is_control(think));
    REQUIRE(t->is_eog(start));  // it is the eos here
    const std::string text = "<|im_start|>hello<think>";
    const Ids parsed = t->encode(text, false, true);
    REQUIRE_EQ(show(parsed), show({start, id_of(*t, "hello"), think}));
    // Without parse_special the control token is plain text; user-defined still matches.
    const Ids plain = t->encode(text, false, false);
    REQUIRE(std::find(plain.begin(), plain.end(), start) == plain.end());
    REQUIRE_EQ(plain.back(), think);
    REQUIRE_EQ(t->decode(plain), text);
    REQUIRE_EQ(t->decode(parsed, true), std::string("hello<think>"));
    REQUIRE_EQ(t->decode(parsed, false), text);
}

// gpt-oss's harmony vocabulary: <|end|> closes the thinking's message, so generation must go
// on to the answer, which ends with <|return|> or <|call|>. A vocabulary with <|end|> alone
// (Phi-3) keeps it as its end of turn.
TEST_CASE("harmony: <|end|> ends a message, <|return|> and <|call|> the generation") {
    TokenizerData d = tiny_bpe();
    for (const char* t : {"<|end|>", "<|return|>", "<|call|>", "<|channel|>"}) {
        d.tokens.push_back(t);
        d.token_types.push_back(3);
    }
    auto t = Tokenizer::from_data(d);
    CHECK(!t->is_eog(id_of(*t, "<|end|>")));
    CHECK(t->is_eog(id_of(*t, "<|return|>")));
    CHECK(t->is_eog(id_of(*t, "<|call|>")));
    CHECK(t->eot() == id_of(*t, "<|return|>"));
    d.tokens.resize(d.tokens.size() - 3);  // <|end|> alone
    d.token_types.resize(d.tokens.size());
    auto phi = Tokenizer::from_data(d);
    CHECK(phi->is_eog(id_of(*phi, "<|end|>")));
}

TEST_CASE("bad data throws") {
    TokenizerData d = tiny_bpe();
    d.model = "bert";
    REQUIRE_THROWS_AS(Tokenizer::from_data(d), Error);
    d = tiny_bpe();
    d.merges.clear();
    REQUIRE_THROWS_AS(Tokenizer::from_data(d), Error);
    d = tiny_spm();
    d.scores.pop_back();
    REQUIRE_THROWS_AS(Tokenizer::from_data(d), Error);
    auto t = Tokenizer::from_data(tiny_spm());
    REQUIRE_THROWS_AS(t->token_to_piece(t->n_vocab()), Error);
    REQUIRE_THROWS_AS(t->decode(Ids{-1}), Error);
}

// ---- Streaming detokenizer -----------------------------------------------------------
TEST_CASE("streaming split character") {
    auto t = Tokenizer::from_data(tiny_spm());
    StreamingDetokenizer d(*t);
    // "h€!" with € (E2 82 AC) spelled as three byte tokens.
    REQUIRE_EQ(d.push(id_of(*t, "\u2581h")), std::string("h"));
    REQUIRE_EQ(d.push(id_of(*t, "<0xE2>")), std::string());
    REQUIRE_EQ(d.push(id_of(*t, "<0x82>")), std::string());
    REQUIRE_EQ(d.pending_bytes(), size_t(2));
    REQUIRE_EQ(d.push(id_of(*t, "<0xAC>")), std::string("\xE2\x82\xAC"));
    REQUIRE_EQ(d.push(id_of(*t, "<0x21>")), std::string("!"));
    REQUIRE_EQ(d.push(t->eos()), std::string());  // control tokens skipped by default
    REQUIRE_EQ(d.flush(), std::string());
    // A stream that ends inside a character: flush gives U+FFFD.
    REQUIRE_EQ(d.push(id_of(*t, "<0xF0>")), std::string());
    REQUIRE_EQ(d.push(id_of(*t, "<0x9F>")), std::string());
    REQUIRE_EQ(d.flush(), std::string("\xEF\xBF\xBD"));
    // A byte that can never be UTF-8 is replaced at once.
    REQUIRE_EQ(d.push(id_of(*t, "<0xFF>")), std::string("\xEF\xBF\xBD"));
}

TEST_CASE("streaming matches decode") {
    auto t = Tokenizer::from_data(tiny_bpe());
    const std::string text = "hello \u00e9\u6c49\U0001F999 world";
    const Ids ids = t->encode(text, false, false);
    StreamingDetokenizer d(*t);
    std::string streamed;
    for (int32_t id : ids) {
        const std::string part = d.push(id);
        std::string check;
        REQUIRE_EQ(unicode::append_complete_utf8(part, check), part.size());  // complete UTF-8
        REQUIRE_EQ(check, part);
        streamed += part;
    }
    streamed += d.flush();
    REQUIRE_EQ(streamed, text);
    REQUIRE_EQ(t->decode(ids), text);
}

// ---- llama.cpp vocab test vectors ----------------------------------------------------
// Encodes every vector of llama.cpp's file at `path` (.inp/.out beside it); all must match
// and decode back.
void check_vectors(const std::string& name, const std::string& path) {
    EMBER_REQUIRE_FILE(path);
    EMBER_REQUIRE_FILE(path + ".inp");
    EMBER_REQUIRE_FILE(path + ".out");
    const auto t = load(path);
    const Vectors v = load_vectors(path);
    REQUIRE(v.inputs.size() > 30);
    REQUIRE_EQ(v.outputs.size(), v.inputs.size());
    int pass = 0, round_trip = 0;
    std::vector<std::string> failures;
    for (size_t i = 0; i < v.inputs.size(); ++i) {
        const Ids got = t->encode(v.inputs[i], false, false);
        if (got == v.outputs[i]) ++pass;
        else
            failures.push_back("#" + std::to_string(i) + " " + v.inputs[i].substr(0, 60) + "\n   want " +
                               show(v.outputs[i]) + "\n   got  " + show(got));
        if (t->decode(got) == v.inputs[i]) ++round_trip;
    }
    test::info("%s: %d/%zu vectors pass, %d/%zu round-trip", name.c_str(), pass, v.inputs.size(), round_trip,
               v.inputs.size());
    if (!failures.empty()) test::warn("%s", join(failures, "\n").c_str());
    REQUIRE_EQ(pass, int(v.inputs.size()));
    REQUIRE_EQ(round_trip, int(v.inputs.size()));
}

TEST_CASE("vectors") {
    std::string name;
    for (const char* n : {"llama-spm", "phi-3", "gpt-2", "qwen2", "starcoder", "refact", "deepseek-coder"}) SUBCASE(n) {
            name = n;
        }
    REQUIRE(!name.empty());
    check_vectors(name, test::testdata("tokenizer/ggml-vocab-" + name + ".gguf"));
}

// Gemma 4 (tokenizer.ggml.model "gemma4") and Qwen 3.5 (pre "qwen35"): their vocabularies and
// vectors ship in llama.cpp's tree (the cached llama-cpp-python source package), not in
// ../shared/testdata.
TEST_CASE("vectors from llama.cpp's tree") {
    std::string name;
    for (const char* n : {"gemma-4", "qwen35"}) SUBCASE(n) {
            name = n;
        }
    REQUIRE(!name.empty());
    check_vectors(name, test::llama_cpp_source_dir() + "/models/ggml-vocab-" + name + ".gguf");
}

// Arbitrary bytes never throw, decode back exactly, and stream as valid UTF-8.
TEST_CASE("random bytes round trip") {
    std::vector<std::string> paths;
    for (const char* n : {"llama-spm", "phi-3", "gpt-2", "qwen2", "starcoder", "deepseek-coder"})
        paths.push_back(test::testdata(std::string("tokenizer/ggml-vocab-") + n + ".gguf"));
    paths.push_back(test::test_model(test::kSmolLM2));
    paths.push_back(test::test_model(test::kGemma3));
    uint32_t seed = 1;
    for (const std::string& path : paths) {
        EMBER_REQUIRE_FILE(path);
        const auto t = load(path);
        // Bytes the vocab cannot spell are dropped (StarCoder lacks 0xF5..0xFF, DeepSeek
        // Coder has them only as user-defined tokens).
        std::string unspellable;
        for (int b = 0; b < 256; ++b) {
            std::string sym;
            if (t->kind() == "spm") {
                char buf[8];
                std::snprintf(buf, sizeof buf, "<0x%02X>", b);
                sym = buf;
            } else {
                ember::append_utf8(sym, unicode::byte_to_cp(uint8_t(b)));
            }
            const auto id = t->find_token(sym);
            if (!id || (t->token_type(*id) != TokenType::Normal && t->token_type(*id) != TokenType::Byte))
                unspellable += char(b);
        }
        for (std::string text : random_texts(seed++, 300)) {
            std::erase_if(text, [&](char c) { return unspellable.find(c) != std::string::npos; });
            const Ids ids = t->encode(text, false, false);
            const std::string back = t->decode(ids);
            REQUIRE_MESSAGE(back == text,
                            path << ": " << to_hex(text) << " -> [" << show(ids) << "] -> " << to_hex(back));
            const Ids with_specials = t->encode(text, true, true);
            StreamingDetokenizer d(*t);
            std::string streamed;
            for (int32_t id : with_specials) streamed += d.push(id);
            streamed += d.flush();
            REQUIRE_EQ(streamed, made_valid(t->decode(with_specials, true)));
        }
    }
}

// ---- Real models ---------------------------------------------------------------------
TEST_CASE("smollm2") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    const auto t = load(path);
    REQUIRE_EQ(t->kind(), std::string_view("bpe/smollm"));
    REQUIRE_EQ(t->pre_tokenizer_variant(), std::string_view("starcoder"));
    REQUIRE_EQ(t->n_vocab(), 49152);
    REQUIRE(!t->add_bos());
    REQUIRE_EQ(t->eos(), 2);
    REQUIRE(t->is_eog(2));  // <|im_end|>
    REQUIRE(t->is_eog(0));  // <|endoftext|>
    REQUIRE(!t->is_eog(1));
    REQUIRE_EQ(t->eot(), 2);
    for (const char* text : kRoundTripTexts) {
        const Ids ids = t->encode(text, true, false);
        REQUIRE_EQ(t->decode(ids), std::string(text));
    }
    // ChatML markers are single tokens only with parse_special.
    const Ids chat = t->encode("<|im_start|>user\nHi<|im_end|>\n", false, true);
    REQUIRE_EQ(chat.front(), 1);
    REQUIRE_EQ(std::count(chat.begin(), chat.end(), 2), 1);
    REQUIRE_EQ(t->decode(chat), std::string("<|im_start|>user\nHi<|im_end|>\n"));
    REQUIRE_EQ(t->decode(chat, true), std::string("user\nHi\n"));
    const Ids plain = t->encode("<|im_start|>", false, false);
    REQUIRE(plain.size() > 1);
    REQUIRE_EQ(t->decode(plain), std::string("<|im_start|>"));
    // Known ids, from llama-cpp-python 0.3.36: Llama(path, vocab_only=True).tokenize(
    // text.encode(), add_bos=True, special=True).
    REQUIRE_EQ(show(t->encode("Hello world", true, true)), show({19556, 905}));
    REQUIRE_EQ(show(t->encode("<|im_start|>user\nCaf\u00e9 \u6c49\u5b57 \U0001F999<|im_end|>\n", true, true)),
               show({1, 4093, 198, 51, 1939, 2756, 17097, 126, 227, 36518, 15107, 116, 243, 2, 198}));
    // Digits are split one by one (starcoder pattern).
    const Ids digits = t->encode("2025", false, false);
    REQUIRE_EQ(digits.size(), size_t(4));
    REQUIRE_EQ(show(digits), show({id_of(*t, "2"), id_of(*t, "0"), id_of(*t, "2"), id_of(*t, "5")}));
}

TEST_CASE("gemma3") {
    const std::string path = test::test_model(test::kGemma3);
    EMBER_REQUIRE_FILE(path);
    const auto t = load(path);
    REQUIRE_EQ(t->kind(), std::string_view("spm"));
    REQUIRE_EQ(t->n_vocab(), 262144);
    REQUIRE(t->add_bos());
    REQUIRE(!t->add_space_prefix());
    REQUIRE_EQ(t->bos(), 2);
    REQUIRE_EQ(t->eos(), 1);
    const int32_t eot = id_of(*t, "<end_of_turn>");
    REQUIRE_EQ(t->eot(), eot);
    REQUIRE(t->is_eog(eot));
    REQUIRE(t->is_eog(1));
    const Ids hello = t->encode("Hello", true, false);
    REQUIRE_EQ(hello.front(), 2);
    REQUIRE_EQ(t->decode(hello, true), std::string("Hello"));
    for (const char* text : kRoundTripTexts) {
        const Ids ids = t->encode(text, false, false);
        REQUIRE_EQ(t->decode(ids), std::string(text));
    }
    // Known ids, from llama-cpp-python 0.3.36 (as for SmolLM2 above).
    REQUIRE_EQ(show(t->encode("Hello world", true, true)), show({2, 9259, 1902}));
    REQUIRE_EQ(show(t->encode("<start_of_turn>user\nCaf\u00e9 \u6c49\u5b57 \U0001F999<end_of_turn>\n", true, true)),
               show({2, 105, 2364, 107, 160319, 236859, 236743, 239908, 237871, 236743, 478, 397, 404, 391, 106, 107}));
    // Newline runs are user-defined tokens, matched whole.
    REQUIRE_EQ(show(t->encode("\n\n", false, false)), show({id_of(*t, "\n\n")}));
    const Ids turn = t->encode("<start_of_turn>user\nHi<end_of_turn>\n", true, true);
    REQUIRE_EQ(turn[0], 2);
    REQUIRE_EQ(turn[1], id_of(*t, "<start_of_turn>"));
    REQUIRE_EQ(std::count(turn.begin(), turn.end(), eot), 1);

    // The llama is spelled with four byte-fallback tokens; streaming holds it back until
    // the last one, then emits the whole character.
    const Ids llama = t->encode("a \U0001F999!", false, false);
    const Ids bytes = {id_of(*t, "<0xF0>"), id_of(*t, "<0x9F>"), id_of(*t, "<0xA6>"), id_of(*t, "<0x99>")};
    REQUIRE(std::search(llama.begin(), llama.end(), bytes.begin(), bytes.end()) != llama.end());
    StreamingDetokenizer d(*t);
    std::vector<std::string> parts;
    for (int32_t id : llama) parts.push_back(d.push(id));
    parts.push_back(d.flush());
    REQUIRE_EQ(join(parts, "|"), std::string("a| ||||\U0001F999|!|"));  // 3 empty pushes
}

// ---- llama.cpp as an independent reference -------------------------------------------
// data/llama_cpp_reference.tsv comes from make_llama_cpp_reference.py (llama-cpp-python):
// every pre-tokenizer on the GPT-2 vocab, plus SmolLM2 and Gemma 3 with special tokens.
TEST_CASE("llama cpp reference") {
    const std::string ref = std::string(EMBER_TOKENIZER_TEST_DIR) + "/data/llama_cpp_reference.tsv";
    const std::string gpt2 = test::testdata("tokenizer/ggml-vocab-gpt-2.gguf");
    EMBER_REQUIRE_FILE(ref);
    EMBER_REQUIRE_FILE(gpt2);
    EMBER_REQUIRE_FILE(test::test_model(test::kSmolLM2));
    EMBER_REQUIRE_FILE(test::test_model(test::kGemma3));
    std::map<std::string, std::unique_ptr<Tokenizer>> toks;
    std::map<std::string, std::pair<int, int>> counts;  // key -> (pass, total)
    std::vector<std::string> failures;
    std::istringstream in(read_file(ref));
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const std::vector<std::string> f = split_tabs(line);
        REQUIRE_EQ(f.size(), size_t(6));
        const std::string& name = f[0];
        const std::string& pre = f[1];
        const std::string key = name + (pre == "-" ? "" : "/" + pre);
        auto& t = toks[key];
        if (!t) {
            if (name == "gpt-2") {
                TokenizerData d = read_tokenizer_data(GgufFile::open(gpt2));
                d.pre = pre;
                t = Tokenizer::from_data(std::move(d));
            } else {
                t = load(test::test_model(name == "smollm2" ? test::kSmolLM2 : test::kGemma3));
            }
        }
        const std::string text = from_hex(f[4]);
        Ids want;
        std::istringstream ids(f[5]);
        for (int32_t id; ids >> id;) want.push_back(id);
        const Ids got = t->encode(text, f[2] == "1", f[3] == "1");
        auto& c = counts[key + (f[3] == "1" ? " special" : "")];
        ++c.second;
        if (got == want) ++c.first;
        else if (failures.size() < 20)
            failures.push_back(key + " " + f[4] + "\n   want " + show(want) + "\n   got  " + show(got));
    }
    int pass = 0, total = 0;
    for (const auto& [key, c] : counts) {
        test::info("%-28s %d/%d", key.c_str(), c.first, c.second);
        pass += c.first;
        total += c.second;
    }
    if (!failures.empty()) test::warn("%s", join(failures, "\n").c_str());
    REQUIRE(total > 1000);
    REQUIRE_EQ(pass, total);
}

// ---- llama-tokenize on text of our own -------------------------------------------------
// The vocab files above come with llama.cpp's own vectors; these texts add what they lack
// (many scripts, combining marks, CJK, emoji, numbers of every length, contractions in both
// cases, code, whitespace runs), plus seeded random mixes of them. gpt-oss's pre-tokenizer
// ("gpt-4o") has no vocab on hand: it runs on the GPT-2 vocab with tokenizer.ggml.pre
// rewritten (a vocab-only GGUF written here), so only the pre-tokenization is new.
namespace {

std::vector<std::string> own_texts() {
    std::vector<std::string> t = {
        "Hello world",
        "HELLO World hello WORLD",
        "HelloWorld camelCase snake_case SCREAMING_CASE",
        "I'm you're he's they'll we'd I've DON'T WE'LL She'S",
        "'s 're'abc ' s",
        "0 12 123 1234 12345 123456 1234567 12345678 3.14159 -42 1e-10 0x1F 1,000,000",
        "Ωμέγα καλημέρα ΚΑΛΗΜΕΡΑ",
        "Привет, мир! ПРИВЕТ",
        "Grüße aus Köln, Øresund, Ærø, ÉCOLE été",
        "e\u0301te\u0301 cafe\u0301 n\u0303 a\u0308\u0301",
        "नमस्ते दुनिया हिन्दी",
        "สวัสดีชาวโลก ภาษาไทย",
        "مرحبا بالعالم ١٢٣",
        "שלום עולם",
        "你好，世界！我爱自然语言处理。",
        "こんにちは世界、カタカナとひらがな",
        "안녕하세요 세계",
        "🙂🙃 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨ 🦙",
        "Tab\there\n\nnew  lines\r\n\r\nand   spaces   ",
        "    indented\n        more\n\t\tmixed \t \n",
        "\n",
        "\n\n\n",
        " ",
        "   ",
        "\t",
        "a\n\nb\n\n\nc",
        "int main() {\n    return a->b[0] + c::d<e>(\"str\\n\");\n}\n",
        "def f(x):\n    return {'k': [1, 2], \"s\": x ** 2}  # comment\n",
        "path/to/file.txt // http://x.y/z?q=1&r=2",
        "<html><body class=\"x\">Text &amp; more</body></html>",
        "ǅungla ǈ ǋ ᾈ ﬁ ẞ",
        "x²³ ½ ① Ⅻ ٣ ߁",
        "MixedΑlphabetЛетters123abc",
        "...!!!?? ?---___***",
        "😀😀😀😀 aaaaaaaaaaaaaaaaaaaaaaaa ........",
        "\u00a0nbsp\u2009thin\u3000ideographic\u200bzero",
        "end with space ",
        " start with space",
    };
    // Seeded mixes of fragments of the texts above, split at character boundaries.
    std::mt19937 rng(35);
    std::vector<std::string_view> chars;
    for (const std::string& s : t)
        for (size_t pos = 0; pos < s.size();) {
            const auto st = ember::unicode::decode_utf8(s, pos);
            chars.push_back(std::string_view(s).substr(pos, st.len));
            pos += st.len;
        }
    std::vector<std::string> mixes;
    for (int i = 0; i < 300; ++i) {
        std::string m;
        const int n = 10 + int(rng() % 60);
        for (int k = 0; k < n; ++k) {
            size_t start = rng() % chars.size();
            for (int run = 1 + int(rng() % 6); run > 0 && start < chars.size(); --run) m += chars[start++];
        }
        mixes.push_back(m);
    }
    t.insert(t.end(), mixes.begin(), mixes.end());
    return t;
}

// llama-tokenize parses special tokens unless told --no-parse-special.
Ids llama_tokenize(const std::string& tool, const std::string& vocab, const std::string& text_file) {
    const auto r = test::run_process(
        {tool, "-m", vocab, "-f", text_file, "--ids", "--no-bos", "--no-escape", "--log-disable"}, 300 * 1000);
    REQUIRE_MESSAGE(r.ok(), tool, " failed on ", vocab, ":\n", r.err);
    const size_t open = r.out.rfind('['), close = r.out.rfind(']');
    const bool found = open != std::string::npos && close != std::string::npos && close > open;
    REQUIRE_MESSAGE(found, "no ids in llama-tokenize's output:\n", r.out);
    std::string list = r.out.substr(open + 1, close - open - 1);
    std::replace(list.begin(), list.end(), ',', ' ');
    Ids ids;
    std::istringstream in(list);
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
}

// `ids` cut at each `sep`.
std::vector<Ids> split_ids(const Ids& ids, int32_t sep) {
    std::vector<Ids> parts(1);
    for (int32_t id : ids) {
        if (id == sep) parts.emplace_back();
        else parts.back().push_back(id);
    }
    return parts;
}

}  // namespace

// All texts go to one llama-tokenize run (a process per text would load the 262k-token Gemma
// vocab dozens of times), joined by the vocab's EOS token and parsed with special tokens on:
// a special token ends a fragment, and both tokenizers encode each fragment on its own.
TEST_CASE("llama-tokenize agrees on our texts") {
    const std::string tool = test::llama_tools_dir({"llama-tokenize"}) + "/llama-tokenize";
    const std::string src = test::llama_cpp_source_dir() + "/models/";
    test::TempDir dir;
    // The GPT-2 vocab with tokenizer.ggml.pre = "gpt-4o".
    const std::string gpt2 = test::testdata("tokenizer/ggml-vocab-gpt-2.gguf");
    EMBER_REQUIRE_FILE(gpt2);
    const std::string gpt4o = dir.path() + "/vocab-gpt-4o.gguf";
    {
        const GgufFile f = GgufFile::open(gpt2);
        ember::GgufWriter w;
        for (const std::string& key : f.metadata_order()) w.set(key, f.metadata().at(key));
        w.set("tokenizer.ggml.pre", ember::GgufValue::str("gpt-4o"));
        w.write_file(gpt4o);
    }
    std::string name, vocab;
    SUBCASE("gpt-4o") { name = "gpt-4o", vocab = gpt4o; }
    SUBCASE("gemma-4") { name = "gemma-4", vocab = src + "ggml-vocab-gemma-4.gguf"; }
    SUBCASE("qwen35") { name = "qwen35", vocab = src + "ggml-vocab-qwen35.gguf"; }
    EMBER_REQUIRE_FILE(vocab);
    const auto t = load(vocab);
    REQUIRE(t->eos() >= 0);
    const std::vector<std::string> texts = own_texts();
    const std::string file = dir.path() + "/texts.txt";
    test::write_file(file, join(texts, t->token_text(t->eos())));
    const std::vector<Ids> want = split_ids(llama_tokenize(tool, vocab, file), t->eos());
    REQUIRE_EQ(want.size(), texts.size());
    int pass = 0;
    std::vector<std::string> failures;
    for (size_t i = 0; i < texts.size(); ++i) {
        const Ids got = t->encode(texts[i], false, false);
        if (got == want[i]) ++pass;
        else
            failures.push_back("#" + std::to_string(i) + " " + texts[i].substr(0, 60) + "\n   want " + show(want[i]) +
                               "\n   got  " + show(got));
    }
    test::info("%s: %d/%zu texts identical to llama-tokenize", name.c_str(), pass, texts.size());
    if (name == "gpt-4o") {  // the rewritten pre really changed the split (else this proves nothing)
        const auto plain = load(gpt2);
        int differ = 0;
        for (const std::string& text : texts)
            differ += plain->encode(text, false, false) != t->encode(text, false, false);
        test::info("gpt-4o: %d texts split differently from gpt-2's pre-tokenizer", differ);
        CHECK(differ > 50);
    }
    if (!failures.empty()) test::warn("%s", join(failures, "\n").c_str());
    REQUIRE_EQ(pass, int(texts.size()));
}

// ---- Speed ---------------------------------------------------------------------------
// 100 KB of varied text, and of long runs that a careless matcher or merge loop would
// make quadratic. Times are printed; the limit applies to optimized, unsanitized builds.
TEST_CASE("speed100 KB") {
    const std::string smol = test::test_model(test::kSmolLM2), gemma = test::test_model(test::kGemma3);
    const std::string qwen = test::testdata("tokenizer/ggml-vocab-qwen2.gguf");
    const std::string gpt2 = test::testdata("tokenizer/ggml-vocab-gpt-2.gguf");
    for (const auto& p : {smol, gemma, qwen, gpt2}) EMBER_REQUIRE_FILE(p);
    std::vector<std::unique_ptr<Tokenizer>> toks;
    toks.push_back(load(smol));
    toks.push_back(load(gemma));
    toks.push_back(load(qwen));
    TokenizerData d = read_tokenizer_data(GgufFile::open(gpt2));
    d.pre = "llama-bpe";
    toks.push_back(Tokenizer::from_data(std::move(d)));

    const size_t size = 100 * 1024;
    std::string varied;
    uint32_t x = 12345;
    static const char* const syllables[] = {"ka", "to", "ri", "mu", "sen", "lo", "pe", "qu", "\u00e9t", "\u6c49", "th"};
    while (varied.size() < size) {
        x = x * 1664525u + 1013904223u;
        for (uint32_t i = 0; i <= (x >> 28) % 4; ++i) varied += syllables[(x >> (i * 4)) % std::size(syllables)];
        varied += (x >> 8) % 10 == 0 ? ".\n" : " ";
        if ((x >> 12) % 7 == 0) varied += std::to_string(x);
    }
    const std::pair<const char*, std::string> cases[] = {
        {"varied", varied},
        {"letters", std::string(size, 'a')},
        {"spaces", std::string(size, ' ')},
        {"digits", std::string(size, '7')},
        {"newlines", std::string(size, '\n')},
        {"'<'", std::string(size, '<')},
    };
    for (const auto& t : toks)
        for (const auto& [name, text] : cases) {
            const auto t0 = std::chrono::steady_clock::now();
            const Ids ids = t->encode(text, false, true);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            test::info("%-14s %-8s %zu bytes -> %6zu tokens in %6.1f ms", std::string(t->kind()).c_str(), name,
                       text.size(), ids.size(), ms);
            REQUIRE_EQ(t->decode(ids), text);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
            REQUIRE_MESSAGE(ms < 1000, "tokenizing 100 KB took a second or more");
#endif
        }
}
