// The loaded model as QML sees it: state, load progress, details and errors. Loading runs
// on the engine thread; a model that fails to load leaves a clear message and the app
// fully usable (the previous model is gone, but chats, settings and history still work).
#pragma once
#include <QObject>
#include <QThreadPool>
#include <QVariantList>
#include <QVariantMap>

#include "app/core/engine_types.h"
#include "app/core/engine_worker.h"

namespace ember::app {

class AppSettings;
class EngineHost;

class ModelController : public QObject {
    Q_OBJECT
    Q_PROPERTY(State state READ state NOTIFY stateChanged)
    Q_PROPERTY(bool ready READ ready NOTIFY stateChanged)
    Q_PROPERTY(double progress READ progress NOTIFY progressChanged)
    Q_PROPERTY(QString path READ path NOTIFY stateChanged)  // loaded or loading
    Q_PROPERTY(QString name READ name NOTIFY stateChanged)
    Q_PROPERTY(QVariantMap details READ details NOTIFY stateChanged)
    Q_PROPERTY(QString error READ error NOTIFY stateChanged)
    Q_PROPERTY(QString builtinModelPath READ builtinModelPath CONSTANT)
    Q_PROPERTY(bool builtinModelExists READ builtinModelExists CONSTANT)
    // Draft models for speculative decoding (the chat setting "Draft model"): the library's
    // models that can draft for the loaded one (library::compatible_drafts: its vocabulary,
    // smaller), each {name, path, size, quantization}, smallest first; why there are none ("":
    // there are); the one chosen for this model (saved per model, AppSettings::modelDraft) and
    // what became of it: loaded (draftName, with the planner's sum of both) or refused
    // (draftError, the reason).
    Q_PROPERTY(QVariantList drafts READ drafts NOTIFY draftsChanged)
    Q_PROPERTY(QString draftReason READ draftReason NOTIFY draftsChanged)
    Q_PROPERTY(QString draftPath READ draftPath NOTIFY stateChanged)
    Q_PROPERTY(QString draftName READ draftName NOTIFY stateChanged)
    Q_PROPERTY(QString draftError READ draftError NOTIFY stateChanged)
    Q_PROPERTY(QString draftFit READ draftFit NOTIFY stateChanged)

public:
    enum State { Empty, Loading, Ready, Failed };
    Q_ENUM(State)

    // kv_disk_folder: where the KV cache's disk tier lives (empty: no disk tier).
    ModelController(EngineHost& host, AppSettings& settings, QString kv_disk_folder = {}, QObject* parent = nullptr);

    State state() const { return state_; }
    bool ready() const { return state_ == Ready; }
    double progress() const { return progress_; }
    QString path() const { return path_; }
    QString name() const { return info_.name; }
    QVariantMap details() const;
    QString error() const { return error_; }
    const LoadedModelInfo& info() const { return info_; }
    QString builtinModelPath() const;
    bool builtinModelExists() const;
    QVariantList drafts() const { return drafts_; }
    QString draftReason() const { return draft_reason_; }
    QString draftPath() const;
    QString draftName() const { return info_.draft_name; }
    QString draftError() const { return info_.draft_error; }
    QString draftFit() const { return info_.draft_fit; }
    // The model library whose models may draft (engine/library; empty: none, no drafts).
    void setLibraryFolder(const QString& folder);

    Q_INVOKABLE void load(const QString& path);
    // A model on a remote server behind the slot instead (app/remote's RemoteController
    // builds the request with the endpoint's settings and key).
    void loadRemote(RemoteLoad req);
    bool remote() const { return !info_.remote_endpoint.isEmpty(); }
    Q_INVOKABLE void loadBuiltin() { load(builtinModelPath()); }
    Q_INVOKABLE void cancelLoad();
    // This model's own context (0: automatic again), saved for it and applied by reloading it.
    Q_INVOKABLE void setContext(int n_ctx);
    // The KV cache's type for every model ("f16" or "q8_0"), saved and applied by reloading
    // the model loaded now.
    Q_INVOKABLE void setCacheType(const QString& type);
    Q_INVOKABLE void unload();
    // The draft model for the loaded model ("": none), saved for it and applied by reloading
    // it with the draft beside it (the planner and the vocabulary check may refuse it: draftError).
    Q_INVOKABLE void setDraft(const QString& draft_path);
    // Lists the library's drafts for the loaded model again (done at each load).
    Q_INVOKABLE void refreshDrafts();

signals:
    void stateChanged();
    void progressChanged();
    void aboutToChangeModel();  // running generations are being cancelled
    void loaded(const QString& name);
    void loadFailed(const QString& error);
    void draftsChanged();

private:
    void set_state(State s);
    void set_drafts(QVariantList drafts, QString reason);

    EngineHost& host_;
    AppSettings& settings_;
    QString kv_disk_folder_;
    State state_ = Empty;
    double progress_ = 0;
    QString path_;
    QString error_;
    LoadedModelInfo info_;
    int pending_loads_ = 0;  // loads queued on the engine thread; only the last one counts
    quint64 load_id_ = 0;    // the newest load, for cancelLoad()
    QString library_folder_;
    QVariantList drafts_;
    QString draft_reason_;
    quint64 drafts_asked_ = 0;  // listings asked for; only the newest one's answer counts
    QThreadPool drafts_pool_;   // one thread reading the library's files; waited for first at destruction
};

}  // namespace ember::app
