#include "engine/tokenizer/detokenizer.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace ember {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special) {}

void StreamingDetokenizer::write_always(std::vector<int32_t> ids) {
    std::sort(ids.begin(), ids.end());
    always_ = std::move(ids);
}

std::string StreamingDetokenizer::push(int32_t id) {
    const bool skip = skip_special_ && !std::binary_search(always_.begin(), always_.end(), id);
    tok_.append_piece(id, skip, at_text_start_, pending_);
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
