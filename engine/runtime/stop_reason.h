// Why a generation stopped. A type inside the program; text only at its edges (the CLI's
// summary line, the SQLite column, the QML signal), through stop_reason_name and
// parse_stop_reason, whose strings are the stored values and never change.
#pragma once
#include <optional>
#include <string_view>

namespace ember {

enum class StopReason {
    None,        // not stopped (or not known: a message stored without a reason)
    EndOfText,   // the model produced an end-of-generation token
    StopString,  // a stop string appeared
    Length,      // the max_tokens limit
    Context,     // the context is full
    Cancelled,   // the caller cancelled
};

// "" (None), "eog", "stop", "length", "context", "cancelled".
constexpr std::string_view stop_reason_name(StopReason r) {
    switch (r) {
        case StopReason::None:
            return "";
        case StopReason::EndOfText:
            return "eog";
        case StopReason::StopString:
            return "stop";
        case StopReason::Length:
            return "length";
        case StopReason::Context:
            return "context";
        case StopReason::Cancelled:
            return "cancelled";
    }
    return "";
}

// The reason named `name` by stop_reason_name; nullopt for any other text.
constexpr std::optional<StopReason> parse_stop_reason(std::string_view name) {
    for (StopReason r : {StopReason::None, StopReason::EndOfText, StopReason::StopString, StopReason::Length,
                         StopReason::Context, StopReason::Cancelled})
        if (stop_reason_name(r) == name) return r;
    return std::nullopt;
}

}  // namespace ember
