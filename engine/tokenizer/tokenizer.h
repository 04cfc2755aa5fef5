// Text <-> token ids, driven only by a model's GGUF tokenizer metadata.
//
// Two vocabulary kinds:
//  - "spm" (tokenizer.ggml.model = "llama"): SentencePiece-style. Spaces become U+2581, an
//    optional space prefix is added, then adjacent pieces merge by highest vocab score; text
//    with no token falls back to <0xXX> byte tokens (or the unknown token).
//  - "bpe" (tokenizer.ggml.model = "gpt2"): byte-level BPE. A pre-tokenizer (chosen by
//    tokenizer.ggml.pre) splits the text into words; each word's bytes are mapped to GPT-2's
//    printable alphabet and merged in the order of tokenizer.ggml.merges.
//  - "bpe/gemma4" (tokenizer.ggml.model = "gemma4"): SentencePiece-style BPE. Spaces become
//    U+2581 (no space prefix), the text splits only into lines and newline runs (a newline
//    run that is a token is taken whole), each line's UTF-8 characters merge by
//    tokenizer.ggml.merges, and text with no token falls back to <0xXX> byte tokens. BOS is
//    always added, as llama.cpp does for these files.
//
// Special tokens: control (and unknown) tokens are recognised in the input text only when
// parse_special is true; user-defined tokens (GGUF type 4, HF "added tokens") are always
// recognised, as Hugging Face and llama.cpp do, except end-of-generation ones (Phi-3's
// "</s>"), which need parse_special like control tokens. Matching is leftmost-longest.
// BPE merges only ever produce normal tokens.
//
// Invalid UTF-8 input never throws: invalid bytes are tokenized as single bytes (BPE: their
// byte-level symbol; SPM: byte-fallback tokens), so decode() gives the exact input back.
// Only a byte the vocab cannot spell at all is lost (StarCoder lacks 0xC0, 0xC1, 0xF1 and
// 0xF5..0xFF; SmolLM2 also 0xF2 and six ASCII control bytes): it becomes the unknown token, or
// nothing if that token would end generation (their unknown token is <|endoftext|>).
//
// Checked against llama.cpp (tests/engine/tokenizer): identical ids on its vocab test vectors
// and on ~1,500 random texts per vocab, with these deliberate differences:
//  - invalid UTF-8 is kept as bytes (llama.cpp substitutes U+FFFD);
//  - a *normal* token whose text looks like an end marker (Qwen's "</s>") stays normal text;
//    llama.cpp promotes it to a control token;
//  - no per-model lstrip/rstrip of text around special tokens (llama.cpp hard-codes it for
//    Phi-3 and Jina by model name; GGUF does not carry it);
//  - decode() is exact: no clean-up of spaces before punctuation.
//
// A Tokenizer is immutable after construction; all methods are safe to call concurrently.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember {

class GgufFile;
class PreTokenizer;
class SpecialTokenMatcher;
class SpmModel;
class BpeModel;
struct Vocab;

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// Everything a tokenizer is built from: what GGUF metadata holds, usable without a file.
struct TokenizerData {
    std::string model;            // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
    std::string pre = "default";  // pre-tokenizer name (BPE only)
    std::vector<std::string> tokens;
    std::vector<float> scores;         // empty: all 0
    std::vector<int32_t> token_types;  // empty: all Normal
    std::vector<std::string> merges;   // "left right", highest priority first (BPE)
    std::optional<int32_t> bos, eos, unk, pad, eot, eom;
    std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Reads tokenizer.ggml.* from a GGUF file (throws ember::Error when something required is
// missing). Useful to inspect or adjust the data before Tokenizer::from_data.
TokenizerData read_tokenizer_data(const GgufFile& file);

// tokenizer.ggml.model values Ember can run, described ("llama (SentencePiece)", …); the
// pre-tokenizer names are PreTokenizer::known_names().
const std::vector<std::pair<std::string_view, std::string_view>>& supported_tokenizer_models();
bool is_supported_tokenizer_model(std::string_view model);

class Tokenizer {
public:
    // Reads tokenizer.ggml.* from the file. Throws ember::Error on missing/inconsistent data.
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
    static std::unique_ptr<Tokenizer> from_data(TokenizerData data);
    ~Tokenizer();

    // add_special: prepend BOS / append EOS as add_bos() / add_eos() say.
    // parse_special: recognise control tokens written in the text (e.g. "<|im_start|>").
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

    // Exact bytes of the ids (possibly invalid UTF-8 if the ids split a character).
    // skip_special: control/unknown/unused tokens produce nothing instead of their text.
    // SPM with a space prefix: the one space the encoder adds at the start of the text (and
    // after each special token) is removed again, so decode(encode(t)) == t — except that a
    // U+2581 in t comes back as a space (SentencePiece's space mark; llama.cpp does the same).
    std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

    // The raw bytes one token stands for: byte tokens give their byte, U+2581 becomes a space
    // (SPM), the byte-level alphabet is mapped back to bytes (BPE); control tokens give their
    // text. Throws ember::Error for an id out of range.
    std::string token_to_piece(int32_t id) const;
    const std::string& token_text(int32_t id) const;  // as stored in the vocab
    TokenType token_type(int32_t id) const;

    int32_t n_vocab() const;
    int32_t bos() const { return bos_; }  // -1 when the vocab has none
    int32_t eos() const { return eos_; }
    int32_t eot() const { return eot_; }
    int32_t unk() const { return unk_; }
    int32_t pad() const { return pad_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_space_prefix() const { return add_space_prefix_; }

    // End of generation: eos, eot, eom and the usual end-of-turn tokens
    // (<|im_end|>, <end_of_turn>, <|eot_id|>, <|end|>, <|endoftext|>, ...).
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return eog_; }
    bool is_control(int32_t id) const;
    std::optional<int32_t> find_token(std::string_view text) const;
    // "spm", or "bpe/" + the pre-tokenizer name from the file (e.g. "bpe/smollm").
    std::string_view kind() const { return kind_; }
    // BPE: the pre-tokenizer's pattern set (e.g. "starcoder" for "smollm"); "" for SPM.
    std::string_view pre_tokenizer_variant() const;

    // Appends the decoded bytes of one token. `at_text_start` carries the SPM space-prefix
    // state between calls (start with true); decode() and StreamingDetokenizer share it.
    void append_piece(int32_t id, bool skip_special, bool& at_text_start, std::string& out) const;

private:
    Tokenizer();
    void init_special_ids(const TokenizerData& d, bool spm);
    void encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
    void check_id(int32_t id) const;

    std::unique_ptr<Vocab> vocab_;
    std::unique_ptr<SpmModel> spm_;
    std::unique_ptr<BpeModel> bpe_;
    std::unique_ptr<PreTokenizer> pre_;
    std::unique_ptr<SpecialTokenMatcher> specials_;
    std::string kind_;
    int32_t bos_ = -1, eos_ = -1, eot_ = -1, unk_ = -1, pad_ = -1;
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
    bool space_marks_ = false;  // BPE over U+2581-marked spaces (gemma4)
    std::vector<int32_t> eog_;
};

}  // namespace ember
