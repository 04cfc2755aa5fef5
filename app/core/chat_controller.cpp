#include "app/core/chat_controller.h"

#include <QDateTime>
#include <algorithm>
#include <utility>

#include "app/core/app_settings.h"
#include "app/core/conversation_list_model.h"
#include "app/core/engine_host.h"
#include "app/core/message_list_model.h"
#include "app/core/model_controller.h"
#include "app/storage/conversation_store.h"

namespace ember::app {
namespace {

// The turns the model reads: the stored messages less failed exchanges (the newest message
// always stays: it is the one being answered, or retried).
QVector<ChatTurn> turns_for_model(const std::vector<Message>& msgs) {
    QVector<ChatTurn> out;
    const std::vector<bool> read = read_by_model(msgs);
    for (size_t i = 0; i < msgs.size(); ++i)
        if (read[i]) out.push_back({msgs[i].role, msgs[i].content, msgs[i].reasoning});
    return out;
}

QString title_from(const QString& text) {
    QString t = text.section('\n', 0, 0).simplified();
    if (t.size() > 48) t = t.left(47).trimmed() + QStringLiteral("…");
    return t;
}

}  // namespace

ChatController::ChatController(ConversationStore& store, EngineHost& host, ModelController& models,
                               AppSettings& settings, QObject* parent)
    : QObject(parent),
      store_(store),
      host_(host),
      models_(models),
      settings_(settings),
      conversations_(new ConversationListModel(store, this)),
      messages_(new MessageListModel(this)) {
    EngineWorker* w = host_.worker();
    connect(w, &EngineWorker::textReady, this, &ChatController::on_text);
    connect(w, &EngineWorker::generationFinished, this, &ChatController::on_finished);
    connect(w, &EngineWorker::generationFailed, this, &ChatController::on_failed);
    connect(&models_, &ModelController::draftsChanged, this, &ChatController::draftModelReasonChanged);
    connect(&models_, &ModelController::stateChanged, this, &ChatController::contextChanged);
    connect(&models_, &ModelController::loaded, this, [this] {
        const qint64 conv = std::exchange(retry_after_load_, 0);
        if (conv != 0 && conv == current_) regenerate();
    });
    connect(this, &ChatController::currentChanged, this, &ChatController::contextChanged);
    connect(this, &ChatController::settingsChanged, this, &ChatController::contextChanged);
    undo_timer_.setSingleShot(true);
    undo_timer_.setInterval(kUndoMs);
    connect(&undo_timer_, &QTimer::timeout, this, &ChatController::purgeDeleted);
    draft_system_ = settings_.defaultSystemPrompt();
    draft_sampling_ = settings_.defaultSamplingJson();
}

// Answers still streaming keep what they have: the engine is told to stop, and whatever it
// wrote so far is saved as interrupted (the next start would mark it so anyway).
ChatController::~ChatController() {
    for (auto& [id, a] : active_) {
        host_.cancel(id);
        guard([&] { a.saver->finish(MessageState::Interrupted, {}); });
    }
    purgeDeleted();
}

bool ChatController::is_generating(qint64 conversation_id) const {
    for (const auto& [id, a] : active_)
        if (a.conversation_id == conversation_id) return true;
    return false;
}

void ChatController::fail(const QString& message) {
    last_error_ = message;
    emit errorOccurred(message);
}

void ChatController::update_generating() {
    QSet<qint64> ids;
    for (const auto& [id, a] : active_) ids.insert(a.conversation_id);
    conversations_->setGenerating(ids);
    emit generatingChanged();
    emit contextChanged();
}

int ChatController::contextUsed() const {
    const auto& msgs = messages_->messages();
    for (auto it = msgs.rbegin(); it != msgs.rend(); ++it)
        if (it->role == QLatin1String("assistant") && it->stats.prompt_tokens)
            return *it->stats.prompt_tokens + it->stats.n_tokens.value_or(0);
    return 0;
}

int ChatController::contextLimit() const { return models_.ready() ? static_cast<int>(models_.info().n_ctx) : 0; }

int ChatController::nextAnswerTokens() const {
    const int room = std::max(0, contextLimit() - contextUsed());
    const int max_tokens = SamplingSettings::from_variant(sampling()).max_tokens;
    return max_tokens > 0 ? std::min(max_tokens, room) : room;
}

// The engine keeps min(max_tokens, a quarter of the context) free for the answer
// (engine/runtime/prompt_fit.h: answer_room); a history past the rest loses its oldest turns.
bool ChatController::contextFull() const {
    const int limit = contextLimit();
    if (limit <= 0) return false;
    const int max_tokens = SamplingSettings::from_variant(sampling()).max_tokens;
    const int quarter = std::max(1, limit / 4);
    const int room = max_tokens > 0 ? std::min(max_tokens, quarter) : quarter;
    return contextUsed() + room > limit;
}

int ChatController::longerContextFor(int needed) const {
    if (!models_.ready() || needed <= 0) return 0;
    const qint64 trained = models_.info().trained_ctx, room = models_.info().ctx_fits_up_to;
    qint64 n = 1;
    while (n < needed) n *= 2;
    n = std::min(n, trained);
    if (room > 0 && n > room) n = room;  // the longest with room here (a halving of trained)
    return n >= needed ? static_cast<int>(n) : 0;
}

bool ChatController::retryWithContext(int n_ctx) {
    if (current_ == 0 || generating() || n_ctx <= 0) return false;
    retry_after_load_ = current_;
    models_.setContext(n_ctx);
    return true;
}

QString ChatController::currentTitle() const {
    return guard(
        [&] {
            if (current_ == 0) return QStringLiteral("New chat");
            const auto c = store_.conversation(current_);
            return c ? c->title : QString();
        },
        QString());
}

QString ChatController::systemPrompt() const {
    return guard(
        [&] {
            if (current_ == 0) return draft_system_;
            const auto c = store_.conversation(current_);
            return c ? c->system_prompt : QString();
        },
        QString());
}

void ChatController::setSystemPrompt(const QString& prompt) {
    guard([&] {
        if (prompt == systemPrompt()) return;
        if (current_ == 0) draft_system_ = prompt;
        else store_.set_system_prompt(current_, prompt);
        emit settingsChanged();
    });
}

QVariantMap ChatController::sampling() const {
    return guard(
        [&] {
            if (current_ == 0) return SamplingSettings::from_json(draft_sampling_).to_variant();
            const auto c = store_.conversation(current_);
            return SamplingSettings::from_json(c ? c->sampling_json : QString()).to_variant();
        },
        QVariantMap());
}

void ChatController::setSampling(const QVariantMap& sampling) {
    guard([&] {
        const QString json = SamplingSettings::from_variant(sampling).to_json();
        if (current_ == 0) draft_sampling_ = json;
        else store_.set_sampling_json(current_, json);
        emit settingsChanged();
    });
}

void ChatController::ensure_conversation(const QString& first_message) {
    if (current_ != 0) return;
    current_ = store_.create_conversation(title_from(first_message), draft_system_, draft_sampling_, models_.path()).id;
    emit currentChanged();
}

bool ChatController::send(const QString& raw) {
    return guard(
        [&] {
            const QString text = raw.trimmed();
            if (text.isEmpty()) return false;
            if (text.size() > kMaxInputChars) {
                fail(QStringLiteral("The message is %1 characters long; the limit is %2.")
                         .arg(text.size())
                         .arg(kMaxInputChars));
                return false;
            }
            if (!models_.ready()) {
                fail(QStringLiteral("No model is loaded. Load a model first."));
                return false;
            }
            if (generating()) {
                fail(QStringLiteral("An answer is still being written here. Stop it first."));
                return false;
            }
            ensure_conversation(text);
            messages_->append(store_.add_message(current_, QStringLiteral("user"), text));
            start_answer();
            return true;
        },
        false);
}

// Sends the conversation as stored to the engine and opens a streaming answer for it.
void ChatController::start_answer() {
    const auto conv = store_.conversation(current_);
    if (!conv) return;
    GenerationRequest req;
    req.id = host_.nextRequestId();
    req.conversation_id = current_;
    if (!conv->system_prompt.trimmed().isEmpty())
        req.turns.push_back({QStringLiteral("system"), conv->system_prompt, {}});
    req.turns += turns_for_model(store_.messages(current_));
    req.sampling = SamplingSettings::from_json(conv->sampling_json);
    // This chat's own policy, else the one in Settings.
    const QString overflow =
        req.sampling.context_overflow.isEmpty() ? settings_.contextOverflow() : req.sampling.context_overflow;
    req.context_overflow =
        ember::parse_overflow_policy(overflow.toStdString()).value_or(ember::OverflowPolicy::Truncate);
    store_.set_model(current_, models_.path());

    const Message answer = store_.add_message(current_, QStringLiteral("assistant"), {}, MessageState::Streaming);
    messages_->append(answer);
    active_[req.id] = Active{current_, std::make_unique<StreamSaver>(store_, answer.id), 0};
    host_.generate(req);
    update_generating();
    conversations_->refresh();  // this chat moves to the top
}

void ChatController::stop() { cancel_conversation(current_); }

void ChatController::cancel_conversation(qint64 id) {
    for (const auto& [req, a] : active_)
        if (a.conversation_id == id) host_.cancel(req);
}

bool ChatController::regenerate() {
    return guard(
        [&] {
            if (current_ == 0 || generating() || !models_.ready() || messages_->count() == 0) return false;
            const Message last = messages_->messages().back();
            if (last.role == QLatin1String("assistant")) {
                store_.delete_from(last.id);
                messages_->removeFrom(last.id);
            }
            if (messages_->count() == 0 || messages_->messages().back().role != QLatin1String("user")) return false;
            start_answer();
            return true;
        },
        false);
}

bool ChatController::editAndResend(qint64 message_id, const QString& text) {
    return guard(
        [&] {
            const int row = messages_->rowOf(message_id);
            if (row < 0 || messages_->at(row)->role != QLatin1String("user")) return false;
            if (generating()) {
                fail(QStringLiteral("Stop the answer being written before editing."));
                return false;
            }
            if (!models_.ready()) {
                fail(QStringLiteral("No model is loaded. Load a model first."));
                return false;
            }
            const QString t = text.trimmed();
            if (t.isEmpty() || t.size() > kMaxInputChars) return false;
            // Everything from the edited message on is replaced; the KV cache keeps the common
            // prefix, so only the edited turn and the new answer are processed.
            store_.delete_from(message_id);
            messages_->removeFrom(message_id);
            messages_->append(store_.add_message(current_, QStringLiteral("user"), t));
            start_answer();
            return true;
        },
        false);
}

QString ChatController::draftModelReason() const { return models_.draftReason(); }

void ChatController::newConversation() {
    current_ = 0;
    draft_system_ = settings_.defaultSystemPrompt();
    draft_sampling_ = settings_.defaultSamplingJson();
    messages_->reset({});
    emit currentChanged();
    emit settingsChanged();
    emit generatingChanged();
}

void ChatController::selectConversation(qint64 id) {
    guard([&] {
        if (id == current_) return;
        if (id == 0 || !store_.conversation(id)) {
            newConversation();
            return;
        }
        current_ = id;
        std::vector<Message> msgs = store_.messages(id);
        // An answer streaming in the background is ahead of its last save: show the live text.
        for (const auto& [req, a] : active_) {
            if (a.conversation_id != id) continue;
            for (Message& m : msgs)
                if (m.id == a.saver->message_id()) {
                    m.content = a.saver->content();
                    m.reasoning = a.saver->reasoning();
                }
        }
        messages_->reset(std::move(msgs));
        for (const auto& [req, a] : active_)
            if (a.conversation_id == id) messages_->setThinkingSince(a.saver->message_id(), a.thinking_since);
        emit currentChanged();
        emit settingsChanged();
        emit generatingChanged();
    });
}

void ChatController::renameConversation(qint64 id, const QString& title) {
    guard([&] {
        const QString t = title.simplified();
        if (t.isEmpty()) return;
        store_.rename(id, t);
        conversations_->refresh();
        if (id == current_) emit currentChanged();
    });
}

void ChatController::deleteConversation(qint64 id) {
    guard([&] {
        const auto c = store_.conversation(id);
        if (!c) return;
        purgeDeleted();  // one level of undo: an earlier deletion becomes final
        cancel_conversation(id);
        store_.soft_delete(id);
        pending_delete_ = id;
        pending_delete_title_ = c->title.isEmpty() ? QStringLiteral("New chat") : c->title;
        undo_timer_.start();
        if (id == current_) newConversation();
        conversations_->refresh();
        emit pendingDeleteChanged();
        emit conversationDeleted(id, pending_delete_title_);
    });
}

void ChatController::undoDelete() {
    guard([&] {
        if (pending_delete_ == 0) return;
        const qint64 id = pending_delete_;
        store_.restore(id);
        pending_delete_ = 0;
        pending_delete_title_.clear();
        undo_timer_.stop();
        conversations_->refresh();
        emit pendingDeleteChanged();
        selectConversation(id);
    });
}

void ChatController::purgeDeleted() {
    guard([&] {
        undo_timer_.stop();
        if (pending_delete_ == 0) return;
        store_.purge_deleted();
        host_.forget(pending_delete_);
        pending_delete_ = 0;
        pending_delete_title_.clear();
        emit pendingDeleteChanged();
    });
}

void ChatController::on_text(quint64 request_id, const QString& text, int pieces, const QString& reasoning) {
    guard([&] {
        auto it = active_.find(request_id);
        if (it == active_.end()) return;
        Active& a = it->second;
        if (!reasoning.isEmpty() && a.thinking_since == 0) a.thinking_since = QDateTime::currentMSecsSinceEpoch();
        a.saver->append(text, pieces, reasoning);
        if (a.conversation_id == current_) messages_->appendText(a.saver->message_id(), text, reasoning);
    });
}

void ChatController::on_finished(quint64 request_id, const GenerationResult& r) {
    guard([&] {
        auto it = active_.find(request_id);
        if (it == active_.end()) return;
        MessageStats stats;
        if (r.generated_tokens > 0) {
            stats.ttft_ms = r.ttft_ms;
            stats.tok_s = r.decode_tok_s;
            stats.n_tokens = r.generated_tokens;
        }
        stats.prompt_tokens = r.prompt_tokens;
        stats.reused_tokens = r.reused_tokens;
        // Only a full measurement is stored: the CPU always works, so without its meter the
        // sum would be a part passed off as the whole (the cost view estimates it instead).
        if (r.cpu_energy_measured) stats.energy_j = r.prefill_j + r.decode_j;
        stats.model = r.model_name;
        stats.stop_reason = r.stop_reason;
        if (r.dropped_turns > 0) stats.dropped_messages = r.dropped_turns;  // shown beside the answer
        if (r.thinking_ms > 0) stats.thinking_ms = r.thinking_ms;
        end_answer(it, MessageState::Complete, stats, to_string(r.stop_reason));
    });
}

// The failure stays in the transcript, on the answer's row (with Retry and what else applies),
// not only in a passing notice.
void ChatController::on_failed(quint64 request_id, const QString& error, qint64 needed_ctx) {
    guard([&] {
        auto it = active_.find(request_id);
        if (it == active_.end()) return;
        MessageStats stats;
        stats.error = error;
        if (needed_ctx > 0) stats.needed_ctx = static_cast<int>(needed_ctx);
        stats.model = models_.name();
        end_answer(it, MessageState::Interrupted, stats, QStringLiteral("error"));
    });
}

void ChatController::end_answer(std::map<quint64, Active>::iterator it, MessageState state, const MessageStats& stats,
                                const QString& stop_reason) {
    const qint64 conv = it->second.conversation_id;
    StreamSaver& saver = *it->second.saver;
    const int64_t msg = saver.message_id();
    // The answer leaves active_ whatever the store says, or it would look busy forever.
    guard([&] {
        if (saver.content().isEmpty() && saver.reasoning().isEmpty() && stats.error.isEmpty()) {
            // Nothing was written (stopped before the first token): no empty bubble.
            store_.delete_from(msg);
            if (conv == current_) messages_->removeFrom(msg);
        } else {
            saver.finish(state, stats);
            if (conv == current_)
                if (const auto m = store_.message(msg)) messages_->update(*m);
        }
    });
    active_.erase(it);
    update_generating();
    emit answerFinished(conv, msg, stop_reason);
}

}  // namespace ember::app
