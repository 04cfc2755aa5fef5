// Everything ember-app is made of, built in dependency order and torn down in reverse:
// settings -> store -> engine thread -> controllers -> QML singletons. The desktop main(),
// the Qt Quick test and the screenshot test all start the app through this one class, so
// what they test is how the app is really wired.
#pragma once
#include <QObject>
#include <QString>
#include <memory>

#include "app/core/api_server_controller.h"
#include "app/core/app_settings.h"
#include "app/core/chat_controller.h"
#include "app/core/clipboard.h"
#include "app/core/engine_host.h"
#include "app/core/model_controller.h"
#include "app/core/model_list_model.h"
#include "app/core/storage_status.h"
#include "app/desktop/about_info.h"
#include "app/models/hub_controller.h"
#include "app/models/library_controller.h"
#include "app/monitor/monitor_controller.h"
#include "app/cost/cost_controller.h"
#include "app/remote/remote_controller.h"
#include "app/storage/store_open.h"

namespace ember::app {

// Start-up facts for the UI: where things are, and anything that went wrong opening them.
class AppInfo : public QObject {
    Q_OBJECT
    Q_PROPERTY(QString dataDir MEMBER data_dir CONSTANT)
    Q_PROPERTY(QString databasePath MEMBER database_path CONSTANT)
    Q_PROPERTY(QString logFile MEMBER log_file CONSTANT)
    Q_PROPERTY(QString storageNotice MEMBER storage_notice CONSTANT)
    Q_PROPERTY(int interruptedAnswers MEMBER interrupted CONSTANT)
    Q_PROPERTY(QString version MEMBER version CONSTANT)
public:
    using QObject::QObject;
    QString data_dir, database_path, log_file, storage_notice, version;
    int interrupted = 0;
};

class AppContext {
public:
    // `data_dir`: conversations and settings (tests pass a temporary folder).
    explicit AppContext(const QString& data_dir, const QString& log_file = {});
    ~AppContext();

    // Registers the singletons of the QML module "Ember.Core": Chat, Models, ModelList,
    // Settings, Clipboard, App, Storage, About, Hub, Library, Monitor, Cost, ApiServer, Remote. Call once per process,
    // before loading QML.
    void register_qml();
    // Loads the last model (or nothing) as the settings say; returns at once.
    void restore_last_model();
    // Sets the settings' history marker once the store holds a conversation.
    void note_history();

    AppSettings settings;  // first: it knows whether there was history to find
    OpenedStore store;
    StorageStatus storage;
    EngineHost host;
    ModelController models;
    // Remote endpoints and their models (QML: Remote); keys in the system keyring.
    RemoteController remote;
    ModelListModel model_list;
    ChatController chat;
    CostController cost;  // after chat: the store holds each answer before the cost view reads it
    // The model manager page (app/models): downloads and the library, in engine/library's
    // folder ($EMBER_MODELS_DIR, else $XDG_DATA_HOME/ember/models).
    HubController hub;
    LibraryController library;
    Clipboard clipboard;
    AppInfo info;
    AboutInfo about;            // QML singleton "About" (ui/AboutDialog.qml)
    MonitorController monitor;  // reads the engine worker's telemetry (QML: Monitor)
    // The settings page's local API server on the app's own engine (QML: ApiServer); after
    // host, so it stops before the engine goes away.
    ApiServerController api_server;
};

}  // namespace ember::app
