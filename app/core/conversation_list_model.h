// The sidebar: conversations newest first, narrowed by the search field (title or message
// text, full-text). Re-read from the store on refresh(); a list of conversations is small
// and one indexed query, so there is no incremental bookkeeping to get wrong.
#pragma once
#include <QAbstractListModel>
#include <QSet>
#include <vector>

#include "app/storage/records.h"

namespace ember::app {

class ConversationStore;

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(QString filter READ filter WRITE setFilter NOTIFY filterChanged)
    Q_PROPERTY(int count READ count NOTIFY countChanged)
public:
    enum Role { IdRole = Qt::UserRole + 1, TitleRole, UpdatedRole, SnippetRole, GeneratingRole };

    explicit ConversationListModel(ConversationStore& store, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    int count() const { return static_cast<int>(rows_.size()); }

    QString filter() const { return filter_; }
    void setFilter(const QString& f);
    void setGenerating(const QSet<qint64>& ids);

    Q_INVOKABLE void refresh();
    Q_INVOKABLE int rowOf(qint64 id) const;
    Q_INVOKABLE QVariantMap get(int row) const;

signals:
    void filterChanged();
    void countChanged();

private:
    ConversationStore& store_;
    QString filter_;
    std::vector<Conversation> rows_;
    QHash<qint64, QString> snippets_;  // conversation -> best matching message text
    QSet<qint64> generating_;
};

}  // namespace ember::app
