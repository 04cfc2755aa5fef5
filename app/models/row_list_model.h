// A list model whose rows are QVariantMaps with a fixed set of role names: what the model
// manager's lists (catalog, search results, files, downloads, library) need, without a class
// per list. Rows are keyed by one role so that a progress update changes one row in place
// (a delegate keeps its state, a progress bar does not flicker).
#pragma once
#include <QAbstractListModel>
#include <QStringList>
#include <QVariantMap>
#include <vector>

namespace ember::app {

class RowListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
public:
    // `roles`: the names QML reads (model.name, ...); `key`: the role that identifies a row.
    RowListModel(QStringList roles, QString key, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    int count() const { return static_cast<int>(rows_.size()); }
    const std::vector<QVariantMap>& rows() const { return rows_; }

    void set_rows(std::vector<QVariantMap> rows);
    // Replaces the row with the same key (merging its fields), or appends it.
    void upsert(const QVariantMap& row);
    void remove_key(const QVariant& key);
    Q_INVOKABLE int indexOf(const QVariant& key) const;
    Q_INVOKABLE QVariantMap get(int row) const;
    Q_INVOKABLE QVariantMap find(const QVariant& key) const { return get(indexOf(key)); }

signals:
    void countChanged();

private:
    QStringList roles_;
    QString key_;
    std::vector<QVariantMap> rows_;
};

}  // namespace ember::app
