// What the conversation store holds, as plain values. Timestamps are ms since the epoch.
#pragma once
#include <QString>
#include <cstdint>
#include <optional>

#include "engine/runtime/stop_reason.h"

namespace ember::app {

// streaming: an answer still being written (saved periodically while it streams);
// interrupted: it never finished (stopped by the app dying, found at the next start).
enum class MessageState { Complete, Streaming, Interrupted };

QString to_string(MessageState s);
MessageState message_state_from(const QString& s);  // unknown text -> Complete
// The stored text of a stop reason (stop_reason_name: "eog", "length", ..., "" for None).
QString to_string(StopReason r);
StopReason stop_reason_from(const QString& s);  // unknown text -> None

struct MessageStats {
    std::optional<double> ttft_ms;              // time to first token
    std::optional<double> tok_s;                // decode speed
    std::optional<int> n_tokens;                // tokens generated
    std::optional<int> prompt_tokens;           // tokens of the prompt it answered
    std::optional<int> reused_tokens;           // of those, already in the KV cache
    std::optional<double> energy_j;             // measured energy (no meter: none)
    QString model;                              // model that wrote it
    StopReason stop_reason = StopReason::None;  // stored as stop_reason_name's text
    QString error;                              // why the answer failed ("": it did not)
    std::optional<int> needed_ctx;              // a message too long for the context: the context it needs
    std::optional<int> dropped_messages;        // oldest messages left out of its prompt to fit the context
    std::optional<double> thinking_ms;          // how long a reasoning model thought before answering
};

struct Message {
    int64_t id = 0;
    int64_t conversation_id = 0;
    QString role;       // "system", "user", "assistant"
    QString content;    // the answer alone: never a thinking marker nor the thinking
    QString reasoning;  // a reasoning model's thinking ("": none)
    int64_t created_at = 0;
    MessageState state = MessageState::Complete;
    MessageStats stats;
};

struct Conversation {
    int64_t id = 0;
    QString title;
    int64_t created_at = 0;
    int64_t updated_at = 0;
    QString system_prompt;
    QString sampling_json = QStringLiteral("{}");  // see app/core/sampling_settings.h
    QString model;                                 // path of the model last used
};

// What SearchHit::snippet wraps each matched word in: two Unicode noncharacters, which are
// meant for a program's own use and are not text, so no character of a message (a "[", a
// "<b>") is ever taken for a marker.
inline constexpr QChar kHitOpen = QChar(u'\uFDD0');
inline constexpr QChar kHitClose = QChar(u'\uFDD1');

struct SearchHit {
    int64_t conversation_id = 0;
    int64_t message_id = 0;
    QString snippet;  // the message around the match, matched words between kHitOpen and kHitClose
};

}  // namespace ember::app
