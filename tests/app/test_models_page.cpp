// The model manager page end to end: ember-app's own wiring (AppContext) and QML, offscreen,
// against the hub's test server (tests/engine/hub/hub_server.py, a real HTTP server on
// 127.0.0.1 started here) serving real GGUF files: stories260K and two quantizations of it
// made with engine/quant at start-up.
//
// What is asserted is what the window renders: the catalog, search results, every file's fit
// badge and reason (equal to what engine/fit decides for the same files and budget), the
// download rows' states and progress bars (a transfer held by the server mid-file, paused,
// resumed, and one cancelled), and the library's load / delete / import / quantize. The
// screenshots models.png and downloads.png go to <build>/screenshots/.
#include <QApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSignalSpy>
#include <QtTest>
#include <sys/stat.h>

#include <fstream>
#include <memory>

#include "app/desktop/app_context.h"
#include "app/logging/logging.h"
#include "app/models/catalog.h"
#include "app/models/fit_badge.h"
#include "engine/fit/quant_choice.h"
#include "engine/gguf/gguf_split.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/quant/quantizer.h"
#include "test_paths.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

namespace {

const QString kRepo = QStringLiteral("ember-test/stories260K-GGUF");
const QString kStallRepo = QStringLiteral("ember-test/stalled-GGUF");   // holds the first transfer
const QString kDropRepo = QStringLiteral("ember-test/cancelled-GGUF");  // holds every transfer
const QString kGatedRepo = QStringLiteral("ember-test/gated-GGUF");     // needs kToken
const QString kToken = QStringLiteral("hf_EmberTestToken0123456789wxyz");
const QString kResumeRepo = QStringLiteral("ember-test/restart-resumed-GGUF");     // left unfinished,
const QString kDiscardRepo = QStringLiteral("ember-test/restart-cancelled-GGUF");  // then resumed / cancelled
const QString kSplitRepo = QStringLiteral("ember-test/split-GGUF");                // Q8_0 in two parts (gguf-split)
constexpr int kStallBytes = 300'000;                                               // of 1'185'376
const QString kVram = QStringLiteral("552MiB"), kRam = QStringLiteral("64MiB");

QQuickItem* find_item(QQuickItem* root, const QString& name) {
    if (!root) return nullptr;
    if (root->objectName() == name) return root;
    for (QQuickItem* c : root->childItems())
        if (QQuickItem* hit = find_item(c, name)) return hit;
    return nullptr;
}

QString text_of(QQuickItem* root, const QString& name) {
    QQuickItem* item = find_item(root, name);
    return item ? item->property("text").toString() : QStringLiteral("<no %1>").arg(name);
}

QByteArray sha256_of(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256).toHex();
}

void write_json(const QString& path, const QJsonObject& o) {
    QFile f(path);
    if (f.open(QIODevice::WriteOnly)) f.write(QJsonDocument(o).toJson());
}

}  // namespace

class TestModelsPage : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString root_;  // the server's repositories
    QProcess server_;
    std::unique_ptr<AppContext> ctx_;
    std::unique_ptr<QQmlApplicationEngine> engine_;
    QQuickWindow* window_ = nullptr;
    QQuickItem* page_ = nullptr;
    LoggingSetup log_;
    const QString out_ = QStringLiteral(EMBER_BINARY_DIR "/screenshots");

    QString repo_dir(const QString& repo) { return QDir(root_).filePath(repo); }

    // The served repository: stories260K as published (F32) and quantized here.
    void make_repositories() {
        const QString src = QString::fromStdString(ember::test::testdata(ember::test::kStories));
        const QString repo = repo_dir(kRepo);
        QVERIFY(QDir().mkpath(repo));
        QVERIFY(QFile::copy(src, repo + "/stories260K-F32.gguf"));
        for (const char* type : {"Q8_0", "Q4_0"}) {
            ember::QuantizeOptions o;
            o.input = src.toStdString();
            o.output = (repo + "/stories260K-" + type + ".gguf").toStdString();
            o.type = type;
            o.n_threads = 1;
            QVERIFY(!ember::quantize_model(o).cancelled);
        }
        write_json(repo + "/.meta", {{"downloads", 1234}, {"likes", 5}});
        // The Q8_0 file as gguf-split would publish it: two parts, one model.
        const std::string q8 = (repo + "/stories260K-Q8_0.gguf").toStdString();
        const ember::GgufFile f = ember::GgufFile::open(q8);
        ember::GgufWriter w;
        for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
        for (const auto& t : f.tensors())
            w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
        QVERIFY(QDir().mkpath(repo_dir(kSplitRepo)));
        const auto parts = w.split(2);
        for (uint32_t i = 0; i < 2; ++i)
            parts[i].write_file(
                ember::split_part_name((repo_dir(kSplitRepo) + "/stories260K-Q8_0").toStdString(), i + 1, 2));
        for (const QString& r : {kStallRepo, kDropRepo, kGatedRepo, kResumeRepo, kDiscardRepo}) {
            QVERIFY(QDir().mkpath(repo_dir(r)));
            QVERIFY(QFile::copy(src, repo_dir(r) + "/stories260K-F32.gguf"));
        }
        // The server sends kStallBytes, then nothing: the client sees a download in flight.
        write_json(repo_dir(kStallRepo) + "/.fault", {{"stall_after", kStallBytes}, {"times", 1}});
        write_json(repo_dir(kDropRepo) + "/.fault", {{"stall_after", kStallBytes}, {"times", 100}});
        // Gated, and its files redirected to another host name, where the token must not go.
        write_json(repo_dir(kGatedRepo) + "/.fault", {{"token", kToken}, {"redirect_host", "localhost"}});
        for (const QString& r : {kResumeRepo, kDiscardRepo})
            write_json(repo_dir(r) + "/.fault", {{"stall_after", kStallBytes}, {"times", 1}});
    }

    void start_server() {
        const QString script = QStringLiteral(EMBER_SOURCE_DIR "/tests/engine/hub/hub_server.py");
        QVERIFY2(QFile::exists(script), qPrintable(script));
        server_.start(QStringLiteral("python3"),
                      {script, "--root", root_, "--log", dir_.filePath(QStringLiteral("server.log"))});
        QVERIFY(server_.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(server_.canReadLine(), 20'000);
        const int port = server_.readLine().trimmed().toInt();
        QVERIFY(port > 0);
        qputenv("HF_ENDPOINT", QStringLiteral("http://127.0.0.1:%1").arg(port).toUtf8());
        qunsetenv("HF_TOKEN");
    }

    bool shoot(const QString& name) {
        QTest::qWait(200);  // let the layout settle (the assertions above do not depend on it)
        const QImage img = window_->grabWindow();
        const QString path = out_ + '/' + name;
        qInfo("saved %s (%dx%d)", qPrintable(path), img.width(), img.height());
        return !img.isNull() && img.save(path);
    }

    QVariantMap download_row(const QString& repo) { return download_row(ctx_->hub, repo); }
    static QVariantMap download_row(HubController& hub, const QString& repo) {
        RowListModel& rows = hub.download_rows();
        for (int i = 0; i < rows.count(); ++i)
            if (rows.get(i).value("repo").toString() == repo) return rows.get(i);
        return {};
    }

    QQuickItem* download_item(const QString& repo) {
        return find_item(page_, QStringLiteral("download_%1").arg(download_row(repo).value("id").toLongLong()));
    }

    QVariantMap library_row(const QString& name) {
        RowListModel& rows = ctx_->library.rows();
        for (int i = 0; i < rows.count(); ++i)
            if (rows.get(i).value("name").toString() == name) return rows.get(i);
        return {};
    }

private slots:
    // The server's log lines (JSON: method, path, host, range, auth) for paths starting so.
    std::vector<QJsonObject> requests_to(const QString& prefix) {
        QFile log(dir_.filePath(QStringLiteral("server.log")));
        std::vector<QJsonObject> out;
        if (!log.open(QIODevice::ReadOnly)) return out;
        for (const QByteArray& line : log.readAll().split('\n')) {
            const QJsonObject o = QJsonDocument::fromJson(line).object();
            if (o.value("path").toString().startsWith(prefix)) out.push_back(o);
        }
        return out;
    }

    QString token_file() const { return dir_.filePath(QStringLiteral("data/hf_token")); }

    void initTestCase() {
        EMBER_REQUIRE_FILE(ember::test::testdata(ember::test::kStories));
        // The app's log at its most talkative: the token must never reach it (checked last).
        log_ = init_logging(QStringLiteral("trace"), dir_.filePath(QStringLiteral("logs")));
        QVERIFY(QDir().mkpath(out_));
        root_ = dir_.filePath(QStringLiteral("hub"));
        make_repositories();
        start_server();
        const QString data = dir_.filePath(QStringLiteral("data"));
        qputenv("EMBER_DATA_DIR", data.toUtf8());
        qunsetenv("EMBER_MODELS_DIR");
        ctx_ = std::make_unique<AppContext>(data);
        QCOMPARE(ctx_->library.folder(), QDir(data).filePath(QStringLiteral("models")));
        ctx_->settings.setThreads(1);
        ctx_->hub.setVramBudget(kVram);
        ctx_->hub.setRamBudget(kRam);
        ctx_->register_qml();
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
        engine_ = std::make_unique<QQmlApplicationEngine>();
        engine_->load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        QCOMPARE(engine_->rootObjects().size(), 1);
        window_ = qobject_cast<QQuickWindow*>(engine_->rootObjects().first());
        QVERIFY(window_);
        QVERIFY(QTest::qWaitForWindowExposed(window_));
        QQuickItem* button = find_item(window_->contentItem(), QStringLiteral("modelsButton"));
        QVERIFY(button);
        QVERIFY(QMetaObject::invokeMethod(button, "clicked"));
        QTRY_VERIFY(window_->property("modelsOpen").toBool());
        page_ = find_item(window_->contentItem(), QStringLiteral("modelsPage"));
        QVERIFY(page_);
        QTRY_VERIFY(page_->isVisible());
    }

    void catalogIsListed() {
        QCOMPARE(ctx_->hub.catalogError(), QString());
        QQuickItem* list = find_item(page_, QStringLiteral("catalogList"));
        QVERIFY(list);
        QCOMPARE(list->property("count").toInt(), int(builtin_catalog().size()));
        QTRY_VERIFY(find_item(list, QStringLiteral("repo_bartowski/Llama-3.2-3B-Instruct-GGUF")));
    }

    void searchFindsTheServedRepository() {
        ctx_->hub.search(QStringLiteral("stories"));
        QTRY_VERIFY_WITH_TIMEOUT(!ctx_->hub.searching(), 20'000);
        QCOMPARE(ctx_->hub.searchError(), QString());
        auto* results = qobject_cast<RowListModel*>(ctx_->hub.searchResults());
        QCOMPARE(results->count(), 1);
        QCOMPARE(results->get(0).value("repo").toString(), kRepo);
        QCOMPARE(results->get(0).value("downloads").toULongLong(), 1234ull);
        ctx_->hub.search(QStringLiteral("no-such-model"));
        QTRY_VERIFY_WITH_TIMEOUT(!ctx_->hub.searching(), 20'000);
        QCOMPARE(results->count(), 0);
    }

    // Every file gets the badge and the reason engine/fit gives for the same file and budget.
    void filesHaveFitBadges() {
        QSignalSpy checked(&ctx_->hub, &HubController::fitChecked);
        ctx_->hub.openRepo(kRepo);
        QVERIFY(checked.wait(60'000));
        QCOMPARE(ctx_->hub.filesError(), QString());
        QCOMPARE(ctx_->hub.file_rows().count(), 3);

        std::vector<ember::fit::ListedFile> listed;
        for (const char* q : {"F32", "Q4_0", "Q8_0"}) {
            const QString p = repo_dir(kRepo) + "/stories260K-" + q + ".gguf";
            listed.push_back({QFileInfo(p).fileName().toStdString(), uint64_t(QFileInfo(p).size())});
        }
        const ember::fit::PrefixReader local = [&](const std::string& file, uint64_t n) {
            std::ifstream in((repo_dir(kRepo) + '/' + QString::fromStdString(file)).toStdString(), std::ios::binary);
            std::vector<uint8_t> bytes(n);
            in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(n));
            bytes.resize(size_t(in.gcount()));
            return bytes;
        };
        const ember::fit::QuantChoice want =
            ember::fit::choose_from_listing(listed, local, resolve_budget(kVram, kRam), ember::fit::ChoiceOptions{});
        QVERIFY(want.chosen.has_value());
        QCOMPARE(ctx_->hub.fitSummary(), QString::fromStdString(want.reason));
        QCOMPARE(text_of(page_, "fitSummary"), "Recommended: " + QString::fromStdString(want.reason));

        for (size_t i = 0; i < want.ranked.size(); ++i) {
            const ember::fit::RankedFile& f = want.ranked[i];
            QVERIFY2(f.plan.has_value(), f.note.c_str());
            QQuickItem* row = find_item(page_, "file_" + QString::fromStdString(f.quant));
            QVERIFY2(row, f.quant.c_str());
            const bool best = want.chosen == i;
            QCOMPARE(text_of(row, "badge"), badge_label(f.plan->placement));
            QCOMPARE(text_of(row, "reason"), QString::fromStdString(best ? want.reason : f.note));
            QCOMPARE(find_item(row, "bestLabel")->isVisible(), best);
            qInfo("%s: [%s] %s", f.quant.c_str(), qPrintable(text_of(row, "badge")),
                  qPrintable(text_of(row, "reason")));
        }
        QVERIFY(text_of(page_, "budgetLabel").contains(QStringLiteral("552.0 MiB VRAM (set)")));
        QVERIFY(shoot(QStringLiteral("models.png")));
    }

    void downloadIsVerifiedIntoTheLibrary() {
        QSignalSpy done(&ctx_->hub, &HubController::modelDownloaded);
        ctx_->hub.download(kRepo, QStringLiteral("Q8_0"));
        QVERIFY(done.wait(60'000));
        QCOMPARE(done.first().first().toString(), kRepo + ":Q8_0");
        page_->setProperty("tab", 1);
        QQuickItem* row = nullptr;
        QTRY_VERIFY((row = download_item(kRepo)) != nullptr);
        QCOMPARE(find_item(row, "downloadProgress")->property("value").toDouble(), 1.0);
        QCOMPARE(text_of(row, "downloadState"), QStringLiteral("Verified ✓"));
        // In the library, byte for byte what the server published.
        QTRY_VERIFY(!library_row(kRepo + ":Q8_0").isEmpty());
        const QVariantMap m = library_row(kRepo + ":Q8_0");
        QCOMPARE(sha256_of(m.value("path").toString()), sha256_of(repo_dir(kRepo) + "/stories260K-Q8_0.gguf"));
        QCOMPARE(m.value("source").toString(), QStringLiteral("downloaded"));
        QVERIFY(ctx_->model_list.indexOfPath(m.value("path").toString()) >= 0);  // the chat's picker
    }

    // A transfer the server holds mid-file: its bar shows the bytes so far; pause keeps them,
    // resume finishes from there. Another held transfer is cancelled.
    void pauseResumeAndCancel() {
        ctx_->hub.download(kStallRepo, QStringLiteral("F32"));
        ctx_->hub.download(kDropRepo, QStringLiteral("F32"));
        const double total = double(QFileInfo(repo_dir(kStallRepo) + "/stories260K-F32.gguf").size());
        const double held = kStallBytes / total;
        QTRY_COMPARE_WITH_TIMEOUT(download_row(kStallRepo).value("progress").toDouble(), held, 30'000);
        QTRY_COMPARE_WITH_TIMEOUT(download_row(kDropRepo).value("progress").toDouble(), held, 30'000);
        const qint64 stalled = download_row(kStallRepo).value("id").toLongLong();
        const qint64 dropped = download_row(kDropRepo).value("id").toLongLong();
        ctx_->hub.pause(stalled);
        ctx_->hub.cancel(dropped);
        QTRY_COMPARE_WITH_TIMEOUT(download_row(kStallRepo).value("state").toString(), QStringLiteral("paused"), 30'000);
        QTRY_COMPARE_WITH_TIMEOUT(download_row(kDropRepo).value("state").toString(), QStringLiteral("cancelled"),
                                  30'000);
        QQuickItem* row = download_item(kStallRepo);
        QVERIFY(row);
        QCOMPARE(text_of(row, "downloadState"), QStringLiteral("Paused"));
        QCOMPARE(find_item(row, "downloadProgress")->property("value").toDouble(), held);
        QVERIFY2(text_of(row, "downloadDetail").startsWith(QStringLiteral("293.0 KiB of 1.1 MiB")),
                 qPrintable(text_of(row, "downloadDetail")));
        QVERIFY(find_item(row, "resumeButton")->isVisible());
        QCOMPARE(text_of(download_item(kDropRepo), "downloadState"), QStringLiteral("Cancelled"));
        QVERIFY(shoot(QStringLiteral("downloads.png")));

        QSignalSpy done(&ctx_->hub, &HubController::modelDownloaded);
        ctx_->hub.resume(stalled);
        QVERIFY(done.wait(60'000));
        QTRY_COMPARE(text_of(download_item(kStallRepo), "downloadState"), QStringLiteral("Verified ✓"));
        QCOMPARE(find_item(download_item(kStallRepo), "downloadProgress")->property("value").toDouble(), 1.0);
        // The resumed transfer asked for the rest only.
        QFile log(dir_.filePath(QStringLiteral("server.log")));
        QVERIFY(log.open(QIODevice::ReadOnly));
        QVERIFY(log.readAll().contains(QStringLiteral("bytes=%1-").arg(kStallBytes).toUtf8()));
    }

    // A gated repository: refused without a token and with HF_TOKEN's wrong one; the token
    // typed on the page (saved 0600, shown only as its hint) takes HF_TOKEN's place, lists the
    // files and downloads them; it goes to the hub's own host only, never to the storage host
    // the files are redirected to. A controller made later (the next start) reads it back.
    void gatedRepositoryUsesTheSavedToken() {
        page_->setProperty("tab", 0);
        QCOMPARE(ctx_->hub.tokenSource(), QString());
        QCOMPARE(text_of(page_, "hubTokenStatus"),
                 QStringLiteral("No access token: gated repositories will refuse downloads."));
        ctx_->hub.openRepo(kGatedRepo);
        QTRY_VERIFY_WITH_TIMEOUT(!ctx_->hub.listing(), 30'000);
        QVERIFY2(ctx_->hub.filesError().contains(QStringLiteral("needs an access token")),
                 qPrintable(ctx_->hub.filesError()));

        qputenv("HF_TOKEN", "hf_NotTheRightToken000000000000");
        QCOMPARE(ctx_->hub.tokenSource(), QStringLiteral("HF_TOKEN"));
        ctx_->hub.openRepo(kGatedRepo);
        QTRY_VERIFY_WITH_TIMEOUT(!ctx_->hub.listing(), 30'000);
        QVERIFY2(ctx_->hub.filesError().contains(QStringLiteral("HTTP 403")), qPrintable(ctx_->hub.filesError()));

        QSignalSpy checked(&ctx_->hub, &HubController::fitChecked);
        QQuickItem* field = find_item(page_, QStringLiteral("hubTokenField"));
        QVERIFY(field);
        field->setProperty("text", kToken);
        QVERIFY(QMetaObject::invokeMethod(find_item(page_, QStringLiteral("hubTokenSave")), "clicked"));
        QCOMPARE(ctx_->hub.tokenSource(), QStringLiteral("settings"));
        QCOMPARE(ctx_->hub.tokenHint(), QStringLiteral("hf_…wxyz"));
        QCOMPARE(field->property("text").toString(), QString());  // not kept in the field
        QCOMPARE(text_of(page_, "hubTokenStatus"),
                 QStringLiteral("Gated repositories use the token saved here (hf_…wxyz)."));
        struct stat st {};
        QCOMPARE(::stat(QFile::encodeName(token_file()).constData(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
        QFile f(token_file());
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), kToken.toUtf8() + "\n");

        QVERIFY(checked.wait(60'000));  // the repository listed again, with the token
        QCOMPARE(ctx_->hub.filesError(), QString());
        QCOMPARE(ctx_->hub.file_rows().count(), 1);
        QSignalSpy done(&ctx_->hub, &HubController::modelDownloaded);
        ctx_->hub.download(kGatedRepo, QStringLiteral("F32"));
        QVERIFY(done.wait(60'000));
        QCOMPARE(done.first().first().toString(), kGatedRepo + ":F32");
        const auto api = requests_to("/api/models/" + kGatedRepo);
        const auto resolve = requests_to('/' + kGatedRepo + "/resolve/");
        const auto storage = requests_to("/_storage/" + kGatedRepo);
        QVERIFY(!api.empty() && !resolve.empty() && !storage.empty());
        QCOMPARE(api.back().value("auth").toString(), "Bearer " + kToken);
        for (const QJsonObject& r : resolve) QCOMPARE(r.value("auth").toString(), "Bearer " + kToken);
        for (const QJsonObject& r : storage) {
            QVERIFY(r.value("host").toString().startsWith(QStringLiteral("localhost:")));
            QVERIFY(r.value("auth").isNull());
        }

        HubController next_start(ctx_->library.folder(), token_file());
        QCOMPARE(next_start.tokenSource(), QStringLiteral("settings"));
        QCOMPARE(next_start.tokenHint(), QStringLiteral("hf_…wxyz"));
        QVERIFY(!ctx_->hub.setToken(QStringLiteral("hf_two words")));  // refused, nothing changed
        QCOMPARE(ctx_->hub.tokenHint(), QStringLiteral("hf_…wxyz"));
        QVERIFY(ctx_->hub.setToken(QString()));
        QVERIFY(!QFile::exists(token_file()));
        QCOMPARE(ctx_->hub.tokenSource(), QStringLiteral("HF_TOKEN"));
        qunsetenv("HF_TOKEN");
    }

    // Quitting mid-download and starting again (a new controller over the same library
    // folder): the Downloads tab lists the unfinished pulls as paused with their bytes on
    // disk; one resumes from there (Range at the partial size) to a verified model, the other
    // is cancelled and its partial file deleted.
    void unfinishedPullsAreListedAfterARestart() {
        const QString folder = ctx_->library.folder();
        const double held = kStallBytes / double(QFileInfo(repo_dir(kResumeRepo) + "/stories260K-F32.gguf").size());
        {
            HubController first(folder, token_file());
            first.download(kResumeRepo, QStringLiteral("F32"));
            first.download(kDiscardRepo, QStringLiteral("F32"));
            for (const QString& r : {kResumeRepo, kDiscardRepo})
                QTRY_COMPARE_WITH_TIMEOUT(download_row(first, r).value("progress").toDouble(), held, 30'000);
        }  // the app quits: transfers stop, partial files stay
        const QString part = folder + '/' + kDiscardRepo + "/main/stories260K-F32.gguf.part";
        QCOMPARE(QFileInfo(part).size(), qint64(kStallBytes));

        HubController again(folder, token_file());
        for (const QString& r : {kResumeRepo, kDiscardRepo}) {
            QTRY_VERIFY_WITH_TIMEOUT(!download_row(again, r).isEmpty(), 10'000);
            const QVariantMap row = download_row(again, r);
            QCOMPARE(row.value("state").toString(), QStringLiteral("paused"));
            QCOMPARE(row.value("quant").toString(), QStringLiteral("F32"));
            QCOMPARE(row.value("progress").toDouble(), held);
            QVERIFY2(row.value("bytesText").toString().startsWith(QStringLiteral("293.0 KiB of 1.1 MiB")),
                     qPrintable(row.value("bytesText").toString()));
        }
        QSignalSpy done(&again, &HubController::modelDownloaded);
        again.resume(download_row(again, kResumeRepo).value("id").toLongLong());
        QVERIFY(done.wait(60'000));
        QCOMPARE(download_row(again, kResumeRepo).value("state").toString(), QStringLiteral("done"));
        bool ranged = false;
        for (const QJsonObject& r : requests_to("/_storage/" + kResumeRepo))
            ranged = ranged || r.value("range").toString() == QStringLiteral("bytes=%1-").arg(kStallBytes);
        QVERIFY(ranged);
        ctx_->library.refresh();
        QTRY_VERIFY(!library_row(kResumeRepo + ":F32").isEmpty());
        QCOMPARE(sha256_of(library_row(kResumeRepo + ":F32").value("path").toString()),
                 sha256_of(repo_dir(kResumeRepo) + "/stories260K-F32.gguf"));

        again.cancel(download_row(again, kDiscardRepo).value("id").toLongLong());
        QTRY_COMPARE(download_row(again, kDiscardRepo).value("state").toString(), QStringLiteral("cancelled"));
        QVERIFY(!QFile::exists(part));
        HubController third(folder, token_file());  // nothing left to list
        QTest::qWait(500);
        QVERIFY(download_row(third, kDiscardRepo).isEmpty());
        QVERIFY(download_row(third, kResumeRepo).isEmpty());
    }

    // A model published in two parts: one row ("in 2 parts") whose badge the planner gives
    // the joined parts, downloaded part by part into one library model that loads.
    void splitModelIsOneModel() {
        page_->setProperty("tab", 0);
        QSignalSpy checked(&ctx_->hub, &HubController::fitChecked);
        ctx_->hub.openRepo(kSplitRepo);
        QVERIFY(checked.wait(60'000));
        QCOMPARE(ctx_->hub.filesError(), QString());
        QCOMPARE(ctx_->hub.file_rows().count(), 1);
        const QVariantMap row = ctx_->hub.file_rows().get(0);
        QCOMPARE(row.value("parts").toInt(), 2);
        QCOMPARE(row.value("file").toString(), QStringLiteral("stories260K-Q8_0-00001-of-00002.gguf"));
        QCOMPARE(row.value("badge").toString() == QStringLiteral("checking"), false);
        QVERIFY2(ctx_->hub.fitSummary().startsWith(QStringLiteral("Q8_0: ")), qPrintable(ctx_->hub.fitSummary()));
        QQuickItem* item = find_item(page_, QStringLiteral("file_Q8_0"));
        QVERIFY(item);
        QCOMPARE(text_of(item, "reason"), ctx_->hub.fitSummary());

        QSignalSpy done(&ctx_->hub, &HubController::modelDownloaded);
        ctx_->hub.download(kSplitRepo, QStringLiteral("Q8_0"));
        QVERIFY(done.wait(60'000));
        QTRY_VERIFY(!library_row(kSplitRepo + ":Q8_0").isEmpty());
        const QVariantMap m = library_row(kSplitRepo + ":Q8_0");
        QVERIFY(m.value("path").toString().endsWith(QStringLiteral("-00001-of-00002.gguf")));
        ctx_->library.load(m.value("id").toLongLong());
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready(), 60'000);
        QCOMPARE(ctx_->models.path(), m.value("path").toString());
    }

    void importQuantizeLoadAndDelete() {
        page_->setProperty("tab", 2);
        const QString src = QString::fromStdString(ember::test::testdata(ember::test::kStories));
        QSignalSpy imported(&ctx_->library, &LibraryController::imported);
        ctx_->library.importFile(QUrl::fromLocalFile(src).toString());  // as the file dialog and a drop hand it
        QVERIFY(imported.wait(30'000));
        const QVariantMap m = library_row(imported.first().first().toString());
        QCOMPARE(m.value("source").toString(), QStringLiteral("imported"));
        QCOMPARE(m.value("path").toString(), QFileInfo(src).canonicalFilePath());  // in place, not copied

        QSignalSpy quantized(&ctx_->library, &LibraryController::quantized);
        ctx_->library.quantize(m.value("id").toLongLong(), QStringLiteral("Q4_0"));
        QVERIFY(ctx_->library.quantizing());
        QVERIFY(quantized.wait(60'000));
        QCOMPARE(ctx_->library.quantizeProgress(), 1.0);
        QCOMPARE(find_item(page_, "quantizeProgress")->property("value").toDouble(), 1.0);
        QVERIFY(text_of(page_, "quantizeText").endsWith(QStringLiteral("to Q4_0: done")));
        const QVariantMap q = library_row(quantized.first().first().toString());
        QVERIFY(q.value("path").toString().endsWith(QStringLiteral("/quantized/stories260K-Q4_0.gguf")));
        QVERIFY(QFile::exists(q.value("path").toString()));

        ctx_->library.load(q.value("id").toLongLong());
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready(), 60'000);
        QCOMPARE(ctx_->models.path(), q.value("path").toString());

        const QVariantMap d = library_row(kRepo + ":Q8_0");
        ctx_->library.remove(d.value("id").toLongLong());
        QTRY_VERIFY(library_row(kRepo + ":Q8_0").isEmpty());
        QVERIFY(!QFile::exists(d.value("path").toString()));
        QCOMPARE(ctx_->model_list.indexOfPath(d.value("path").toString()), -1);
    }

    void badImportSaysWhy() {
        const QString bad = dir_.filePath(QStringLiteral("not-a-model.gguf"));
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("this is not a GGUF file");
        f.close();
        window_->setProperty("modelsOpen", true);
        page_->setProperty("tab", 2);
        const int before = ctx_->library.rows().count();
        QSignalSpy failed(&ctx_->library, &LibraryController::errorOccurred);
        ctx_->library.importFile(bad);
        QVERIFY(failed.wait(30'000));
        QVERIFY2(failed.first().first().toString().contains(QStringLiteral("not-a-model.gguf")),
                 qPrintable(failed.first().first().toString()));
        QCOMPARE(text_of(page_, "libraryError"), failed.first().first().toString());
        QCOMPARE(ctx_->library.rows().count(), before);
    }

    // The token typed in the gated-repository test appears in the log as its hint only.
    void tokenNeverInTheLog() {
        shutdown_logging();  // flushes
        QFile f(log_.file);
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(log_.file));
        const QByteArray log = f.readAll();
        QVERIFY(log.contains("hub: access token saved (hf_…wxyz)"));
        QVERIFY(!log.contains(kToken.toUtf8()));
        QVERIFY(!log.contains("EmberTestToken"));
    }

    void cleanupTestCase() {
        engine_.reset();
        ctx_.reset();
        server_.kill();
        server_.waitForFinished();
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    TestModelsPage t;
    return QTest::qExec(&t, argc, argv);
}
#include "test_models_page.moc"
