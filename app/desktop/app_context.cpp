#include "app/desktop/app_context.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QQmlEngine>

namespace ember::app {

AppContext::AppContext(const QString& data_dir, const QString& log_file)
    : settings(QDir(data_dir).filePath(QStringLiteral("settings.ini"))),
      store(open_conversation_store(data_dir, StoreOptions{settings.hadHistory()})),
      storage(*store.store, data_dir),
      models(host, settings),
      model_list(ModelListModel::defaultFolders()),
      chat(*store.store, host, models, settings),
      monitor(host.worker()->telemetry()) {
    info.data_dir = data_dir;
    info.database_path = store.path;
    info.log_file = log_file;
    info.storage_notice = store.notice;
    info.interrupted = store.interrupted;
    info.version = QCoreApplication::applicationVersion();
    note_history();
    // The first conversation of a new user sets the marker too.
    QObject::connect(chat.conversations(), &ConversationListModel::countChanged, &settings, [this] { note_history(); });
    // The monitor's device badge carries the loader's reason for the placement.
    QObject::connect(&models, &ModelController::stateChanged, &monitor,
                     [this] { monitor.setPlacementReason(models.ready() ? models.info().backend : QString()); });
}

// The chat controller saves answers still streaming before the engine thread goes away.
AppContext::~AppContext() = default;

void AppContext::note_history() {
    if (settings.hadHistory()) return;
    try {
        if (store.store->conversation_count() > 0) settings.setHadHistory(true);
    } catch (const std::exception&) {}
}

void AppContext::register_qml() {
    // The instances outlive the QML engine (they are members here; the engine is destroyed
    // first), so QML must not take ownership.
    for (QObject* o :
         std::initializer_list<QObject*>{&chat, &models, &model_list, &settings, &clipboard, &info, &storage, &monitor})
        QQmlEngine::setObjectOwnership(o, QQmlEngine::CppOwnership);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Chat", &chat);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Models", &models);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "ModelList", &model_list);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Settings", &settings);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Clipboard", &clipboard);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "App", &info);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Storage", &storage);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Monitor", &monitor);
    qmlRegisterUncreatableType<ModelController>("Ember.Core", 1, 0, "ModelState", QStringLiteral("enum only"));
    qmlRegisterUncreatableType<MessageListModel>("Ember.Core", 1, 0, "MessageListModel", QStringLiteral("from Chat"));
    qmlRegisterUncreatableType<ConversationListModel>("Ember.Core", 1, 0, "ConversationListModel",
                                                      QStringLiteral("from Chat"));
}

void AppContext::restore_last_model() {
    const QString last = settings.lastModelPath();
    if (settings.loadLastModel() && !last.isEmpty() && QFileInfo::exists(last)) models.load(last);
}

}  // namespace ember::app
