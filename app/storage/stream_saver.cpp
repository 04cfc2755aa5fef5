#include "app/storage/stream_saver.h"

namespace ember::app {

StreamSaver::StreamSaver(ConversationStore& store, int64_t message_id, int interval_ms, int every_tokens)
    : store_(store), message_id_(message_id), interval_ms_(interval_ms), every_tokens_(every_tokens) {
    since_save_.start();
}

bool StreamSaver::append(const QString& text, int tokens, const QString& reasoning) {
    content_ += text;
    reasoning_ += reasoning;
    unsaved_tokens_ += tokens;
    dirty_ = true;
    if (unsaved_tokens_ >= every_tokens_ || since_save_.elapsed() >= interval_ms_) {
        save();
        return true;
    }
    return false;
}

void StreamSaver::save() {
    if (dirty_) store_.update_answer(message_id_, content_, reasoning_, MessageState::Streaming);
    dirty_ = false;
    unsaved_tokens_ = 0;
    ++saves_;
    since_save_.restart();
}

void StreamSaver::finish(MessageState state, const MessageStats& stats) {
    store_.finish_message(message_id_, content_, state, stats, reasoning_);
    dirty_ = false;
}

}  // namespace ember::app
