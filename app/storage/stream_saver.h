// Keeps a streaming answer safe on disk while it is being written: the text is saved as
// state=streaming at most every `interval_ms` or every `every_tokens` tokens, whichever
// comes first, so a crash loses at most that much and the next start shows the rest as
// interrupted. Bounded cost: one small UPDATE per interval, not one per token.
#pragma once
#include <QElapsedTimer>
#include <QString>

#include "app/storage/conversation_store.h"

namespace ember::app {

class StreamSaver {
public:
    StreamSaver(ConversationStore& store, int64_t message_id, int interval_ms = 500, int every_tokens = 64);

    // Adds answer text and thinking (carrying `tokens` tokens); returns true when this call saved.
    bool append(const QString& text, int tokens, const QString& reasoning = {});
    void save();  // save now, still streaming
    void finish(MessageState state, const MessageStats& stats);

    const QString& content() const { return content_; }
    const QString& reasoning() const { return reasoning_; }
    int64_t message_id() const { return message_id_; }
    int saves() const { return saves_; }

private:
    ConversationStore& store_;
    int64_t message_id_;
    int interval_ms_;
    int every_tokens_;
    QString content_;
    QString reasoning_;
    int unsaved_tokens_ = 0;
    bool dirty_ = false;
    int saves_ = 0;
    QElapsedTimer since_save_;
};

}  // namespace ember::app
