#include "app/core/storage_status.h"

#include "app/storage/backups.h"
#include "app/storage/conversation_store.h"

namespace ember::app {

StorageStatus::StorageStatus(ConversationStore& store, const QString& data_dir, int retry_ms, QObject* parent)
    : QObject(parent), store_(store), data_dir_(data_dir) {
    retry_.setInterval(retry_ms);
    connect(&retry_, &QTimer::timeout, this, &StorageStatus::retryNow);
    // Hourly check; backup_if_due takes one only when the newest is a day old.
    backup_.setInterval(3600 * 1000);
    connect(&backup_, &QTimer::timeout, this, [this] { backup_if_due(store_, data_dir_); });
    backup_.start();
    store_.set_on_change([this] { on_store_changed(); });
    if (!store_.on_disk()) retry_.start();
}

StorageStatus::~StorageStatus() { store_.set_on_change({}); }

QString StorageStatus::problem() const { return store_.problem(); }
bool StorageStatus::onDisk() const { return store_.on_disk(); }

bool StorageStatus::retryNow() {
    const bool ok = store_.try_save_to_disk();
    if (ok) retry_.stop();
    return ok;
}

void StorageStatus::on_store_changed() {
    if (store_.on_disk()) retry_.stop();
    else if (!retry_.isActive()) retry_.start();
    emit changed();
}

}  // namespace ember::app
