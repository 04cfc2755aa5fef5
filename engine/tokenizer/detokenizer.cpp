#include "engine/tokenizer/detokenizer.h"

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace ember {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special) {}

std::string StreamingDetokenizer::push(int32_t id) {
    tok_.append_piece(id, skip_special_, at_text_start_, pending_);
    std::string out;
    pending_.erase(0, unicode::append_complete_utf8(pending_, out));
    return out;
}

std::string StreamingDetokenizer::flush() {
    std::string out;
    pending_.erase(0, unicode::append_complete_utf8(pending_, out));
    if (!pending_.empty()) out += "\xEF\xBF\xBD";  // a truncated sequence: U+FFFD
    reset();
    return out;
}

void StreamingDetokenizer::reset() {
    pending_.clear();
    at_text_start_ = true;
}

}  // namespace ember
