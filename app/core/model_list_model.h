// Model files Ember can load: every *.gguf in the test-model cache, in
// <data dir>/models (~/.local/share/ember/models) and any extra folders given, plus the
// built-in default (SmolLM2) marked as such, and the model library's models (folder
// "library"). File-system facts only (name, size): reading
// GGUF metadata happens when a model is loaded, on the engine thread. Each file is listed
// once: paths are compared canonically, and the library leaves out its models whose bytes
// a folder here already holds (LibraryController).
#pragma once
#include <QAbstractListModel>
#include <QStringList>
#include <vector>

namespace ember::app {

class ModelListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
    Q_PROPERTY(QStringList folders READ folders CONSTANT)
public:
    enum Role { NameRole = Qt::UserRole + 1, PathRole, SizeRole, BuiltinRole, FolderRole };

    explicit ModelListModel(QStringList folders = defaultFolders(), QObject* parent = nullptr);
    static QStringList defaultFolders();

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    int count() const { return static_cast<int>(rows_.size()); }
    QStringList folders() const { return folders_; }

    Q_INVOKABLE void rescan();
    Q_INVOKABLE int indexOfPath(const QString& path) const;
    Q_INVOKABLE QVariantMap get(int row) const;
    // The model library's models (name, path of the first part), listed alongside the
    // folder scan; set by the model manager (app/models/library_controller) after each change.
    void setLibraryModels(const QList<QPair<QString, QString>>& models);

signals:
    void countChanged();

private:
    struct Entry {
        QString name, path;
        QString key;  // the canonical path: one row per file
        QString size, folder;
        bool builtin = false;
    };
    QStringList folders_;
    QList<QPair<QString, QString>> library_;
    std::vector<Entry> rows_;
};

}  // namespace ember::app
