// What the chat window does: pick a conversation, send, stop, regenerate, edit and resend,
// per-conversation system prompt and sampling, new / rename / delete-with-undo. It keeps
// the store, the list models and the engine worker in step; the engine runs on its own
// thread and answers stream back as queued signals, so every method here returns at once.
//
// Several answers can be in flight (one per conversation): switching conversations never
// stops an answer, it keeps streaming into the store and shows up when you come back.
#pragma once
#include <QObject>
#include <QTimer>
#include <QVariantMap>
#include <map>
#include <memory>

#include "app/core/conversation_list_model.h"  // complete types for the Q_PROPERTYs
#include "app/core/engine_types.h"
#include "app/core/message_list_model.h"
#include "app/storage/stream_saver.h"

namespace ember::app {

class AppSettings;
class ConversationStore;
class EngineHost;
class ModelController;

class ChatController : public QObject {
    Q_OBJECT
    Q_PROPERTY(ember::app::ConversationListModel* conversations READ conversations CONSTANT)
    Q_PROPERTY(ember::app::MessageListModel* messages READ messages CONSTANT)
    Q_PROPERTY(qint64 currentConversationId READ currentConversationId NOTIFY currentChanged)
    Q_PROPERTY(QString currentTitle READ currentTitle NOTIFY currentChanged)
    Q_PROPERTY(bool generating READ generating NOTIFY generatingChanged)  // in this conversation
    Q_PROPERTY(bool busy READ busy NOTIFY generatingChanged)              // in any conversation
    Q_PROPERTY(QString systemPrompt READ systemPrompt WRITE setSystemPrompt NOTIFY settingsChanged)
    Q_PROPERTY(QVariantMap sampling READ sampling WRITE setSampling NOTIFY settingsChanged)
    Q_PROPERTY(int maxInputChars READ maxInputChars CONSTANT)
    // Why the chat settings' "Draft model" speculation is unavailable ("" when the library has
    // a draft for the loaded model: ModelController::drafts).
    Q_PROPERTY(QString draftModelReason READ draftModelReason NOTIFY draftModelReasonChanged)
    Q_PROPERTY(QString lastError READ lastError NOTIFY errorOccurred)
    Q_PROPERTY(QString pendingDeleteTitle READ pendingDeleteTitle NOTIFY pendingDeleteChanged)
    // The context meter: tokens of this chat the model read and wrote in its last answer, of
    // the loaded model's context; what the next answer may write; whether the next prompt will
    // leave out the oldest messages (the history and a new message no longer fit beside the
    // room kept for the answer).
    Q_PROPERTY(int contextUsed READ contextUsed NOTIFY contextChanged)
    Q_PROPERTY(int contextLimit READ contextLimit NOTIFY contextChanged)
    Q_PROPERTY(int nextAnswerTokens READ nextAnswerTokens NOTIFY contextChanged)
    Q_PROPERTY(bool contextFull READ contextFull NOTIFY contextChanged)

public:
    // Longest message accepted: keeps a huge paste from stalling text layout, and is far
    // beyond what fits a small model's context anyway.
    static constexpr int kMaxInputChars = 100'000;
    static constexpr int kUndoMs = 8000;

    ChatController(ConversationStore& store, EngineHost& host, ModelController& models, AppSettings& settings,
                   QObject* parent = nullptr);
    ~ChatController() override;

    ConversationListModel* conversations() const { return conversations_; }
    MessageListModel* messages() const { return messages_; }
    qint64 currentConversationId() const { return current_; }
    QString currentTitle() const;
    bool generating() const { return is_generating(current_); }
    bool busy() const { return !active_.empty(); }
    QString systemPrompt() const;
    void setSystemPrompt(const QString& prompt);
    QVariantMap sampling() const;
    void setSampling(const QVariantMap& sampling);
    int maxInputChars() const { return kMaxInputChars; }
    QString draftModelReason() const;
    QString lastError() const { return last_error_; }
    QString pendingDeleteTitle() const { return pending_delete_title_; }
    int contextUsed() const;
    int contextLimit() const;
    int nextAnswerTokens() const;
    bool contextFull() const;

    Q_INVOKABLE bool send(const QString& text);
    Q_INVOKABLE void stop();
    Q_INVOKABLE bool regenerate();
    Q_INVOKABLE bool editAndResend(qint64 message_id, const QString& text);
    Q_INVOKABLE void newConversation();
    Q_INVOKABLE void selectConversation(qint64 id);
    Q_INVOKABLE void renameConversation(qint64 id, const QString& title);
    Q_INVOKABLE void deleteConversation(qint64 id);
    Q_INVOKABLE void undoDelete();
    Q_INVOKABLE void purgeDeleted();  // ends the undo window now
    Q_INVOKABLE bool isGenerating(qint64 conversation_id) const { return is_generating(conversation_id); }
    // A failed answer's "Use a longer context": this model's context set to `n_ctx` (saved for
    // it), the model reloaded, then the last message answered again.
    Q_INVOKABLE bool retryWithContext(int n_ctx);
    // The context to offer for a message that needs `needed` tokens: the next power of two at
    // or above it, no longer than the model was made for nor than this machine has room for
    // (the planner's longest, ModelController details' contextFitsUpTo); 0 when none would do.
    Q_INVOKABLE int longerContextFor(int needed) const;

signals:
    void currentChanged();
    void generatingChanged();
    void settingsChanged();
    void errorOccurred(const QString& message);
    void notice(const QString& message);
    void pendingDeleteChanged();
    void conversationDeleted(qint64 id, const QString& title);
    // An answer ended (any conversation); `stop_reason`: to_string(StopReason), or "error".
    void answerFinished(qint64 conversation_id, qint64 message_id, const QString& stop_reason);
    void contextChanged();
    void draftModelReasonChanged();

private:
    struct Active {
        qint64 conversation_id = 0;
        std::unique_ptr<StreamSaver> saver;
        qint64 thinking_since = 0;  // when its first thinking arrived (ms since the epoch; 0: none yet)
    };

    bool is_generating(qint64 conversation_id) const;
    void fail(const QString& message);
    // Runs `f`, turning an exception (a storage error) into an error message: an exception
    // must never reach Qt's event loop, which aborts the app. The store itself keeps
    // writing in memory when the disk refuses, so what reaches here is rare.
    template <class F>
    void guard(F&& f) const {
        try {
            f();
        } catch (const std::exception& e) {
            const_cast<ChatController*>(this)->fail(
                QStringLiteral("Storage error: %1").arg(QString::fromUtf8(e.what())));
        }
    }
    template <class F, class R>
    R guard(F&& f, R fallback) const {
        try {
            return f();
        } catch (const std::exception& e) {
            const_cast<ChatController*>(this)->fail(
                QStringLiteral("Storage error: %1").arg(QString::fromUtf8(e.what())));
            return fallback;
        }
    }
    void ensure_conversation(const QString& first_message);
    void start_answer();
    void cancel_conversation(qint64 id);
    void update_generating();

    void on_text(quint64 request_id, const QString& text, int pieces, const QString& reasoning);
    void on_finished(quint64 request_id, const GenerationResult& r);
    void on_failed(quint64 request_id, const QString& error, qint64 needed_ctx);
    void end_answer(std::map<quint64, Active>::iterator it, MessageState state, const MessageStats& stats,
                    const QString& stop_reason);

    ConversationStore& store_;
    EngineHost& host_;
    ModelController& models_;
    AppSettings& settings_;
    ConversationListModel* conversations_;
    MessageListModel* messages_;

    qint64 current_ = 0;    // 0: a new chat not yet written to the store
    QString draft_system_;  // settings of that new chat until its first message
    QString draft_sampling_;
    std::map<quint64, Active> active_;
    QString last_error_;

    qint64 retry_after_load_ = 0;  // retryWithContext: the conversation to answer once loaded
    qint64 pending_delete_ = 0;
    QString pending_delete_title_;
    QTimer undo_timer_;
};

}  // namespace ember::app
