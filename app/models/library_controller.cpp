#include "app/models/library_controller.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QUrl>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "app/core/model_controller.h"
#include "app/core/model_list_model.h"
#include "app/models/async_call.h"
#include "engine/gguf/gguf.h"
#include "engine/hub/sha256.h"
#include "engine/library/library.h"
#include "engine/quant/quant_plan.h"
#include "engine/quant/quant_targets.h"
#include "engine/quant/quantizer.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::app {
namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }

QString params_text(uint64_t n) {
    if (n == 0) return {};
    return n >= 1'000'000'000 ? QStringLiteral("%1B params").arg(double(n) / 1e9, 0, 'f', 1)
           : n >= 1'000'000   ? QStringLiteral("%1M params").arg(double(n) / 1e6, 0, 'f', 0)
                              : QStringLiteral("%1K params").arg(double(n) / 1e3, 0, 'f', 0);
}

QVariantMap model_row(const library::LibraryModel& m) {
    return {{QStringLiteral("id"), QVariant::fromValue<qint64>(m.id)},
            {QStringLiteral("name"), text(m.name)},
            {QStringLiteral("repo"), text(m.repo)},
            {QStringLiteral("quant"), text(m.quantization)},
            {QStringLiteral("sizeText"), text(format_bytes(m.size))},
            {QStringLiteral("architecture"), text(m.architecture)},
            {QStringLiteral("paramsText"), params_text(m.parameters)},
            {QStringLiteral("context"), QVariant::fromValue<qulonglong>(m.context_length)},
            {QStringLiteral("source"), text(library::source_name(m.source))},
            {QStringLiteral("path"), text(m.path)},
            {QStringLiteral("sha256"), text(m.sha256)},
            {QStringLiteral("size"), QVariant::fromValue<qulonglong>(m.size)},
            {QStringLiteral("present"), m.present}};
}

QString local_path(const QString& path_or_url) {
    const QUrl url(path_or_url);
    return url.isLocalFile() ? url.toLocalFile() : path_or_url;
}

// What a scheme keeps of the model, in plain words (llama.cpp's measured perplexity order).
QString quality_words(const QString& scheme) {
    if (scheme == "F32" || scheme == "F16" || scheme == "BF16") return QObject::tr("Same quality as the original");
    if (scheme == "Q8_0") return QObject::tr("Almost no loss: hard to tell from the original");
    if (scheme == "Q6_K") return QObject::tr("Very close to the original");
    if (scheme == "Q5_K_M" || scheme == "Q5_K") return QObject::tr("Close to the original: a slight loss");
    if (scheme.startsWith("Q5_")) return QObject::tr("A slight loss, a little more than Q5_K_M");
    if (scheme == "Q4_K_M") return QObject::tr("Good: a small loss, the usual balance of size and quality");
    if (scheme == "Q4_K") return QObject::tr("A small loss, a little more than Q4_K_M");
    return QObject::tr("A clear loss: answers get worse, most on small models");
}

QString offer_note(const QuantOffer& o, const QString& source) {
    if (!o.readable)
        return QObject::tr("Ember cannot read this model's weights (%1), so it cannot make other sizes of it.")
            .arg(source);
    if (o.requantize && o.targets.empty())
        return QObject::tr(
                   "This model is already quantized (%1) and no smaller file would be worth it. "
                   "To get other sizes, quantize the original F16 or F32 model.")
            .arg(source);
    if (o.requantize)
        return QObject::tr(
                   "This model is already quantized (%1): Ember can make a smaller file from it, but its "
                   "quality will be at most that of %1, usually a little lower. For the best result, "
                   "quantize the original F16 or F32 model.")
            .arg(source);
    return QObject::tr(
               "The original has %1 weights. A smaller file loads faster and needs less memory; each step "
               "down loses a little quality.")
        .arg(source);
}

// `label`: the library's name for the model's quantization ("Q4_K_M" from the file name),
// else the type that holds most of its weights.
QVariantMap offer_map(qint64 id, const QString& name, const QString& label, const QuantOffer& o) {
    const QString source = label.isEmpty() ? text(std::string(dtype_name(o.source))) : label;
    QVariantList targets;
    for (const QuantTarget& t : o.targets) {
        const int saving = o.source_bytes ? int(std::lround(100.0 * (1.0 - double(t.bytes) / o.source_bytes))) : 0;
        targets.push_back(QVariantMap{{"type", text(t.scheme)},
                                      {"sizeText", text(format_bytes(t.bytes))},
                                      {"saving", QObject::tr("%1 % smaller").arg(saving)},
                                      {"quality", quality_words(text(t.scheme))}});
    }
    return {{"id", id},
            {"name", name},
            {"source", source},
            {"sourceSize", text(format_bytes(o.source_bytes))},
            {"requantize", o.requantize},
            {"note", offer_note(o, source)},
            {"recommended", text(o.recommended)},
            {"targets", targets},
            {"ready", true}};
}

}  // namespace

LibraryController::LibraryController(QString folder, ModelController& loader, ModelListModel* picker, QObject* parent)
    : QObject(parent),
      folder_(std::move(folder)),
      loader_(loader),
      picker_(picker),
      rows_({"id", "name", "repo", "quant", "sizeText", "architecture", "paramsText", "context", "source", "path",
             "sha256", "size", "present"},
            "id"),
      picker_folders_(picker ? picker->folders() : QStringList{}) {
    serial_.setMaxThreadCount(1);
    quant_.setMaxThreadCount(1);
    refresh();
}

LibraryController::~LibraryController() {
    cancelQuantize();
    quant_.waitForDone();
    serial_.start([this] { library_.reset(); });
    serial_.waitForDone();
}

template <typename Work, typename Done>
void LibraryController::on_library(Work work, Done done) {
    ++busy_;
    emit busyChanged();
    run_async(
        serial_, this,
        [this, work = std::move(work)]() mutable {
            if (!library_) library_ = std::make_shared<library::Library>(std::filesystem::path(folder_.toStdString()));
            return work(*library_);
        },
        [this, done = std::move(done)](auto out) mutable {
            --busy_;
            emit busyChanged();
            if (out.value) done(std::move(*out.value));
            else fail(out.error);
        });
}

void LibraryController::fail(const QString& message) {
    error_ = message;
    emit errorChanged();
    emit errorOccurred(message);
}

// A new action starts: the last one's error no longer describes the page.
void LibraryController::clear_error() {
    if (error_.isEmpty()) return;
    error_.clear();
    emit errorChanged();
}

QString LibraryController::sha256_of(const QString& path) {
    const QFileInfo f(path);
    const Hashed now{f.size(), f.lastModified().toMSecsSinceEpoch(), {}};
    auto it = hashes_.find(path);
    if (it == hashes_.end() || it->second.size != now.size || it->second.mtime != now.mtime)
        it = hashes_.insert_or_assign(path, Hashed{now.size, now.mtime, text(hub::sha256_file(path.toStdString()))})
                 .first;
    return it->second.sha256;
}

// The rows, and the picker's entries: each file once. The picker scans its folders itself;
// a library model with the bytes of a scanned file (same size, then same SHA-256: only
// same-size files are hashed) or of an earlier library model is left out.
LibraryController::Listing LibraryController::listing(library::Library& lib) {
    Listing out;
    std::set<QString> seen_sha, seen_path;
    std::map<qint64, std::vector<QString>> scanned_by_size;
    for (const QString& folder : picker_folders_)
        for (const QFileInfo& f : QDir(folder).entryInfoList({QStringLiteral("*.gguf")}, QDir::Files | QDir::Readable))
            scanned_by_size[f.size()].push_back(f.canonicalFilePath());
    for (const library::LibraryModel& m : lib.list()) {
        QVariantMap row = model_row(m);
        out.rows.push_back(row);
        if (!m.present) continue;
        const QString path = QFileInfo(text(m.path)).canonicalFilePath(), sha = text(m.sha256);
        bool listed = seen_sha.count(sha) > 0 || seen_path.count(path) > 0;
        // The first part (what the picker lists of a split model) against each scanned file.
        const auto same_size = scanned_by_size.find(qint64(m.parts.empty() ? m.size : m.parts.front().size));
        if (!listed && same_size != scanned_by_size.end())
            for (const QString& scanned : same_size->second)
                listed = listed || scanned == path || sha256_of(scanned) == sha;
        seen_sha.insert(sha);
        seen_path.insert(path);
        if (!listed) out.picker.append({row.value("name").toString(), row.value("path").toString()});
    }
    return out;
}

void LibraryController::publish(Listing l) {
    if (picker_) picker_->setLibraryModels(l.picker);
    rows_.set_rows(std::move(l.rows));
    emit changed();
}

void LibraryController::refresh() {
    on_library([this](library::Library& lib) { return listing(lib); }, [this](Listing l) { publish(std::move(l)); });
}

void LibraryController::load(qint64 id) {
    clear_error();
    const QVariantMap row = rows_.find(QVariant::fromValue(id));
    if (row.isEmpty()) return fail(tr("That model is no longer in the library."));
    if (!row.value("present").toBool())
        return fail(tr("%1 is missing on disk (%2): delete it or download it again.")
                        .arg(row.value("name").toString(), row.value("path").toString()));
    loader_.load(row.value("path").toString());  // queued to the engine thread
}

void LibraryController::remove(qint64 id) {
    clear_error();
    on_library(
        [this, id](library::Library& lib) {
            lib.remove(id);
            return listing(lib);
        },
        [this](Listing l) { publish(std::move(l)); });
}

void LibraryController::importFile(const QString& path_or_url) {
    clear_error();
    const QString path = local_path(path_or_url);
    on_library(
        [this, path](library::Library& lib) {
            const library::LibraryModel m = lib.import_file(std::filesystem::path(path.toStdString()));
            return std::make_pair(text(m.name), listing(lib));
        },
        [this](std::pair<QString, Listing> out) {
            publish(std::move(out.second));
            emit imported(out.first);
        });
}

void LibraryController::offerQuantize(qint64 id) {
    const QVariantMap row = rows_.find(QVariant::fromValue(id));
    const QString name = row.value("name").toString();
    quantize_offer_ = {{"id", id}, {"name", name}, {"ready", false}};
    emit quantizeOfferChanged();
    if (row.isEmpty()) return;
    run_async(
        serial_, this,
        [path = row.value("path").toString().toStdString()] { return quant_offer(GgufFile::open(path)); },
        [this, id, name, label = row.value("quant").toString()](Outcome<QuantOffer> out) {
            if (quantize_offer_.value("id").toLongLong() != id) return;  // another model was chosen since
            if (out.value) quantize_offer_ = offer_map(id, name, label, *out.value);
            else quantize_offer_ = {{"id", id}, {"name", name}, {"ready", true}, {"note", out.error}};
            emit quantizeOfferChanged();
        });
}

void LibraryController::quantize(qint64 id, const QString& type) {
    const QVariantMap row = rows_.find(QVariant::fromValue(id));
    if (row.isEmpty() || quantizing_) return;
    clear_error();
    const QString source = row.value("path").toString();
    const QString out_dir = QDir(folder_).filePath(QStringLiteral("quantized"));
    const QString output = QDir(out_dir).filePath(QFileInfo(source).completeBaseName() + '-' + type + ".gguf");
    quantize_cancel_ = std::make_shared<std::atomic<bool>>(false);
    quantizing_ = true;
    quantize_progress_ = 0;
    quantize_text_ = tr("Making a %2 copy of %1").arg(row.value("name").toString(), type);
    emit quantizeChanged();
    run_async(
        quant_, this,
        [this, source, output, out_dir, type, cancel = quantize_cancel_] {
            QuantizeOptions o;
            o.input = source.toStdString();
            o.output = output.toStdString();
            o.type = type.toStdString();
            // Only what the dialog would offer: then a requantization is one that makes a
            // smaller file, and the dialog has said its quality is capped by the source's.
            const QuantOffer offer = quant_offer(GgufFile::open(o.input));
            const bool offered = std::any_of(offer.targets.begin(), offer.targets.end(),
                                             [&](const QuantTarget& t) { return t.scheme == o.type; });
            if (!offered)
                throw Error(tr("A %1 file would be no smaller or better than this %2 model, so it was not made.")
                                .arg(type, text(std::string(dtype_name(offer.source))))
                                .toStdString());
            o.allow_requantize = offer.requantize;
            o.cancel = cancel.get();
            o.on_progress = [this](const QuantizeProgress& p) {
                const double f = p.fraction();
                QMetaObject::invokeMethod(
                    this,
                    [this, f] {
                        quantize_progress_ = f;
                        emit quantizeChanged();
                    },
                    Qt::QueuedConnection);
            };
            QDir().mkpath(out_dir);
            return quantize_model(o).cancelled;
        },
        [this, output](Outcome<bool> out) {
            quantizing_ = false;
            emit quantizeChanged();
            if (!out.value) return fail(tr("Could not quantize: %1").arg(out.error));
            if (*out.value) return;  // cancelled: the quantizer left no output
            quantize_progress_ = 1;
            emit quantizeChanged();
            on_library(
                [this, output](library::Library& lib) {
                    const library::LibraryModel m = lib.import_file(std::filesystem::path(output.toStdString()));
                    return std::make_pair(text(m.name), listing(lib));
                },
                [this](std::pair<QString, Listing> res) {
                    clear_error();
                    publish(std::move(res.second));
                    emit quantized(res.first);
                });
        });
}

void LibraryController::cancelQuantize() {
    if (quantize_cancel_) quantize_cancel_->store(true);
}

}  // namespace ember::app
