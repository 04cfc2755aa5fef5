#include "app/core/engine_host.h"

namespace ember::app {

EngineHost::EngineHost(QObject* parent) : QObject(parent), worker_(new EngineWorker) {
    thread_.setObjectName(QStringLiteral("ember-engine"));
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    thread_.start();
}

EngineHost::~EngineHost() {
    cancelAll();
    thread_.quit();
    thread_.wait();
}

quint64 EngineHost::load(LoadRequest req) {
    req.id = nextRequestId();
    QMetaObject::invokeMethod(
        worker_, [w = worker_, req] { w->loadModel(req); }, Qt::QueuedConnection);
    return req.id;
}

quint64 EngineHost::loadRemote(RemoteLoad req) {
    req.id = nextRequestId();
    QMetaObject::invokeMethod(
        worker_, [w = worker_, req] { w->loadRemote(req); }, Qt::QueuedConnection);
    return req.id;
}

void EngineHost::unload() {
    QMetaObject::invokeMethod(
        worker_, [w = worker_] { w->unloadModel(); }, Qt::QueuedConnection);
}

void EngineHost::generate(const GenerationRequest& req) {
    QMetaObject::invokeMethod(
        worker_, [w = worker_, req] { w->generate(req); }, Qt::QueuedConnection);
}

void EngineHost::forget(qint64 conversation_id) {
    QMetaObject::invokeMethod(
        worker_, [w = worker_, conversation_id] { w->forgetConversation(conversation_id); }, Qt::QueuedConnection);
}

}  // namespace ember::app
