// Tokenizer tests: Unicode helpers, pre-tokenizers, SPM and BPE on small hand-made vocabs,
// special tokens, streaming detokenization, llama.cpp's vocab test vectors, and two real
// models (SmolLM2: byte-level BPE, Gemma 3: SentencePiece-style).
#include <QtTest>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "test_paths.h"

using namespace ember;
using Ids = std::vector<int32_t>;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

QString show(const Ids& ids) {
    QStringList s;
    for (int32_t id : ids) s << QString::number(id);
    return s.join(' ');
}

QString show_pieces(const std::vector<std::string_view>& pieces) {
    QStringList s;
    for (auto p : pieces) s << "[" + QString::fromUtf8(p.data(), qsizetype(p.size())) + "]";
    return s.join(' ');
}

std::vector<std::string_view> split(std::string_view pre, std::string_view text) {
    return PreTokenizer(pre).split(text);
}

// llama.cpp's .inp/.out vector files: inputs separated by "\n__ggml_vocab_test__\n" (the file
// ends with one); line i of .out is the ids of input i.
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
        if (hit == std::string::npos) break;
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

std::unique_ptr<Tokenizer> load(const std::string& path) {
    return Tokenizer::from_gguf(GgufFile::open(path));
}

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
        {"\u2581", -1}, {"h", -2}, {"e", -2}, {"l", -2}, {"o", -2}, {"w", -2}, {"r", -2}, {"d", -2},
        {"ll", -3}, {"he", -4}, {"\u2581h", -5}, {"llo", -3.5f}, {"\u2581he", -4.5f},
        {"hello", -6}, {"\u2581hello", -2.5f}, {"\u2581w", -5}, {"or", -5}, {"\u2581wor", -5.5f},
        {"ld", -5}, {"\u2581world", -3}, {"\u2581wo", -5}, {"\u2581worl", -5}, {"orld", -6},
        {"<|user|>", 0},
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
        unicode::append_utf8(unicode::byte_to_cp(uint8_t(b)), s);
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
    if (!id) qFatal("no token '%s'", std::string(text).c_str());
    return *id;
}

// Deterministic arbitrary inputs: random bytes (mostly invalid UTF-8), random picks of
// characters from many scripts, and mixtures of both.
std::vector<std::string> random_texts(uint32_t seed, int n) {
    static const char* const pieces[] = {
        "a", "Z", "7", " ", "  ", "\n", "\r\n", "\t", "'s", "!", "...", "\u00e9", "e\u0301", "\u00df",
        "\u6c49", "\u3002", "\ud55c", "\u30ab", "\U0001F999", "\u200d", "\u00a0", "\u3000", "\u0663",
        "\u00bd", "\uff21", "\u0430", "\u03bb", "\u0639", "\u0939\u093f", "<s>", "<|im_start|>", "0123",
    };
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&] { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x; };
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
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u0395\u03bb\u03bb\u03ac\u03b4\u03b1 \u0639\u0631\u0628\u064a",
};

}  // namespace

class TestTokenizer : public QObject {
    Q_OBJECT

private slots:
    // ---- Unicode helpers -----------------------------------------------------------------
    void unicodeCategories() {
        using unicode::Category;
        QCOMPARE(unicode::category('A'), Category::Lu);
        QCOMPARE(unicode::category('z'), Category::Ll);
        QCOMPARE(unicode::category('7'), Category::Nd);
        QCOMPARE(unicode::category(0xBD), Category::No);      // ½
        QCOMPARE(unicode::category(' '), Category::Zs);
        QCOMPARE(unicode::category('!'), Category::Po);
        QCOMPARE(unicode::category('$'), Category::Sc);
        QCOMPARE(unicode::category(0x4E00), Category::Lo);    // 一
        QCOMPARE(unicode::category(0x0301), Category::Mn);    // combining acute
        QCOMPARE(unicode::category(0x1F600), Category::So);   // 😀
        QCOMPARE(unicode::category(0xE000), Category::Co);
        QCOMPARE(unicode::category(0x0378), Category::Cn);    // unassigned
        QCOMPARE(unicode::category(0x10FFFF), Category::Cn);
        QCOMPARE(unicode::category(0x110000), Category::Cn);
        QVERIFY(unicode::is_whitespace(0x3000));
        QVERIFY(unicode::is_whitespace(0x85));
        QVERIFY(!unicode::is_whitespace(0x1C));
        QVERIFY(!unicode::is_whitespace(0x200B));  // zero width space is Cf, not White_Space
        QVERIFY(unicode::flags(0x00E9) & unicode::kLetter);
        QVERIFY(unicode::flags(0x0661) & unicode::kNumber);  // Arabic-Indic one
    }

    void utf8Decoding() {
        using unicode::Utf8Step;
        auto st = unicode::decode_utf8("\xF0\x9F\xA6\x99", 0);  // 🦙
        QCOMPARE(st.status, Utf8Step::Ok);
        QCOMPARE(st.cp, char32_t(0x1F999));
        QCOMPARE(int(st.len), 4);
        QCOMPARE(unicode::decode_utf8("\xC0\x80", 0).status, Utf8Step::Invalid);      // overlong
        QCOMPARE(unicode::decode_utf8("\xE0\x80\x80", 0).status, Utf8Step::Invalid);  // overlong
        QCOMPARE(unicode::decode_utf8("\xED\xA0\x80", 0).status, Utf8Step::Invalid);  // surrogate
        QCOMPARE(unicode::decode_utf8("\xF4\x90\x80\x80", 0).status, Utf8Step::Invalid);
        QCOMPARE(unicode::decode_utf8("\xE2\x28\xA1", 0).len, uint8_t(1));
        st = unicode::decode_utf8("\xE2\x82", 0);
        QCOMPARE(st.status, Utf8Step::Incomplete);
        QCOMPARE(int(st.len), 2);

        std::string out;
        QCOMPARE(unicode::append_complete_utf8("a\xE2\x82\xAC" "b\xE2\x82", out), size_t(5));
        QCOMPARE(out, std::string("a\xE2\x82\xAC" "b"));
        out.clear();
        QCOMPARE(unicode::append_complete_utf8("x\xFFy\xE2\x28", out), size_t(5));
        QCOMPARE(out, std::string("x\xEF\xBF\xBDy\xEF\xBF\xBD("));
    }

    void byteLevelAlphabet() {
        QCOMPARE(unicode::byte_to_cp('A'), char32_t('A'));
        QCOMPARE(unicode::byte_to_cp(' '), char32_t(0x120));  // Ġ
        QCOMPARE(unicode::byte_to_cp('\n'), char32_t(0x10A));  // Ċ
        QCOMPARE(unicode::byte_to_cp(0xAD), char32_t(0x143));
        for (int b = 0; b < 256; ++b) QCOMPARE(unicode::cp_to_byte(unicode::byte_to_cp(uint8_t(b))), b);
        QCOMPARE(unicode::cp_to_byte(0x2581), -1);
    }

    // ---- Pre-tokenizers ------------------------------------------------------------------
    void preTokenizers_data() {
        QTest::addColumn<QString>("pre");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("gpt2") << "gpt-2" << "Hello world's  test 123 !!\n"
                              << "[Hello] [ world] ['s] [ ] [ test] [ 123] [ !!] [\n]";
        QTest::newRow("gpt2 no case folding") << "gpt-2" << "I'M" << "[I] ['] [M]";
        QTest::newRow("llama3") << "llama-bpe" << "Hello 12345 I'M ok\n\n  x"
                                << "[Hello] [ ] [123] [45] [ I] ['M] [ ok] [\n\n] [ ] [ x]";
        QTest::newRow("llama3 punct") << "llama-bpe" << "a...\n\nb" << "[a] [...\n\n] [b]";
        QTest::newRow("qwen2") << "qwen2" << "x 2025!" << "[x] [ ] [2] [0] [2] [5] [!]";
        QTest::newRow("starcoder") << "smollm" << "abc 123" << "[abc] [ ] [1] [2] [3]";
        QTest::newRow("deepseek-coder") << "deepseek-coder" << "ied 4 \u00bd months"
                                        << "[ied] [ ] [4] [ ] [\u00bd] [ months]";
        QTest::newRow("deepseek-llm") << "deepseek-llm" << "Hi, \u4f60\u597d 42  "
                                      << "[Hi] [,] [ ] [\u4f60\u597d] [ ] [42] [  ]";
        QTest::newRow("default") << "default" << "x+=1234" << "[x] [+=] [123] [4]";
        QTest::newRow("falcon") << "falcon" << "a`b 12345" << "[a] [`] [b] [ ] [123] [45]";
    }
    void preTokenizers() {
        QFETCH(QString, pre);
        QFETCH(QString, text);
        QFETCH(QString, expected);
        const std::string t = text.toStdString();
        QCOMPARE(show_pieces(split(pre.toStdString(), t)), expected);
    }

    void preTokenizerInvalidUtf8() {
        // Every byte is kept; invalid ones act like U+FFFD (a symbol), nothing throws.
        const std::string bad = "a\xFF" "b \xE2\x82 c\xC0";
        std::vector<std::string> pieces;
        for (auto p : split("gpt-2", bad)) pieces.emplace_back(p);
        const std::vector<std::string> want = {"a", "\xFF", "b", " \xE2\x82", " c", "\xC0"};
        QCOMPARE(pieces, want);
    }

    void unknownPreTokenizerThrows() {
        QVERIFY_THROWS_EXCEPTION(Error, PreTokenizer("no-such-pre"));
        QVERIFY(!PreTokenizer::known_names().empty());
    }

    // ---- SPM on a tiny vocab -------------------------------------------------------------
    void spmMergesByScore() {
        auto t = Tokenizer::from_data(tiny_spm());
        QCOMPARE(t->kind(), std::string_view("spm"));
        QVERIFY(t->add_bos());
        QVERIFY(t->add_space_prefix());
        const Ids ids = t->encode("hello world", false, false);
        QCOMPARE(show(ids), show({id_of(*t, "\u2581hello"), id_of(*t, "\u2581world")}));
        QCOMPARE(t->decode(ids), std::string("hello world"));
        // BOS via add_special; decode drops nothing but renders control text unless skipped.
        const Ids with_bos = t->encode("hello", true, false);
        QCOMPARE(with_bos.front(), t->bos());
        QCOMPARE(t->decode(with_bos, true), std::string("hello"));
        QCOMPARE(t->decode(with_bos, false), std::string("<s>hello"));
    }

    void spmByteFallback() {
        auto t = Tokenizer::from_data(tiny_spm());
        const Ids ids = t->encode("h\u00e9", false, false);  // é is not in the vocab
        QCOMPARE(show(ids), show({id_of(*t, "\u2581h"), id_of(*t, "<0xC3>"), id_of(*t, "<0xA9>")}));
        QCOMPARE(t->decode(ids), std::string("h\u00e9"));
        QCOMPARE(t->token_to_piece(id_of(*t, "<0xC3>")), std::string("\xC3"));
        QCOMPARE(t->token_to_piece(id_of(*t, "\u2581hello")), std::string(" hello"));
        // Invalid UTF-8 goes through as bytes, and comes back exactly.
        const std::string bad = "he\xFF\xE2\x82";
        QCOMPARE(t->decode(t->encode(bad, false, false)), bad);
    }

    void spmSpacePrefixAfterSpecial() {
        auto t = Tokenizer::from_data(tiny_spm());
        // "<|user|>" is user-defined: always matched; text after it gets the space prefix.
        const Ids ids = t->encode("hello<|user|>world", false, false);
        QCOMPARE(show(ids), show({id_of(*t, "\u2581hello"), id_of(*t, "<|user|>"), id_of(*t, "\u2581world")}));
        QCOMPARE(t->decode(ids), std::string("hello<|user|>world"));
        QVERIFY(t->encode("", false, false).empty());
        QCOMPARE(show(t->encode("", true, false)), show({t->bos()}));
    }

    // ---- BPE on a tiny vocab -------------------------------------------------------------
    void bpeMergesByRank() {
        auto t = Tokenizer::from_data(tiny_bpe());
        QCOMPARE(t->kind(), std::string_view("bpe/gpt-2"));
        QVERIFY(!t->add_bos());
        const Ids ids = t->encode("hello world", false, false);
        QCOMPARE(show(ids), show({id_of(*t, "hello"), id_of(*t, "\u0120world")}));
        QCOMPARE(t->decode(ids), std::string("hello world"));
        // "hel": h+e merges first (rank 0), then nothing joins "he" and "l".
        QCOMPARE(show(t->encode("hel", false, false)), show({id_of(*t, "he"), id_of(*t, "l")}));
        const std::string bad = "\xFF\xFEhello\xE2\x82";
        QCOMPARE(t->decode(t->encode(bad, false, false)), bad);
        QCOMPARE(t->token_to_piece(id_of(*t, "\u0120world")), std::string(" world"));
    }

    void specialTokens() {
        auto t = Tokenizer::from_data(tiny_bpe());
        const int32_t start = id_of(*t, "<|im_start|>"), think = id_of(*t, "<think>");
        QVERIFY(t->is_control(start));
        QVERIFY(!t->is_control(think));
        QVERIFY(t->is_eog(start));  // it is the eos here
        const std::string text = "<|im_start|>hello<think>";
        const Ids parsed = t->encode(text, false, true);
        QCOMPARE(show(parsed), show({start, id_of(*t, "hello"), think}));
        // Without parse_special the control token is plain text; user-defined still matches.
        const Ids plain = t->encode(text, false, false);
        QVERIFY(std::find(plain.begin(), plain.end(), start) == plain.end());
        QCOMPARE(plain.back(), think);
        QCOMPARE(t->decode(plain), text);
        QCOMPARE(t->decode(parsed, true), std::string("hello<think>"));
        QCOMPARE(t->decode(parsed, false), text);
    }

    void badDataThrows() {
        TokenizerData d = tiny_bpe();
        d.model = "bert";
        QVERIFY_THROWS_EXCEPTION(Error, Tokenizer::from_data(d));
        d = tiny_bpe();
        d.merges.clear();
        QVERIFY_THROWS_EXCEPTION(Error, Tokenizer::from_data(d));
        d = tiny_spm();
        d.scores.pop_back();
        QVERIFY_THROWS_EXCEPTION(Error, Tokenizer::from_data(d));
        auto t = Tokenizer::from_data(tiny_spm());
        QVERIFY_THROWS_EXCEPTION(Error, t->token_to_piece(t->n_vocab()));
        QVERIFY_THROWS_EXCEPTION(Error, t->decode(Ids{-1}));
    }

    // ---- Streaming detokenizer -----------------------------------------------------------
    void streamingSplitCharacter() {
        auto t = Tokenizer::from_data(tiny_spm());
        StreamingDetokenizer d(*t);
        // "h€!" with € (E2 82 AC) spelled as three byte tokens.
        QCOMPARE(d.push(id_of(*t, "\u2581h")), std::string("h"));
        QCOMPARE(d.push(id_of(*t, "<0xE2>")), std::string());
        QCOMPARE(d.push(id_of(*t, "<0x82>")), std::string());
        QCOMPARE(d.pending_bytes(), size_t(2));
        QCOMPARE(d.push(id_of(*t, "<0xAC>")), std::string("\xE2\x82\xAC"));
        QCOMPARE(d.push(id_of(*t, "<0x21>")), std::string("!"));
        QCOMPARE(d.push(t->eos()), std::string());  // control tokens skipped by default
        QCOMPARE(d.flush(), std::string());
        // A stream that ends inside a character: flush gives U+FFFD.
        QCOMPARE(d.push(id_of(*t, "<0xF0>")), std::string());
        QCOMPARE(d.push(id_of(*t, "<0x9F>")), std::string());
        QCOMPARE(d.flush(), std::string("\xEF\xBF\xBD"));
        // A byte that can never be UTF-8 is replaced at once.
        QCOMPARE(d.push(id_of(*t, "<0xFF>")), std::string("\xEF\xBF\xBD"));
    }

    void streamingMatchesDecode() {
        auto t = Tokenizer::from_data(tiny_bpe());
        const std::string text = "hello \u00e9\u6c49\U0001F999 world";
        const Ids ids = t->encode(text, false, false);
        StreamingDetokenizer d(*t);
        std::string streamed;
        for (int32_t id : ids) {
            const std::string part = d.push(id);
            std::string check;
            QCOMPARE(unicode::append_complete_utf8(part, check), part.size());  // complete UTF-8
            QCOMPARE(check, part);
            streamed += part;
        }
        streamed += d.flush();
        QCOMPARE(streamed, text);
        QCOMPARE(t->decode(ids), text);
    }

    // ---- llama.cpp vocab test vectors ----------------------------------------------------
    void vectors_data() {
        QTest::addColumn<QString>("name");
        for (const char* n : {"llama-spm", "phi-3", "gpt-2", "qwen2", "starcoder", "refact", "deepseek-coder"})
            QTest::newRow(n) << QString(n);
    }
    void vectors() {
        QFETCH(QString, name);
        const std::string path = test::testdata("tokenizer/ggml-vocab-" + name.toStdString() + ".gguf");
        EMBER_REQUIRE_FILE(path);
        EMBER_REQUIRE_FILE(path + ".inp");
        EMBER_REQUIRE_FILE(path + ".out");
        const auto t = load(path);
        const Vectors v = load_vectors(path);
        QVERIFY(v.inputs.size() > 30);
        QCOMPARE(v.outputs.size(), v.inputs.size());
        int pass = 0, round_trip = 0;
        QStringList failures;
        for (size_t i = 0; i < v.inputs.size(); ++i) {
            const Ids got = t->encode(v.inputs[i], false, false);
            if (got == v.outputs[i]) ++pass;
            else
                failures << QString("#%1 %2\n   want %3\n   got  %4")
                                .arg(i)
                                .arg(QString::fromUtf8(v.inputs[i].c_str()).left(60))
                                .arg(show(v.outputs[i]), show(got));
            if (t->decode(got) == v.inputs[i]) ++round_trip;
        }
        qInfo("%s: %d/%zu vectors pass, %d/%zu round-trip", qPrintable(name), pass, v.inputs.size(),
              round_trip, v.inputs.size());
        if (!failures.isEmpty()) qWarning("%s", qPrintable(failures.join('\n')));
        QCOMPARE(pass, int(v.inputs.size()));
        QCOMPARE(round_trip, int(v.inputs.size()));
    }

    // Arbitrary bytes never throw, decode back exactly, and stream as valid UTF-8.
    void randomBytesRoundTrip() {
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
                if (t->kind() == "spm") sym = QString::asprintf("<0x%02X>", b).toStdString();
                else unicode::append_utf8(unicode::byte_to_cp(uint8_t(b)), sym);
                const auto id = t->find_token(sym);
                if (!id || (t->token_type(*id) != TokenType::Normal && t->token_type(*id) != TokenType::Byte))
                    unspellable += char(b);
            }
            for (std::string text : random_texts(seed++, 300)) {
                std::erase_if(text, [&](char c) { return unspellable.find(c) != std::string::npos; });
                const Ids ids = t->encode(text, false, false);
                const std::string back = t->decode(ids);
                QVERIFY2(back == text, qPrintable(QString("%1: %2 -> [%3] -> %4")
                                                      .arg(QString::fromStdString(path),
                                                           QByteArray::fromStdString(text).toHex(), show(ids),
                                                           QByteArray::fromStdString(back).toHex())));
                const Ids with_specials = t->encode(text, true, true);
                StreamingDetokenizer d(*t);
                std::string streamed;
                for (int32_t id : with_specials) streamed += d.push(id);
                streamed += d.flush();
                QCOMPARE(streamed, made_valid(t->decode(with_specials, true)));
            }
        }
    }

    // ---- Real models ---------------------------------------------------------------------
    void smollm2() {
        const std::string path = test::test_model(test::kSmolLM2);
        EMBER_REQUIRE_FILE(path);
        const auto t = load(path);
        QCOMPARE(t->kind(), std::string_view("bpe/smollm"));
        QCOMPARE(t->pre_tokenizer_variant(), std::string_view("starcoder"));
        QCOMPARE(t->n_vocab(), 49152);
        QVERIFY(!t->add_bos());
        QCOMPARE(t->eos(), 2);
        QVERIFY(t->is_eog(2));  // <|im_end|>
        QVERIFY(t->is_eog(0));  // <|endoftext|>
        QVERIFY(!t->is_eog(1));
        QCOMPARE(t->eot(), 2);
        for (const char* text : kRoundTripTexts) {
            const Ids ids = t->encode(text, true, false);
            QCOMPARE(t->decode(ids), std::string(text));
        }
        // ChatML markers are single tokens only with parse_special.
        const Ids chat = t->encode("<|im_start|>user\nHi<|im_end|>\n", false, true);
        QCOMPARE(chat.front(), 1);
        QCOMPARE(std::count(chat.begin(), chat.end(), 2), 1);
        QCOMPARE(t->decode(chat), std::string("<|im_start|>user\nHi<|im_end|>\n"));
        QCOMPARE(t->decode(chat, true), std::string("user\nHi\n"));
        const Ids plain = t->encode("<|im_start|>", false, false);
        QVERIFY(plain.size() > 1);
        QCOMPARE(t->decode(plain), std::string("<|im_start|>"));
        // Known ids, from llama-cpp-python 0.3.36: Llama(path, vocab_only=True).tokenize(
        // text.encode(), add_bos=True, special=True).
        QCOMPARE(show(t->encode("Hello world", true, true)), show({19556, 905}));
        QCOMPARE(show(t->encode("<|im_start|>user\nCaf\u00e9 \u6c49\u5b57 \U0001F999<|im_end|>\n", true, true)),
                 show({1, 4093, 198, 51, 1939, 2756, 17097, 126, 227, 36518, 15107, 116, 243, 2, 198}));
        // Digits are split one by one (starcoder pattern).
        const Ids digits = t->encode("2025", false, false);
        QCOMPARE(digits.size(), size_t(4));
        QCOMPARE(show(digits), show({id_of(*t, "2"), id_of(*t, "0"), id_of(*t, "2"), id_of(*t, "5")}));
    }

    void gemma3() {
        const std::string path = test::test_model(test::kGemma3);
        EMBER_REQUIRE_FILE(path);
        const auto t = load(path);
        QCOMPARE(t->kind(), std::string_view("spm"));
        QCOMPARE(t->n_vocab(), 262144);
        QVERIFY(t->add_bos());
        QVERIFY(!t->add_space_prefix());
        QCOMPARE(t->bos(), 2);
        QCOMPARE(t->eos(), 1);
        const int32_t eot = id_of(*t, "<end_of_turn>");
        QCOMPARE(t->eot(), eot);
        QVERIFY(t->is_eog(eot));
        QVERIFY(t->is_eog(1));
        const Ids hello = t->encode("Hello", true, false);
        QCOMPARE(hello.front(), 2);
        QCOMPARE(t->decode(hello, true), std::string("Hello"));
        for (const char* text : kRoundTripTexts) {
            const Ids ids = t->encode(text, false, false);
            QCOMPARE(t->decode(ids), std::string(text));
        }
        // Known ids, from llama-cpp-python 0.3.36 (as for SmolLM2 above).
        QCOMPARE(show(t->encode("Hello world", true, true)), show({2, 9259, 1902}));
        QCOMPARE(show(t->encode("<start_of_turn>user\nCaf\u00e9 \u6c49\u5b57 \U0001F999<end_of_turn>\n", true, true)),
                 show({2, 105, 2364, 107, 160319, 236859, 236743, 239908, 237871, 236743, 478, 397, 404, 391, 106, 107}));
        // Newline runs are user-defined tokens, matched whole.
        QCOMPARE(show(t->encode("\n\n", false, false)), show({id_of(*t, "\n\n")}));
        const Ids turn = t->encode("<start_of_turn>user\nHi<end_of_turn>\n", true, true);
        QCOMPARE(turn[0], 2);
        QCOMPARE(turn[1], id_of(*t, "<start_of_turn>"));
        QCOMPARE(std::count(turn.begin(), turn.end(), eot), 1);

        // The llama is spelled with four byte-fallback tokens; streaming holds it back until
        // the last one, then emits the whole character.
        const Ids llama = t->encode("a \U0001F999!", false, false);
        const Ids bytes = {id_of(*t, "<0xF0>"), id_of(*t, "<0x9F>"), id_of(*t, "<0xA6>"), id_of(*t, "<0x99>")};
        QVERIFY(std::search(llama.begin(), llama.end(), bytes.begin(), bytes.end()) != llama.end());
        StreamingDetokenizer d(*t);
        QStringList parts;
        for (int32_t id : llama) parts << QString::fromStdString(d.push(id));
        parts << QString::fromStdString(d.flush());
        QCOMPARE(parts.join("|"), QString("a| ||||\U0001F999|!|"));  // 3 empty pushes
    }

    // ---- llama.cpp as an independent reference -------------------------------------------
    // data/llama_cpp_reference.tsv comes from make_llama_cpp_reference.py (llama-cpp-python):
    // every pre-tokenizer on the GPT-2 vocab, plus SmolLM2 and Gemma 3 with special tokens.
    void llamaCppReference() {
        const std::string ref = std::string(EMBER_TOKENIZER_TEST_DIR) + "/data/llama_cpp_reference.tsv";
        const std::string gpt2 = test::testdata("tokenizer/ggml-vocab-gpt-2.gguf");
        EMBER_REQUIRE_FILE(ref);
        EMBER_REQUIRE_FILE(gpt2);
        EMBER_REQUIRE_FILE(test::test_model(test::kSmolLM2));
        EMBER_REQUIRE_FILE(test::test_model(test::kGemma3));
        std::map<std::string, std::unique_ptr<Tokenizer>> toks;
        std::map<std::string, std::pair<int, int>> counts;  // key -> (pass, total)
        QStringList failures;
        std::istringstream in(read_file(ref));
        for (std::string line; std::getline(in, line);) {
            if (line.empty() || line[0] == '#') continue;
            QStringList f = QString::fromStdString(line).split('\t');
            QCOMPARE(f.size(), 6);
            const std::string name = f[0].toStdString(), pre = f[1].toStdString();
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
            const QByteArray text = QByteArray::fromHex(f[4].toLatin1());
            Ids want;
            for (const QString& id : f[5].split(' ', Qt::SkipEmptyParts)) want.push_back(id.toInt());
            const Ids got = t->encode(std::string_view(text.constData(), size_t(text.size())), f[2] == "1", f[3] == "1");
            auto& c = counts[key + (f[3] == "1" ? " special" : "")];
            ++c.second;
            if (got == want) ++c.first;
            else if (failures.size() < 20)
                failures << QString("%1 %2\n   want %3\n   got  %4").arg(QString::fromStdString(key), f[4], show(want), show(got));
        }
        int pass = 0, total = 0;
        for (const auto& [key, c] : counts) {
            qInfo("%-28s %d/%d", key.c_str(), c.first, c.second);
            pass += c.first;
            total += c.second;
        }
        if (!failures.isEmpty()) qWarning("%s", qPrintable(failures.join('\n')));
        QVERIFY(total > 1000);
        QCOMPARE(pass, total);
    }

    // ---- Speed ---------------------------------------------------------------------------
    // 100 KB of varied text, and of long runs that a careless matcher or merge loop would
    // make quadratic. Times are printed; the limit applies to optimized, unsanitized builds.
    void speed100KB() {
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
            {"varied", varied}, {"letters", std::string(size, 'a')}, {"spaces", std::string(size, ' ')},
            {"digits", std::string(size, '7')}, {"newlines", std::string(size, '\n')}, {"'<'", std::string(size, '<')},
        };
        for (const auto& t : toks)
            for (const auto& [name, text] : cases) {
                const auto t0 = std::chrono::steady_clock::now();
                const Ids ids = t->encode(text, false, true);
                const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                qInfo("%-14s %-8s %zu bytes -> %6zu tokens in %6.1f ms", std::string(t->kind()).c_str(), name,
                      text.size(), ids.size(), ms);
                QCOMPARE(t->decode(ids), text);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
                QVERIFY2(ms < 1000, "tokenizing 100 KB took a second or more");
#endif
            }
    }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
