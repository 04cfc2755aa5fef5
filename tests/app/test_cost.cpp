// The cost view: its arithmetic on fixed inputs (per-1M costs from energy, electricity price and
// amortized hardware; the watts estimate where no meter reads), the shipped and edited API
// prices, token totals per conversation and per day from a real SQLite store filled through
// ConversationStore (days in the time zone TZ=EMB-5:30, UTC+5:30, chosen so that an evening
// answer in UTC lands on the next local day), and the view itself: CostView.qml alone in a
// window (offscreen) while SmolLM2 answers, saved as <build>/cost.png, with its texts and chart
// series checked. The energy of those answers comes from real meters' files: a fake powercap
// tree whose counter a thread advances (measured), or none at all (estimated) — this machine
// has neither RAPL nor an NVIDIA driver.
#include <QApplication>
#include <QDir>
#include <QImage>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickView>
#include <QSet>
#include <QSignalSpy>
#include <QtTest>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "app/core/energy_ledger.h"
#include "app/cost/api_prices.h"
#include "app/cost/cost_controller.h"
#include "app/cost/cost_model.h"
#include "app/storage/conversation_store.h"
#include "app_harness.h"
#include "kernels/common/error.h"
#include "test_paths.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

namespace {

// 2026-11-30 10:00 and 20:00 UTC: 15:30 on the 30th and 01:30 on 1 December at UTC+5:30.
constexpr qint64 kMorningUtc = 1796032800000;
constexpr qint64 kEveningUtc = kMorningUtc + 10 * 3600 * 1000;

MessageStats answer_stats(int prompt, int reused, int generated, std::optional<double> energy_j) {
    MessageStats s;
    s.prompt_tokens = prompt;
    s.reused_tokens = reused;
    if (generated > 0) s.n_tokens = generated;
    s.energy_j = energy_j;
    return s;
}

void set_created_at(ConversationStore& store, int64_t message_id, qint64 at_ms) {
    store.db()
        .prepare("UPDATE messages SET created_at = ? WHERE id = ?")
        .bind(1, static_cast<int64_t>(at_ms))
        .bind(2, message_id)
        .run();
}

// A package counter that a thread advances like a real one, replacing the file atomically
// (rename) so the reader never sees half a number.
class TickingRapl {
public:
    explicit TickingRapl(const QString& root) : dir_(root + "/intel-rapl:0") {
        QDir().mkpath(dir_);
        write("name", "package-0\n");
        write("max_energy_range_uj", "262143328850\n");
        write("energy_uj", "0\n");
        thread_ = std::thread([this] {
            uint64_t uj = 0;
            while (!stop_) {
                uj += 20'000;  // the file advances in steps, as the hardware's counter does
                write("energy_uj.new", std::to_string(uj) + "\n");
                std::rename((dir_ + "/energy_uj.new").toLocal8Bit().constData(),
                            (dir_ + "/energy_uj").toLocal8Bit().constData());
                // Real counters tick about every millisecond; so does this one (a cadence, not
                // a wait for a condition), without spinning a shared core.
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        });
    }
    ~TickingRapl() {
        stop_ = true;
        thread_.join();
    }

private:
    void write(const char* name, const std::string& text) {
        QFile f(dir_ + '/' + name);
        if (f.open(QIODevice::WriteOnly | QIODevice::Truncate)) f.write(text.data(), static_cast<qint64>(text.size()));
    }
    QString dir_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// The energy meters a test's app reads: EMBER_POWERCAP_ROOT at `powercap_root`, no NVML. Unset
// again when the test ends, also when a QVERIFY returns early (so no later test inherits them).
class MeterEnv {
public:
    explicit MeterEnv(const QString& powercap_root) {
        qputenv("EMBER_POWERCAP_ROOT", powercap_root.toUtf8());
        qputenv("EMBER_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    }
    ~MeterEnv() {
        qunsetenv("EMBER_POWERCAP_ROOT");
        qunsetenv("EMBER_NVML_LIBRARY");
    }
};

// A ticking fake RAPL counter as the only meter, for one test.
struct FakeRaplMeters {
    QTemporaryDir dir;
    TickingRapl rapl{dir.path()};
    MeterEnv env{dir.path()};
};

// An item by objectName, through visual children too (Repeater's delegates are not QObject
// children of the view). Stops the test, rather than crashing it, when there is none.
QObject* search(QObject* o, const QString& name) {
    if (o->objectName() == name) return o;
    for (QObject* c : o->children())
        if (QObject* f = search(c, name)) return f;
    if (auto* item = qobject_cast<QQuickItem*>(o))
        for (QQuickItem* c : item->childItems())
            if (QObject* f = search(c, name)) return f;
    return nullptr;
}

QObject* find(QQuickItem* root, const char* name) {
    QObject* o = search(root, QLatin1String(name));
    if (!o) qFatal("CostView has no item named %s", name);
    return o;
}

}  // namespace

class TestCost : public QObject {
    Q_OBJECT

    // Sends the questions in a new conversation (short answers: at most `max_tokens` each) and
    // waits for every answer to be stored.
    static void answer(ember::test::AppHarness& h, const QStringList& questions, int max_tokens) {
        h.chat.newConversation();
        h.set_sampling(max_tokens);  // after newConversation, which starts from the defaults
        for (const QString& q : questions) {
            QSignalSpy done(&h.chat, &ChatController::answerFinished);
            QVERIFY(h.chat.send(q));
            QVERIFY(done.wait(120'000));
        }
    }

private slots:
    void initTestCase() {
        qputenv("TZ", "EMB-5:30");
        tzset();
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
    }

    void localCostPerMillionFromEnergyPriceAndAmortization() {
        // 1000 prompt tokens in 2 s for 36 J; 500 generated in 10 s for 180 J. At 0.30 per kWh,
        // a 2000 machine used 4 years x 365 days x 8 h (42,048,000 s): 4.7565e-5 per second.
        EnergyUse use;
        use.add(answer_use(1000, 500, 2.0, 10.0, 36.0, 180.0, true, 65.0));
        QCOMPARE(use.answers, 1);
        QCOMPARE(use.estimated_answers, 0);
        const CostInputs in{0.30, 2000.0, 4.0, 8.0};
        QVERIFY(qAbs(hardware_cost_per_second(in) - 2000.0 / 42'048'000.0) < 1e-15);
        const LocalCost c = local_cost(use, in);
        QVERIFY(qAbs(*c.input_j_per_token - 0.036) < 1e-12);
        QVERIFY(qAbs(*c.output_j_per_token - 0.36) < 1e-12);
        // Input: 36 kJ per 1M tokens = 0.01 kWh = 0.003; 2000 s of the machine = 0.0951294.
        QVERIFY(qAbs(*c.input_energy_per_1m - 0.003) < 1e-12);
        QVERIFY(qAbs(*c.input_hardware_per_1m - 2000.0 * 2000.0 / 42'048'000.0) < 1e-9);
        QVERIFY(qAbs(*c.input_per_1m() - (0.003 + 0.0951294)) < 1e-6);
        // Output: 360 kJ = 0.1 kWh = 0.03; 20000 s = 0.951294.
        QVERIFY(qAbs(*c.output_energy_per_1m - 0.03) < 1e-12);
        QVERIFY(qAbs(*c.output_per_1m() - (0.03 + 0.951294)) < 1e-6);
        // No hardware price: energy only.
        const LocalCost e = local_cost(use, CostInputs{0.30, 0, 4, 8});
        QCOMPARE(*e.input_hardware_per_1m, 0.0);
        QVERIFY(qAbs(*e.output_per_1m() - 0.03) < 1e-12);
        // API side: 1000 in and 500 out at 3 / 15 per 1M.
        QVERIFY(qAbs(cost_of(1000, 500, 3.0, 15.0) - 0.0105) < 1e-12);
    }

    void noMeterMeansWattsTimesTimeMarkedAsEstimate() {
        // CPU meter unreadable, 0.5 J from a GPU meter: 50 W x 2 s is added to the prefill.
        EnergyUse use;
        use.add(answer_use(100, 0, 2.0, 0.0, 0.5, 0.0, false, 50.0));
        QCOMPARE(use.estimated_answers, 1);
        QVERIFY(qAbs(use.prefill_j - 100.5) < 1e-12);
        const LocalCost c = local_cost(use, CostInputs{0.36, 0, 4, 8});
        QVERIFY(qAbs(*c.input_j_per_token - 1.005) < 1e-12);
        QVERIFY(!c.output_j_per_token);  // no generated token: no output cost, not a zero
        QVERIFY(!c.output_per_1m());
        // A second, measured answer: the sum stays flagged while any part is estimated.
        use.add(answer_use(100, 10, 1.0, 1.0, 20.0, 30.0, true, 50.0));
        QCOMPARE(use.answers, 2);
        QCOMPARE(use.estimated_answers, 1);
        QVERIFY(qAbs(*local_cost(use, {}).input_j_per_token - (100.5 + 20.0) / 200.0) < 1e-12);
    }

    // Two answers overlapping: A alone 0-1 s (prefill) and 1-2 s (decode); B joins at 2 s and
    // both decode 2-4 s; A ends at 4 s; B alone to 5 s. The CPU counter draws 10 W (10 J/s)
    // until 2 s and 20 W after. Shared stretches split evenly, and the shares add up to the
    // 80 J the counter moved while anything ran.
    void energyLedgerSplitsOverlappingAnswers() {
        auto at = [](double t) {
            ember::EnergySample s;
            s.t_s = t;
            s.cpu_j = {true, t <= 2 ? 10 * t : 20 + 20 * (t - 2), {}};
            s.gpu_j = {false, 0, "no GPU"};
            return s;
        };
        EnergyLedger ledger;
        ledger.start(1, at(0));
        ledger.first_token(1, at(1));
        ledger.first_token(1, at(1.5));  // only the first one counts
        ledger.start(2, at(2));
        ledger.first_token(2, at(3));
        const EnergyShare a = ledger.finish(1, at(4));
        QCOMPARE(ledger.running(), 1);
        const EnergyShare b = ledger.finish(2, at(5));
        QCOMPARE(ledger.running(), 0);
        // A: prefill 0-1 (10 J, 1 s); decode 1-2 alone (10 J) + half of 2-4 (40 J, 2 s).
        QVERIFY(qAbs(a.prefill_j - 10) < 1e-9 && qAbs(a.prefill_s - 1) < 1e-9);
        QVERIFY(qAbs(a.decode_j - 30) < 1e-9 && qAbs(a.decode_s - 2) < 1e-9);
        QVERIFY(a.shared && a.cpu_measured && !a.gpu_measured);
        // B: prefill half of 2-3 (20 J, 1 s); decode half of 3-4 + 4-5 alone (10 + 20 J).
        QVERIFY(qAbs(b.prefill_j - 10) < 1e-9 && qAbs(b.prefill_s - 0.5) < 1e-9);
        QVERIFY(qAbs(b.decode_j - 30) < 1e-9 && qAbs(b.decode_s - 1.5) < 1e-9);
        QVERIFY(b.shared);
        QVERIFY(qAbs(a.prefill_j + a.decode_j + b.prefill_j + b.decode_j - 80) < 1e-9);  // conserved
        QVERIFY(qAbs(a.prefill_s + a.decode_s + b.prefill_s + b.decode_s - 5) < 1e-9);   // no time counted twice

        // Alone, an answer gets exactly its own readings; an unknown id gets nothing.
        ledger.start(3, at(10));
        ledger.first_token(3, at(11));
        const EnergyShare c = ledger.finish(3, at(12));
        QVERIFY(!c.shared);
        QVERIFY(qAbs(c.prefill_j - 20) < 1e-9 && qAbs(c.decode_j - 20) < 1e-9);
        QCOMPARE(ledger.finish(99, at(13)).decode_j, 0.0);

        // A shared answer flags the cost view's numbers as an estimate and says why.
        ember::test::AppHarness h;
        CostController cost(*h.store.store, h.settings, nullptr);
        GenerationResult r;
        r.prompt_tokens = 100;
        r.generated_tokens = 10;
        r.prefill_s = a.prefill_s, r.decode_s = a.decode_s, r.prefill_j = a.prefill_j, r.decode_j = a.decode_j;
        r.cpu_energy_measured = true;
        r.energy_shared = true;
        cost.addAnswer(r);
        QVERIFY(cost.estimated());
        QCOMPARE(cost.sharedAnswers(), 1);
        QVERIFY2(cost.energySource().contains("split evenly"), qPrintable(cost.energySource()));
        QVERIFY(qAbs(cost.outputJoulesPerToken() - 3.0) < 1e-9);  // 30 J over 10 tokens
    }

    void apiPricesAreDatedSourcedAndEditable() {
        const ApiPriceList d = default_api_prices();
        QCOMPARE(d.retrieved, QStringLiteral("2026-12-02"));
        QCOMPARE(d.currency, QStringLiteral("USD"));
        QVERIFY(d.prices.size() >= 3);
        for (const ApiPrice& p : d.prices) {
            QVERIFY2(p.source.startsWith("http") || p.source.contains("http"), qPrintable(p.model));
            QVERIFY(!p.as_of.isEmpty());
            QVERIFY(p.output_per_1m >= p.input_per_1m);
        }
        // Bad lists are refused with a reason.
        auto refused = [](const char* json) {
            try {
                parse_api_prices(json);
            } catch (const ember::Error& e) {
                return QString::fromUtf8(e.what());
            }
            return QString();
        };
        QVERIFY(refused("{").startsWith("API prices are not valid JSON"));
        QCOMPARE(refused("{\"x\":1}"), QStringLiteral("API prices have no \"prices\" list"));
        QCOMPARE(refused(R"({"prices":[{"model":"m","input_per_1m":-1,"output_per_1m":1}]})"),
                 QStringLiteral("API price 1: \"input_per_1m\" must be a number of at least 0 (price per 1M tokens)"));

        // Edits are kept in the settings and survive a new controller; reset brings the defaults.
        QTemporaryDir dir;
        OpenedStore store = open_conversation_store(dir.path());
        AppSettings settings(dir.filePath("settings.ini"));
        {
            CostController c(*store.store, settings, nullptr);
            c.setApiPrice(1, 1.25, 9.5);
            c.setApiPrice(0, -1, 2);  // refused
            QVERIFY(c.error().contains("at least 0"));
        }
        CostController again(*store.store, settings, nullptr);
        QCOMPARE(again.apiPrices().at(1).toMap().value("input_per_1m").toDouble(), 1.25);
        QCOMPARE(again.apiPrices().at(1).toMap().value("output_per_1m").toDouble(), 9.5);
        QCOMPARE(again.apiPrices().at(1).toMap().value("as_of").toString(), QStringLiteral("edited"));
        QCOMPARE(again.apiPrices().at(0).toMap().value("input_per_1m").toDouble(), d.prices[0].input_per_1m);
        again.resetApiPrices();
        QCOMPARE(again.apiPrices().at(1).toMap().value("input_per_1m").toDouble(), d.prices[1].input_per_1m);
        // A damaged saved list: the built-in prices and a message, nothing thrown.
        settings.setApiPricesJson("{\"prices\": 7}");
        CostController damaged(*store.store, settings, nullptr);
        QVERIFY(damaged.error().startsWith("Your saved API prices could not be read"));
        QCOMPARE(damaged.apiPrices().size(), static_cast<qsizetype>(d.prices.size()));
    }

    void totalsPerConversationAndDayFromTheStore() {
        QTemporaryDir dir;
        OpenedStore opened = open_conversation_store(dir.path());
        ConversationStore& store = *opened.store;
        const Conversation a = store.create_conversation("Paris");
        const Conversation b = store.create_conversation("Rust");
        const Conversation gone = store.create_conversation("Deleted");
        auto add = [&](const Conversation& c, qint64 at, MessageStats stats) {
            const Message q = store.add_message(c.id, "user", "question");
            set_created_at(store, q.id, at);
            const Message m = store.add_message(c.id, "assistant", "answer", MessageState::Complete, stats);
            set_created_at(store, m.id, at + 1000);
        };
        add(a, kMorningUtc, answer_stats(120, 0, 40, 12.5));
        add(a, kEveningUtc, answer_stats(180, 150, 60, std::nullopt));       // 150 tokens from the cache
        add(b, kEveningUtc + 60'000, answer_stats(50, 0, 0, std::nullopt));  // stopped before a token
        add(gone, kMorningUtc, answer_stats(1000, 0, 1000, 99.0));
        store.soft_delete(gone.id);
        store.add_message(b.id, "assistant", "an answer from before schema v4");  // no counts: not counted

        const std::vector<ConversationTotals> conv = totals_by_conversation(store);
        QCOMPARE(conv.size(), size_t(2));
        const auto& pa = conv[0].conversation_id == a.id ? conv[0] : conv[1];
        const auto& pb = conv[0].conversation_id == b.id ? conv[0] : conv[1];
        QCOMPARE(pa.title, QStringLiteral("Paris"));
        QCOMPARE(pa.totals.answers, 2);
        QCOMPARE(pa.totals.prompt_tokens, 300);
        QCOMPARE(pa.totals.reused_tokens, 150);
        QCOMPARE(pa.totals.new_prompt_tokens(), 150);
        QCOMPARE(pa.totals.generated_tokens, 100);
        QCOMPARE(pa.totals.energy_j, 12.5);
        QCOMPARE(pa.totals.measured_answers, 1);
        QCOMPARE(pb.totals.answers, 1);
        QCOMPARE(pb.totals.new_prompt_tokens(), 50);
        QCOMPARE(pb.totals.generated_tokens, 0);

        // At UTC+5:30 the evening answers (20:00 UTC) belong to 1 December.
        const std::vector<DayTotals> days = totals_by_day(store);
        QCOMPARE(days.size(), size_t(2));
        QCOMPARE(days[0].day, QStringLiteral("2026-12-01"));
        QCOMPARE(days[0].totals.answers, 2);
        QCOMPARE(days[0].totals.new_prompt_tokens(), 30 + 50);
        QCOMPARE(days[0].totals.generated_tokens, 60);
        QCOMPARE(days[1].day, QStringLiteral("2026-11-30"));
        QCOMPARE(days[1].totals.new_prompt_tokens(), 120);
        QCOMPARE(days[1].totals.generated_tokens, 40);

        const std::vector<UsagePoint> points = usage_over_time(store);
        QCOMPARE(points.size(), size_t(3));
        QCOMPARE(points[0].at_ms, kMorningUtc + 1000);
        QCOMPARE(points[1].new_prompt_tokens, 30);
        QCOMPARE(points[2].generated_tokens, 0);

        // The controller shows the same numbers, and its cumulative cost is tokens x prices.
        AppSettings settings(dir.filePath("settings.ini"));
        CostController c(store, settings, nullptr);
        QCOMPARE(c.conversations().size(), 2);
        QCOMPARE(c.days().at(0).toMap().value("day").toString(), QStringLiteral("2026-12-01"));
        const QVariantList cum = c.cumulative();
        QCOMPARE(cum.size(), 3);
        QCOMPARE(cum.last().toMap().value("tokens").toLongLong(), 120 + 40 + 30 + 60 + 50);
        const ApiPrice api = default_api_prices().prices[0];
        QVERIFY(qAbs(cum.last().toMap().value("apiCost").toDouble() -
                     cost_of(200, 100, api.input_per_1m, api.output_per_1m)) < 1e-12);
        QCOMPARE(cum.last().toMap().value("localCost").toDouble(), 0.0);  // nothing measured yet
    }

    void measuredEnergyIsStoredPerAnswer() {
        EMBER_REQUIRE_FILE(ember::test::test_model(ember::test::kSmolLM2));
        FakeRaplMeters meters;
        ember::test::AppHarness h;
        CostController cost(*h.store.store, h.settings, h.host.worker());
        QVERIFY(h.load(ember::test::test_model(ember::test::kSmolLM2)));
        answer(h, {QStringLiteral("Name a colour.")}, 12);
        QTRY_COMPARE(cost.measuredAnswers(), 1);
        QVERIFY(!cost.estimated());
        QVERIFY2(cost.energySource().startsWith("CPU energy measured (RAPL)"), qPrintable(cost.energySource()));
        QVERIFY2(cost.energySource().contains("no GPU energy: no NVIDIA driver found"),
                 qPrintable(cost.energySource()));
        QVERIFY2(cost.energySourceDetail().startsWith("GPU: NVML not available (/nonexistent/libnvidia-ml.so.1"),
                 qPrintable(cost.energySourceDetail()));  // the loader's words, for Details
        const std::vector<Message> msgs = h.store.store->messages(h.chat.currentConversationId());
        QCOMPARE(msgs.back().role, QStringLiteral("assistant"));
        QVERIFY(msgs.back().stats.energy_j.has_value());
        QVERIFY(*msgs.back().stats.energy_j > 0);  // the counter advanced while it answered
        QCOMPARE(cost.days().at(0).toMap().value("measured").toLongLong(), 1);
    }

    // Two chats answering at once through the scheduler share the meter's readings: both are
    // marked shared, both store a measured part, and the view calls its numbers an estimate.
    void overlappingAnswersShareTheEnergy() {
        EMBER_REQUIRE_FILE(ember::test::test_model(ember::test::kSmolLM2));
        FakeRaplMeters meters;
        ember::test::AppHarness h;
        CostController cost(*h.store.store, h.settings, h.host.worker());
        QVERIFY(h.load(ember::test::test_model(ember::test::kSmolLM2)));
        QSignalSpy done(&h.chat, &ChatController::answerFinished);
        QSignalSpy results(h.host.worker(), &EngineWorker::generationFinished);
        h.set_sampling(24);
        QVERIFY(h.chat.send(QStringLiteral("Name a colour.")));
        const qint64 a = h.chat.currentConversationId();
        h.chat.newConversation();
        h.set_sampling(24);
        QVERIFY(h.chat.send(QStringLiteral("Name a fruit.")));
        const qint64 b = h.chat.currentConversationId();
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, 120'000);
        QTRY_COMPARE(cost.measuredAnswers(), 2);
        for (const auto& r : results) QVERIFY(r.at(1).value<GenerationResult>().energy_shared);
        QCOMPARE(cost.sharedAnswers(), 2);
        QVERIFY(cost.estimated());
        QVERIFY2(cost.energySource().contains("split evenly"), qPrintable(cost.energySource()));
        // Both store a measured part; together they drew energy. One of them may get 0 J: a
        // short answer on a loaded machine can run between two ticks of the fake counter
        // (seen once in CI, after the prefix cache made the second chat's prefill shorter).
        double joules = 0;
        for (qint64 id : {a, b}) {
            const auto msgs = h.store.store->messages(id);
            QVERIFY(msgs.back().stats.energy_j.has_value() && *msgs.back().stats.energy_j >= 0);
            joules += *msgs.back().stats.energy_j;
        }
        QVERIFY(joules > 0);
    }

    void viewRendersWhileSmolLM2Answers() {
        EMBER_REQUIRE_FILE(ember::test::test_model(ember::test::kSmolLM2));
        // No meter at all, as on this machine: the view must say "estimate".
        MeterEnv meters(QStringLiteral("/nonexistent/powercap"));
        ember::test::AppHarness h;
        h.settings.setHardwarePrice(1500);
        CostController cost(*h.store.store, h.settings, h.host.worker());

        QQuickView view;
        view.setInitialProperties({{"controller", QVariant::fromValue<QObject*>(&cost)}});
        view.setResizeMode(QQuickView::SizeRootObjectToView);
        view.resize(1000, 1150);
        view.setSource(QUrl(QStringLiteral("qrc:/Ember/Ui/CostView.qml")));
        QVERIFY2(view.status() == QQuickView::Ready,
                 qPrintable(view.errors().isEmpty() ? "" : view.errors()[0].toString()));
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QQuickItem* root = view.rootObject();
        QCOMPARE(find(root, "localInput")->property("text").toString(), QStringLiteral("—"));

        QVERIFY(h.load(ember::test::test_model(ember::test::kSmolLM2)));
        answer(h, {QStringLiteral("Say hello.")}, 16);
        QTRY_COMPARE(cost.measuredAnswers(), 1);
        QCOMPARE(find(root, "measuredOver")->property("text").toString(),
                 QStringLiteral("From the 1 answer of this session."));  // issue #33: not "1 answers"
        answer(h, {QStringLiteral("What is the capital of France?"), QStringLiteral("And of Italy?")}, 16);
        QTRY_COMPARE(cost.measuredAnswers(), 3);
        QVERIFY(cost.estimated());

        QTRY_VERIFY(find(root, "localInput")->property("text").toString().endsWith(" USD"));
        QVERIFY(find(root, "localOutput")->property("text").toString().endsWith(" USD"));
        QVERIFY(cost.localInputPer1M() > 0);
        QVERIFY(cost.localOutputPer1M() > cost.hardwareOutputPer1M());
        QVERIFY(find(root, "estimateBadge")->property("visible").toBool());
        QCOMPARE(find(root, "measuredOver")->property("text").toString(),
                 QStringLiteral("From the 3 answers of this session."));
        // In plain words; the meters' own reasons are the details.
        QCOMPARE(find(root, "energySource")->property("text").toString(),
                 QStringLiteral("CPU energy estimated from the 65 W setting: no energy counter Ember can read on "
                                "this machine\nno GPU energy: no NVIDIA driver found"));
        QVERIFY(find(root, "energySourceDetail")
                    ->property("text")
                    .toString()
                    .startsWith("CPU: no powercap counters at /nonexistent/powercap"));
        QCOMPARE(find(root, "apiName0")->property("text").toString(),
                 default_api_prices().prices[0].vendor + ' ' + default_api_prices().prices[0].model);
        // One point per answer, in each series.
        for (const char* s : {"tokenSeries", "localCostSeries", "apiCostSeries"}) {
            QObject* series = root->property(s).value<QObject*>();
            QVERIFY2(series, s);
            QTRY_COMPARE(series->property("count").toInt(), 3);
        }
        // The totals tables: both conversations, and today's answers.
        QCOMPARE(cost.conversations().size(), 2);
        QCOMPARE(cost.days().size(), 1);
        QCOMPARE(cost.days().at(0).toMap().value("answers").toLongLong(), 3);
        QCOMPARE(cost.days().at(0).toMap().value("measured").toLongLong(), 0);  // estimates are not stored

        // Settings edited through the controller's settings reach the view: twice the price,
        // twice the energy part.
        const double energy_part = cost.localOutputPer1M() - cost.hardwareOutputPer1M();
        const QString before = find(root, "localOutput")->property("text").toString();
        cost.settings()->setElectricityPrice(2 * cost.settings()->electricityPrice());
        QVERIFY(qAbs(cost.localOutputPer1M() - cost.hardwareOutputPer1M() - 2 * energy_part) < 1e-9 * energy_part);
        QTRY_VERIFY(find(root, "localOutput")->property("text").toString() != before);
        cost.settings()->setElectricityPrice(0.30);

        QTest::qWait(200);  // let the chart's scene render before the grab (not an assertion)
        const QImage img = view.grabWindow();
        const QString path = QStringLiteral(EMBER_BINARY_DIR "/cost.png");
        QVERIFY(img.save(path));
        qInfo("saved %s (%dx%d)", qPrintable(path), img.width(), img.height());
        QSet<QRgb> colours;
        for (int y = 0; y < img.height(); y += 3)
            for (int x = 0; x < img.width(); x += 3) colours.insert(img.pixel(x, y));
        QVERIFY(colours.size() > 8);
    }
};

QTEST_MAIN(TestCost)
#include "test_cost.moc"
