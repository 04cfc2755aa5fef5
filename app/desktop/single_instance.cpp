#include "app/desktop/single_instance.h"

#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLocalSocket>
#include <QThread>

namespace ember::app {

QString SingleInstance::server_name(const QString& data_dir) {
    // Short and fixed-length (socket paths are limited), one per canonical folder.
    const QString canonical = QFileInfo(data_dir).canonicalFilePath();
    const QByteArray h =
        QCryptographicHash::hash((canonical.isEmpty() ? data_dir : canonical).toUtf8(), QCryptographicHash::Sha256);
    return QStringLiteral("ember-") + QString::fromLatin1(h.toHex().left(24));
}

SingleInstance::SingleInstance(const QString& data_dir, QObject* parent) : QObject(parent) {
    QDir().mkpath(data_dir);
    name_ = server_name(data_dir);
    lock_ = std::make_unique<QLockFile>(QDir(data_dir).filePath(QStringLiteral("ember.lock")));
    // 0: never stale by age; only a lock whose process is gone is taken over.
    lock_->setStaleLockTime(0);
    primary_ = lock_->tryLock(0);
    if (!primary_ && lock_->error() == QLockFile::PermissionError) {
        // A read-only data folder: no lock can be taken, and no one can write there either.
        primary_ = true;
    }
    connect(&server_, &QLocalServer::newConnection, this, &SingleInstance::on_connection);
}

SingleInstance::~SingleInstance() {
    server_.close();
    if (lock_) lock_->unlock();
}

bool SingleInstance::listen() {
    // Only the lock holder gets here: a socket file left by a crash is safe to remove.
    QLocalServer::removeServer(name_);
    server_.setSocketOptions(QLocalServer::UserAccessOption);
    return server_.listen(name_);
}

void SingleInstance::on_connection() {
    while (QLocalSocket* s = server_.nextPendingConnection()) {
        connect(s, &QLocalSocket::disconnected, s, &QObject::deleteLater);
        connect(s, &QLocalSocket::readyRead, this, [this, s] {
            if (!s->canReadLine()) return;
            const QJsonDocument doc = QJsonDocument::fromJson(s->readLine());
            QStringList args;
            for (const QJsonValue& v : doc.array()) args << v.toString();
            s->write("ok\n");
            s->flush();
            emit argumentsReceived(args);
        });
    }
}

bool SingleInstance::hand_over(const QStringList& arguments, int timeout_ms) {
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < timeout_ms) {
        QLocalSocket s;
        s.connectToServer(name_);
        if (s.waitForConnected(500)) {
            s.write(QJsonDocument(QJsonArray::fromStringList(arguments)).toJson(QJsonDocument::Compact) + '\n');
            s.flush();
            while (!s.canReadLine() && s.waitForReadyRead(std::max<int>(1, timeout_ms - int(t.elapsed())))) {}
            if (s.canReadLine() && s.readLine().trimmed() == "ok") return true;
        }
        QThread::msleep(100);  // the primary is still starting: its server is not up yet
    }
    return false;
}

}  // namespace ember::app
