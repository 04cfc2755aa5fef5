// One ember-app per data folder. Two processes writing one conversation database would
// each think it owns the answers streaming in it (and a backup or a recovery by one would
// overwrite the other's writes), so the first launch takes a lock file in the data folder
// and listens on a local socket named after the folder; a later launch finds the lock
// held, hands its command line to the first over that socket, and exits.
#pragma once
#include <QLocalServer>
#include <QLockFile>
#include <QObject>
#include <QStringList>
#include <memory>

namespace ember::app {

class SingleInstance : public QObject {
    Q_OBJECT
public:
    // Tries to take `data_dir`'s lock (a lock left by a process that died is taken over).
    explicit SingleInstance(const QString& data_dir, QObject* parent = nullptr);
    ~SingleInstance() override;

    bool primary() const { return primary_; }
    // Primary only: starts accepting command lines from later launches.
    bool listen();
    // Secondary only: sends `arguments` to the primary; false if it did not answer within
    // `timeout_ms` (it may still be starting up: retried until then).
    bool hand_over(const QStringList& arguments, int timeout_ms = 15000);

    static QString server_name(const QString& data_dir);

signals:
    void argumentsReceived(const QStringList& arguments);

private:
    void on_connection();
    QString name_;
    std::unique_ptr<QLockFile> lock_;
    QLocalServer server_;
    bool primary_ = false;
};

}  // namespace ember::app
