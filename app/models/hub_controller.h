// The "find and download" half of the model manager page, as QML sees it (singleton "Hub"):
// the curated catalog, Hugging Face search, a repository's files each with a fit badge and
// its one-line reason (engine/fit against this machine's VRAM and RAM, from the first bytes
// of each remote file: nothing is downloaded to judge a fit), and the download queue with
// progress, pause, resume and cancel (engine/hub's DownloadQueue), including the pulls an
// earlier run (or the CLI) left unfinished, listed as paused at start. The access token for
// gated repositories is kept by HubToken (app/models/hub_token.h): the one typed here when
// set, else HF_TOKEN.
//
// Nothing here blocks the GUI thread: hub calls run on `net_` (a pool of two threads), the
// queue is made and driven on `serial_` (one thread), and every result or progress update
// comes back as a queued call. Stale answers (a search overtaken by a newer one, the files of
// a repository the user has already left) are dropped by a generation counter.
#pragma once
#include <QObject>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <QVariantMap>
#include <cstdint>
#include <memory>

#include "app/models/hub_token.h"
#include "app/models/row_list_model.h"

namespace ember::hub {
class DownloadQueue;
struct PullProgress;
}  // namespace ember::hub

namespace ember::app {

class HubController : public QObject {
    Q_OBJECT
    Q_PROPERTY(QObject* catalog READ catalog CONSTANT)
    Q_PROPERTY(QObject* searchResults READ searchResults CONSTANT)
    Q_PROPERTY(QObject* files READ files CONSTANT)
    Q_PROPERTY(QObject* downloads READ downloads CONSTANT)
    Q_PROPERTY(QString catalogError READ catalogError CONSTANT)
    Q_PROPERTY(bool searching READ searching NOTIFY searchingChanged)
    Q_PROPERTY(QString searchError READ searchError NOTIFY searchingChanged)
    Q_PROPERTY(QString repo READ repo NOTIFY filesChanged)  // whose files are listed
    Q_PROPERTY(bool listing READ listing NOTIFY filesChanged)
    Q_PROPERTY(bool checkingFit READ checkingFit NOTIFY filesChanged)
    Q_PROPERTY(QString filesError READ filesError NOTIFY filesChanged)
    Q_PROPERTY(QString fitSummary READ fitSummary NOTIFY filesChanged)  // the choice, one line
    // Budgets as people type them ("8GiB"); "" measures this machine (free VRAM of the first
    // CUDA device, available RAM).
    Q_PROPERTY(QString vramBudget READ vramBudget WRITE setVramBudget NOTIFY budgetChanged)
    Q_PROPERTY(QString ramBudget READ ramBudget WRITE setRamBudget NOTIFY budgetChanged)
    Q_PROPERTY(QString budgetText READ budgetText NOTIFY budgetChanged)
    Q_PROPERTY(int activeDownloads READ activeDownloads NOTIFY downloadsChanged)
    // The access token in use: "settings" (typed here), "HF_TOKEN" or "" (none), and its hint
    // ("hf_…wxyz"); the token itself is never readable from QML.
    Q_PROPERTY(QString tokenSource READ tokenSource NOTIFY tokenChanged)
    Q_PROPERTY(QString tokenHint READ tokenHint NOTIFY tokenChanged)

public:
    // `models_dir`: the library folder downloads go to (engine/library's default_dir());
    // `token_file`: where the access token typed on the page is kept (0600).
    HubController(QString models_dir, QString token_file, QObject* parent = nullptr);
    ~HubController() override;

    QObject* catalog() { return &catalog_; }
    QObject* searchResults() { return &search_; }
    QObject* files() { return &files_; }
    QObject* downloads() { return &downloads_; }
    RowListModel& file_rows() { return files_; }
    RowListModel& download_rows() { return downloads_; }
    QString catalogError() const { return catalog_error_; }
    bool searching() const { return searching_; }
    QString searchError() const { return search_error_; }
    QString repo() const { return repo_; }
    bool listing() const { return listing_; }
    bool checkingFit() const { return checking_fit_; }
    QString filesError() const { return files_error_; }
    QString fitSummary() const { return fit_summary_; }
    QString vramBudget() const { return vram_budget_; }
    QString ramBudget() const { return ram_budget_; }
    void setVramBudget(const QString& v);
    void setRamBudget(const QString& v);
    QString budgetText() const { return budget_text_; }
    int activeDownloads() const;
    QString tokenSource() const { return token_.source(); }
    QString tokenHint() const { return token_.hint(); }

    Q_INVOKABLE void search(const QString& query);
    // Lists the repository's models (one row per quantization; a split model is one row)
    // and then judges each against the budget.
    Q_INVOKABLE void openRepo(const QString& repo);
    // Starts a pull, unless the model is in the library already (same repository and
    // quantization, or the same bytes) or being pulled: never a second row for one model.
    Q_INVOKABLE void download(const QString& repo, const QString& quant);
    Q_INVOKABLE void pause(qint64 id);
    Q_INVOKABLE void resume(qint64 id);
    Q_INVOKABLE void cancel(qint64 id);
    Q_INVOKABLE void clearFinished();
    // Saves the access token (an empty one removes it) and uses it from the next hub call on;
    // returns false, with errorOccurred, when it cannot be saved.
    Q_INVOKABLE bool setToken(const QString& token);
    // The library's rows (LibraryController): each file row says whether its model is there
    // (libraryId, localPath), so that the page offers Load instead of Download.
    void setLibraryModels(const std::vector<QVariantMap>& models);
    // Folders of model files outside the library (the chat's picker scans them): a file row
    // whose bytes are there says so (copyPath), so that the page offers Load for it too.
    void setLocalFolders(const QStringList& folders) { local_folders_ = folders; }
    // How the app loads a model (AppSettings: context, 0 = automatic; chats kept), so that
    // each file is judged by what its load would allocate: with an automatic context, at the
    // longest the model was made for, shorter (down to 4,096) where that is what fits.
    void setLoadShape(int n_ctx, int n_seqs) {
        load_ctx_ = n_ctx;
        load_seqs_ = n_seqs;
    }

signals:
    void searchingChanged();
    void filesChanged();
    void budgetChanged();
    void downloadsChanged();
    void tokenChanged();
    void fitChecked();                          // every file of repo() has its badge
    void modelDownloaded(const QString& name);  // the library has a new verified model
    void errorOccurred(const QString& message);

private:
    void list_files(quint64 generation, const QString& repo);
    void check_fit(quint64 generation, const QString& repo, std::vector<QVariantMap> rows);
    template <typename F>
    void with_queue(F f);  // runs f(DownloadQueue&) on serial_, making the queue first
    void on_progress(uint64_t id, const hub::PullProgress& p);
    QVariantMap local_fields(const QVariantMap& file) const;
    QVariantMap pull_of(const QString& repo, const QString& quant) const;
    void set_pull(const QString& repo, const QString& quant, const QString& state);

    QString models_dir_;
    HubToken token_;
    RowListModel catalog_, search_, files_, downloads_;
    QString catalog_error_;
    bool searching_ = false, listing_ = false, checking_fit_ = false;
    QString search_error_, files_error_, fit_summary_, repo_;
    quint64 search_gen_ = 0, files_gen_ = 0;
    QString vram_budget_, ram_budget_, budget_text_;
    int load_ctx_ = 0, load_seqs_ = 1;
    QThreadPool net_, serial_;
    std::shared_ptr<hub::DownloadQueue> queue_;  // made and used on serial_ only
    std::vector<QVariantMap> local_;             // the library's rows
    QStringList local_folders_;
    QSet<QString> requested_;  // "repo:quant" asked for, no progress back yet
};

}  // namespace ember::app
