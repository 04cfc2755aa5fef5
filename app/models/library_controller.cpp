#include "app/models/library_controller.h"

#include <QDir>
#include <QFileInfo>
#include <QUrl>
#include <filesystem>

#include "app/core/model_controller.h"
#include "app/core/model_list_model.h"
#include "app/models/async_call.h"
#include "engine/library/library.h"
#include "engine/quant/quant_plan.h"
#include "engine/quant/quantizer.h"
#include "kernels/common/format.h"

namespace ember::app {
namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }

QString params_text(uint64_t n) {
    if (n == 0) return {};
    return n >= 1'000'000'000 ? QStringLiteral("%1B params").arg(double(n) / 1e9, 0, 'f', 1)
                              : QStringLiteral("%1M params").arg(double(n) / 1e6, 0, 'f', 0);
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
            {QStringLiteral("present"), m.present}};
}

std::vector<QVariantMap> list_rows(library::Library& lib) {
    std::vector<QVariantMap> rows;
    for (const library::LibraryModel& m : lib.list()) rows.push_back(model_row(m));
    return rows;
}

QString local_path(const QString& path_or_url) {
    const QUrl url(path_or_url);
    return url.isLocalFile() ? url.toLocalFile() : path_or_url;
}

}  // namespace

LibraryController::LibraryController(QString folder, ModelController& loader, ModelListModel* picker, QObject* parent)
    : QObject(parent),
      folder_(std::move(folder)),
      loader_(loader),
      picker_(picker),
      rows_({"id", "name", "repo", "quant", "sizeText", "architecture", "paramsText", "context", "source", "path",
             "present"},
            "id") {
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

QStringList LibraryController::quantTypes() const {
    QStringList out;
    for (const std::string& n : quant_scheme_names()) out << text(n);
    return out;
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

void LibraryController::publish(std::vector<QVariantMap> rows) {
    if (picker_) {
        QList<QPair<QString, QString>> models;
        for (const QVariantMap& r : rows)
            if (r.value("present").toBool()) models.append({r.value("name").toString(), r.value("path").toString()});
        picker_->setLibraryModels(models);
    }
    rows_.set_rows(std::move(rows));
    emit changed();
}

void LibraryController::refresh() {
    on_library([](library::Library& lib) { return list_rows(lib); },
               [this](std::vector<QVariantMap> rows) { publish(std::move(rows)); });
}

void LibraryController::load(qint64 id) {
    const QVariantMap row = rows_.find(QVariant::fromValue(id));
    if (row.isEmpty()) return fail(tr("That model is no longer in the library."));
    if (!row.value("present").toBool())
        return fail(tr("%1 is missing on disk (%2): delete it or download it again.")
                        .arg(row.value("name").toString(), row.value("path").toString()));
    loader_.load(row.value("path").toString());  // queued to the engine thread
}

void LibraryController::remove(qint64 id) {
    on_library(
        [id](library::Library& lib) {
            lib.remove(id);
            return list_rows(lib);
        },
        [this](std::vector<QVariantMap> rows) { publish(std::move(rows)); });
}

void LibraryController::importFile(const QString& path_or_url) {
    const QString path = local_path(path_or_url);
    on_library(
        [path](library::Library& lib) {
            const library::LibraryModel m = lib.import_file(std::filesystem::path(path.toStdString()));
            return std::make_pair(text(m.name), list_rows(lib));
        },
        [this](std::pair<QString, std::vector<QVariantMap>> out) {
            publish(std::move(out.second));
            emit imported(out.first);
        });
}

void LibraryController::quantize(qint64 id, const QString& type) {
    const QVariantMap row = rows_.find(QVariant::fromValue(id));
    if (row.isEmpty() || quantizing_) return;
    const QString source = row.value("path").toString();
    const QString out_dir = QDir(folder_).filePath(QStringLiteral("quantized"));
    const QString output = QDir(out_dir).filePath(QFileInfo(source).completeBaseName() + '-' + type + ".gguf");
    quantize_cancel_ = std::make_shared<std::atomic<bool>>(false);
    quantizing_ = true;
    quantize_progress_ = 0;
    quantize_text_ = tr("Quantizing %1 to %2").arg(row.value("name").toString(), type);
    emit quantizeChanged();
    run_async(
        quant_, this,
        [this, source, output, out_dir, type, cancel = quantize_cancel_] {
            QDir().mkpath(out_dir);
            QuantizeOptions o;
            o.input = source.toStdString();
            o.output = output.toStdString();
            o.type = type.toStdString();
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
            return quantize_model(o).cancelled;
        },
        [this, output](Outcome<bool> out) {
            quantizing_ = false;
            emit quantizeChanged();
            if (!out.value) return fail(tr("Quantizing failed: %1").arg(out.error));
            if (*out.value) return;  // cancelled: the quantizer left no output
            quantize_progress_ = 1;
            emit quantizeChanged();
            on_library(
                [output](library::Library& lib) {
                    const library::LibraryModel m = lib.import_file(std::filesystem::path(output.toStdString()));
                    return std::make_pair(text(m.name), list_rows(lib));
                },
                [this](std::pair<QString, std::vector<QVariantMap>> res) {
                    publish(std::move(res.second));
                    emit quantized(res.first);
                });
        });
}

void LibraryController::cancelQuantize() {
    if (quantize_cancel_) quantize_cancel_->store(true);
}

}  // namespace ember::app
