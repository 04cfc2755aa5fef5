// The messages of the conversation on screen. ChatController fills it from the store and
// streams text into the answer being written.
#pragma once
#include <QAbstractListModel>
#include <vector>

#include "app/storage/records.h"

namespace ember::app {

// Per stored message: whether the model reads it in later turns. A failed answer that wrote
// nothing stays in the transcript (its error, Retry) but is not sent, nor the message it
// failed to answer (the newest message always is: it is being answered, or retried).
std::vector<bool> read_by_model(const std::vector<Message>& msgs);

class MessageListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
public:
    enum Role {
        IdRole = Qt::UserRole + 1,
        RoleRole,
        ContentRole,
        StateRole,
        StatsRole,
        CreatedRole,
        ErrorRole,            // why the answer failed ("": it did not)
        NeededContextRole,    // the context a message too long would need (0: not that)
        DroppedMessagesRole,  // oldest messages left out of the answer's prompt (0: none)
        ReasoningRole,        // a reasoning model's thinking ("": none), never part of the content
        ThinkingMsRole,       // how long it thought (0: unknown, or still thinking)
        ThinkingSinceRole,    // still streaming: when its thinking began (ms since the epoch; 0: not begun)
        // The first message the latest answer read after leaving older ones out: how many it
        // left out above (the chat draws a divider there); 0 on every other row.
        DroppedAboveRole,
    };

    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    int count() const { return static_cast<int>(rows_.size()); }

    void reset(std::vector<Message> messages);
    void append(const Message& m);
    void appendText(int64_t message_id, const QString& text, const QString& reasoning = {});
    // When the streaming answer's thinking began (kept across reset(): see ChatController).
    void setThinkingSince(int64_t message_id, qint64 ms_since_epoch);
    void update(const Message& m);        // content, state, stats of an existing row
    void removeFrom(int64_t message_id);  // this message and every later one
    int rowOf(int64_t message_id) const;
    const Message* at(int row) const;
    const std::vector<Message>& messages() const { return rows_; }

    Q_INVOKABLE QVariantMap get(int row) const;  // for QML tests and delegates

signals:
    void countChanged();

private:
    int dropped_above(int row) const;
    std::vector<Message> rows_;
    QHash<int64_t, qint64> thinking_since_;
};

}  // namespace ember::app
