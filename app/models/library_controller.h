// The "what I have" half of the model manager page, as QML sees it (singleton "Library"):
// the models of engine/library (downloaded and verified, or imported after a full GGUF parse),
// with load, delete, import (file dialog and drag and drop hand a file here) and quantize
// with progress and cancel (engine/quant). The chat page's model picker lists the same
// models (ModelListModel::setLibraryModels), each file once: a library model whose bytes
// (SHA-256) are already listed, by another library model or by the picker's folder scan (a
// download of the built-in model), is left out of the picker.
//
// Quantize offers only the targets that make a useful file from the chosen model
// (engine/quant/quant_targets.h), each with its expected size and quality in plain words;
// from an already quantized model those are smaller files only (a requantization, allowed
// here because the offer says so), and the dialog says the quality is capped by the source.
//
// Every library call runs on `serial_` (one thread: SQLite and the file system, in order);
// quantizing runs on `quant_` so that the list stays usable meanwhile. Results come back as
// queued calls; the GUI thread never waits on the disk.
#pragma once
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <QVariantMap>
#include <atomic>
#include <map>
#include <memory>

#include "app/models/row_list_model.h"

namespace ember::library {
class Library;
}

namespace ember::app {

class ModelController;
class ModelListModel;

class LibraryController : public QObject {
    Q_OBJECT
    Q_PROPERTY(QObject* models READ models CONSTANT)
    Q_PROPERTY(QString folder READ folder CONSTANT)
    Q_PROPERTY(bool busy READ busy NOTIFY busyChanged)
    Q_PROPERTY(QString error READ error NOTIFY errorChanged)
    Q_PROPERTY(bool quantizing READ quantizing NOTIFY quantizeChanged)
    Q_PROPERTY(double quantizeProgress READ quantizeProgress NOTIFY quantizeChanged)
    Q_PROPERTY(QString quantizeText READ quantizeText NOTIFY quantizeChanged)  // what is being done
    // What Quantize can make of one model (offerQuantize): id, name, source, note, ready,
    // recommended, and targets [{type, sizeText, saving, quality}], best quality first.
    Q_PROPERTY(QVariantMap quantizeOffer READ quantizeOffer NOTIFY quantizeOfferChanged)

public:
    // `folder`: the library (engine/library's default_dir()). `loader` loads a model into the
    // chat; `picker` (may be null) is told the library's models.
    LibraryController(QString folder, ModelController& loader, ModelListModel* picker, QObject* parent = nullptr);
    ~LibraryController() override;

    QObject* models() { return &rows_; }
    RowListModel& rows() { return rows_; }
    QString folder() const { return folder_; }
    bool busy() const { return busy_ > 0; }
    QString error() const { return error_; }
    QVariantMap quantizeOffer() const { return quantize_offer_; }
    bool quantizing() const { return quantizing_; }
    double quantizeProgress() const { return quantize_progress_; }
    QString quantizeText() const { return quantize_text_; }

    Q_INVOKABLE void refresh();
    Q_INVOKABLE void load(qint64 id);
    Q_INVOKABLE void remove(qint64 id);
    // A local path or a file:// URL (from the file dialog or a drop).
    Q_INVOKABLE void importFile(const QString& path_or_url);
    // Reads the model's header and publishes quantizeOffer for it.
    Q_INVOKABLE void offerQuantize(qint64 id);
    // Writes <folder>/quantized/<stem>-<TYPE>.gguf and adds it to the library; a type the
    // offer for this model would not list is refused with the reason.
    Q_INVOKABLE void quantize(qint64 id, const QString& type);
    Q_INVOKABLE void cancelQuantize();

signals:
    void busyChanged();
    void errorChanged();
    void quantizeChanged();
    void quantizeOfferChanged();
    void changed();  // the list was reloaded
    void imported(const QString& name);
    void quantized(const QString& name);
    void errorOccurred(const QString& message);

private:
    template <typename Work, typename Done>
    void on_library(Work work, Done done);  // work(Library&) on serial_, done on the GUI thread
    struct Listing {
        std::vector<QVariantMap> rows;          // the library page's
        QList<QPair<QString, QString>> picker;  // (name, path) of each file not listed elsewhere
    };
    Listing listing(library::Library& lib);  // on serial_
    QString sha256_of(const QString& path);  // on serial_, cached by path, size and time
    void fail(const QString& message);
    void clear_error();
    void publish(Listing l);

    QString folder_;
    ModelController& loader_;
    ModelListModel* picker_;
    RowListModel rows_;
    int busy_ = 0;
    QString error_;
    bool quantizing_ = false;
    double quantize_progress_ = 0;
    QString quantize_text_;
    QVariantMap quantize_offer_;
    std::shared_ptr<std::atomic<bool>> quantize_cancel_;
    QThreadPool serial_, quant_;
    std::shared_ptr<library::Library> library_;  // opened and used on serial_ only
    QStringList picker_folders_;                 // what the picker scans (read on serial_)
    struct Hashed {
        qint64 size, mtime;
        QString sha256;
    };
    std::map<QString, Hashed> hashes_;  // serial_ only
};

}  // namespace ember::app
