// The monitor window of the real app (AppContext + Main.qml, offscreen) while SmolLM2
// generates: it polls only while it is on screen, its charts, badge, memory bars,
// percentiles and process line show live numbers (asserted from the rendered items, and
// grabbed into <build>/screenshots/monitor.png), GPU sensors come from NVML or say why not
// (monitor-gpu.png with the test-only NVML stand-in library, since these machines have no
// GPU: the model itself still runs on the CPU, and the badge says so), its open state and
// geometry survive a restart, and the stats line under an answer names the prompt, the
// reused tokens and why the answer stopped. Issue #33: every part follows the theme (measured
// on the grab: monitor-dark/light.png, cost-dark/light.png), both tabs fit the window's
// minimum size (cost-min.png, monitor-min.png), and where the model runs is said in plain
// words with the loader's own behind a Details button (monitor-details.png).
//
// `test_monitor --bench [tokens] [rounds] [json]` is a benchmark instead: the same answer
// generated with the monitor hidden, then shown, alternating; it prints a table and writes
// JSON (docs/BENCHMARKS.md).
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QRegularExpression>
#include <QSet>
#include <QSignalSpy>
#include <QXYSeries>
#include <QtTest>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "app/core/device_words.h"
#include "app/desktop/app_context.h"
#include "test_paths.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

namespace {

const QString kStory = QStringLiteral("Write a long story about a lighthouse keeper and a storm.");

// The NVML stand-in's answers: one H200 with power, temperature, load and memory.
const char* kStandInScript =
    "count=1\nname=NVIDIA H200 (stand-in)\nutil=87\nmem_util=64\nmem_total=150754820096\nmem_used=20000000000\n"
    "power_mw=412345\ntemp_c=61\nsm_mhz=1980\nmem_mhz=2619\nenergy_mj=123456789\n";

// The app as ember-app builds it, on a throw-away data folder, with its QML loaded.
struct App {
    std::unique_ptr<AppContext> ctx;
    std::unique_ptr<QQmlApplicationEngine> engine;
    QQuickWindow* main = nullptr;
    QQuickWindow* monitor = nullptr;

    bool start(const QString& dir) {
        qputenv("EMBER_DATA_DIR", dir.toUtf8());
        ctx = std::make_unique<AppContext>(dir);
        ctx->settings.setContextLength(2048);
        ctx->settings.setThreads(1);  // two shared cores: one engine thread keeps the GUI responsive
        ctx->register_qml();
        return load_qml();
    }
    bool load_qml() {
        engine = std::make_unique<QQmlApplicationEngine>();
        engine->load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        if (engine->rootObjects().size() != 1) return false;
        main = qobject_cast<QQuickWindow*>(engine->rootObjects().first());
        monitor = main ? main->property("monitorWindow").value<QQuickWindow*>() : nullptr;
        return main && monitor && QTest::qWaitForWindowExposed(main);
    }
    bool load_model() {
        ctx->models.load(QString::fromStdString(ember::test::test_model(ember::test::kSmolLM2)));
        QElapsedTimer t;
        t.start();
        while (!ctx->models.ready() && ctx->models.state() != ModelController::Failed && t.elapsed() < 120'000)
            QTest::qWait(20);
        return ctx->models.ready();
    }
    void sampling(int max_tokens) {
        QVariantMap s = ctx->chat.sampling();
        s["temperature"] = 0.8;
        s["seed"] = 7;
        s["max_tokens"] = max_tokens;
        ctx->chat.setSampling(s);
    }
    // Rendered items by objectName, walking the visual tree (Repeater-made items included).
    static void collect(QQuickItem* item, const QString& name, QList<QQuickItem*>& out) {
        if (!item) return;
        if (item->objectName() == name) out << item;
        for (QQuickItem* c : item->childItems()) collect(c, name, out);
    }
    QStringList texts(const char* name) const {
        QList<QQuickItem*> found;
        collect(monitor->contentItem(), QLatin1String(name), found);
        QStringList out;
        for (QQuickItem* i : found) out << i->property("text").toString();
        return out;
    }
    QString text(const char* name) const {
        const QStringList t = texts(name);
        return t.isEmpty() ? QStringLiteral("<no %1>").arg(QLatin1String(name)) : t.first();
    }
    QXYSeries* series(const char* name) const {
        auto* page = monitor->property("livePage").value<QObject*>();
        return page ? qobject_cast<QXYSeries*>(page->property(name).value<QObject*>()) : nullptr;
    }
};

// Distinct colours of a grab (a blank one has one or two), sampled every third pixel.
int colours_of(const QImage& img) {
    QSet<QRgb> c;
    for (int y = 0; y < img.height(); y += 3)
        for (int x = 0; x < img.width(); x += 3) c.insert(img.pixel(x, y));
    return static_cast<int>(c.size());
}

// How a region of a grab is drawn: its mean luminance (0 black to 1 white), and how many of
// its pixels (every second one sampled) stand out from its median by more than 0.25, lighter
// (text on a dark ground) and darker (text on a light one).
struct Tone {
    double mean = 0;
    int lighter = 0, darker = 0;
};

Tone tone_of(const QImage& img, const QRect& region) {
    const QRect r = region & img.rect();
    std::vector<double> l;
    for (int y = r.top(); y <= r.bottom(); y += 2)
        for (int x = r.left(); x <= r.right(); x += 2) {
            const QColor c = img.pixelColor(x, y);
            l.push_back(0.2126 * c.redF() + 0.7152 * c.greenF() + 0.0722 * c.blueF());
        }
    if (l.empty()) return {};
    Tone t;
    for (double v : l) t.mean += v / static_cast<double>(l.size());
    std::vector<double> sorted = l;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
    const double median = sorted[sorted.size() / 2];
    for (double v : l) {
        t.lighter += v > median + 0.25;
        t.darker += v < median - 0.25;
    }
    return t;
}

QString describe(const Tone& t) {
    return QStringLiteral("mean %1, %2 lighter and %3 darker pixels").arg(t.mean).arg(t.lighter).arg(t.darker);
}

}  // namespace

class TestMonitor : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    App app_;
    QString standin_script_;
    const QString out_ = QStringLiteral(EMBER_BINARY_DIR "/screenshots");

    bool shoot(const QString& name) {
        const QImage img = app_.monitor->grabWindow();
        if (img.isNull() || !img.save(out_ + '/' + name)) return false;
        qInfo("saved %s (%dx%d, %d colours)", qPrintable(out_ + '/' + name), img.width(), img.height(),
              colours_of(img));
        return img.size() == app_.monitor->size() * app_.monitor->devicePixelRatio() && colours_of(img) > 40;
    }

    // Starts an answer and waits until the charts have several points of it being decoded.
    void generate_until_charted(int max_tokens) {
        const auto tel = [this] { return app_.ctx->host.worker()->telemetrySnapshot(); };
        const uint64_t before = tel().requests;
        const int polls = app_.ctx->monitor.polls();
        app_.sampling(max_tokens);
        QVERIFY(app_.ctx->chat.send(kStory));
        QXYSeries* speed = app_.series("decodeSeries");
        QXYSeries* latency = app_.series("latencySeries");
        QVERIFY(speed && latency);
        // This answer (not the last one) is decoding, and the panel has polled it twice since.
        QTRY_VERIFY_WITH_TIMEOUT(
            tel().requests > before && tel().current.running && tel().current.generated_tokens >= 6, 120'000);
        const int decoding = app_.ctx->monitor.polls();
        QTRY_VERIFY(app_.ctx->monitor.polls() >= decoding + 2);
        QVERIFY(app_.ctx->monitor.polls() > polls);
        QVERIFY(app_.ctx->monitor.decodeTokS() > 0 && latency->count() >= 2);
        QVERIFY(app_.ctx->chat.generating());
        QVERIFY2(app_.text("totalsText").startsWith(QStringLiteral("%1 request").arg(before + 1)),
                 qPrintable(app_.text("totalsText")));
    }

    QQuickItem* item(const char* name) const {
        QList<QQuickItem*> found;
        App::collect(app_.monitor->contentItem(), QLatin1String(name), found);
        return found.isEmpty() ? nullptr : found.first();
    }

    // The item's rectangle in the window's grab (device pixels).
    QRect grab_rect(QQuickItem* i) const {
        const QRectF r = i->mapRectToScene(QRectF(0, 0, i->width(), i->height()));
        const qreal dpr = app_.monitor->devicePixelRatio();
        return QRectF(r.topLeft() * dpr, r.size() * dpr).toAlignedRect();
    }

    // Waits (charts repaint their scene from the event loop) until the named item is drawn dark
    // or light as the theme says, with text or lines of the other kind on it; fails with the
    // last measure.
    void expect_tone(const char* name, bool dark, bool has_text) {
        QQuickItem* i = item(name);
        QVERIFY2(i && i->isVisible(), name);
        Tone t;
        const auto right = [&] {
            t = tone_of(app_.monitor->grabWindow(), grab_rect(i));
            const bool ground = dark ? t.mean < 0.35 : t.mean > 0.75;
            const bool text = !has_text || (dark ? t.lighter : t.darker) >= 8;
            return ground && text;
        };
        QVERIFY2(QTest::qWaitFor(right, 5000),
                 qPrintable(QStringLiteral("%1 in the %2 theme: %3").arg(name, dark ? "dark" : "light", describe(t))));
    }

    // Opens the monitor window unless it is open (these tests can also run alone).
    void ensure_open() {
        if (!app_.monitor->isVisible()) QVERIFY(QMetaObject::invokeMethod(app_.monitor, "open"));
        QVERIFY(QTest::qWaitForWindowExposed(app_.monitor));
    }

    void show_tab(int index) {
        QObject* tabs = app_.monitor->findChild<QObject*>(QStringLiteral("monitorTabs"));
        QVERIFY(tabs);
        tabs->setProperty("currentIndex", index);
    }

    QStringList shown_stats() const {
        QList<QQuickItem*> found;
        App::collect(app_.main->contentItem(), QStringLiteral("statsLine"), found);
        QStringList out;
        for (QQuickItem* i : found) out << i->property("text").toString();
        return out;
    }

    void wait_idle() { QTRY_VERIFY_WITH_TIMEOUT(!app_.ctx->chat.generating(), 120'000); }

    // What every live page must show, read back from the rendered items.
    void check_live_page() {
        QVERIFY(app_.series("decodeSeries")->count() > 0);
        QVERIFY(app_.series("latencySeries")->count() > 0);
        const double tok_s = app_.series("decodeSeries")->at(app_.series("decodeSeries")->count() - 1).y();
        QVERIFY2(tok_s > 0, "the newest point of the speed chart is the current decode rate");
        QCOMPARE(app_.text("deviceBadgeText"), QStringLiteral("CPU"));
        // Why, in plain words (no "CUDA module", no "cudaError..."); the loader's own words
        // are one click away.
        const QString reason = app_.text("deviceReasonText");
        QVERIFY2(reason.endsWith(QStringLiteral(": running on the CPU")) &&
                     !reason.contains(QStringLiteral("cuda"), Qt::CaseInsensitive),
                 qPrintable(reason));
        QCOMPARE(reason, device_words(app_.ctx->models.info().backend).summary);
        QCOMPARE(app_.text("deviceDetailText"), app_.ctx->models.info().backend);
        // The same words in Settings' "Runs on" and the About dialog (Models.details).
        QCOMPARE(app_.ctx->models.details().value(QStringLiteral("runsOn")).toString(), reason);
        QVERIFY2(app_.text("decodeNowText").endsWith(QStringLiteral("tok/s now")),
                 qPrintable(app_.text("decodeNowText")));
        // Inter-token p50 <= p95 <= p99, over more than one sample.
        const double p50 = app_.text("percentile_1_0").toDouble(), p95 = app_.text("percentile_1_1").toDouble(),
                     p99 = app_.text("percentile_1_2").toDouble();
        QVERIFY2(p50 > 0 && p50 <= p95 && p95 <= p99,
                 qPrintable(QStringLiteral("%1 %2 %3").arg(p50).arg(p95).arg(p99)));
        QVERIFY(app_.text("percentile_1_3").toInt() >= 3);
        QVERIFY(app_.text("percentile_0_3").toInt() >= 1);  // the TTFT of this answer at least
        // Memory: the CPU holds the mapped weights, the KV cache and the scratch buffers.
        const QString parts = app_.texts("memoryPart").join('|');
        QVERIFY2(parts.contains(QStringLiteral("KV cache")) && parts.contains(QStringLiteral("Mapped weights")),
                 qPrintable(parts));
        QVERIFY2(app_.text("memoryDeviceTitle").contains(QStringLiteral("held by Ember")),
                 qPrintable(app_.text("memoryDeviceTitle")));
        QVERIFY2(app_.text("processText").contains(QStringLiteral("resident")), qPrintable(app_.text("processText")));
    }

private slots:
    void initTestCase() {
        EMBER_REQUIRE_FILE(ember::test::test_model(ember::test::kSmolLM2));
        QVERIFY(QFile::exists(QStringLiteral(EMBER_NVML_STANDIN_LIB)));
        QVERIFY(QDir().mkpath(out_));
        // No NVML at first, as on these machines; the stand-in comes in for monitor-gpu.png.
        qputenv("EMBER_NVML_LIBRARY", QByteArray(dir_.filePath(QStringLiteral("no-libnvidia-ml.so.1")).toUtf8()));
        QVERIFY(app_.start(dir_.path()));
        QVERIFY(app_.load_model());
    }

    void pollsOnlyWhileOpen() {
        QVERIFY(!app_.monitor->isVisible());
        QVERIFY(!app_.ctx->monitor.active());
        QCOMPARE(app_.ctx->monitor.polls(), 0);  // a model is loaded, yet nothing has read it
        QVERIFY(QMetaObject::invokeMethod(app_.monitor, "open"));
        QVERIFY(QTest::qWaitForWindowExposed(app_.monitor));
        QVERIFY(app_.ctx->monitor.active());
        QVERIFY(app_.ctx->settings.monitorOpen());
        QTRY_VERIFY(app_.ctx->monitor.polls() >= 3);
    }

    // The speculation row: absent until a request speculated, then the engine's totals in words.
    void speculationRowSaysAcceptanceAndTokensPerPass() {
        ember::TelemetrySnapshot snap;
        ember::app::MonitorController m([&] { return snap; }, dir_.filePath(QStringLiteral("no-libnvidia-ml.so.1")));
        m.setActive(true);
        QCOMPARE(m.speculationText(), QString());
        snap.speculation = {50, 31, 20, 48};  // drafted, accepted, passes, tokens
        m.setActive(false);
        m.setActive(true);
        QCOMPARE(m.speculationText(), QStringLiteral("Speculation: 62 % accepted, 2.4 tokens/pass"));
        m.setActive(false);
    }

    void liveChartsBadgeAndMemoryWhileAModelGenerates() {
        generate_until_charted(400);
        if (QTest::currentTestFailed()) return;
        check_live_page();
        // NVML is absent: the sensors are hidden with the reason in plain words, not faked;
        // the loader's words are the detail.
        QVERIFY(app_.texts("gpuSensor_0").isEmpty());
        QCOMPARE(app_.text("gpuSensorsReason"), QStringLiteral("Not shown: no NVIDIA driver found"));
        QVERIFY2(app_.text("gpuSensorsDetail").startsWith(QStringLiteral("NVML not available")),
                 qPrintable(app_.text("gpuSensorsDetail")));
        QVERIFY(shoot(QStringLiteral("monitor.png")));
        // The loader's own words are one click away (for a bug report).
        QQuickItem* details = item("deviceDetailButton");
        QVERIFY(details && details->isVisible() && !item("deviceDetailText")->isVisible());
        details->setProperty("checked", true);
        QTRY_VERIFY(item("deviceDetailText")->isVisible() && item("gpuSensorsDetail")->isVisible());
        QVERIFY(shoot(QStringLiteral("monitor-details.png")));
        details->setProperty("checked", false);
        app_.ctx->chat.stop();
        wait_idle();
    }

    void gpuSensorsFromTheNvmlStandIn() {
        standin_script_ = dir_.filePath(QStringLiteral("nvml-standin.txt"));
        QFile f(standin_script_);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(kStandInScript);
        f.close();
        qputenv("EMBER_NVML_STANDIN", standin_script_.toUtf8());
        app_.ctx->monitor.useNvmlLibrary(QStringLiteral(EMBER_NVML_STANDIN_LIB));
        generate_until_charted(400);
        if (QTest::currentTestFailed()) return;
        QTRY_VERIFY(app_.ctx->monitor.gpuSensorsAvailable());
        QTRY_COMPARE(app_.text("gpuSensor_0"), QStringLiteral("412 W"));
        QCOMPARE(app_.text("gpuSensor_1"), QStringLiteral("61 °C"));
        QCOMPARE(app_.text("gpuSensor_2"), QStringLiteral("87%"));
        QVERIFY2(app_.text("gpuSensor_3").endsWith(QStringLiteral("of 140.4 GiB")),
                 qPrintable(app_.text("gpuSensor_3")));
        QVERIFY(!app_.monitor->findChild<QQuickItem*>(QStringLiteral("gpuSensorsReason"))->isVisible());
        check_live_page();
        if (QTest::currentTestFailed()) return;
        QVERIFY(shoot(QStringLiteral("monitor-gpu.png")));
        app_.ctx->chat.stop();
        wait_idle();
    }

    // Issue #33: each part of the monitor follows the theme, the tab bar, the charts and the
    // cost tab's chart and inputs included: dark with light text in the dark theme, and the
    // other way round in the light one (measured on the rendered window).
    void everyPartFollowsTheTheme() {
        ensure_open();
        for (const bool dark : {true, false}) {
            app_.ctx->settings.setTheme(dark ? QStringLiteral("dark") : QStringLiteral("light"));
            show_tab(0);
            QCOMPARE(app_.monitor->color(), dark ? QColor("#1f2023") : QColor("#ffffff"));
            expect_tone("monitorTabs", dark, true);
            expect_tone("decodeChart", dark, true);
            expect_tone("latencyChart", dark, true);
            // The theme's own colours, not a QtCharts theme's.
            QCOMPARE(item("decodeChart")->property("backgroundColor").value<QColor>(), app_.monitor->color());
            QVERIFY(shoot(dark ? QStringLiteral("monitor-dark.png") : QStringLiteral("monitor-light.png")));
            show_tab(1);
            expect_tone("monitorTabs", dark, true);
            expect_tone("costChart", dark, true);
            expect_tone("electricityPrice", dark, true);  // a text field
            expect_tone("resetApiPrices", dark, true);    // a button
            // The chart's own colours are the theme's, not QtCharts' defaults.
            QObject* chart = item("costChart");
            QCOMPARE(chart->property("backgroundColor").value<QColor>(), app_.monitor->color());
            QCOMPARE(chart->property("titleColor").value<QColor>(), dark ? QColor("#e8e8ea") : QColor("#1d1d1f"));
            QVERIFY(shoot(dark ? QStringLiteral("cost-dark.png") : QStringLiteral("cost-light.png")));
        }
        show_tab(0);
    }

    // Issue #33: the cost tab's Reset button and the footnote under the API prices are whole
    // and inside the window at the window's minimum size (scrolled to, as a user would) and
    // at its usual size (without scrolling); at the minimum size the live page keeps its
    // margins too.
    void tabsFitAtMinimumAndUsualSizes() {
        ensure_open();
        show_tab(1);
        auto* flick = item("costFlickable");
        QVERIFY(flick);
        for (const QSize size : {app_.monitor->minimumSize(), QSize(960, 720)}) {
            app_.monitor->resize(size);
            QTRY_COMPARE(app_.monitor->contentItem()->size(), QSizeF(size));
            flick->setProperty("contentY", 0);
            for (const char* name : {"resetApiPrices", "apiPricesFootnote"}) {
                QQuickItem* i = item(name);
                QVERIFY2(i && i->isVisible(), name);
                QRectF r = i->mapRectToScene(QRectF(0, 0, i->width(), i->height()));
                const bool usual = size.width() > app_.monitor->minimumWidth();
                if (!usual && r.bottom() > size.height()) {  // below the fold: scroll to it
                    flick->setProperty("contentY", r.bottom() - size.height() + 16);
                    r = i->mapRectToScene(QRectF(0, 0, i->width(), i->height()));
                }
                const QString where = QStringLiteral("%1 at %2x%3: %4,%5 %6x%7")
                                          .arg(name)
                                          .arg(size.width())
                                          .arg(size.height())
                                          .arg(r.x())
                                          .arg(r.y())
                                          .arg(r.width())
                                          .arg(r.height());
                QVERIFY2(QRectF(QPointF(0, 0), QSizeF(size)).contains(r), qPrintable(where));
                QVERIFY2(i->width() >= i->implicitWidth() - 0.5 || i->property("wrapMode").toInt() != 0,
                         qPrintable(where + " (squeezed)"));
                if (i->property("contentWidth").isValid())  // the text fits its box: nothing runs past it
                    QVERIFY2(i->property("contentWidth").toReal() <= i->width() + 0.5, qPrintable(where));
            }
            if (QTest::currentTestFailed()) return;
            if (size == app_.monitor->minimumSize()) {
                QVERIFY(shoot(QStringLiteral("cost-min.png")));
                show_tab(0);  // the live page fits too: nothing runs into the page's right margin (8 px or more)
                for (const char* name : {"decodeNowText", "latencyChart", "memoryBar", "percentileTable",
                                         "gpuSensorsReason", "totalsText"}) {
                    QQuickItem* i = item(name);
                    QVERIFY2(i, name);
                    QTRY_VERIFY2(i->mapRectToScene(QRectF(0, 0, i->width(), i->height())).right() <= size.width() - 8,
                                 qPrintable(QStringLiteral("%1 at %2 px").arg(name).arg(size.width())));
                }
                QTest::qWait(300);  // the charts re-render their scene at the new size (for the picture only)
                QVERIFY(shoot(QStringLiteral("monitor-min.png")));
                show_tab(1);
            } else {
                QVERIFY(shoot(QStringLiteral("cost-usual.png")));
            }
        }
        flick->setProperty("contentY", 0);
        show_tab(0);
    }

    void answerStatsNamePromptReuseAndStopReason() {
        // A short answer that hits its token limit, after the two above in the same chat:
        // most of its prompt is already in the KV cache.
        app_.sampling(8);
        QSignalSpy done(&app_.ctx->chat, &ChatController::answerFinished);
        QVERIFY(app_.ctx->chat.send(QStringLiteral("And then?")));
        QVERIFY(done.wait(120'000));
        MessageListModel* m = app_.ctx->chat.messages();
        const QVariantMap last = m->get(m->count() - 1);
        const QString line = last.value("stats").toString();
        QVERIFY2(line.contains(QRegularExpression(QStringLiteral("prompt \\d+ tokens, \\d+ reused"))),
                 qPrintable(line));
        QVERIFY2(line.endsWith(QStringLiteral("hit the token limit")), qPrintable(line));
        const auto stored = app_.ctx->store.store->message(last.value("messageId").toLongLong());
        QVERIFY(stored && stored->stats.prompt_tokens && stored->stats.reused_tokens);
        QVERIFY(*stored->stats.reused_tokens > 0 && *stored->stats.reused_tokens < *stored->stats.prompt_tokens);
        QCOMPARE(stored->stats.n_tokens.value_or(0), 8);
        // And it is what the window shows under the answer.
        QTRY_VERIFY2(shown_stats().contains(line), qPrintable(shown_stats().join('\n')));
    }

    void closingStopsPollingAndIsRemembered() {
        QVERIFY(app_.monitor->close());
        QTRY_VERIFY(!app_.ctx->monitor.active());
        QVERIFY(!app_.ctx->settings.monitorOpen());
        const int polls = app_.ctx->monitor.polls();
        QSignalSpy updated(&app_.ctx->monitor, &MonitorController::updated);
        QVERIFY(!updated.wait(4 * MonitorController::kIntervalMs));  // four periods without a poll
        QCOMPARE(app_.ctx->monitor.polls(), polls);
    }

    void openStateAndGeometryAreRestoredAtStart() {
        QVERIFY(QMetaObject::invokeMethod(app_.monitor, "open"));
        QVERIFY(QTest::qWaitForWindowExposed(app_.monitor));
        const QRect where(40, 60, 900, 700);
        app_.monitor->setGeometry(where);
        QTRY_COMPARE(app_.ctx->settings.monitorGeometry(), where);
        app_.ctx->settings.setMonitorTab(5);  // a tab this build lacks: restored as the last one (Cost)
        app_.ctx->settings.sync();            // as at exit
        // The next start: a new process (QML singletons are one per process) on a copy of
        // this settings file, reporting what its monitor window came up as.
        QTemporaryDir next;
        QVERIFY(QFile::copy(app_.ctx->settings.settingsFile(), next.filePath(QStringLiteral("settings.ini"))));
        QProcess child;
        child.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        child.start(QCoreApplication::applicationFilePath(), {QStringLiteral("--report-monitor"), next.path()});
        QVERIFY(child.waitForFinished(120'000));
        QCOMPARE(child.exitCode(), 0);
        QCOMPARE(QString::fromUtf8(child.readAllStandardOutput()).trimmed(),
                 QStringLiteral("visible=1 active=1 geometry=40,60,900,700 tab=1"));
    }

    void cleanupTestCase() {
        app_.engine.reset();
        app_.ctx.reset();
        qunsetenv("EMBER_NVML_STANDIN");
    }
};

// ---- benchmark: decode speed with the monitor hidden and shown -----------------------------

namespace {

struct Run {
    bool shown;
    int tokens;
    double tok_s;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int bench(int tokens, int rounds, const QString& json_path) {
    QTemporaryDir dir;
    App app;
    if (!app.start(dir.path()) || !app.load_model()) {
        std::fprintf(stderr, "bench: could not start the app with SmolLM2\n");
        return 1;
    }
    std::vector<Run> runs;
    for (int r = 0; r < rounds; ++r) {
        for (bool shown : {false, true}) {
            if (shown) QMetaObject::invokeMethod(app.monitor, "open");
            else app.monitor->close();
            app.ctx->chat.newConversation();  // the same prompt from an empty cache each time
            app.sampling(tokens);
            QSignalSpy done(&app.ctx->chat, &ChatController::answerFinished);
            app.ctx->chat.send(kStory);
            if (!done.wait(300'000)) return 1;
            const QVariantMap m = app.ctx->chat.messages()->get(1);
            const auto stored = app.ctx->store.store->message(m.value("messageId").toLongLong());
            if (!stored || !stored->stats.tok_s) return 1;
            runs.push_back({shown, stored->stats.n_tokens.value_or(0), *stored->stats.tok_s});
            std::printf("round %d  monitor %-6s  %4d tokens  %7.2f tok/s\n", r + 1, shown ? "shown" : "hidden",
                        runs.back().tokens, runs.back().tok_s);
        }
    }
    QJsonArray arr;
    std::vector<double> hidden, shown;
    for (const Run& x : runs) {
        (x.shown ? shown : hidden).push_back(x.tok_s);
        arr.append(QJsonObject{{"monitor", x.shown ? "shown" : "hidden"}, {"tokens", x.tokens}, {"tok_s", x.tok_s}});
    }
    auto row = [](const char* name, const std::vector<double>& v) {
        std::printf("%-15s %8.2f %8.2f %8.2f\n", name, median(v), *std::min_element(v.begin(), v.end()),
                    *std::max_element(v.begin(), v.end()));
    };
    std::printf("\n%-15s %8s %8s %8s   (decode tok/s, SmolLM2 Q4_1, 1 engine thread)\n", "monitor", "median", "min",
                "max");
    row("hidden", hidden);
    row("shown (4 Hz)", shown);
    std::printf("shown/hidden median: %.3f\n", median(shown) / median(hidden));
    QJsonObject doc{{"benchmark", "monitor_overhead"},
                    {"model", ember::test::kSmolLM2},
                    {"tokens", tokens},
                    {"rounds", rounds},
                    {"qpa", QGuiApplication::platformName()},
                    {"median_hidden_tok_s", median(hidden)},
                    {"median_shown_tok_s", median(shown)},
                    {"runs", arr}};
    QFile f(json_path);
    if (!f.open(QIODevice::WriteOnly)) return 1;
    f.write(QJsonDocument(doc).toJson());
    std::printf("wrote %s\n", qPrintable(json_path));
    app.engine.reset();
    app.ctx.reset();
    return 0;
}

}  // namespace

// The restart half of openStateAndGeometryAreRestoredAtStart: the app on `dir`, once its
// windows are up, prints what the monitor window restored.
int report_monitor(const QString& dir) {
    App app;
    if (!app.start(dir)) return 1;
    QElapsedTimer t;
    t.start();
    while (!(app.monitor->isVisible() && app.ctx->monitor.active()) && t.elapsed() < 10'000) QTest::qWait(20);
    auto* tabs = app.monitor->findChild<QObject*>(QStringLiteral("monitorTabs"));
    const QRect g = app.monitor->geometry();
    std::printf("visible=%d active=%d geometry=%d,%d,%d,%d tab=%d\n", app.monitor->isVisible() ? 1 : 0,
                app.ctx->monitor.active() ? 1 : 0, g.x(), g.y(), g.width(), g.height(),
                tabs ? tabs->property("currentIndex").toInt() : -1);
    app.engine.reset();
    app.ctx.reset();
    return 0;
}

int main(int argc, char** argv) {
    QApplication qapp(argc, argv);  // what ember-app runs (QtCharts needs widgets)
    QQuickStyle::setStyle(QStringLiteral("Fusion"));
    const QStringList args = qapp.arguments();
    if (args.size() > 2 && args[1] == QLatin1String("--report-monitor")) return report_monitor(args[2]);
    if (args.size() > 1 && args[1] == QLatin1String("--bench")) {
        const int tokens = args.size() > 2 ? args[2].toInt() : 128;
        const int rounds = args.size() > 3 ? args[3].toInt() : 5;
        const QString json = args.size() > 4 ? args[4] : QStringLiteral("monitor-bench.json");
        return bench(tokens, rounds, json);
    }
    TestMonitor t;
    return QTest::qExec(&t, argc, argv);
}
#include "test_monitor.moc"
