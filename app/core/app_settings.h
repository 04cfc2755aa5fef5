// App-wide preferences (QSettings, INI). Per-conversation choices (system prompt, sampling)
// live in the conversation database instead; the defaults for new chats live here.
// With $EMBER_DATA_DIR set (tests, portable runs) the file is <that dir>/settings.ini so a
// test never touches the user's real settings.
#pragma once
#include <QObject>
#include <QRect>
#include <QSettings>
#include <QVariantMap>
#include <memory>

namespace ember::app {

class AppSettings : public QObject {
    Q_OBJECT
    Q_PROPERTY(QString theme READ theme WRITE setTheme NOTIFY changed)  // system | light | dark
    Q_PROPERTY(QString logLevel READ logLevel WRITE setLogLevel NOTIFY changed)
    // Tokens per chat for every model without its own setting; 0: automatic (the longest the
    // model was made for that fits this machine, engine/fit/context_choice.h).
    Q_PROPERTY(int contextLength READ contextLength WRITE setContextLength NOTIFY changed)
    Q_PROPERTY(int cachedChats READ cachedChats WRITE setCachedChats NOTIFY changed)
    Q_PROPERTY(int threads READ threads WRITE setThreads NOTIFY changed)  // 0: one per core
    // The KV cache's disk tier (prompts' KV kept across restarts), GiB; 0: off.
    Q_PROPERTY(int kvDiskCacheGiB READ kvDiskCacheGiB WRITE setKvDiskCacheGiB NOTIFY changed)
    // The KV cache's element type: "f16" or "q8_0" (17/32 of the memory per token). A change
    // applies from the next load (ModelController::setCacheType reloads at once).
    Q_PROPERTY(QString kvCacheType READ kvCacheType WRITE setKvCacheType NOTIFY changed)
    // What a chat longer than the model's context does (engine/runtime/prompt_fit.h):
    // "truncate" (the default: the oldest messages left out), "roll" (the same, the rest moved
    // in the KV cache instead of computed again) or "stop" (the answer refused, saying why).
    Q_PROPERTY(QString contextOverflow READ contextOverflow WRITE setContextOverflow NOTIFY changed)
    Q_PROPERTY(QString defaultSystemPrompt READ defaultSystemPrompt WRITE setDefaultSystemPrompt NOTIFY changed)
    Q_PROPERTY(QVariantMap defaultSampling READ defaultSampling WRITE setDefaultSampling NOTIFY changed)
    Q_PROPERTY(QString lastModelPath READ lastModelPath WRITE setLastModelPath NOTIFY changed)
    Q_PROPERTY(bool loadLastModel READ loadLastModel WRITE setLoadLastModel NOTIFY changed)
    // The monitor window: open at the last exit, where it was, which tab was shown.
    Q_PROPERTY(bool monitorOpen READ monitorOpen WRITE setMonitorOpen NOTIFY changed)
    Q_PROPERTY(QRect monitorGeometry READ monitorGeometry WRITE setMonitorGeometry NOTIFY changed)
    Q_PROPERTY(int monitorTab READ monitorTab WRITE setMonitorTab NOTIFY changed)
    // The local OpenAI-compatible API server (engine/server) on the app's own engine, bound
    // to 127.0.0.1. The key (empty: none) is kept in this file in plain text, as a local
    // server's command-line flag would be: it guards the port against other local programs.
    Q_PROPERTY(bool serverEnabled READ serverEnabled WRITE setServerEnabled NOTIFY changed)
    Q_PROPERTY(int serverPort READ serverPort WRITE setServerPort NOTIFY changed)
    Q_PROPERTY(QString serverApiKey READ serverApiKey WRITE setServerApiKey NOTIFY changed)
    Q_PROPERTY(QString settingsFile READ settingsFile CONSTANT)
    Q_PROPERTY(QString builtinModelPath READ builtinModelPath CONSTANT)
    // The cost view's settings (see below).
    Q_PROPERTY(double electricityPrice READ electricityPrice WRITE setElectricityPrice NOTIFY changed)
    Q_PROPERTY(QString currency READ currency WRITE setCurrency NOTIFY changed)
    Q_PROPERTY(double cpuWatts READ cpuWatts WRITE setCpuWatts NOTIFY changed)
    Q_PROPERTY(double hardwarePrice READ hardwarePrice WRITE setHardwarePrice NOTIFY changed)
    Q_PROPERTY(double hardwareYears READ hardwareYears WRITE setHardwareYears NOTIFY changed)
    Q_PROPERTY(double hoursPerDay READ hoursPerDay WRITE setHoursPerDay NOTIFY changed)

public:
    explicit AppSettings(QObject* parent = nullptr);
    explicit AppSettings(const QString& file, QObject* parent = nullptr);

    QString theme() const;
    void setTheme(const QString& v);
    QString logLevel() const;
    void setLogLevel(const QString& v);
    int contextLength() const;
    void setContextLength(int v);
    // One model's own context (0: none, contextLength applies), keyed by its path.
    Q_INVOKABLE int modelContext(const QString& path) const;
    Q_INVOKABLE void setModelContext(const QString& path, int n_ctx);
    int contextFor(const QString& path) const;  // what a load of `path` asks for (0: automatic)
    // The draft model chosen for one model (its file; "": none), keyed by the model's path: a
    // draft only drafts for models of its vocabulary, so the choice belongs to the model, and
    // every chat set to "Draft model" uses it while that model is loaded.
    Q_INVOKABLE QString modelDraft(const QString& path) const;
    Q_INVOKABLE void setModelDraft(const QString& path, const QString& draft_path);
    // The "no chat template of its own" notice, dismissed for one model file for good.
    Q_INVOKABLE bool templateNoticeDismissed(const QString& path) const;
    Q_INVOKABLE void dismissTemplateNotice(const QString& path);
    int cachedChats() const;
    void setCachedChats(int v);
    int threads() const;
    void setThreads(int v);
    int kvDiskCacheGiB() const;
    void setKvDiskCacheGiB(int v);
    QString kvCacheType() const;
    void setKvCacheType(const QString& v);  // anything but "q8_0" is "f16"
    QString contextOverflow() const;
    void setContextOverflow(const QString& v);  // anything but "roll" or "stop" is "truncate"
    QString defaultSystemPrompt() const;
    void setDefaultSystemPrompt(const QString& v);
    QVariantMap defaultSampling() const;
    void setDefaultSampling(const QVariantMap& v);
    QString defaultSamplingJson() const;
    QString lastModelPath() const;
    void setLastModelPath(const QString& v);
    bool loadLastModel() const;
    void setLoadLastModel(bool v);
    bool monitorOpen() const;
    void setMonitorOpen(bool v);
    QRect monitorGeometry() const;  // empty: never placed (the window picks its default)
    void setMonitorGeometry(const QRect& v);
    int monitorTab() const;
    void setMonitorTab(int v);
    bool serverEnabled() const;
    void setServerEnabled(bool v);
    int serverPort() const;
    void setServerPort(int v);  // 1..65535
    QString serverApiKey() const;
    void setServerApiKey(const QString& v);
    QString settingsFile() const { return settings_->fileName(); }
    void sync() { settings_->sync(); }  // writes pending changes to the file now
    // Set once the conversation database has held a conversation: a database later found
    // empty (0 bytes, gone) is then noticed and restored from a backup.
    bool hadHistory() const;
    void setHadHistory(bool v);

    // The model Ember offers when none is loaded: SmolLM2-135M-Instruct from the test-model
    // cache ($EMBER_TEST_MODELS_DIR, else ~/.cache/ember/test-models).
    static QString builtinModelPath();
    static QString defaultSettingsFile();

    // The cost view (app/cost): electricity price per kWh, the CPU's power while generating
    // where its energy meter is unreadable, and the hardware to amortize (price 0: none).
    double electricityPrice() const;
    void setElectricityPrice(double v);
    QString currency() const;
    void setCurrency(const QString& v);
    double cpuWatts() const;
    void setCpuWatts(double v);
    double hardwarePrice() const;
    void setHardwarePrice(double v);
    double hardwareYears() const;
    void setHardwareYears(double v);
    double hoursPerDay() const;
    void setHoursPerDay(double v);
    QString apiPricesJson() const;  // the user's edited API prices; empty: the shipped ones
    void setApiPricesJson(const QString& v);
    // The remote endpoints (app/core/remote_endpoints.h), JSON; never their API keys.
    QString remoteEndpointsJson() const;
    void setRemoteEndpointsJson(const QString& v);

    Q_INVOKABLE void resetToDefaults();

signals:
    void changed();

private:
    void set(const char* key, const QVariant& v);
    std::unique_ptr<QSettings> settings_;
};

}  // namespace ember::app
