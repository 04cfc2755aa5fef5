#include "app/core/model_controller.h"

#include <filesystem>
#include <utility>

#include <QFileInfo>

#include "app/core/app_settings.h"
#include "app/core/device_words.h"
#include "app/core/engine_host.h"
#include "kernels/common/format.h"
#include "app/models/async_call.h"  // header only: the model manager's way off the GUI thread
#ifdef EMBER_HAVE_LIBRARY
#include "engine/library/drafts.h"
#endif

namespace ember::app {
namespace {

// The chat-template fallback in plain words (the engine's warning names the rule it applied;
// it stays available as the details).
QString template_notice(const QString& warning) {
    if (warning.isEmpty()) return {};
    const bool missing = warning.startsWith(QLatin1String("the model file has no chat template"));
    return missing ? QStringLiteral(
                         "This model file does not say how to lay out a conversation, so Ember uses a "
                         "standard layout that suits it. If answers ramble or show stray markers, try "
                         "another file of this model.")
                   : QStringLiteral(
                         "This model file's conversation layout does not work as written, so Ember uses a "
                         "standard layout that suits it. If answers ramble or show stray markers, try "
                         "another file of this model.");
}

// Why the model has the context it has: the planner's choice, or whose setting.
QString context_reason(const LoadedModelInfo& info, bool own) {
    if (info.ctx_automatic) return info.ctx_reason;
    QString r = own ? QStringLiteral("your setting for this model")
                    : QStringLiteral("your setting for every model (Settings › Engine)");
    if (!info.ctx_reason.isEmpty()) r += QStringLiteral(", ") + info.ctx_reason;
    return r;
}

struct DraftListing {
    QVariantList drafts;
    QString reason;  // why there are none
};

// The library's models in `folder` that can draft for the model file `target` (on a pool
// thread: it reads every candidate's vocabulary).
DraftListing list_drafts(const QString& folder, const QString& target) {
    DraftListing l;
#ifdef EMBER_HAVE_LIBRARY
    const library::Library lib{std::filesystem::path(folder.toStdString())};
    for (const library::LibraryModel& m : library::compatible_drafts(lib, target.toStdString()))
        l.drafts.append(QVariantMap{{"name", QString::fromStdString(m.name)},
                                    {"path", QString::fromStdString(m.path)},
                                    {"size", QString::fromStdString(format_bytes(m.size))},
                                    {"quantization", QString::fromStdString(m.quantization)}});
    if (l.drafts.isEmpty())
        l.reason = QStringLiteral(
            "no model in your library has this model's vocabulary and is smaller (add one on the Models page, "
            "or quantize this one to fewer bits)");
#else
    (void)folder, (void)target;
    l.reason = QStringLiteral("this build has no model library to find a draft model in");
#endif
    return l;
}

}  // namespace

ModelController::ModelController(EngineHost& host, AppSettings& settings, QString kv_disk_folder, QObject* parent)
    : QObject(parent), host_(host), settings_(settings), kv_disk_folder_(std::move(kv_disk_folder)) {
    drafts_pool_.setMaxThreadCount(1);
    draft_reason_ = QStringLiteral("no model is loaded");
    EngineWorker* w = host_.worker();
    connect(w, &EngineWorker::loadProgress, this, [this](float p) {
        if (state_ != Loading) return;
        progress_ = p;
        emit progressChanged();
    });
    connect(w, &EngineWorker::modelLoaded, this, [this](const LoadedModelInfo& info) {
        if (--pending_loads_ > 0) return;  // superseded by a newer load request
        info_ = info;
        error_.clear();
        if (info.remote_endpoint.isEmpty()) settings_.setLastModelPath(info.path);  // a file to load at the next start
        set_state(Ready);
        refreshDrafts();
        emit loaded(info.name);
    });
    connect(w, &EngineWorker::modelLoadFailed, this, [this](const QString& path, const QString& err, bool cancelled) {
        if (--pending_loads_ > 0) return;
        info_ = {};
        const QString what = path.startsWith(QLatin1String("remote:")) ? path.mid(7) : QFileInfo(path).fileName();
        error_ = cancelled ? QString() : QStringLiteral("Could not load %1: %2").arg(what, err);
        set_state(cancelled ? Empty : Failed);
        if (!cancelled) emit loadFailed(error_);
    });
    connect(w, &EngineWorker::modelUnloaded, this, [this] {
        if (pending_loads_ > 0) return;
        info_ = {};
        set_state(Empty);
    });
}

void ModelController::set_state(State s) {
    state_ = s;
    emit stateChanged();
    if (s != Ready) refreshDrafts();
}

void ModelController::setLibraryFolder(const QString& folder) {
    library_folder_ = folder;
    refreshDrafts();
}

QString ModelController::draftPath() const { return path_.isEmpty() ? QString() : settings_.modelDraft(path_); }

void ModelController::setDraft(const QString& draft_path) {
    if (path_.isEmpty() || remote() || draft_path == draftPath()) return;
    settings_.setModelDraft(path_, draft_path);
    load(path_);
}

void ModelController::set_drafts(QVariantList drafts, QString reason) {
    drafts_ = std::move(drafts);
    draft_reason_ = std::move(reason);
    emit draftsChanged();
}

void ModelController::refreshDrafts() {
    const quint64 asked = ++drafts_asked_;
    if (state_ != Ready)
        return set_drafts(
            {}, state_ == Loading ? QStringLiteral("the model is loading") : QStringLiteral("no model is loaded"));
    if (remote()) return set_drafts({}, QStringLiteral("a remote model runs on its server, without a draft from here"));
    if (library_folder_.isEmpty()) return set_drafts({}, QStringLiteral("there is no model library to find one in"));
    run_async(
        drafts_pool_, this, [folder = library_folder_, target = info_.path] { return list_drafts(folder, target); },
        [this, asked](Outcome<DraftListing> out) {
            if (asked != drafts_asked_) return;  // a newer listing is on its way
            if (out.value) set_drafts(std::move(out.value->drafts), std::move(out.value->reason));
            else set_drafts({}, out.error);
        });
}

QVariantMap ModelController::details() const {
    if (state_ != Ready) return {};
    const bool own_context = settings_.modelContext(info_.path) > 0;
    return {{"name", info_.name},
            {"path", info_.path},
            {"metadataName", info_.metadata_name},
            {"architecture", info_.architecture},
            {"params", info_.params},
            {"fileType", info_.file_type},
            {"fileSize", info_.file_size},
            {"backend", info_.backend},                       // the engine's words: Details
            {"runsOn", device_words(info_.backend).summary},  // the same in plain words
            {"context", info_.n_ctx},
            {"trainedContext", info_.trained_ctx},
            {"contextFitsUpTo", info_.ctx_fits_up_to},
            {"contextAutomatic", info_.ctx_automatic},
            {"contextOwn", own_context},
            {"contextReason", context_reason(info_, own_context)},
            {"cachedChats", info_.n_seqs},
            {"kvSize", info_.kv_size},
            {"kvType", info_.kv_type},
            {"kvPerToken", info_.kv_per_token},
            {"chatTemplate", info_.chat_template},
            {"reasoningFormat", info_.reasoning_format},
            {"readsEnableThinking", info_.reads_enable_thinking},
            {"readsReasoningEffort", info_.reads_reasoning_effort},
            {"templateWarning", info_.template_warning},
            {"templateNotice", template_notice(info_.template_warning)},
            {"loadMs", info_.load_ms},
            {"draftName", info_.draft_name},
            {"draftError", info_.draft_error},
            {"draftFit", info_.draft_fit},
            {"remote", !info_.remote_endpoint.isEmpty()},
            {"endpoint", info_.remote_endpoint},
            {"url", info_.remote_url}};
}

QString ModelController::builtinModelPath() const { return AppSettings::builtinModelPath(); }
bool ModelController::builtinModelExists() const { return QFileInfo::exists(builtinModelPath()); }

void ModelController::load(const QString& path) {
    if (path.isEmpty()) return;
    emit aboutToChangeModel();
    host_.cancelAll();  // the running load/answer stops; queued answers are dropped
    ++pending_loads_;
    path_ = path;
    error_.clear();
    progress_ = 0;
    info_ = {};
    set_state(Loading);
    emit progressChanged();
    LoadRequest r;
    r.path = path;
    r.n_ctx = settings_.contextFor(path);
    r.n_seqs = settings_.cachedChats();
    r.n_threads = settings_.threads();
    r.kv_type = settings_.kvCacheType() == QLatin1String("q8_0") ? DType::Q8_0 : DType::F16;
    r.kv_disk_folder = kv_disk_folder_;
    r.kv_disk_bytes = static_cast<quint64>(settings_.kvDiskCacheGiB()) << 30;
    r.draft_path = settings_.modelDraft(path);
    load_id_ = host_.load(r);
}

void ModelController::loadRemote(RemoteLoad req) {
    emit aboutToChangeModel();
    host_.cancelAll();
    ++pending_loads_;
    path_ = remote_model_path(req.endpoint, req.model);
    error_.clear();
    progress_ = 0;
    info_ = {};
    set_state(Loading);
    emit progressChanged();
    load_id_ = host_.loadRemote(std::move(req));
}

void ModelController::setContext(int n_ctx) {
    if (path_.isEmpty() || remote()) return;  // a remote model's context is the server's
    settings_.setModelContext(path_, n_ctx);
    load(path_);
}

void ModelController::setCacheType(const QString& type) {
    const QString before = settings_.kvCacheType();
    settings_.setKvCacheType(type);
    if (!path_.isEmpty() && !remote() && settings_.kvCacheType() != before) load(path_);
}

void ModelController::cancelLoad() {
    if (state_ == Loading) host_.cancel(load_id_);
}

void ModelController::unload() {
    emit aboutToChangeModel();
    host_.cancelAll();
    host_.unload();
    path_.clear();
    info_ = {};
    set_state(Empty);
}

}  // namespace ember::app
