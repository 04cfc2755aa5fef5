// The model manager page end to end: ember-app's own wiring (AppContext) and QML, offscreen,
// against the hub's test server (tests/engine/hub/hub_server.py, a real HTTP server on
// 127.0.0.1 started here) serving real GGUF files: stories260K and three quantizations of it
// made with engine/quant at start-up.
//
// What is asserted is what the window renders: the catalog, search results, every file's fit
// badge and plain-language reason (for the plan engine/fit makes of the same files and
// budget), a file already in the library (or on this computer) offered as Load and never
// pulled twice, the download rows' states and progress bars (a transfer held by the server
// mid-file, paused, resumed from Discover, and one cancelled), the library's load / delete /
// import / quantize (only useful targets, exact sizes, a real requantization of SmolLM2, the
// error cleared by the next job), the chat picker listing each file once, and every control
// on screen from 720x560 to 4K in both themes. Screenshots in <build>/screenshots/:
// models.png, downloads.png, quantize[-dark].png, quantize-requantize[-dark].png,
// models-720[-dark].png (Discover's files), models-720-{catalog,downloads,library,delete}
// [-dark].png, models-4k.png.
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
#include <functional>
#include <memory>

#include "app/core/model_list_model.h"
#include "app/desktop/app_context.h"
#include "app/logging/logging.h"
#include "app/models/catalog.h"
#include "app/models/fit_badge.h"
#include "engine/fit/context_choice.h"
#include "engine/fit/quant_choice.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_split.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/quant/quant_targets.h"
#include "engine/quant/quantizer.h"
#include "kernels/common/format.h"
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
        for (const char* type : {"Q8_0", "Q4_0", "Q5_0"}) {
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
        for (const QString& r : {kStallRepo, kDropRepo, kResumeRepo, kDiscardRepo}) {
            QVERIFY(QDir().mkpath(repo_dir(r)));
            QVERIFY(QFile::copy(src, repo_dir(r) + "/stories260K-F32.gguf"));
        }
        // The gated repository's file has bytes of its own: the page would offer Load for a
        // file whose bytes the library has under another name.
        QVERIFY(QDir().mkpath(repo_dir(kGatedRepo)));
        QVERIFY(QFile::rename(repo + "/stories260K-Q5_0.gguf", repo_dir(kGatedRepo) + "/stories260K-Q5_0.gguf"));
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
        // The app's notices (a snackbar) would hide the page's bottom edge.
        if (auto* notice = window_->property("snackbar").value<QObject*>()) {
            QMetaObject::invokeMethod(notice, "close");
            if (!QTest::qWaitFor([&] { return !notice->property("visible").toBool(); }, 5'000))
                qWarning("the snackbar is still shown");
        }
        QTest::qWait(200);  // let the layout settle (the assertions above do not depend on it)
        const QImage img = window_->grabWindow();
        const QString path = out_ + '/' + name;
        qInfo("saved %s (%dx%d)", qPrintable(path), img.width(), img.height());
        return !img.isNull() && img.save(path);
    }

    QVariantMap download_row(const QString& repo) { return download_row(ctx_->hub, repo); }
    static QVariantMap download_row(HubController& hub, const QString& repo) {  // the latest pull
        RowListModel& rows = hub.download_rows();
        for (int i = rows.count() - 1; i >= 0; --i)
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

    // Every control the page shows (buttons, text fields, combo boxes) and every one-line
    // label: on screen at the window's size, a button at its full width (squeezed below its
    // implicit width, it clips its text), and a label's text within its box. A control in a list
    // counts when its row is in the list's viewport (the others are a scroll away).
    void check_reachable(QQuickItem* root, const QString& where) {
        if (QTest::currentTestFailed()) return;  // one report is enough
        const QRectF win = QRectF(0, 0, window_->width(), window_->height()).adjusted(-0.5, -0.5, 0.5, 0.5);
        int controls = 0;
        // `view`: the viewport of the innermost list around the item (the window when none).
        std::function<void(QQuickItem*, QRectF, bool)> walk = [&](QQuickItem* item, QRectF view, bool in_list) {
            if (!item->isVisible() || item->opacity() == 0) return;
            const QRectF r = item->mapRectToScene(QRectF(0, 0, item->width(), item->height()));
            const bool shown = r.bottom() > view.top() && r.top() < view.bottom();
            if (!shown) return;  // scrolled away: reachable by scrolling
            // On screen: all of it, or in a list the part the viewport shows.
            const QRectF seen = in_list ? r.intersected(view) : r;
            const bool control = item->inherits("QQuickAbstractButton") || item->inherits("QQuickTextField") ||
                                 item->inherits("QQuickComboBox");
            if (control) {
                ++controls;
                const QString what = QStringLiteral("%1: %2 \"%3\" at %4,%5 %6x%7 (implicit width %8) in %9x%10")
                                         .arg(where, item->objectName(), item->property("text").toString())
                                         .arg(r.x())
                                         .arg(r.y())
                                         .arg(r.width())
                                         .arg(r.height())
                                         .arg(item->implicitWidth())
                                         .arg(window_->width())
                                         .arg(window_->height());
                QVERIFY2(r.left() >= win.left() && r.right() <= win.right(), qPrintable(what));
                QVERIFY2(win.contains(seen), qPrintable(what));
                QVERIFY2(r.width() >= 20, qPrintable(what));
                if (item->inherits("QQuickButton")) QVERIFY2(r.width() >= item->implicitWidth() - 1, qPrintable(what));
            }
            if (item->inherits("QQuickText") && item->property("elide").toInt() == 0 &&
                item->property("wrapMode").toInt() == 0 && !item->property("text").toString().isEmpty()) {
                const double content = item->property("contentWidth").toDouble();
                const QString what = QStringLiteral("%1: label \"%2\" %3 px wide in a %4 px box at x %5")
                                         .arg(where, item->property("text").toString())
                                         .arg(content)
                                         .arg(item->width())
                                         .arg(r.x());
                QVERIFY2(content <= item->width() + 1, qPrintable(what));
                QVERIFY2(r.left() >= win.left() && r.left() + content <= win.right(), qPrintable(what));
            }
            if (item->clip()) {  // a list's viewport (or a clipped box): on screen itself
                QVERIFY2(win.contains(seen), qPrintable(QStringLiteral("%1: %2 (%3,%4 %5x%6) beyond the window")
                                                            .arg(where, item->objectName())
                                                            .arg(r.x())
                                                            .arg(r.y())
                                                            .arg(r.width())
                                                            .arg(r.height())));
                view = view.intersected(r), in_list = true;
            }
            for (QQuickItem* c : item->childItems()) {
                walk(c, view, in_list);
                if (QTest::currentTestFailed()) return;
            }
        };
        walk(root, win, false);
        QVERIFY2(controls > 0, qPrintable(where + ": no controls found"));
        qInfo("%s: %d controls on screen", qPrintable(where), controls);
    }

    QQuickItem* item_in(QObject* popup, const QString& name) {
        for (const char* part : {"contentItem", "footer"})
            if (QQuickItem* hit = find_item(popup->property(part).value<QQuickItem*>(), name)) return hit;
        return nullptr;
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

    // Files are judged as the app would load them: the context setting (automatic: the model's
    // own length, shorter where that fits) and the chats kept, not a fixed 8,192 x 1.
    void filesAreJudgedAsTheAppLoads() {
        const ember::fit::ChoiceOptions automatic = load_choice_options(0, 4);
        QCOMPARE(automatic.fit.n_seqs, 4);
        QCOMPARE(automatic.fit.n_ctx, ember::fit::ContextOptions{}.max_ctx);
        QCOMPARE(automatic.min_ctx, int64_t(4096));
        const ember::fit::ChoiceOptions set = load_choice_options(2048, 1);
        QCOMPARE(set.fit.n_ctx, int64_t(2048));
        QCOMPARE(set.min_ctx, int64_t(2048));  // loaded as set: never judged shorter
        QCOMPARE(set.fit.n_seqs, 1);
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
        // Judged as the app loads: its context setting and chats kept.
        const ember::fit::ChoiceOptions options =
            load_choice_options(ctx_->settings.contextLength(), ctx_->settings.cachedChats());
        const ember::fit::QuantChoice want =
            ember::fit::choose_from_listing(listed, local, resolve_budget(kVram, kRam), options);
        QVERIFY(want.chosen.has_value());
        // The page's words are plain (what happens), the planner's decision the same.
        const QString summary = plain_choice(want, options);
        QVERIFY2(summary.startsWith(QString::fromStdString(want.ranked[*want.chosen].quant) + " "),
                 qPrintable(summary));
        QCOMPARE(ctx_->hub.fitSummary(), summary);
        QCOMPARE(text_of(page_, "fitSummary"), "Recommended: " + summary);

        for (size_t i = 0; i < want.ranked.size(); ++i) {
            const ember::fit::RankedFile& f = want.ranked[i];
            QVERIFY2(f.plan.has_value(), f.note.c_str());
            QQuickItem* row = find_item(page_, "file_" + QString::fromStdString(f.quant));
            QVERIFY2(row, f.quant.c_str());
            const bool best = want.chosen == i;
            const ember::fit::FitPlan& plan = best ? *want.plan : *f.plan;
            QCOMPARE(text_of(row, "badge"), badge_label(plan.placement));
            const QString reason = text_of(row, "reason");
            QCOMPARE(reason, plain_reason(plan));
            // What happens, with the numbers: no rule, no planner jargon.
            const char* opening = plan.placement == ember::fit::Placement::Gpu     ? "Runs fully on your GPU: "
                                  : plan.placement == ember::fit::Placement::Split ? "Runs partly on your GPU ("
                                  : plan.placement == ember::fit::Placement::Cpu   ? "Too big for your GPU; fits in RAM"
                                                                                   : "Too large for this machine";
            QVERIFY2(reason.startsWith(QLatin1String(opening)), qPrintable(reason));
            QVERIFY2(reason.contains(QStringLiteral("MiB")) || reason.contains(QStringLiteral("KiB")),
                     qPrintable(reason));
            QVERIFY2(reason.contains(QStringLiteral("for chats up to %1 tokens").arg(plan.n_ctx)), qPrintable(reason));
            for (const char* jargon : {"or better", "layers on the GPU with", "offload"})
                QVERIFY2(!reason.contains(QLatin1String(jargon)) && !summary.contains(QLatin1String(jargon)),
                         qPrintable(reason + " / " + summary));
            QCOMPARE(find_item(row, "bestLabel")->isVisible(), best);
            qInfo("%s: [%s] %s", f.quant.c_str(), qPrintable(text_of(row, "badge")),
                  qPrintable(text_of(row, "reason")));
        }
        QVERIFY(text_of(page_, "budgetLabel").contains(QStringLiteral("552.0 MiB VRAM (set)")));
        QVERIFY(shoot(QStringLiteral("models.png")));
    }

    // The words for each placement, with the numbers (the served files cover two of them).
    void plainFitWordsForEveryPlacement() {
        ember::fit::FitPlan p;
        p.n_ctx = 8192, p.n_layers = 32, p.gpu_layers = 20;
        p.budget = {8ull << 30, 16ull << 30, true};
        p.gpu.weights = 6ull << 30, p.cpu.mapped_weights = 3ull << 30;
        p.placement = ember::fit::Placement::Gpu;
        QCOMPARE(plain_reason(p), QStringLiteral("Runs fully on your GPU: 6.0 GiB of 8.0 GiB free VRAM, for chats up "
                                                 "to 8192 tokens."));
        p.placement = ember::fit::Placement::Split;
        QCOMPARE(plain_reason(p),
                 QStringLiteral("Runs partly on your GPU (20 of 32 layers), the rest on the CPU: slower. Needs 6.0 GiB "
                                "of 8.0 GiB free VRAM and 3.0 GiB of 16.0 GiB RAM, for chats up to 8192 tokens."));
        p.placement = ember::fit::Placement::Cpu;
        QCOMPARE(plain_reason(p), QStringLiteral("Too big for your GPU; fits in RAM and runs on the CPU: slower. Needs "
                                                 "3.0 GiB of 16.0 GiB RAM, for chats up to 8192 tokens."));
        p.placement = ember::fit::Placement::TooLarge;
        QCOMPARE(plain_reason(p), QStringLiteral("Too large for this machine: it needs 3.0 GiB of memory for chats up "
                                                 "to 8192 tokens, and you have 8.0 GiB free VRAM and 16.0 GiB RAM."));
        p.budget.vram = 0, p.budget.vram_measured = false;
        p.placement = ember::fit::Placement::Cpu;
        QCOMPARE(plain_reason(p), QStringLiteral("No GPU: runs on the CPU, slower than a GPU. Needs 3.0 GiB of 16.0 "
                                                 "GiB RAM, for chats up to 8192 tokens."));
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

    // A model in the library shows as such in Discover (Load, not Download), and asking for
    // it again, or twice in a row for a new one, never adds a second row anywhere.
    void discoverShowsWhatIsInTheLibrary() {
        page_->setProperty("tab", 0);
        // The F32 file's bytes in a folder the chat's picker scans (as the built-in model is).
        const QString copy = ctx_->model_list.folders().last() + "/a-copy.gguf";
        QVERIFY(QFile::copy(repo_dir(kRepo) + "/stories260K-F32.gguf", copy));
        QSignalSpy checked(&ctx_->hub, &HubController::fitChecked);
        ctx_->hub.openRepo(kRepo);
        QVERIFY(checked.wait(60'000));
        QQuickItem* elsewhere = find_item(page_, QStringLiteral("file_F32"));
        QCOMPARE(text_of(elsewhere, "downloadButton"), QStringLiteral("Load"));
        QCOMPARE(text_of(elsewhere, "inLibraryLabel"), QStringLiteral("✓ On this computer"));
        QCOMPARE(ctx_->hub.file_rows().find(QStringLiteral("F32")).value("copyPath").toString(),
                 QFileInfo(copy).absoluteFilePath());
        const qint64 q8 = library_row(kRepo + ":Q8_0").value("id").toLongLong();
        QVERIFY(q8 > 0);
        QQuickItem* have = find_item(page_, QStringLiteral("file_Q8_0"));
        QVERIFY(have);
        QTRY_COMPARE(text_of(have, "downloadButton"), QStringLiteral("Load"));
        QVERIFY(find_item(have, "inLibraryLabel")->isVisible());
        QCOMPARE(ctx_->hub.file_rows().find(QStringLiteral("Q8_0")).value("libraryId").toLongLong(), q8);
        QCOMPARE(text_of(find_item(page_, QStringLiteral("file_Q4_0")), "downloadButton"), QStringLiteral("Download"));
        QVERIFY(!find_item(find_item(page_, QStringLiteral("file_Q4_0")), "inLibraryLabel")->isVisible());

        const int downloads = ctx_->hub.download_rows().count(), models = ctx_->library.rows().count();
        ctx_->hub.download(kRepo, QStringLiteral("Q8_0"));  // what a stale Download button would do
        ctx_->hub.download(kRepo, QStringLiteral("F32"));
        QTest::qWait(500);
        QCOMPARE(ctx_->hub.download_rows().count(), downloads);
        QVERIFY(QFile::remove(copy));

        QSignalSpy done(&ctx_->hub, &HubController::modelDownloaded);
        ctx_->hub.download(kRepo, QStringLiteral("Q4_0"));
        ctx_->hub.download(kRepo, QStringLiteral("Q4_0"));  // a double click
        QTRY_COMPARE(text_of(find_item(page_, QStringLiteral("file_Q4_0")), "downloadButton"),
                     QStringLiteral("Downloading…"));
        QVERIFY(done.wait(60'000));
        QTRY_COMPARE(text_of(find_item(page_, QStringLiteral("file_Q4_0")), "downloadButton"), QStringLiteral("Load"));
        ctx_->hub.download(kRepo, QStringLiteral("Q4_0"));
        QTest::qWait(500);
        QCOMPARE(ctx_->hub.download_rows().count(), downloads + 1);
        QCOMPARE(ctx_->library.rows().count(), models + 1);
        QCOMPARE(done.count(), 1);
    }

    // A transfer the server holds mid-file: its bar shows the bytes so far; pause keeps them,
    // resume finishes from there. Another held transfer is cancelled.
    void pauseResumeAndCancel() {
        page_->setProperty("tab", 1);
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

        // Discover offers Resume for the paused pull, and resumes that row: no second one.
        page_->setProperty("tab", 0);
        QSignalSpy checked(&ctx_->hub, &HubController::fitChecked);
        ctx_->hub.openRepo(kStallRepo);
        QVERIFY(checked.wait(60'000));
        QQuickItem* resume = find_item(find_item(page_, QStringLiteral("file_F32")), QStringLiteral("downloadButton"));
        QVERIFY(resume);
        QCOMPARE(resume->property("text").toString(), QStringLiteral("Resume"));
        const int rows = ctx_->hub.download_rows().count();
        QSignalSpy done(&ctx_->hub, &HubController::modelDownloaded);
        QVERIFY(QMetaObject::invokeMethod(resume, "clicked"));
        QVERIFY(done.wait(60'000));
        QCOMPARE(ctx_->hub.download_rows().count(), rows);
        QCOMPARE(download_row(kStallRepo).value("id").toLongLong(), stalled);
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
        ctx_->hub.download(kGatedRepo, QStringLiteral("Q5_0"));
        QVERIFY(done.wait(60'000));
        QCOMPARE(done.first().first().toString(), kGatedRepo + ":Q5_0");
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
        QVERIFY2(ctx_->hub.fitSummary().startsWith(QStringLiteral("Q8_0 ")), qPrintable(ctx_->hub.fitSummary()));
        QQuickItem* item = find_item(page_, QStringLiteral("file_Q8_0"));
        QVERIFY(item);
        QVERIFY(find_item(item, QStringLiteral("bestLabel"))->isVisible());

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
        QCOMPARE(text_of(page_, "quantizeText"), QStringLiteral("Making a Q4_0 copy of stories260K: done"));
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

    // A model loaded from the chat while the Library tab is hidden: once shown, its row says
    // "loaded" beside the name, not drawn over it (a Qt 6.4 layout kept a child made visible
    // while hidden at x = 0).
    void loadedMarkBesideTheNameAfterLoadingElsewhere() {
        page_->setProperty("tab", 0);
        QVariantMap row;  // the first model on disk
        for (int i = 0; i < ctx_->library.rows().count() && row.isEmpty(); ++i)
            if (ctx_->library.rows().get(i).value("present").toBool()) row = ctx_->library.rows().get(i);
        QVERIFY(!row.isEmpty());
        ctx_->models.unload();
        QTRY_VERIFY(!ctx_->models.ready());
        ctx_->models.load(row.value("path").toString());  // as the chat's picker loads
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready(), 60'000);
        page_->setProperty("tab", 2);
        QQuickItem* item = nullptr;
        QTRY_VERIFY((item = find_item(page_, "library_" + row.value("id").toString())) != nullptr);
        QQuickItem* name = find_item(item, QStringLiteral("libraryName"));
        QQuickItem* state = find_item(item, QStringLiteral("libraryState"));
        QVERIFY(name && state);
        QTRY_COMPARE(state->property("text").toString(), QStringLiteral("loaded"));
        QTRY_VERIFY(state->mapToItem(item, QPointF(0, 0)).x() >= name->mapToItem(item, QPointF(name->width(), 0)).x());
        QVERIFY(state->mapToItem(item, QPointF(state->width(), 0)).x() <= item->width());
    }

    // The dialog for an F32 model: every smaller type, never F32, each with the size the
    // quantizer will write and its quality in words; Q4_K_M chosen. quantize.png.
    void quantizeOffersOnlyUsefulTargets() {
        window_->resize(720, 560);
        window_->setProperty("modelsOpen", true);
        page_->setProperty("tab", 2);
        const QVariantMap f32 = library_row(QStringLiteral("stories260K"));
        QVERIFY(!f32.isEmpty());
        QQuickItem* row = nullptr;
        QTRY_VERIFY((row = find_item(page_, "library_" + f32.value("id").toString())) != nullptr);
        QVERIFY(QMetaObject::invokeMethod(find_item(row, "quantizeButton"), "clicked"));
        QObject* dialog = window_->findChild<QObject*>(QStringLiteral("quantizeDialog"));
        QVERIFY(dialog);
        QTRY_VERIFY(dialog->property("opened").toBool());
        QTRY_VERIFY(ctx_->library.quantizeOffer().value("ready").toBool());

        const ember::QuantOffer want =
            ember::quant_offer(ember::GgufFile::open(f32.value("path").toString().toStdString()));
        QVERIFY(want.targets.size() >= 10);
        QCOMPARE(dialog->property("chosen").toString(), QStringLiteral("Q4_K_M"));
        QVERIFY(!item_in(dialog, QStringLiteral("target_F32")));
        QQuickItem* list = item_in(dialog, QStringLiteral("quantizeTargets"));
        QVERIFY(list);
        QCOMPARE(list->property("count").toInt(), int(want.targets.size()));
        // The chosen (recommended) type is scrolled into view.
        QQuickItem* chosen = nullptr;
        QTRY_VERIFY((chosen = item_in(dialog, QStringLiteral("target_Q4_K_M"))) != nullptr);
        const QRectF shown = list->mapRectToScene(QRectF(0, 0, list->width(), list->height()));
        const QRectF at = chosen->mapRectToScene(QRectF(0, 0, chosen->width(), chosen->height()));
        QTRY_VERIFY2(shown.contains(chosen->mapRectToScene(QRectF(0, 0, chosen->width(), chosen->height()))),
                     qPrintable(QStringLiteral("Q4_K_M at y %1-%2, list %3-%4")
                                    .arg(at.top())
                                    .arg(at.bottom())
                                    .arg(shown.top())
                                    .arg(shown.bottom())));
        const QString note = item_in(dialog, QStringLiteral("quantizeNote"))->property("text").toString();
        QVERIFY2(note.startsWith(QStringLiteral("The original has F32 weights.")), qPrintable(note));
        QQuickItem* popup = dialog->property("contentItem").value<QQuickItem*>()->parentItem();
        check_reachable(popup, QStringLiteral("quantize dialog"));
        QVERIFY(shoot(QStringLiteral("quantize.png")));
        ctx_->settings.setTheme(QStringLiteral("dark"));
        QVERIFY(shoot(QStringLiteral("quantize-dark.png")));
        ctx_->settings.setTheme(QStringLiteral("light"));
        for (const ember::QuantTarget& t : want.targets) {
            const QString type = QString::fromStdString(t.scheme);
            QVERIFY2(t.scheme != "F32", "F32 offered for an F32 model");
            // Rows below the fold are created when scrolled to.
            QVERIFY(QMetaObject::invokeMethod(list, "positionViewAtIndex", Q_ARG(int, int(&t - want.targets.data())),
                                              Q_ARG(int, 0)));
            QQuickItem* item = nullptr;
            QTRY_VERIFY((item = item_in(dialog, "target_" + type)) != nullptr);
            QCOMPARE(text_of(item, "targetSize"), "about " + QString::fromStdString(ember::format_bytes(t.bytes)));
            QVERIFY2(text_of(item, "targetQuality").size() > 10, qPrintable(text_of(item, "targetQuality")));
        }
        QVERIFY(QMetaObject::invokeMethod(dialog, "close"));
        QTRY_VERIFY(!dialog->property("visible").toBool());
    }

    // A quantized model (SmolLM2, Q4_1): only smaller files, with a note that quality is capped
    // by the source; a refused type gives a plain red error, which the next job clears; the
    // requantization runs from the dialog (allow_requantize) into a model that loads.
    void requantizeFromTheDialogClearsTheError() {
        const QString smol = QString::fromStdString(ember::test::test_model(ember::test::kSmolLM2));
        EMBER_REQUIRE_FILE(smol.toStdString());
        window_->setProperty("modelsOpen", true);
        page_->setProperty("tab", 2);
        QSignalSpy imported(&ctx_->library, &LibraryController::imported);
        ctx_->library.importFile(smol);
        QVERIFY(imported.wait(60'000));
        const QVariantMap m = library_row(imported.first().first().toString());
        const qint64 id = m.value("id").toLongLong();

        QSignalSpy failed(&ctx_->library, &LibraryController::errorOccurred);
        ctx_->library.quantize(id, QStringLiteral("Q8_0"));  // larger: never offered, refused if asked
        QVERIFY(failed.wait(30'000));
        QQuickItem* error = find_item(page_, QStringLiteral("libraryError"));
        QTRY_VERIFY(error->isVisible());
        QCOMPARE(error->property("text").toString(),
                 QStringLiteral("Could not quantize: A Q8_0 file would be no smaller or better than this Q4_1 "
                                "model, so it was not made."));

        QObject* dialog = window_->findChild<QObject*>(QStringLiteral("quantizeDialog"));
        QQuickItem* row = nullptr;
        QTRY_VERIFY((row = find_item(page_, "library_" + QString::number(id))) != nullptr);
        QVERIFY(QMetaObject::invokeMethod(find_item(row, "quantizeButton"), "clicked"));
        QTRY_VERIFY(dialog->property("opened").toBool());
        QTRY_VERIFY(ctx_->library.quantizeOffer().value("ready").toBool());
        const QVariantMap offer = ctx_->library.quantizeOffer();
        QCOMPARE(offer.value("source").toString(), QStringLiteral("Q4_1"));
        QVERIFY(offer.value("requantize").toBool());
        const QString note = item_in(dialog, QStringLiteral("quantizeNote"))->property("text").toString();
        QVERIFY2(note.contains(QStringLiteral("already quantized (Q4_1)")) &&
                     note.contains(QStringLiteral("at most that of Q4_1")),
                 qPrintable(note));
        QStringList types;
        for (const QVariant& t : offer.value("targets").toList()) types << t.toMap().value("type").toString();
        QVERIFY2(types.contains(QStringLiteral("Q4_0")), qPrintable(types.join(',')));
        for (const char* up : {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_0", "Q4_1"}) {
            QVERIFY2(!types.contains(up), qPrintable(types.join(',')));
            QVERIFY(!item_in(dialog, QStringLiteral("target_") + up));
        }
        QCOMPARE(dialog->property("chosen").toString(), types.first());
        ctx_->settings.setTheme(QStringLiteral("dark"));
        QVERIFY(shoot(QStringLiteral("quantize-requantize-dark.png")));
        ctx_->settings.setTheme(QStringLiteral("light"));
        QVERIFY(shoot(QStringLiteral("quantize-requantize.png")));

        QSignalSpy quantized(&ctx_->library, &LibraryController::quantized);
        QVERIFY(QMetaObject::invokeMethod(item_in(dialog, "target_Q4_0"), "clicked"));
        QCOMPARE(dialog->property("chosen").toString(), QStringLiteral("Q4_0"));
        QVERIFY(QMetaObject::invokeMethod(item_in(dialog, "quantizeStart"), "clicked"));
        QTRY_VERIFY(!dialog->property("visible").toBool());
        QVERIFY(ctx_->library.quantizing());
        QVERIFY(!error->isVisible());  // cleared when the job started
        QVERIFY(quantized.wait(120'000));
        QCOMPARE(ctx_->library.error(), QString());
        QVERIFY(!error->isVisible());
        const QVariantMap q = library_row(quantized.first().first().toString());
        QVERIFY2(q.value("path").toString().endsWith(QStringLiteral("/quantized/SmolLM2-135M-Instruct.Q4_1-Q4_0.gguf")),
                 qPrintable(q.value("path").toString()));
        QVERIFY(QFileInfo(q.value("path").toString()).size() < QFileInfo(smol).size());
        ctx_->library.load(q.value("id").toLongLong());
        QTRY_VERIFY_WITH_TIMEOUT(ctx_->models.ready() && ctx_->models.path() == q.value("path").toString(), 60'000);
    }

    // The same bytes under several names (two downloads and an import of stories260K F32,
    // and a copy in a folder the picker scans): the chat's model picker lists the file once.
    void pickerListsEachFileOnce() {
        const QString src = QString::fromStdString(ember::test::testdata(ember::test::kStories));
        const qint64 size = QFileInfo(src).size();
        int copies = 0;
        for (const QVariantMap& r : ctx_->library.rows().rows()) copies += r.value("size").toLongLong() == size;
        QVERIFY2(copies >= 3, qPrintable(QString::number(copies)));  // kStallRepo, kResumeRepo, the import
        const QString scanned = ctx_->model_list.folders().last() + "/stories-copy.gguf";
        QVERIFY(QFile::copy(src, scanned));
        ctx_->library.refresh();
        QSignalSpy changed(&ctx_->library, &LibraryController::changed);
        QVERIFY(changed.wait(30'000));
        QStringList listed;
        for (int i = 0; i < ctx_->model_list.count(); ++i) {
            const QString path = ctx_->model_list.get(i).value("path").toString();
            if (QFileInfo(path).size() == size) listed << path;
        }
        QCOMPARE(listed, QStringList{QFileInfo(scanned).absoluteFilePath()});
        QVERIFY(QFile::remove(scanned));
        ctx_->library.refresh();
        QVERIFY(changed.wait(30'000));
        int now = 0;
        for (int i = 0; i < ctx_->model_list.count(); ++i)
            now += QFileInfo(ctx_->model_list.get(i).value("path").toString()).size() == size;
        QCOMPARE(now, 1);  // one of the library's copies takes its place

        // One folder reached twice, once through a symlink: its file is listed once.
        QTemporaryDir real;
        QVERIFY(QFile::copy(src, real.filePath(QStringLiteral("one.gguf"))));
        const QString link = dir_.filePath(QStringLiteral("linked-models"));
        QVERIFY(QFile::link(real.path(), link));
        ModelListModel twice({real.path(), link});
        int ones = 0;
        for (int i = 0; i < twice.count(); ++i) ones += twice.get(i).value("name").toString() == QStringLiteral("one");
        QCOMPARE(ones, 1);
        QVERIFY(twice.indexOfPath(link + "/one.gguf") >= 0);
    }

    // 720x560 (the window's minimum width), both themes: every tab's controls on screen and
    // unclipped (models-720*.png); then 800x600, 1180x760 and 3840x2160 (models-4k.png).
    void everyControlReachableAt720() {
        window_->resize(720, 560);
        window_->setProperty("modelsOpen", true);
        QTRY_COMPARE(window_->width(), 720);
        QSignalSpy checked(&ctx_->hub, &HubController::fitChecked);
        ctx_->hub.openRepo(kRepo);
        QVERIFY(checked.wait(60'000));
        QQuickItem* discover = page_->property("discover").value<QQuickItem*>();
        // A paused pull, so that the Downloads tab has its Resume and Cancel buttons.
        ctx_->hub.download(kDropRepo, QStringLiteral("F32"));
        QTRY_VERIFY_WITH_TIMEOUT(download_row(kDropRepo).value("state").toString() == QStringLiteral("downloading") &&
                                     download_row(kDropRepo).value("progress").toDouble() > 0,
                                 30'000);
        const qint64 held = download_row(kDropRepo).value("id").toLongLong();
        ctx_->hub.pause(held);
        QTRY_COMPARE_WITH_TIMEOUT(download_row(kDropRepo).value("state").toString(), QStringLiteral("paused"), 30'000);
        for (const QString theme : {"light", "dark"}) {
            ctx_->settings.setTheme(theme);
            const QString suffix = theme == "dark" ? QStringLiteral("-dark") : QString();
            page_->setProperty("tab", 0);
            discover->setProperty("dismissedRepo", QString());
            QTRY_VERIFY(find_item(page_, QStringLiteral("fileColumn"))->isVisible());
            QTest::qWait(200);
            check_reachable(page_, theme + " discover files");
            QVERIFY(shoot("models-720" + suffix + ".png"));
            QVERIFY(QMetaObject::invokeMethod(find_item(page_, QStringLiteral("allModelsButton")), "clicked"));
            QTRY_VERIFY(find_item(page_, QStringLiteral("repoColumn"))->isVisible());
            QTest::qWait(200);
            check_reachable(page_, theme + " discover list");
            QVERIFY(shoot("models-720-catalog" + suffix + ".png"));
            page_->setProperty("tab", 1);
            QVERIFY(QMetaObject::invokeMethod(find_item(page_, QStringLiteral("downloadList")), "positionViewAtEnd"));
            QTest::qWait(200);
            QVERIFY(find_item(download_item(kDropRepo), QStringLiteral("resumeButton"))->isVisible());
            check_reachable(page_, theme + " downloads");
            QVERIFY(shoot("models-720-downloads" + suffix + ".png"));
            page_->setProperty("tab", 2);
            QTest::qWait(200);
            check_reachable(page_, theme + " library");
            QVERIFY(shoot("models-720-library" + suffix + ".png"));
            // Delete asks first, in a dialog that fits too.
            const QString first = "library_" + ctx_->library.rows().get(0).value("id").toString();
            QQuickItem* row = find_item(page_, first);
            QVERIFY(row);
            QVERIFY(QMetaObject::invokeMethod(find_item(row, QStringLiteral("deleteButton")), "clicked"));
            QObject* confirm = row->findChild<QObject*>(QStringLiteral("deleteDialog"));
            QVERIFY(confirm);
            QTRY_VERIFY(confirm->property("opened").toBool());
            check_reachable(confirm->property("contentItem").value<QQuickItem*>()->parentItem(), theme + " delete");
            QVERIFY(shoot("models-720-delete" + suffix + ".png"));
            QVERIFY(QMetaObject::invokeMethod(confirm, "reject"));
            QTRY_VERIFY(!confirm->property("visible").toBool());
        }
        ctx_->settings.setTheme(QStringLiteral("light"));
        // The other sizes the issue names, the default, and 4K: every tab, every control.
        for (const QSize size : {QSize(800, 600), QSize(1180, 760), QSize(3840, 2160)}) {
            window_->resize(size);
            QTRY_COMPARE(window_->size(), size);
            const QString where = QStringLiteral("%1x%2").arg(size.width()).arg(size.height());
            for (int tab : {0, 1, 2}) {
                page_->setProperty("tab", tab);
                discover->setProperty("dismissedRepo", QString());
                QTest::qWait(200);
                check_reachable(page_, where + " tab " + QString::number(tab));
            }
        }
        QVERIFY(shoot(QStringLiteral("models-4k.png")));
        window_->resize(1180, 760);
        ctx_->hub.cancel(held);
        QTRY_COMPARE_WITH_TIMEOUT(download_row(kDropRepo).value("state").toString(), QStringLiteral("cancelled"),
                                  30'000);
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
