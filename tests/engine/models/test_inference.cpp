// End-to-end CPU inference on real models against independent references:
//  - stories260K: 256 greedy tokens from BOS equal an independent float32 reference exactly;
//  - SmolLM2-135M (Q4_1) and Gemma 3 270M (Q4_K_M): teacher-forced top-5 logits and greedy
//    tokens against llama.cpp (tests/fixtures/reference/*.json, see its README), and 32
//    free-running greedy tokens equal to llama.cpp's on the prompts without near-ties;
//  - chat through SmolLM2's own template answers "Paris".
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <fstream>

#include "engine/runtime/chat.h"
#include "kernels/common/error.h"
#include "engine/runtime/model.h"
#include "engine/runtime/sequence.h"
#include "test_paths.h"

using namespace ember;

namespace {

// Tolerances against llama.cpp. Both engines quantize activations to 8 bits for the integer
// dot products (~0.5% relative error per matmul, see tests/kernels), each with its own
// rounding, through 18-30 layers. Against the float64 reference below, llama.cpp itself is
// off by up to 1.32 (mean 0.10-0.33) on these prompts and Ember by less; the two errors add
// up here, and grow over 33 teacher-forced steps (measured max 2.57 on one step, mean
// 0.16-0.38; a Debug build rounds differently: max 2.91, mean 0.45). With the weights
// dequantized to f32, Ember matches float64 to 1e-3. A real bug (a wrong RoPE base, a
// missing norm) moves the mean by whole units.
constexpr float kLogitTolMax = 4.0f;
constexpr float kLogitTolMean = 0.5f;
// Where llama.cpp's best token leads the runner-up by more than this, ours must agree.
constexpr float kTieMargin = 1.0f;

std::unique_ptr<Model> load(const std::string& path, int64_t n_ctx = 512) {
    LoadOptions o;
    o.path = path;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    return Model::load(o);
}

std::vector<int32_t> ints(const QJsonArray& a) {
    std::vector<int32_t> v;
    for (const auto& x : a) v.push_back(x.toInt());
    return v;
}

QJsonObject read_fixture(const QString& name) {
    QFile f(QString(EMBER_SOURCE_DIR) + "/tests/fixtures/reference/" + name);
    if (!f.open(QIODevice::ReadOnly)) qFatal("missing fixture %s", qPrintable(f.fileName()));
    return QJsonDocument::fromJson(f.readAll()).object();
}

int argmax(const std::vector<float>& l) { return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin()); }

struct Errors {
    float max = 0;
    double sum = 0;
    int n = 0;
    bool argmax_ok = true;
};

// Teacher-forced comparison of one prompt: feeds llama.cpp's greedy tokens and compares the
// top-5 logits after the prompt and after every step.
Errors compare_prompt(Model& model, const QJsonObject& p) {
    Sequence seq(model);
    const auto prompt = ints(p["prompt_ids"].toArray());
    const auto greedy = ints(p["greedy_ids"].toArray());
    const QJsonArray top5 = p["top5"].toArray();
    const QJsonArray margins = p["margins"].toArray();
    Errors err;
    std::vector<float> logits = seq.prefill(prompt);
    for (int s = 0; s <= static_cast<int>(greedy.size()); ++s) {
        float step_err = 0;
        for (const auto& entry : top5[s].toArray()) {
            const int id = entry.toArray()[0].toInt();
            const float ref = static_cast<float>(entry.toArray()[1].toDouble());
            const float e = std::abs(logits[static_cast<size_t>(id)] - ref);
            step_err = std::max(step_err, e);
            err.sum += e;
            ++err.n;
        }
        if (qEnvironmentVariableIsSet("EMBER_TEST_VERBOSE")) qInfo("step %d: top-5 error %.4f", s, step_err);
        err.max = std::max(err.max, step_err);
        const int ref_top = top5[s].toArray()[0].toArray()[0].toInt();
        if (margins[s].toDouble() > kTieMargin && argmax(logits) != ref_top) {
            qWarning("%s step %d: argmax %d, llama.cpp %d (margin %.3f)", qPrintable(p["id"].toString()), s, argmax(logits),
                     ref_top, margins[s].toDouble());
            err.argmax_ok = false;
        }
        if (s == static_cast<int>(greedy.size())) break;
        const int32_t next[1] = {greedy[static_cast<size_t>(s)]};
        logits = seq.prefill(next);
    }
    return err;
}

void compare_model(const std::string& path, const QString& fixture) {
    EMBER_REQUIRE_FILE(path);
    auto model = load(path);
    const QJsonObject fx = read_fixture(fixture);
    for (const auto& pv : fx["prompts"].toArray()) {
        const QJsonObject p = pv.toObject();
        // Our tokenizer must produce llama.cpp's prompt ids.
        const std::string text = p["text"].toString().toStdString();
        auto ids = model->tokenizer().encode(text, false, p["parse_special"].toBool());
        if (p["add_bos"].toBool()) ids.insert(ids.begin(), model->tokenizer().bos());
        QCOMPARE(ids, ints(p["prompt_ids"].toArray()));
        const Errors e = compare_prompt(*model, p);
        const double mean = e.sum / e.n;
        qInfo("%s / %s: top-5 logit error max %.4f mean %.4f", qPrintable(fixture), qPrintable(p["id"].toString()), e.max, mean);
        QVERIFY2(e.max <= kLogitTolMax, qPrintable(QString("%1: max logit error %2").arg(p["id"].toString()).arg(e.max)));
        QVERIFY2(mean <= kLogitTolMean, qPrintable(QString("%1: mean logit error %2").arg(p["id"].toString()).arg(mean)));
        QVERIFY2(e.argmax_ok, qPrintable(p["id"].toString() + ": greedy token differs where llama.cpp is decisive"));
    }
}

// Free-running greedy decoding against llama.cpp's 32 greedy tokens, for the prompts where
// llama.cpp's best token leads the runner-up by at least kDecisiveMargin at every step (the
// counting prompts of the fixture): no step is a near-tie that either engine's rounding may
// decide, so the sequences must be identical. Requires at least 3 such prompts per model, so
// the check cannot silently become empty.
constexpr double kDecisiveMargin = 0.9;

void free_running_greedy(const std::string& path, const QString& fixture) {
    EMBER_REQUIRE_FILE(path);
    auto model = load(path);
    const QJsonObject fx = read_fixture(fixture);
    int checked = 0;
    for (const auto& pv : fx["prompts"].toArray()) {
        const QJsonObject p = pv.toObject();
        const QJsonArray margins = p["margins"].toArray();
        const auto expected = ints(p["greedy_ids"].toArray());
        double min_margin = 1e9;
        for (size_t s = 0; s < expected.size(); ++s) min_margin = std::min(min_margin, margins[static_cast<int>(s)].toDouble());
        if (min_margin < kDecisiveMargin) continue;
        Sequence seq(*model);
        GenerateOptions g;
        g.sampling = SamplingParams::greedy();
        g.max_tokens = static_cast<int32_t>(expected.size()) + 1;  // the last one is not fed back
        g.ignore_eog = true;
        const auto prompt = ints(p["prompt_ids"].toArray());
        seq.generate(prompt, g, {});
        const std::vector<int32_t> got(seq.tokens().begin() + static_cast<std::ptrdiff_t>(prompt.size()), seq.tokens().end());
        qInfo("%s / %s: %zu free-running greedy tokens, min llama.cpp margin %.3f", qPrintable(fixture),
              qPrintable(p["id"].toString()), got.size(), min_margin);
        QCOMPARE(got, expected);
        ++checked;
    }
    QVERIFY2(checked >= 3, qPrintable(QString("only %1 decisive prompts in %2").arg(checked).arg(fixture)));
}

// Against the float64 numpy reference (tests/reference/numpy_forward.py) run on the same
// dequantized weights: only Ember's own rounding (8-bit activations in the integer dot
// products, F16 KV cache) separates the two, so the bound is tight.
// Measured (2026-11-30): max 1.27, mean 0.07-0.31 over the top-10 of 9 steps per prompt;
// llama.cpp on the same prompts: max 1.32, mean 0.10-0.33 (no looser than its own error).
constexpr float kF64TolMax = 1.5f;
constexpr float kF64TolMean = 0.35f;

void compare_f64(const std::string& path, const QString& fixture) {
    EMBER_REQUIRE_FILE(path);
    auto model = load(path);
    const QJsonObject fx = read_fixture(fixture);
    for (const auto& pv : fx["prompts"].toArray()) {
        const QJsonObject p = pv.toObject();
        Sequence seq(*model);
        const auto greedy = ints(p["greedy_ids"].toArray());
        const QJsonArray rows = p["top10"].toArray();
        std::vector<float> logits = seq.prefill(ints(p["prompt_ids"].toArray()));
        float max_err = 0;
        double sum = 0;
        int n = 0;
        for (int s = 0; s < rows.size(); ++s) {
            const QJsonArray top = rows[s].toArray();
            for (const auto& e : top) {
                const float err = std::abs(logits[static_cast<size_t>(e.toArray()[0].toInt())] - static_cast<float>(e.toArray()[1].toDouble()));
                max_err = std::max(max_err, err);
                sum += err;
                ++n;
            }
            const double margin = top[0].toArray()[1].toDouble() - top[1].toArray()[1].toDouble();
            if (margin > 2 * kF64TolMax) QCOMPARE(argmax(logits), top[0].toArray()[0].toInt());
            if (s + 1 < rows.size()) {
                const int32_t next[1] = {greedy[static_cast<size_t>(s)]};
                logits = seq.prefill(next);
            }
        }
        qInfo("%s / %s: top-10 logit error vs float64 max %.4f mean %.4f", qPrintable(fixture), qPrintable(p["id"].toString()),
              max_err, sum / n);
        QVERIFY2(max_err <= kF64TolMax, qPrintable(p["id"].toString()));
        QVERIFY2(sum / n <= kF64TolMean, qPrintable(p["id"].toString()));
    }
}

}  // namespace

class TestInference : public QObject {
    Q_OBJECT
private slots:
    void storiesGreedyMatchesReference() {
        const std::string path = test::testdata(test::kStories);
        EMBER_REQUIRE_FILE(path);
        std::ifstream in(test::testdata("models/stories260K.greedy256.ids.txt"));
        std::string header;
        std::getline(in, header);
        std::vector<int32_t> expected;
        for (int32_t id; in >> id;) expected.push_back(id);
        QCOMPARE(expected.size(), size_t(256));
        auto model = load(path, 512);
        Sequence seq(*model);
        GenerateOptions g;
        g.sampling = SamplingParams::greedy();
        g.max_tokens = 256;
        g.ignore_eog = true;
        const int32_t bos[1] = {1};
        std::vector<int32_t> got;
        // Collect ids by re-reading the sequence's tokens after generation.
        const GenerateStats st = seq.generate(bos, g, {});
        QCOMPARE(st.generated_tokens, 256);
        got.assign(seq.tokens().begin() + 1, seq.tokens().end());
        // The last sampled token is not fed back, so the cache holds 255 generated tokens.
        QCOMPARE(got.size(), size_t(255));
        QCOMPARE(got, std::vector<int32_t>(expected.begin(), expected.begin() + 255));
    }
    void smolLM2MatchesFloat64Reference() { compare_f64(test::test_model(test::kSmolLM2), "smollm2.f64.json"); }
    void gemma3MatchesFloat64Reference() { compare_f64(test::test_model(test::kGemma3), "gemma3.f64.json"); }
    void smolLM2MatchesLlamaCpp() { compare_model(test::test_model(test::kSmolLM2), "smollm2.json"); }
    void gemma3MatchesLlamaCpp() { compare_model(test::test_model(test::kGemma3), "gemma3.json"); }
    void smolLM2FreeRunningGreedyMatchesLlamaCpp() { free_running_greedy(test::test_model(test::kSmolLM2), "smollm2.json"); }
    void gemma3FreeRunningGreedyMatchesLlamaCpp() { free_running_greedy(test::test_model(test::kGemma3), "gemma3.json"); }
    void chatAnswersParis() {
        // SmolLM2 through its own ChatML template (with its default system prompt), greedy.
        // The bare question starts at a near-tie between "The" and "L'"/"La" (margin 0.09 in
        // a float64 reference), so either engine may answer in French; with "Answer in
        // English." every greedy step leads by >= 1.0 in llama.cpp.
        const std::string path = test::test_model(test::kSmolLM2);
        EMBER_REQUIRE_FILE(path);
        auto model = load(path, 1024);
        QVERIFY(model->chat_template().source_desc.find("model") != std::string::npos);
        Sequence seq(*model);
        GenerateOptions g;
        g.sampling = SamplingParams::greedy();
        g.max_tokens = 48;
        auto ask = [&](const std::vector<ChatMessage>& msgs, GenerateStats* st = nullptr) {
            std::string reply;
            const auto s = seq.generate(chat_prompt_tokens(*model, msgs), g, [&](std::string_view t) { reply += t; return true; });
            if (st) *st = s;
            qInfo("reply: %s", reply.c_str());
            return reply;
        };
        const std::vector<ChatMessage> q1 = {{"user", "What is the capital of France? Answer in English."}};
        GenerateStats st1;
        const std::string reply = ask(q1, &st1);
        QVERIFY2(reply.find("Paris") != std::string::npos, reply.c_str());
        QVERIFY(reply.find("<|im_end|>") == std::string::npos);
        QVERIFY(st1.stop_reason == StopReason::EndOfText);
        // The next turn reuses the first turn's cache: only the new tokens are processed.
        auto q2 = q1;
        q2.push_back({"assistant", reply});
        q2.push_back({"user", "And of Italy?"});
        GenerateStats st2;
        ask(q2, &st2);
        QVERIFY2(st2.reused_tokens >= st1.prompt_tokens, qPrintable(QString::number(st2.reused_tokens)));
    }
    void completionKeepsTheSpaceBeforeItsFirstWord() {
        // SentencePiece marks word starts with a space; a completion continues the prompt, so
        // "Once upon a" + " time" must not lose that space (the encoder's own space prefix is
        // only dropped at the very start of a text).
        auto model = load(test::testdata(test::kStories), 64);
        Sequence seq(*model);
        auto prompt = model->tokenizer().encode("Once upon a", false, false);
        prompt.insert(prompt.begin(), model->tokenizer().bos());
        GenerateOptions g;
        g.sampling = SamplingParams::greedy();
        g.max_tokens = 3;
        std::string text;
        seq.generate(prompt, g, [&](std::string_view t) { text += t; return true; });
        QCOMPARE(text.substr(0, 5), std::string(" time"));
    }
    void promptLongerThanContextIsAClearError() {
        auto model = load(test::testdata(test::kStories), 64);
        Sequence seq(*model);
        std::vector<int32_t> prompt(100, 5);
        try {
            seq.generate(prompt, GenerateOptions{}, {});
            QFAIL("no error");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("does not fit the context of 64") != std::string::npos);
        }
        QCOMPARE(seq.tokens().size(), size_t(0));
    }
};

QTEST_GUILESS_MAIN(TestInference)
#include "test_inference.moc"
