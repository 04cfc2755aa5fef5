#include "app/models/row_list_model.h"

namespace ember::app {

RowListModel::RowListModel(QStringList roles, QString key, QObject* parent)
    : QAbstractListModel(parent), roles_(std::move(roles)), key_(std::move(key)) {}

int RowListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant RowListModel::data(const QModelIndex& index, int role) const {
    const int row = index.row();
    const int r = role - Qt::UserRole - 1;
    if (row < 0 || row >= count() || r < 0 || r >= roles_.size()) return {};
    return rows_[static_cast<size_t>(row)].value(roles_[r]);
}

QHash<int, QByteArray> RowListModel::roleNames() const {
    QHash<int, QByteArray> names;
    for (int i = 0; i < roles_.size(); ++i) names.insert(Qt::UserRole + 1 + i, roles_[i].toUtf8());
    return names;
}

void RowListModel::set_rows(std::vector<QVariantMap> rows) {
    const int before = count();
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
    if (count() != before) emit countChanged();
}

void RowListModel::upsert(const QVariantMap& row) {
    const int i = indexOf(row.value(key_));
    if (i < 0) {
        beginInsertRows({}, count(), count());
        rows_.push_back(row);
        endInsertRows();
        emit countChanged();
        return;
    }
    QVariantMap& r = rows_[static_cast<size_t>(i)];
    for (auto it = row.begin(); it != row.end(); ++it) r.insert(it.key(), it.value());
    emit dataChanged(index(i), index(i));
}

void RowListModel::remove_key(const QVariant& key) {
    const int i = indexOf(key);
    if (i < 0) return;
    beginRemoveRows({}, i, i);
    rows_.erase(rows_.begin() + i);
    endRemoveRows();
    emit countChanged();
}

int RowListModel::indexOf(const QVariant& key) const {
    for (int i = 0; i < count(); ++i)
        if (rows_[static_cast<size_t>(i)].value(key_) == key) return i;
    return -1;
}

QVariantMap RowListModel::get(int row) const {
    return row >= 0 && row < count() ? rows_[static_cast<size_t>(row)] : QVariantMap{};
}

}  // namespace ember::app
