// The tool-call text both APIs' answers share (answer_format.h).
#include "engine/server/answer_format.h"

#include "engine/core/log.h"

namespace ember::server {

ToolCallChunk ToolCallText::feed(std::string_view text, bool at_end) {
    if (!parser_) return {std::string(text), {}};
    ToolCallChunk c = parser_->feed(text);
    if (at_end) {
        ToolCallChunk last = parser_->finish();
        c.content += last.content;
        for (ToolCallDelta& d : last.calls) c.calls.push_back(std::move(d));
        for (const std::string& p : parser_->problems()) log_warn("tool calls in " + tag_ + ": " + p);
    }
    made_calls_ = made_calls_ || !c.calls.empty();
    return c;
}

}  // namespace ember::server
