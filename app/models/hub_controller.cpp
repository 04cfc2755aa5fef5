#include "app/models/hub_controller.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "app/models/async_call.h"
#include "app/models/catalog.h"
#include "app/models/fit_badge.h"
#include "engine/fit/quant_choice.h"
#include "engine/hub/download_queue.h"
#include "engine/hub/hub_client.h"
#include "engine/hub/sha256.h"
#include "kernels/common/format.h"

namespace ember::app {
namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }
QString bytes_text(uint64_t n) { return text(format_bytes(n)); }

QString eta_text(double s) {
    if (s < 0) return {};
    const auto secs = static_cast<qint64>(std::ceil(s));
    return secs >= 3600 ? QStringLiteral("%1 h %2 min left").arg(secs / 3600).arg(secs % 3600 / 60)
           : secs >= 60 ? QStringLiteral("%1 min %2 s left").arg(secs / 60).arg(secs % 60)
                        : QStringLiteral("%1 s left").arg(secs);
}

QVariantMap search_row(const hub::ModelSummary& m) {
    return {{QStringLiteral("repo"), text(m.id)},
            {QStringLiteral("downloads"), QVariant::fromValue<qulonglong>(m.downloads)},
            {QStringLiteral("likes"), QVariant::fromValue<qulonglong>(m.likes)}};
}

QVariantMap choice_row(const hub::ModelChoice& c) {
    QStringList part_files;
    QVariantList part_sizes;
    for (const hub::RemoteFile& f : c.files) {
        part_files.push_back(text(f.path));
        part_sizes.push_back(QVariant::fromValue<qulonglong>(f.size));
    }
    return {{QStringLiteral("quant"), text(c.quant)},
            {QStringLiteral("partFiles"), part_files},  // a split model's parts, for the fit check
            {QStringLiteral("partSizes"), part_sizes},
            {QStringLiteral("file"), text(c.files.front().path)},
            {QStringLiteral("sha256"), text(c.files.front().sha256)},  // the first part's, as the library keeps it
            {QStringLiteral("libraryId"), QVariant::fromValue<qint64>(0)},
            {QStringLiteral("localPath"), QString()},  // the library's copy
            {QStringLiteral("copyPath"), QString()},   // or another copy on this computer (the picker's folders)
            {QStringLiteral("pull"), QString()},       // the state of its pull under way, if any
            {QStringLiteral("parts"), static_cast<int>(c.files.size())},
            {QStringLiteral("size"), static_cast<double>(c.total_bytes())},
            {QStringLiteral("sizeText"), bytes_text(c.total_bytes())},
            {QStringLiteral("badge"), QStringLiteral("checking")},
            {QStringLiteral("badgeText"), QStringLiteral("Checking fit…")},
            {QStringLiteral("reason"), QString()},
            {QStringLiteral("best"), false},
            {QStringLiteral("checked"), false}};
}

// A file in one of `folders` with the remote file's bytes (the same size, then the same
// SHA-256: only same-size files are read), or "". Blocking: a worker thread's call.
QString local_copy(const QStringList& folders, const hub::RemoteFile& f) {
    if (f.sha256.empty()) return {};
    for (const QString& folder : folders)
        for (const QFileInfo& local : QDir(folder).entryInfoList({QStringLiteral("*.gguf")}, QDir::Files))
            if (uint64_t(local.size()) == f.size && hub::sha256_file(local.filePath().toStdString()) == f.sha256)
                return local.absoluteFilePath();
    return {};
}

// What a download row shows for one progress snapshot.
QVariantMap download_row(uint64_t id, const hub::PullProgress& p) {
    const double fraction = p.total ? double(p.bytes) / double(p.total) : 0.0;
    const bool active = p.state == hub::PullState::Downloading;
    return {{QStringLiteral("id"), QVariant::fromValue<qint64>(static_cast<qint64>(id))},
            {QStringLiteral("repo"), text(p.repo)},
            {QStringLiteral("quant"), text(p.quant)},
            {QStringLiteral("state"), text(hub::pull_state_name(p.state))},
            {QStringLiteral("progress"), fraction},
            {QStringLiteral("bytesText"),
             p.total ? QStringLiteral("%1 of %2").arg(bytes_text(p.bytes), bytes_text(p.total)) : QString()},
            {QStringLiteral("rateText"),
             active && p.bytes_per_s > 0 ? QStringLiteral("%1/s").arg(bytes_text(uint64_t(p.bytes_per_s))) : QString()},
            {QStringLiteral("etaText"), active ? eta_text(p.eta_s) : QString()},
            {QStringLiteral("partText"),
             p.parts > 1 && p.part > 0 ? QStringLiteral("part %1 of %2").arg(p.part).arg(p.parts) : QString()},
            {QStringLiteral("error"), text(p.error)},
            {QStringLiteral("waiting"),
             active && !p.waiting_for.empty()
                 ? QStringLiteral("Waiting: %1 is downloading this file; it will be used when verified.")
                       .arg(text(p.waiting_for))
                 : QString()}};
}

const QStringList kDownloadRoles{"id",       "repo",    "quant",    "state", "progress", "bytesText",
                                 "rateText", "etaText", "partText", "error", "waiting"};

}  // namespace

HubController::HubController(QString models_dir, QString token_file, QObject* parent)
    : QObject(parent),
      models_dir_(std::move(models_dir)),
      token_(std::move(token_file)),
      catalog_({"name", "repo", "parameters", "active", "sizeText", "architecture", "licence", "description"}, "repo"),
      search_({"repo", "downloads", "likes"}, "repo"),
      files_({"quant", "file", "sha256", "libraryId", "localPath", "copyPath", "pull", "partFiles", "partSizes",
              "parts", "size", "sizeText", "badge", "badgeText", "reason", "best", "checked"},
             "quant"),
      downloads_(kDownloadRoles, "id") {
    net_.setMaxThreadCount(2);
    serial_.setMaxThreadCount(1);
    try {  // a resource compiled into the binary: reading it is not disk I/O worth a thread
        std::vector<QVariantMap> rows;
        for (const CatalogEntry& e : builtin_catalog()) rows.push_back(e.to_row());
        catalog_.set_rows(std::move(rows));
    } catch (const std::exception& e) {
        catalog_error_ = text(e.what());
    }
    // The pulls an earlier run or the CLI left unfinished: listed (paused) from the start.
    with_queue([](hub::DownloadQueue& q) { q.restore_pending(); });
}

// The queue's destructor stops the transfers (keeping partial files for the next start) and
// joins its threads; it runs on serial_ like every other use of the queue.
HubController::~HubController() {
    net_.waitForDone();
    serial_.start([this] { queue_.reset(); });
    serial_.waitForDone();
}

void HubController::setVramBudget(const QString& v) {
    if (v == vram_budget_) return;
    vram_budget_ = v;
    emit budgetChanged();
    if (!repo_.isEmpty()) openRepo(repo_);  // the badges depend on it
}

void HubController::setRamBudget(const QString& v) {
    if (v == ram_budget_) return;
    ram_budget_ = v;
    emit budgetChanged();
    if (!repo_.isEmpty()) openRepo(repo_);
}

void HubController::search(const QString& query) {
    const quint64 gen = ++search_gen_;
    searching_ = true;
    search_error_.clear();
    emit searchingChanged();
    run_async(
        net_, this,
        [q = query.trimmed().toStdString(), cfg = token_.config()] {
            std::vector<QVariantMap> rows;
            for (const hub::ModelSummary& m : hub::HubClient(cfg).search(q, 30)) rows.push_back(search_row(m));
            return rows;
        },
        [this, gen](Outcome<std::vector<QVariantMap>> out) {
            if (gen != search_gen_) return;  // overtaken by a newer search
            searching_ = false;
            if (out.value) search_.set_rows(std::move(*out.value));
            else search_error_ = out.error;
            emit searchingChanged();
        });
}

void HubController::openRepo(const QString& repo) {
    const quint64 gen = ++files_gen_;
    repo_ = repo;
    listing_ = true;
    checking_fit_ = false;
    files_error_.clear();
    fit_summary_.clear();
    files_.set_rows({});
    emit filesChanged();
    list_files(gen, repo);
}

void HubController::list_files(quint64 gen, const QString& repo) {
    run_async(
        net_, this,
        [r = repo.toStdString(), cfg = token_.config(), folders = local_folders_] {
            std::vector<QVariantMap> rows;
            for (const hub::ModelChoice& c : hub::gguf_choices(hub::HubClient(cfg).list_files(r, "main"))) {
                QVariantMap row = choice_row(c);
                if (c.files.size() == 1) row["copyPath"] = local_copy(folders, c.files.front());
                rows.push_back(std::move(row));
            }
            return rows;
        },
        [this, gen, repo](Outcome<std::vector<QVariantMap>> out) {
            if (gen != files_gen_) return;
            listing_ = false;
            if (!out.value) {
                files_error_ = out.error;
            } else if (out.value->empty()) {
                files_error_ = tr("%1 has no GGUF model files.").arg(repo);
            } else {
                for (QVariantMap& row : *out.value) {  // in the library, or being pulled
                    row.insert(local_fields(row));
                    row["pull"] = pull_of(repo, row.value("quant").toString()).value("state").toString();
                }
                files_.set_rows(*out.value);
                checking_fit_ = true;
                check_fit(gen, repo, std::move(*out.value));
            }
            emit filesChanged();
        });
}

namespace {

struct FitAnswer {
    std::vector<QVariantMap> updates;  // one per file row, keyed by quant
    QString summary, budget;
};

// Reads each file's header from the hub (its first bytes only) and ranks the files with the
// fit planner's quantization chooser against the budget.
FitAnswer judge_files(const hub::HubConfig& cfg, const std::string& repo, const std::vector<QVariantMap>& rows,
                      const QString& vram, const QString& ram, const fit::ChoiceOptions& options) {
    const fit::Budget budget = resolve_budget(vram, ram);
    const hub::HubClient hub(cfg);
    std::vector<fit::ListedFile> listed;  // every part: the planner joins a split model's headers
    for (const QVariantMap& r : rows) {
        const QStringList files = r.value("partFiles").toStringList();
        const QVariantList sizes = r.value("partSizes").toList();
        for (qsizetype i = 0; i < files.size() && i < sizes.size(); ++i)
            listed.push_back({files[i].toStdString(), sizes[i].toULongLong()});
    }
    const fit::PrefixReader prefix = [&](const std::string& path, uint64_t n) {
        const std::string bytes = hub.fetch_range(repo, "main", path, 0, n);
        return std::vector<uint8_t>(bytes.begin(), bytes.end());
    };
    const fit::QuantChoice choice = fit::choose_from_listing(listed, prefix, budget, options);
    FitAnswer a;
    a.summary = plain_choice(choice, options);
    a.budget = describe_budget(budget, !vram.trimmed().isEmpty(), !ram.trimmed().isEmpty());
    for (size_t i = 0; i < choice.ranked.size(); ++i) {
        const fit::RankedFile& f = choice.ranked[i];
        for (const QVariantMap& r : rows) {
            if (r.value("file").toString().toStdString() != f.path) continue;
            const bool best = choice.chosen == i;
            QVariantMap u = badge_fields(f, best, best ? choice.plan : f.plan);
            u[QStringLiteral("quant")] = r.value("quant");
            a.updates.push_back(std::move(u));
        }
    }
    return a;
}

}  // namespace

void HubController::check_fit(quint64 gen, const QString& repo, std::vector<QVariantMap> rows) {
    run_async(
        net_, this,
        [cfg = token_.config(), r = repo.toStdString(), rows = std::move(rows), vram = vram_budget_, ram = ram_budget_,
         o = load_choice_options(load_ctx_, load_seqs_)] { return judge_files(cfg, r, rows, vram, ram, o); },
        [this, gen](Outcome<FitAnswer> out) {
            if (gen != files_gen_) return;
            checking_fit_ = false;
            if (out.value) {
                for (const QVariantMap& u : out.value->updates) files_.upsert(u);
                fit_summary_ = out.value->summary;
                budget_text_ = out.value->budget;
                emit budgetChanged();
            } else {
                files_error_ = tr("Could not check the fit: %1").arg(out.error);
            }
            emit filesChanged();
            emit fitChecked();
        });
}

template <typename F>
void HubController::with_queue(F f) {
    serial_.start([this, f = std::move(f), cfg = token_.config()]() mutable {
        try {
            if (!queue_) {
                queue_ = std::make_shared<hub::DownloadQueue>(cfg, std::filesystem::path(models_dir_.toStdString()), 2);
                // Called on the queue's worker threads: hop to the GUI thread.
                queue_->set_listener([this](uint64_t id, const hub::PullProgress& p) {
                    QMetaObject::invokeMethod(
                        this, [this, id, p] { on_progress(id, p); }, Qt::QueuedConnection);
                });
            }
            f(*queue_);
        } catch (const std::exception& e) {
            const QString msg = text(e.what());
            QMetaObject::invokeMethod(
                this, [this, msg] { emit errorOccurred(msg); }, Qt::QueuedConnection);
        }
    });
}

// The library model with this file's bytes: the same repository and quantization, or the
// same SHA-256 (a file published under another name, or imported).
QVariantMap HubController::local_fields(const QVariantMap& file) const {
    const QString sha = file.value("sha256").toString();
    for (const QVariantMap& m : local_) {
        if (!m.value("present").toBool()) continue;
        const bool same_name = m.value("name").toString() == repo_ + ':' + file.value("quant").toString();
        if (same_name || (!sha.isEmpty() && m.value("sha256").toString() == sha))
            return {{"libraryId", m.value("id")}, {"localPath", m.value("path")}};
    }
    return {{"libraryId", QVariant::fromValue<qint64>(0)}, {"localPath", QString()}};
}

void HubController::setLibraryModels(const std::vector<QVariantMap>& models) {
    local_ = models;
    for (const QVariantMap& row : files_.rows()) {
        QVariantMap u = local_fields(row);
        u.insert("quant", row.value("quant"));
        files_.upsert(u);
    }
}

// The pull of this model that has not ended (queued, running or paused), or an empty map.
QVariantMap HubController::pull_of(const QString& repo, const QString& quant) const {
    for (const QVariantMap& d : downloads_.rows()) {
        const QString s = d.value("state").toString();
        const bool ongoing = s == "queued" || s == "listing" || s == "downloading" || s == "paused";
        if (ongoing && d.value("repo").toString() == repo && d.value("quant").toString() == quant) return d;
    }
    return {};
}

void HubController::download(const QString& repo, const QString& quant) {
    // Never a second copy: a model in the library is loaded from there (the page offers Load),
    // and a pull already under way is resumed, not started again.
    const QString key = repo + ':' + quant;
    if (requested_.contains(key)) return;  // asked for, its first progress not back yet
    if (const QVariantMap pull = pull_of(repo, quant); !pull.isEmpty()) return resume(pull.value("id").toLongLong());
    for (const QVariantMap& m : local_)
        if (m.value("present").toBool() && m.value("name").toString() == key) return;
    if (repo == repo_)
        if (const QVariantMap row = files_.find(quant);
            row.value("libraryId").toLongLong() > 0 || !row.value("copyPath").toString().isEmpty())
            return;
    requested_.insert(key);
    set_pull(repo, quant, QStringLiteral("queued"));
    with_queue([this, key, repo, quant](hub::DownloadQueue& queue) {
        try {
            const uint64_t id = queue.enqueue(repo.toStdString(), quant.toStdString());
            const hub::PullProgress p = queue.progress(id);
            QMetaObject::invokeMethod(
                this, [this, id, p] { on_progress(id, p); }, Qt::QueuedConnection);
        } catch (...) {  // not queued: the button offers Download again (with_queue reports why)
            QMetaObject::invokeMethod(
                this,
                [this, key, repo, quant] {
                    requested_.remove(key);
                    set_pull(repo, quant, QString());
                },
                Qt::QueuedConnection);
            throw;
        }
    });
}

void HubController::pause(qint64 id) {
    with_queue([id](hub::DownloadQueue& q) { q.pause(uint64_t(id)); });
}
void HubController::resume(qint64 id) {
    with_queue([id](hub::DownloadQueue& q) { q.resume(uint64_t(id)); });
}
void HubController::cancel(qint64 id) {
    with_queue([id](hub::DownloadQueue& q) { q.cancel(uint64_t(id)); });
}

void HubController::set_pull(const QString& repo, const QString& quant, const QString& state) {
    if (repo == repo_ && files_.indexOf(quant) >= 0) files_.upsert({{"quant", quant}, {"pull", state}});
}

void HubController::on_progress(uint64_t id, const hub::PullProgress& p) {
    const QString before = downloads_.find(QVariant::fromValue<qint64>(qint64(id))).value("state").toString();
    downloads_.upsert(download_row(id, p));
    const QString repo = text(p.repo), quant = text(p.quant);
    requested_.remove(repo + ':' + quant);
    set_pull(repo, quant, pull_of(repo, quant).value("state").toString());
    const QString state = text(hub::pull_state_name(p.state));
    if (state == before) return;
    emit downloadsChanged();
    if (p.state == hub::PullState::Done) emit modelDownloaded(text(p.repo + ":" + p.quant));
    if (p.state == hub::PullState::Failed)
        emit errorOccurred(tr("Download of %1 failed: %2").arg(text(p.repo), text(p.error)));
}

int HubController::activeDownloads() const {
    int n = 0;
    for (int i = 0; i < downloads_.count(); ++i) {
        const QString s = downloads_.get(i).value("state").toString();
        n += s == "queued" || s == "listing" || s == "downloading";
    }
    return n;
}

bool HubController::setToken(const QString& token) {
    try {
        token_.set(token);
    } catch (const std::exception& e) {
        emit errorOccurred(text(e.what()));
        return false;
    }
    // The hint only: the token itself never reaches a log.
    const QString what = token_.stored() ? "saved (" + token_.hint() + ")" : QStringLiteral("removed");
    qInfo("hub: access token %s", qUtf8Printable(what));
    with_queue([cfg = token_.config()](hub::DownloadQueue& q) { q.set_config(cfg); });
    emit tokenChanged();
    if (!repo_.isEmpty()) openRepo(repo_);  // a gated repository may list now
    return true;
}

void HubController::clearFinished() {
    std::vector<QVariantMap> keep;
    for (int i = 0; i < downloads_.count(); ++i) {
        const QVariantMap r = downloads_.get(i);
        const QString s = r.value("state").toString();
        if (s != "done" && s != "cancelled" && s != "failed") keep.push_back(r);
    }
    downloads_.set_rows(std::move(keep));
    emit downloadsChanged();
}

}  // namespace ember::app
