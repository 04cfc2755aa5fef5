#include "app/core/message_list_model.h"

#include <QDateTime>

#include "app/core/stats_format.h"

namespace ember::app {

namespace {

bool failed_unanswered(const Message& m) {
    return m.role == QLatin1String("assistant") && !m.stats.error.isEmpty() && m.content.isEmpty() &&
           m.reasoning.isEmpty();
}

}  // namespace

std::vector<bool> read_by_model(const std::vector<Message>& msgs) {
    std::vector<bool> out(msgs.size());
    for (size_t i = 0; i < msgs.size(); ++i) {
        const bool failed_question =
            msgs[i].role == QLatin1String("user") && i + 1 < msgs.size() && failed_unanswered(msgs[i + 1]);
        out[i] = !failed_question && !failed_unanswered(msgs[i]);
    }
    return out;
}

// The latest finished answer left out its first N read messages: the divider goes on the
// (N+1)th message it read.
int MessageListModel::dropped_above(int row) const {
    int last = count() - 1;
    while (last >= 0 && (rows_[static_cast<size_t>(last)].role != QLatin1String("assistant") ||
                         rows_[static_cast<size_t>(last)].state == MessageState::Streaming))
        --last;
    const int n = last >= 0 ? rows_[static_cast<size_t>(last)].stats.dropped_messages.value_or(0) : 0;
    if (n <= 0 || row >= last) return 0;
    const std::vector<bool> read = read_by_model(rows_);
    int seen = 0;
    for (int i = 0; i < last; ++i) {
        if (!read[static_cast<size_t>(i)]) continue;
        if (seen++ == n) return i == row ? n : 0;
    }
    return 0;
}

int MessageListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant MessageListModel::data(const QModelIndex& index, int role) const {
    const Message* m = at(index.row());
    if (!m) return {};
    switch (role) {
        case IdRole:
            return QVariant::fromValue<qint64>(m->id);
        case RoleRole:
            return m->role;
        case Qt::DisplayRole:
        case ContentRole:
            return m->content;
        case StateRole:
            return to_string(m->state);
        case StatsRole:
            return m->role == QLatin1String("assistant") ? format_stats_line(m->stats, m->state) : QString();
        case CreatedRole:
            return QVariant::fromValue<qint64>(m->created_at);
        case ErrorRole:
            return m->stats.error;
        case NeededContextRole:
            return m->stats.needed_ctx.value_or(0);
        case DroppedMessagesRole:
            return m->stats.dropped_messages.value_or(0);
        case ReasoningRole:
            return m->reasoning;
        case ThinkingMsRole:
            return m->stats.thinking_ms.value_or(0.0);
        case ThinkingSinceRole:
            return QVariant::fromValue<qint64>(thinking_since_.value(m->id, 0));
        case DroppedAboveRole:
            return dropped_above(index.row());
        default:
            return {};
    }
}

QHash<int, QByteArray> MessageListModel::roleNames() const {
    return {{IdRole, "messageId"},
            {RoleRole, "role"},
            {ContentRole, "content"},
            {StateRole, "messageState"},
            {StatsRole, "stats"},
            {CreatedRole, "createdAt"},
            {ErrorRole, "error"},
            {NeededContextRole, "neededContext"},
            {DroppedMessagesRole, "droppedMessages"},
            {ReasoningRole, "reasoning"},
            {ThinkingMsRole, "thinkingMs"},
            {ThinkingSinceRole, "thinkingSince"},
            {DroppedAboveRole, "droppedAbove"}};
}

void MessageListModel::reset(std::vector<Message> messages) {
    beginResetModel();
    rows_ = std::move(messages);
    thinking_since_.clear();
    endResetModel();
    emit countChanged();
}

void MessageListModel::append(const Message& m) {
    const int row = count();
    beginInsertRows({}, row, row);
    rows_.push_back(m);
    endInsertRows();
    emit countChanged();
}

void MessageListModel::appendText(int64_t message_id, const QString& text, const QString& reasoning) {
    const int row = rowOf(message_id);
    if (row < 0) return;
    Message& m = rows_[static_cast<size_t>(row)];
    m.content += text;
    m.reasoning += reasoning;
    QList<int> roles{ContentRole};
    if (!reasoning.isEmpty()) roles << ReasoningRole;
    if (!reasoning.isEmpty() && !thinking_since_.contains(message_id)) {
        thinking_since_.insert(message_id, QDateTime::currentMSecsSinceEpoch());
        roles << ThinkingSinceRole;
    }
    emit dataChanged(index(row), index(row), roles);
}

void MessageListModel::setThinkingSince(int64_t message_id, qint64 ms_since_epoch) {
    const int row = rowOf(message_id);
    if (row < 0 || ms_since_epoch <= 0) return;
    thinking_since_.insert(message_id, ms_since_epoch);
    emit dataChanged(index(row), index(row), {ThinkingSinceRole});
}

void MessageListModel::update(const Message& m) {
    const int row = rowOf(m.id);
    if (row < 0) return;
    rows_[static_cast<size_t>(row)] = m;
    emit dataChanged(index(row), index(row),
                     {ContentRole, StateRole, StatsRole, ErrorRole, NeededContextRole, DroppedMessagesRole,
                      ReasoningRole, ThinkingMsRole});
    emit dataChanged(index(0), index(count() - 1), {DroppedAboveRole});  // the divider may move
}

void MessageListModel::removeFrom(int64_t message_id) {
    const int row = rowOf(message_id);
    if (row < 0) return;
    beginRemoveRows({}, row, count() - 1);
    rows_.resize(static_cast<size_t>(row));
    endRemoveRows();
    emit countChanged();
}

int MessageListModel::rowOf(int64_t message_id) const {
    // Streaming updates target the last rows: search from the end.
    for (int i = count() - 1; i >= 0; --i)
        if (rows_[static_cast<size_t>(i)].id == message_id) return i;
    return -1;
}

const Message* MessageListModel::at(int row) const {
    return row >= 0 && row < count() ? &rows_[static_cast<size_t>(row)] : nullptr;
}

QVariantMap MessageListModel::get(int row) const {
    QVariantMap out;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it)
        out.insert(QString::fromLatin1(it.value()), data(index(row), it.key()));
    return out;
}

}  // namespace ember::app
