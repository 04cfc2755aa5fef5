// Pre-tokenizers for byte-level BPE: split text into the pieces ("words") that BPE then
// merges independently. Each variant is the sequence of regular expressions its model was
// trained with (named by GGUF's tokenizer.ggml.pre), implemented here as hand-written
// matchers over Unicode categories.
//
// A variant's patterns are applied in order, the way llama.cpp applies them: each pattern
// splits every current piece into its matches and the unmatched gaps between them; a pattern
// sees only the piece it splits (so lookaheads and `$` stop at the piece's end).
//
// Invalid UTF-8 never throws: each invalid byte is kept as a piece byte and classified as
// U+FFFD (a symbol), so BPE still encodes the exact bytes.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ember {

struct PreTokenizerVariant;

class PreTokenizer {
public:
    // Throws ember::Error for a name it does not know (listing the known ones).
    explicit PreTokenizer(std::string_view pre_name);

    // Splits `text` into consecutive pieces that together cover it exactly.
    std::vector<std::string_view> split(std::string_view text) const;

    const std::string& name() const { return name_; }
    // The pattern set actually used (e.g. "starcoder" for pre = "smollm").
    std::string_view variant() const;
    // Llama 3 style: a piece that is already a whole token skips the BPE merges.
    bool ignore_merges() const;

    static std::vector<std::string> known_names();

private:
    std::string name_;
    const PreTokenizerVariant* variant_;
};

}  // namespace ember
