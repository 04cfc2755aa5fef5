// The stats line under an answer (app/core/stats_format): each part appears only when it is
// known, reused tokens only when the cache supplied some, and every stop reason in words.
#include <QtTest>

#include "app/core/stats_format.h"

using namespace ember::app;

class TestStatsFormat : public QObject {
    Q_OBJECT
private slots:
    void fullLineNamesPromptReuseAndStopReason() {
        MessageStats s;
        s.ttft_ms = 85.4;
        s.tok_s = 41.26;
        s.n_tokens = 120;
        s.prompt_tokens = 300;
        s.reused_tokens = 250;
        s.model = QStringLiteral("SmolLM2");
        s.stop_reason = ember::StopReason::EndOfText;
        QCOMPARE(format_stats_line(s, MessageState::Complete),
                 QStringLiteral("TTFT 85 ms · 41.3 tok/s · 120 tokens · prompt 300 tokens, 250 reused · SmolLM2 · "
                                "end of answer"));
    }

    void noReuseAndSingularToken() {
        MessageStats s;
        s.n_tokens = 1;
        s.prompt_tokens = 1;
        s.reused_tokens = 0;
        s.stop_reason = ember::StopReason::Length;
        QCOMPARE(format_stats_line(s, MessageState::Complete),
                 QStringLiteral("1 token · prompt 1 token · hit the token limit"));
    }

    void everyStopReasonHasWords() {
        QCOMPARE(stop_reason_words(ember::StopReason::None), QString());
        QCOMPARE(stop_reason_words(ember::StopReason::StopString), QStringLiteral("stop string"));
        QCOMPARE(stop_reason_words(ember::StopReason::Context), QStringLiteral("context full"));
        QCOMPARE(stop_reason_words(ember::StopReason::Cancelled), QStringLiteral("stopped"));
    }

    void interruptedWinsOverTheStoredReason() {
        MessageStats s;
        s.stop_reason = ember::StopReason::Cancelled;
        QCOMPARE(format_stats_line(s, MessageState::Interrupted), QStringLiteral("interrupted"));
        QCOMPARE(format_stats_line(MessageStats{}, MessageState::Complete), QString());
    }
};

QTEST_GUILESS_MAIN(TestStatsFormat)
#include "test_stats_format.moc"
