// SseReader: the event-stream rules (line endings split anywhere, several data lines, comments,
// a last event without its blank line) and the bound on one line.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/remote/sse_reader.h"

using ember::remote::SseReader;

namespace {

struct Events {
    std::vector<std::string> data, names;
    SseReader reader;
    explicit Events(size_t max_line = 1 << 20)
        : reader(max_line, [this](const std::string& name, const std::string& d) {
              names.push_back(name);
              data.push_back(d);
              return true;
          }) {}
};

const std::string kStream =
    ": keep-alive\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: error\n"
    "data: line one\n"
    "data:line two\n\n"
    "id: 7\rdata: cr only\r\r"
    "data: [DONE]\n\n";

}  // namespace

TEST_CASE("eventsComeOutWholeHoweverTheBytesAreSplit") {
    for (size_t piece : {size_t(1), size_t(2), size_t(3), size_t(7), kStream.size()}) {
        CAPTURE(piece);
        Events e;
        for (size_t i = 0; i < kStream.size(); i += piece)
            REQUIRE(e.reader.feed(std::string_view(kStream).substr(i, piece)));
        REQUIRE(e.reader.finish());
        CHECK(e.data == std::vector<std::string>{"{\"a\":1}", "line one\nline two", "cr only", "[DONE]"});
        CHECK(e.names == std::vector<std::string>{"", "error", "", ""});
    }
}

TEST_CASE("lastEventWithoutItsBlankLineIsDeliveredAtTheEnd") {
    Events e;
    REQUIRE(e.reader.feed("data: partial"));
    CHECK(e.data.empty());
    REQUIRE(e.reader.finish());
    CHECK(e.data == std::vector<std::string>{"partial"});
}

TEST_CASE("lineLongerThanTheBoundStopsTheReader") {
    Events e(1000);
    REQUIRE(e.reader.feed("data: ok\n\ndata: "));
    const std::string block(300, 'x');
    bool go_on = true;
    for (int i = 0; i < 10 && go_on; ++i) go_on = e.reader.feed(block);
    CHECK_FALSE(go_on);
    CHECK(e.reader.line_too_long());
    CHECK(e.data == std::vector<std::string>{"ok"});
    CHECK_FALSE(e.reader.feed("\n\n"));  // nothing more is read
    // Many short data lines of one event are bounded the same way.
    Events many(1000);
    std::string lines;
    for (int i = 0; i < 200; ++i) lines += "data: 0123456789\n";
    CHECK_FALSE(many.reader.feed(lines));
    CHECK(many.reader.line_too_long());
}
