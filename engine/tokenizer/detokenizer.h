// Streaming detokenization: feed generated ids one at a time and get back only text that is
// complete, valid UTF-8. A character whose bytes span several tokens (byte-fallback or
// byte-level tokens) is held back until its last byte arrives.
//
// Bytes that can never become valid UTF-8 (e.g. 0xFF, or a lead byte followed by a
// non-continuation byte) are emitted as U+FFFD, one per maximal invalid subpart. flush()
// emits whatever is still held: a sequence cut off by the end of the stream becomes one
// U+FFFD. So the concatenated output is always valid UTF-8, and it equals
// Tokenizer::decode() of the same ids whenever that is valid UTF-8.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember {

class Tokenizer;

class StreamingDetokenizer {
public:
    // skip_special: control tokens (e.g. <|im_end|>) produce no text.
    explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = true);

    // Text completed by this token (often empty while a character is incomplete).
    std::string push(int32_t id);
    // Everything still held back; the detokenizer is then ready for a new stream.
    std::string flush();
    void reset();
    // The ids continue text that came before (generated tokens after a prompt): an SPM
    // token's leading space is then kept, not taken for the encoder's space prefix.
    void continue_text() { at_text_start_ = false; }
    // Control tokens whose text is written even with skip_special: the markers
    // a reasoning splitter reads (engine/template/reasoning.h), e.g. gpt-oss's <|channel|>.
    void write_always(std::vector<int32_t> ids);

    size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer& tok_;
    bool skip_special_;
    bool at_text_start_ = true;
    std::string pending_;
    std::vector<int32_t> always_;
};

}  // namespace ember
