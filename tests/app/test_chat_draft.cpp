// The app's draft model (issue #38): the chat setting "Draft model" through the real model
// controller, engine worker and scheduler, with real models. Drafts are quantized copies made
// here (no smaller model of the same vocabulary is on the package index): stories260K F32 is
// drafted by its Q8_0 copy, SmolLM2-135M Q4_1 by its Q4_0 copy. The option is offered when the
// library holds a draft for the loaded model and greyed with the reason when it does not; a
// chat with a draft answers (greedy) exactly as without, and the monitor's counters show the
// drafting; a draft of another vocabulary, or one that does not fit beside the model, is
// refused with the reason and the model runs alone; unloading the model unloads the draft.
#include <QSignalSpy>
#include <QtTest>
#include <filesystem>

#include "app/monitor/monitor_controller.h"
#include "app_harness.h"
#include "engine/fit/fit_model.h"
#include "engine/fit/planner.h"
#include "engine/gguf/gguf.h"
#include "engine/library/library.h"
#include "engine/quant/quantizer.h"
#include "test_paths.h"

using namespace ember::app;
using ember::test::AppHarness;

namespace {

const std::string kStoriesPath = ember::test::testdata(ember::test::kStories);
const std::string kSmolPath = ember::test::test_model(ember::test::kSmolLM2);

// `path` requantized to `type` as <dir>/<stem>-<type>.gguf: a draft with the same vocabulary.
QString quantized_copy(const std::string& path, const char* type, const QString& dir) {
    ember::QuantizeOptions q;
    q.input = path;
    q.output = (std::filesystem::path(dir.toStdString()) /
                (std::filesystem::path(path).stem().string() + "-" + type + ".gguf"))
                   .string();
    q.type = type;
    q.n_threads = 1;
    q.allow_requantize = true;
    ember::quantize_model(q);
    return QString::fromStdString(q.output);
}

// The harness's model library (<dir>/models), holding `files`, as the model controller's.
void use_library(AppHarness& h, const QStringList& files) {
    const QString folder = h.dir.filePath(QStringLiteral("models"));
    ember::library::Library lib{std::filesystem::path(folder.toStdString())};
    for (const QString& f : files) lib.import_file(std::filesystem::path(f.toStdString()));
    h.models.setLibraryFolder(folder);
}

void set_speculation(AppHarness& h, const QString& mode) {
    QVariantMap s = h.chat.sampling();
    s[QStringLiteral("speculation")] = mode;
    h.chat.setSampling(s);
}

// The greedy answer to `prompt` in a new chat of `h` (speculation as `mode`).
QString answer(AppHarness& h, const QString& prompt, int max_tokens, const QString& mode) {
    h.chat.newConversation();
    h.set_sampling(max_tokens);
    set_speculation(h, mode);
    QSignalSpy done(&h.chat, &ChatController::answerFinished);
    if (!h.chat.send(prompt)) return QStringLiteral("<not sent>");
    if (!done.wait(120'000) || done.last().at(2).toString() == QLatin1String("error"))
        return QStringLiteral("<failed>");
    return h.store.store->messages(h.chat.currentConversationId()).back().content;
}

// Waits until the model controller's draft listing says `reason` is "" (or not).
bool wait_drafts(AppHarness& h, bool offered) {
    return QTest::qWaitFor([&] { return h.models.draftReason().isEmpty() == offered; }, 30'000);
}

uint64_t held_bytes(const ember::TelemetrySnapshot& s) {
    uint64_t n = 0;
    for (const ember::DeviceMemory& m : s.memory) n += m.held();
    return n;
}

}  // namespace

class TestChatDraft : public QObject {
    Q_OBJECT
    QTemporaryDir copies_;  // the quantized drafts, made once
    QString stories_q8_, smol_q4_0_;

private slots:
    void initTestCase() {
        EMBER_REQUIRE_FILE(kStoriesPath);
        EMBER_REQUIRE_FILE(kSmolPath);
        stories_q8_ = quantized_copy(kStoriesPath, "Q8_0", copies_.path());
        smol_q4_0_ = quantized_copy(kSmolPath, "Q4_0", copies_.path());
    }

    // Greyed with the reason while the library has no draft for the model; offered, with the
    // draft listed, once it has one; the reason again with no model loaded.
    void optionFollowsTheLibrary() {
        AppHarness h;
        QVERIFY(h.chat.draftModelReason().contains(QStringLiteral("no model is loaded")));
        use_library(h, {QString::fromStdString(kSmolPath)});  // another vocabulary, and larger
        QVERIFY2(h.load(kStoriesPath), qPrintable(h.models.error()));
        QVERIFY(wait_drafts(h, false));
        QTRY_VERIFY(h.chat.draftModelReason().contains(QStringLiteral("no model in your library")));
        QVERIFY(h.models.drafts().isEmpty());

        QSignalSpy reason_changed(&h.chat, &ChatController::draftModelReasonChanged);
        use_library(h, {stories_q8_});
        QVERIFY(wait_drafts(h, true));
        QCOMPARE(h.chat.draftModelReason(), QString());
        QVERIFY(reason_changed.count() > 0);  // QML's binding follows it
        QCOMPARE(h.models.drafts().size(), 1);
        const QVariantMap d = h.models.drafts().at(0).toMap();
        QCOMPARE(d.value("path").toString(), stories_q8_);
        QCOMPARE(d.value("name").toString(), QStringLiteral("stories260K-Q8_0"));

        h.models.unload();
        QVERIFY(wait_drafts(h, false));
        QVERIFY(h.chat.draftModelReason().contains(QStringLiteral("no model is loaded")));
    }

    // stories260K drafted by its Q8_0 copy: the same greedy reply as without a draft, the
    // drafts counted in the monitor's telemetry, the draft's bytes in its memory figure; the
    // choice kept for the model across a reload; unloading the model unloads the draft.
    void draftGivesTheSameGreedyReply() {
        AppHarness h;
        use_library(h, {stories_q8_});
        QVERIFY2(h.load(kStoriesPath), qPrintable(h.models.error()));
        const QString prompt = QStringLiteral("Once upon a time");
        const QString plain = answer(h, prompt, 96, QStringLiteral("off"));
        const uint64_t alone_bytes = held_bytes(h.host.worker()->telemetrySnapshot());
        QVERIFY(!plain.isEmpty() && !plain.startsWith('<'));

        QVERIFY(wait_drafts(h, true));
        h.models.setDraft(stories_q8_);
        QTRY_VERIFY_WITH_TIMEOUT(h.models.ready(), 120'000);
        QCOMPARE(h.models.draftError(), QString());
        QCOMPARE(h.models.draftName(), QStringLiteral("stories260K-Q8_0"));
        QCOMPARE(h.models.draftPath(), stories_q8_);
        QVERIFY(h.models.draftFit().startsWith(QStringLiteral("model + draft: ")));
        QCOMPARE(h.settings.modelDraft(QString::fromStdString(kStoriesPath)), stories_q8_);

        const QString drafted = answer(h, prompt, 96, QStringLiteral("draft"));
        QCOMPARE(drafted, plain);
        const ember::TelemetrySnapshot t = h.host.worker()->telemetrySnapshot();
        qInfo("stories260K + Q8_0 draft: %llu drafted, %llu accepted, %llu passes",
              (unsigned long long)t.speculation.drafted, (unsigned long long)t.speculation.accepted,
              (unsigned long long)t.speculation.passes);
        QVERIFY(t.speculation.drafted > 0);
        // A Q8_0 copy mostly agrees (86 drafted, 80 accepted: the draft proposes the argmax after
        // the chat's repeat penalty, as the target picks).
        QVERIFY(t.speculation.accepted * 2 > t.speculation.drafted);
        QVERIFY(held_bytes(t) > alone_bytes);  // the draft's weights and KV cache are counted
        // The monitor's line reads the same counters.
        MonitorController monitor([w = h.host.worker()] { return w->telemetrySnapshot(); });
        monitor.poll();
        qInfo("monitor: %s", qPrintable(monitor.speculationText()));
        QVERIFY(monitor.speculationText().contains(QStringLiteral("% accepted")));
        QVERIFY(monitor.speculationText().contains(QStringLiteral("tokens/pass")));

        // A chat set to "off" beside it does not draft: the counters stay where they were.
        QCOMPARE(answer(h, prompt, 96, QStringLiteral("off")), plain);
        QCOMPARE(h.host.worker()->telemetrySnapshot().speculation.drafted, t.speculation.drafted);

        // Loading the model again (the next start) brings its draft back.
        QVERIFY(h.load(kStoriesPath));
        QCOMPARE(h.models.draftName(), QStringLiteral("stories260K-Q8_0"));
        h.models.unload();
        QTRY_VERIFY(!h.host.engine().loaded());
        QCOMPARE(held_bytes(h.host.worker()->telemetrySnapshot()), uint64_t{0});
    }

    // SmolLM2 Q4_1 with its Q4_0 copy (nearly its size: the scheduler may pause such a draft),
    // a real chat model through its template: the same greedy reply.
    void smolLM2DraftGivesTheSameGreedyReply() {
        AppHarness h;
        use_library(h, {smol_q4_0_});
        QVERIFY2(h.load(kSmolPath), qPrintable(h.models.error()));
        const QString prompt = QStringLiteral("Write a Python function that adds two numbers.");
        const QString plain = answer(h, prompt, 48, QStringLiteral("off"));
        QVERIFY(!plain.isEmpty() && !plain.startsWith('<'));
        QVERIFY(wait_drafts(h, true));
        h.models.setDraft(smol_q4_0_);
        QTRY_VERIFY_WITH_TIMEOUT(h.models.ready(), 120'000);
        QCOMPARE(h.models.draftError(), QString());
        QCOMPARE(answer(h, prompt, 48, QStringLiteral("draft")), plain);
    }

    // A draft whose vocabulary is not the model's (the saved choice pointing at SmolLM2 for
    // stories260K) is refused with the engine's reason; the model runs alone and answers.
    void otherVocabularyIsRefused() {
        AppHarness h;
        h.settings.setModelDraft(QString::fromStdString(kStoriesPath), QString::fromStdString(kSmolPath));
        QVERIFY2(h.load(kStoriesPath), qPrintable(h.models.error()));
        QVERIFY2(h.models.draftError().contains(QStringLiteral("does not share the vocabulary")),
                 qPrintable(h.models.draftError()));
        QVERIFY(h.models.draftError().startsWith(QStringLiteral("Draft model SmolLM2-135M-Instruct.Q4_1 not used")));
        QCOMPARE(h.models.draftName(), QString());
        const QString a = answer(h, QStringLiteral("Once upon a time"), 16, QStringLiteral("draft"));
        QVERIFY(!a.isEmpty() && !a.startsWith('<'));
        QCOMPARE(h.host.worker()->telemetrySnapshot().speculation.drafted, uint64_t{0});
    }

    // A draft that does not fit beside the model in the budget (the planner counting both) is
    // refused with the planner's reason; the model itself loads.
    void draftThatDoesNotFitIsRefused() {
        AppHarness h;
        QVERIFY(h.load(kStoriesPath));  // the context and sequences the app loads with
        ember::fit::FitOptions fo;
        fo.n_ctx = h.models.info().n_ctx;
        fo.n_seqs = h.models.info().n_seqs;
        const ember::fit::DraftFitPlan both = ember::fit::plan_with_draft(
            ember::fit::fit_model(ember::GgufFile::open(kStoriesPath)),
            ember::fit::fit_model(ember::GgufFile::open(stories_q8_.toStdString())), fo, {0, uint64_t{1} << 40});
        QVERIFY(ember::fit::fits(both));
        LoadRequest r;
        r.path = QString::fromStdString(kStoriesPath);
        r.n_ctx = fo.n_ctx;
        r.n_seqs = fo.n_seqs;
        r.n_threads = 1;
        r.draft_path = stories_q8_;
        // Room for the model and half the draft.
        r.fit_budget = ember::fit::Budget{0, both.target.cpu.total() + both.draft.cpu.total() / 2};
        QSignalSpy loaded(h.host.worker(), &EngineWorker::modelLoaded);
        h.host.load(r);
        QVERIFY(loaded.wait(120'000));
        const auto info = loaded.last().at(0).value<LoadedModelInfo>();
        QVERIFY2(info.draft_error.contains(QStringLiteral("do not fit together")), qPrintable(info.draft_error));
        QVERIFY(info.draft_name.isEmpty());
        QVERIFY(h.host.engine().loaded());
    }
};

QTEST_GUILESS_MAIN(TestChatDraft)
#include "test_chat_draft.moc"
