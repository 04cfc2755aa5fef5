#include "app/core/model_list_model.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>

#include "app/core/app_settings.h"
#include "app/storage/store_open.h"
#include "kernels/common/format.h"

namespace ember::app {
namespace {

QString human_size(qint64 bytes) { return QString::fromStdString(format_bytes(static_cast<uint64_t>(bytes))); }

// One file, however it is reached (a symlinked folder, a relative path): the same key.
QString file_key(const QString& path) {
    const QFileInfo f(path);
    const QString canonical = f.canonicalFilePath();
    return canonical.isEmpty() ? f.absoluteFilePath() : canonical;
}

}  // namespace

QStringList ModelListModel::defaultFolders() {
    return {QFileInfo(AppSettings::builtinModelPath()).absolutePath(),
            QDir(app_data_dir()).filePath(QStringLiteral("models"))};
}

ModelListModel::ModelListModel(QStringList folders, QObject* parent)
    : QAbstractListModel(parent), folders_(std::move(folders)) {
    rescan();
}

int ModelListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant ModelListModel::data(const QModelIndex& index, int role) const {
    const int row = index.row();
    if (row < 0 || row >= count()) return {};
    const Entry& e = rows_[static_cast<size_t>(row)];
    switch (role) {
        case Qt::DisplayRole:
        case NameRole:
            return e.name;
        case PathRole:
            return e.path;
        case SizeRole:
            return e.size;
        case BuiltinRole:
            return e.builtin;
        case FolderRole:
            return e.folder;
        default:
            return {};
    }
}

QHash<int, QByteArray> ModelListModel::roleNames() const {
    return {
        {NameRole, "name"}, {PathRole, "path"}, {SizeRole, "size"}, {BuiltinRole, "builtin"}, {FolderRole, "folder"}};
}

void ModelListModel::rescan() {
    const int before = count();
    beginResetModel();
    rows_.clear();
    const QString builtin = QFileInfo(AppSettings::builtinModelPath()).absoluteFilePath();
    for (const QString& folder : folders_) {
        const QFileInfoList files =
            QDir(folder).entryInfoList({QStringLiteral("*.gguf")}, QDir::Files | QDir::Readable, QDir::Name);
        for (const QFileInfo& f : files) {
            const QString path = f.absoluteFilePath();
            if (indexOfPath(path) >= 0) continue;
            rows_.push_back(
                {f.completeBaseName(), path, file_key(path), human_size(f.size()), folder, path == builtin});
        }
    }
    for (const auto& [name, path] : library_)
        if (indexOfPath(path) < 0)
            rows_.push_back({name, path, file_key(path), human_size(QFileInfo(path).size()), QStringLiteral("library"),
                             file_key(path) == file_key(builtin)});
    // The built-in default first, then by name.
    std::stable_sort(rows_.begin(), rows_.end(), [](const Entry& a, const Entry& b) {
        return a.builtin != b.builtin ? a.builtin : a.name.compare(b.name, Qt::CaseInsensitive) < 0;
    });
    endResetModel();
    if (count() != before) emit countChanged();
}

void ModelListModel::setLibraryModels(const QList<QPair<QString, QString>>& models) {
    library_ = models;
    rescan();
}

int ModelListModel::indexOfPath(const QString& path) const {
    const QString key = file_key(path);
    for (int i = 0; i < count(); ++i)
        if (rows_[static_cast<size_t>(i)].key == key) return i;
    return -1;
}

QVariantMap ModelListModel::get(int row) const {
    QVariantMap out;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it)
        out.insert(QString::fromLatin1(it.value()), data(index(row), it.key()));
    return out;
}

}  // namespace ember::app
