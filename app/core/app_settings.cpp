#include "app/core/app_settings.h"

#include <QDir>
#include <QStandardPaths>

#include "app/core/sampling_settings.h"

namespace ember::app {
namespace {
constexpr const char* kDefaultSystemPrompt = "You are a helpful assistant.";
}

QString AppSettings::defaultSettingsFile() {
    const QString data = qEnvironmentVariable("EMBER_DATA_DIR");
    const QString dir = data.isEmpty() ? QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation) : data;
    return QDir(dir).filePath(QStringLiteral("settings.ini"));
}

QString AppSettings::builtinModelPath() {
    QString dir = qEnvironmentVariable("EMBER_TEST_MODELS_DIR");
    if (dir.isEmpty()) dir = QDir::homePath() + QStringLiteral("/.cache/ember/test-models");
    return QDir(dir).filePath(QStringLiteral("SmolLM2-135M-Instruct.Q4_1.gguf"));
}

AppSettings::AppSettings(QObject* parent) : AppSettings(defaultSettingsFile(), parent) {}

AppSettings::AppSettings(const QString& file, QObject* parent)
    : QObject(parent), settings_(std::make_unique<QSettings>(file, QSettings::IniFormat)) {}

void AppSettings::set(const char* key, const QVariant& v) {
    if (settings_->value(QLatin1String(key)) == v) return;
    settings_->setValue(QLatin1String(key), v);
    emit changed();
}

QString AppSettings::theme() const { return settings_->value("ui/theme", QStringLiteral("system")).toString(); }
void AppSettings::setTheme(const QString& v) { set("ui/theme", v); }
QString AppSettings::logLevel() const { return settings_->value("log/level", QStringLiteral("info")).toString(); }
void AppSettings::setLogLevel(const QString& v) { set("log/level", v); }
int AppSettings::contextLength() const { return settings_->value("engine/context", 0).toInt(); }
void AppSettings::setContextLength(int v) { set("engine/context", qMax(0, v)); }
int AppSettings::cachedChats() const { return settings_->value("engine/cached_chats", 4).toInt(); }
void AppSettings::setCachedChats(int v) { set("engine/cached_chats", qBound(1, v, 64)); }
int AppSettings::threads() const { return settings_->value("engine/threads", 0).toInt(); }
void AppSettings::setThreads(int v) { set("engine/threads", qMax(0, v)); }
int AppSettings::kvDiskCacheGiB() const { return settings_->value("engine/kv_disk_cache_gib", 4).toInt(); }
void AppSettings::setKvDiskCacheGiB(int v) { set("engine/kv_disk_cache_gib", qBound(0, v, 1024)); }
QString AppSettings::kvCacheType() const {
    return settings_->value("engine/kv_cache_type").toString() == QLatin1String("q8_0") ? QStringLiteral("q8_0")
                                                                                        : QStringLiteral("f16");
}
void AppSettings::setKvCacheType(const QString& v) {
    set("engine/kv_cache_type", v == QLatin1String("q8_0") ? QStringLiteral("q8_0") : QStringLiteral("f16"));
}
QString AppSettings::contextOverflow() const {
    const QString v = settings_->value("chat/context_overflow").toString();
    return v == QLatin1String("roll") || v == QLatin1String("stop") ? v : QStringLiteral("truncate");
}
void AppSettings::setContextOverflow(const QString& v) {
    set("chat/context_overflow",
        v == QLatin1String("roll") || v == QLatin1String("stop") ? v : QStringLiteral("truncate"));
}
QString AppSettings::defaultSystemPrompt() const {
    return settings_->value("chat/system_prompt", QLatin1String(kDefaultSystemPrompt)).toString();
}
void AppSettings::setDefaultSystemPrompt(const QString& v) { set("chat/system_prompt", v); }
QString AppSettings::defaultSamplingJson() const {
    return settings_->value("chat/sampling", QStringLiteral("{}")).toString();
}
QVariantMap AppSettings::defaultSampling() const {
    return SamplingSettings::from_json(defaultSamplingJson()).to_variant();
}
void AppSettings::setDefaultSampling(const QVariantMap& v) {
    set("chat/sampling", SamplingSettings::from_variant(v).to_json());
}
int AppSettings::modelContext(const QString& path) const {
    return settings_->value("engine/model_contexts").toMap().value(path, 0).toInt();
}
void AppSettings::setModelContext(const QString& path, int n_ctx) {
    QVariantMap m = settings_->value("engine/model_contexts").toMap();
    if (n_ctx > 0) m.insert(path, n_ctx);
    else m.remove(path);
    set("engine/model_contexts", m);
}
int AppSettings::contextFor(const QString& path) const {
    const int own = modelContext(path);
    return own > 0 ? own : contextLength();
}
QString AppSettings::modelDraft(const QString& path) const {
    return settings_->value("engine/model_drafts").toMap().value(path).toString();
}
void AppSettings::setModelDraft(const QString& path, const QString& draft_path) {
    QVariantMap m = settings_->value("engine/model_drafts").toMap();
    if (draft_path.isEmpty()) m.remove(path);
    else m.insert(path, draft_path);
    set("engine/model_drafts", m);
}
bool AppSettings::templateNoticeDismissed(const QString& path) const {
    return settings_->value("chat/template_notice_dismissed").toStringList().contains(path);
}
void AppSettings::dismissTemplateNotice(const QString& path) {
    QStringList l = settings_->value("chat/template_notice_dismissed").toStringList();
    if (l.contains(path)) return;
    l.append(path);
    set("chat/template_notice_dismissed", l);
}
QString AppSettings::lastModelPath() const { return settings_->value("model/last").toString(); }
void AppSettings::setLastModelPath(const QString& v) { set("model/last", v); }
bool AppSettings::loadLastModel() const { return settings_->value("model/load_last", true).toBool(); }
void AppSettings::setLoadLastModel(bool v) { set("model/load_last", v); }

bool AppSettings::monitorOpen() const { return settings_->value("monitor/open", false).toBool(); }
void AppSettings::setMonitorOpen(bool v) { set("monitor/open", v); }
QRect AppSettings::monitorGeometry() const { return settings_->value("monitor/geometry").toRect(); }
void AppSettings::setMonitorGeometry(const QRect& v) { set("monitor/geometry", v); }
int AppSettings::monitorTab() const { return settings_->value("monitor/tab", 0).toInt(); }
void AppSettings::setMonitorTab(int v) { set("monitor/tab", qMax(0, v)); }

bool AppSettings::serverEnabled() const { return settings_->value("server/enabled", false).toBool(); }
void AppSettings::setServerEnabled(bool v) { set("server/enabled", v); }
int AppSettings::serverPort() const { return settings_->value("server/port", 8080).toInt(); }
void AppSettings::setServerPort(int v) { set("server/port", qBound(1, v, 65535)); }
QString AppSettings::serverApiKey() const { return settings_->value("server/api_key").toString(); }
void AppSettings::setServerApiKey(const QString& v) { set("server/api_key", v.trimmed()); }

bool AppSettings::hadHistory() const { return settings_->value("storage/had_history", false).toBool(); }
void AppSettings::setHadHistory(bool v) {
    set("storage/had_history", v);
    settings_->sync();  // at once: the marker matters most when the app dies
}

// Defaults: a typical household tariff and desktop CPU package power; the user sets theirs.
double AppSettings::electricityPrice() const { return settings_->value("cost/electricity_price", 0.30).toDouble(); }
void AppSettings::setElectricityPrice(double v) { set("cost/electricity_price", qMax(0.0, v)); }
QString AppSettings::currency() const { return settings_->value("cost/currency", QStringLiteral("USD")).toString(); }
void AppSettings::setCurrency(const QString& v) { set("cost/currency", v.trimmed()); }
double AppSettings::cpuWatts() const { return settings_->value("cost/cpu_watts", 65.0).toDouble(); }
void AppSettings::setCpuWatts(double v) { set("cost/cpu_watts", qBound(0.0, v, 5000.0)); }
double AppSettings::hardwarePrice() const { return settings_->value("cost/hardware_price", 0.0).toDouble(); }
void AppSettings::setHardwarePrice(double v) { set("cost/hardware_price", qMax(0.0, v)); }
double AppSettings::hardwareYears() const { return settings_->value("cost/hardware_years", 4.0).toDouble(); }
void AppSettings::setHardwareYears(double v) { set("cost/hardware_years", qBound(0.1, v, 50.0)); }
double AppSettings::hoursPerDay() const { return settings_->value("cost/hours_per_day", 8.0).toDouble(); }
void AppSettings::setHoursPerDay(double v) { set("cost/hours_per_day", qBound(0.1, v, 24.0)); }
QString AppSettings::apiPricesJson() const { return settings_->value("cost/api_prices").toString(); }
void AppSettings::setApiPricesJson(const QString& v) { set("cost/api_prices", v); }
QString AppSettings::remoteEndpointsJson() const { return settings_->value("remote/endpoints").toString(); }
void AppSettings::setRemoteEndpointsJson(const QString& v) { set("remote/endpoints", v); }

void AppSettings::resetToDefaults() {
    const QString last = lastModelPath();
    const bool history = hadHistory();
    const QString endpoints = remoteEndpointsJson();  // accounts, not preferences (their keys stay in the keyring)
    settings_->clear();
    if (!endpoints.isEmpty()) settings_->setValue("remote/endpoints", endpoints);
    if (!last.isEmpty()) settings_->setValue("model/last", last);
    if (history) settings_->setValue("storage/had_history", true);  // a fact, not a preference
    emit changed();
}

}  // namespace ember::app
