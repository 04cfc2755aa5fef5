#include "app/core/conversation_list_model.h"

#include "app/storage/conversation_store.h"

namespace ember::app {

ConversationListModel::ConversationListModel(ConversationStore& store, QObject* parent)
    : QAbstractListModel(parent), store_(store) {
    refresh();
}

int ConversationListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
    const int row = index.row();
    if (row < 0 || row >= count()) return {};
    const Conversation& c = rows_[static_cast<size_t>(row)];
    switch (role) {
        case IdRole:
            return QVariant::fromValue<qint64>(c.id);
        case Qt::DisplayRole:
        case TitleRole:
            return c.title.isEmpty() ? QStringLiteral("New chat") : c.title;
        case UpdatedRole:
            return QVariant::fromValue<qint64>(c.updated_at);
        case SnippetRole:
            return snippets_.value(c.id);
        case GeneratingRole:
            return generating_.contains(c.id);
        default:
            return {};
    }
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
    return {{IdRole, "conversationId"},
            {TitleRole, "title"},
            {UpdatedRole, "updatedAt"},
            {SnippetRole, "snippet"},
            {GeneratingRole, "generating"}};
}

void ConversationListModel::setFilter(const QString& f) {
    if (f == filter_) return;
    filter_ = f;
    emit filterChanged();
    refresh();
}

void ConversationListModel::setGenerating(const QSet<qint64>& ids) {
    if (ids == generating_) return;
    generating_ = ids;
    if (count() > 0) emit dataChanged(index(0), index(count() - 1), {GeneratingRole});
}

void ConversationListModel::refresh() {
    const int before = count();
    std::vector<Conversation> rows;
    QHash<qint64, QString> snippets;
    try {
        rows = store_.conversations(filter_);
        if (!filter_.trimmed().isEmpty())
            for (const SearchHit& h : store_.search(filter_, 200))
                if (!snippets.contains(h.conversation_id)) snippets.insert(h.conversation_id, h.snippet);
    } catch (const std::exception& e) {
        // A read the disk refuses mid-session: keep showing the list as it was.
        qWarning("ember: reading the conversation list failed: %s", e.what());
        return;
    }
    beginResetModel();
    rows_ = std::move(rows);
    snippets_ = std::move(snippets);
    endResetModel();
    if (count() != before) emit countChanged();
}

int ConversationListModel::rowOf(qint64 id) const {
    for (int i = 0; i < count(); ++i)
        if (rows_[static_cast<size_t>(i)].id == id) return i;
    return -1;
}

QVariantMap ConversationListModel::get(int row) const {
    QVariantMap out;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it)
        out.insert(QString::fromLatin1(it.value()), data(index(row), it.key()));
    return out;
}

}  // namespace ember::app
