// The conversation store's health for the UI ("Storage" in QML): what is wrong with the
// disk right now, if anything, and the work that keeps the data safe while the app runs:
// retrying to save what the store holds in memory, and the daily rolling backup.
#pragma once
#include <QObject>
#include <QString>
#include <QTimer>

namespace ember::app {

class ConversationStore;

class StorageStatus : public QObject {
    Q_OBJECT
    Q_PROPERTY(QString problem READ problem NOTIFY changed)  // a sentence, or empty
    Q_PROPERTY(bool onDisk READ onDisk NOTIFY changed)       // every change is in the file
public:
    // `data_dir` holds the backups. `retry_ms`: how often a refused save is retried.
    StorageStatus(ConversationStore& store, const QString& data_dir, int retry_ms = 3000, QObject* parent = nullptr);
    ~StorageStatus() override;

    QString problem() const;
    bool onDisk() const;
    Q_INVOKABLE bool retryNow();

signals:
    void changed();

private:
    void on_store_changed();
    ConversationStore& store_;
    QString data_dir_;
    QTimer retry_;
    QTimer backup_;
};

}  // namespace ember::app
