#include "app/desktop/app_context.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QQmlEngine>
#include <QStandardPaths>

#include "app/core/device_words.h"
#include "app/desktop/search_highlighter.h"
#include "engine/kv/disk_prefix_store.h"
#include "engine/library/library.h"

namespace ember::app {
namespace {

// A folder the app shares with the `ember` CLI when it runs on its usual data folder (or when
// `env` names one): `shared()` (which throws without HOME). Any other data folder
// (EMBER_DATA_DIR, the tests' throw-away ones) keeps its own `own` subfolder, so no test
// touches the user's files. Used for the model library ($EMBER_MODELS_DIR, else
// $XDG_DATA_HOME/ember/models) and the KV cache's disk tier ($EMBER_KV_CACHE_DIR, else
// $XDG_CACHE_HOME/ember/kv, as `ember serve --cache-disk`).
template <class Shared>
QString shared_folder(const QString& data_dir, const char* env, Shared shared, const QString& own) {
    const QString usual = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (qEnvironmentVariableIsEmpty(env) && QDir(data_dir) != QDir(usual)) return QDir(data_dir).filePath(own);
    try {
        return QString::fromStdString(shared().string());
    } catch (const std::exception&) {  // no HOME: with the conversations
        return QDir(data_dir).filePath(own);
    }
}

QString library_folder(const QString& data_dir) {
    return shared_folder(data_dir, "EMBER_MODELS_DIR", library::Library::default_dir, QStringLiteral("models"));
}

QString kv_disk_folder(const QString& data_dir) {
    return shared_folder(data_dir, "EMBER_KV_CACHE_DIR", default_disk_prefix_cache_root, QStringLiteral("kv"));
}

}  // namespace

AppContext::AppContext(const QString& data_dir, const QString& log_file)
    : settings(QDir(data_dir).filePath(QStringLiteral("settings.ini"))),
      store(open_conversation_store(data_dir, StoreOptions{settings.hadHistory()})),
      storage(*store.store, data_dir),
      models(host, settings, kv_disk_folder(data_dir)),
      remote(settings, models),
      model_list(ModelListModel::defaultFolders()),
      chat(*store.store, host, models, settings),
      cost(*store.store, settings, host.worker()),
      hub(library_folder(data_dir), QDir(data_dir).filePath(QStringLiteral("hf_token"))),
      library(library_folder(data_dir), models, &model_list),
      monitor([w = host.worker()] { return w->telemetrySnapshot(); }),
      api_server(host.engine(), settings) {
    info.data_dir = data_dir;
    info.database_path = store.path;
    info.log_file = log_file;
    info.storage_notice = store.notice;
    info.interrupted = store.interrupted;
    info.version = QCoreApplication::applicationVersion();
    note_history();
    models.setLibraryFolder(library_folder(data_dir));  // its draft models for the loaded one
    // A model added to (or removed from) the library may be a draft for the loaded one.
    QObject::connect(&library, &LibraryController::changed, &models, &ModelController::refreshDrafts);
    // The first conversation of a new user sets the marker too.
    QObject::connect(chat.conversations(), &ConversationListModel::countChanged, &settings, [this] { note_history(); });
    // A finished download shows in the library (and the chat's model picker) at once.
    QObject::connect(&hub, &HubController::modelDownloaded, &library, &LibraryController::refresh);
    // Discover shows a model already in the library, or in the picker's folders, as such
    // (Load, not Download).
    hub.setLocalFolders(model_list.folders());
    // Files are judged at the context and chats a load would use (the app loads as it says).
    const auto load_shape = [this] { hub.setLoadShape(settings.contextLength(), settings.cachedChats()); };
    load_shape();
    QObject::connect(&settings, &AppSettings::changed, &hub, load_shape);
    QObject::connect(&library, &LibraryController::changed, &hub,
                     [this] { hub.setLibraryModels(library.rows().rows()); });
    // The monitor's device badge carries the loader's reason for the placement, in plain words
    // with the loader's own words as the detail.
    QObject::connect(&models, &ModelController::stateChanged, &monitor, [this] {
        const DeviceWords w = device_words(models.ready() ? models.info().backend : QString());
        monitor.setPlacementReason(w.summary, w.detail);
    });
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
         std::initializer_list<QObject*>{&chat, &models, &model_list, &settings, &clipboard, &info, &storage, &about,
                                         &hub, &library, &monitor, &cost, &api_server, &remote})
        QQmlEngine::setObjectOwnership(o, QQmlEngine::CppOwnership);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Chat", &chat);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Models", &models);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "ModelList", &model_list);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Settings", &settings);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Clipboard", &clipboard);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "App", &info);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Storage", &storage);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "About", &about);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Hub", &hub);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Library", &library);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Monitor", &monitor);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Cost", &cost);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "ApiServer", &api_server);
    qmlRegisterSingletonInstance("Ember.Core", 1, 0, "Remote", &remote);
    qmlRegisterType<SearchHighlighter>("Ember.Core", 1, 0, "SearchHighlighter");
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
