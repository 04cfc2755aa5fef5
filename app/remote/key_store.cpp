#include "app/remote/key_store.h"

#include <qt6keychain/keychain.h>

#include <utility>

namespace ember::app {
namespace {

QString entry(const QString& endpoint) { return QStringLiteral("remote-endpoint/") + endpoint; }

QString keyring_words(const QKeychain::Job& job) {
    return QStringLiteral("The system keyring did not answer (%1)").arg(job.errorString());
}

}  // namespace

KeyStore::KeyStore(QString service, QObject* parent) : QObject(parent), service_(std::move(service)) {}

void KeyStore::read(const QString& endpoint, std::function<void(const QString&, const QString&)> done) {
    if (const auto it = typed_.constFind(endpoint); it != typed_.constEnd()) {
        QMetaObject::invokeMethod(
            this, [done, key = *it] { done(key, {}); }, Qt::QueuedConnection);
        return;
    }
    auto* job = new QKeychain::ReadPasswordJob(service_, this);  // deletes itself when finished
    job->setKey(entry(endpoint));
    job->setInsecureFallback(false);
    connect(job, &QKeychain::Job::finished, this, [done = std::move(done)](QKeychain::Job* j) {
        auto* r = static_cast<QKeychain::ReadPasswordJob*>(j);
        if (r->error() == QKeychain::NoError) done(r->textData(), {});
        else if (r->error() == QKeychain::EntryNotFound) done({}, {});
        else done({}, keyring_words(*r));
    });
    job->start();
}

void KeyStore::write(const QString& endpoint, const QString& key, std::function<void(const QString&)> done) {
    if (key.isEmpty()) {
        remove(endpoint);
        QMetaObject::invokeMethod(
            this, [done] { done({}); }, Qt::QueuedConnection);
        return;
    }
    typed_.insert(endpoint, key);
    auto* job = new QKeychain::WritePasswordJob(service_, this);
    job->setKey(entry(endpoint));
    job->setInsecureFallback(false);
    job->setTextData(key);
    connect(job, &QKeychain::Job::finished, this, [this, done = std::move(done)](QKeychain::Job* j) {
        if (j->error() == QKeychain::NoError) {
            done({});
            return;
        }
        refused_ = true;
        done(keyring_words(*j) + QStringLiteral(": the key is kept for this session only, not saved."));
    });
    job->start();
}

void KeyStore::remove(const QString& endpoint) {
    typed_.remove(endpoint);
    auto* job = new QKeychain::DeletePasswordJob(service_, this);
    job->setKey(entry(endpoint));
    job->setInsecureFallback(false);
    job->start();
}

}  // namespace ember::app
