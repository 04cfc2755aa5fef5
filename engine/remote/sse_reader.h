// An incremental reader of a Server-Sent Events stream (the WHATWG event-stream format that
// OpenAI-compatible servers stream answers in): bytes in, in whatever pieces the network gives
// them, whole events' data out. Lines may end in \n, \r\n or \r; "data:" fields of one event
// are joined with \n; comments (":") and other fields are skipped. A line longer than the
// bound is an error, so an endless line from a hostile server costs at most that much memory.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace ember::remote {

class SseReader {
public:
    // on_event gets an event's data (its "event:" name, if any, in `name`); returning false
    // stops the reader (feed() then returns false too).
    using EventFn = std::function<bool(const std::string& name, const std::string& data)>;
    SseReader(size_t max_line_bytes, EventFn on_event);

    // Reads more of the stream. False: on_event asked to stop, or a line went past the bound
    // (line_too_long() then says so). Nothing is read after either.
    bool feed(std::string_view bytes);
    // The stream ended: an event without its closing blank line is still delivered.
    bool finish();
    bool line_too_long() const { return too_long_; }

private:
    bool line(std::string_view l);
    bool dispatch();

    size_t max_line_;
    EventFn on_event_;
    std::string partial_;  // the unfinished line
    std::string data_, name_;
    bool has_data_ = false;
    bool after_cr_ = false;  // the last byte was '\r' (a following '\n' belongs to it)
    bool stopped_ = false, too_long_ = false;
};

}  // namespace ember::remote
