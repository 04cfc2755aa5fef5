// Owns the engine thread and the EngineWorker on it, and posts work to it. Every call here
// returns at once (queued); the only blocking wait is in the destructor, at shutdown, after
// everything running has been told to cancel.
#pragma once
#include <QObject>
#include <QThread>
#include <atomic>

#include "app/core/engine_worker.h"

namespace ember::app {

class EngineHost : public QObject {
    Q_OBJECT
public:
    explicit EngineHost(QObject* parent = nullptr);
    ~EngineHost() override;

    EngineWorker* worker() const { return worker_; }  // connect to its signals (queued)
    // The app's InferenceEngine (the loaded model's scheduler): the local API server's.
    EngineSlot& engine() const { return worker_->engine(); }

    quint64 load(LoadRequest req);       // returns the request id (for cancel)
    quint64 loadRemote(RemoteLoad req);  // a remote model instead of a file (issue #41)
    void unload();
    void generate(const GenerationRequest& req);
    void forget(qint64 conversation_id);
    void cancel(quint64 request_id) { worker_->cancel(request_id); }
    void cancelAll() { worker_->cancelUpTo(next_id_.load()); }  // everything issued so far

    quint64 nextRequestId() { return ++next_id_; }

private:
    QThread thread_;
    EngineWorker* worker_;  // deleted on its own thread when the thread finishes
    std::atomic<quint64> next_id_{0};
};

}  // namespace ember::app
