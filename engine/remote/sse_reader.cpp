// SseReader: the event-stream format's line and field rules, with a bound on what one line,
// and one event's data, may hold.
#include "engine/remote/sse_reader.h"

namespace ember::remote {

SseReader::SseReader(size_t max_line_bytes, EventFn on_event)
    : max_line_(max_line_bytes), on_event_(std::move(on_event)) {}

bool SseReader::feed(std::string_view bytes) {
    if (stopped_) return false;
    size_t start = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        const char c = bytes[i];
        if (c != '\n' && c != '\r') continue;
        const bool lf_after_cr = c == '\n' && after_cr_ && i == start && partial_.empty();
        after_cr_ = c == '\r';
        if (lf_after_cr) {  // the second half of a \r\n
            start = i + 1;
            continue;
        }
        partial_.append(bytes.substr(start, i - start));
        start = i + 1;
        if (partial_.size() > max_line_) return too_long_ = true, stopped_ = true, false;
        const std::string l = std::move(partial_);
        partial_.clear();
        if (!line(l)) return stopped_ = true, false;
    }
    if (start < bytes.size()) after_cr_ = false;
    partial_.append(bytes.substr(start));
    if (partial_.size() > max_line_) return too_long_ = true, stopped_ = true, false;
    return true;
}

bool SseReader::finish() {
    if (stopped_) return false;
    if (!partial_.empty()) {
        const std::string l = std::move(partial_);
        partial_.clear();
        if (!line(l)) return stopped_ = true, false;
    }
    return dispatch();
}

// One line of the stream: a field, a comment, or the blank line that ends an event.
bool SseReader::line(std::string_view l) {
    if (l.empty()) return dispatch();
    if (l.front() == ':') return true;  // a comment (keep-alive)
    const size_t colon = l.find(':');
    const std::string_view field = l.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view{} : l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
        if (has_data_) data_ += '\n';
        data_.append(value);
        has_data_ = true;
        if (data_.size() > max_line_) return too_long_ = true, false;
    } else if (field == "event") {
        name_.assign(value);
    }
    return true;
}

bool SseReader::dispatch() {
    if (!has_data_) {
        name_.clear();
        return true;
    }
    const bool go_on = on_event_(name_, data_);
    data_.clear(), name_.clear();
    has_data_ = false;
    return go_on;
}

}  // namespace ember::remote
