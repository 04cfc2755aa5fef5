#include "app/core/stats_format.h"

#include <QStringList>

namespace ember::app {
namespace {

QString tokens_text(int n) { return n == 1 ? QStringLiteral("1 token") : QStringLiteral("%1 tokens").arg(n); }

// How much of the prompt the KV cache already held: the cost a long chat does not pay again.
QString prompt_text(const MessageStats& s) {
    if (!s.prompt_tokens) return {};
    QString t = QStringLiteral("prompt %1").arg(tokens_text(*s.prompt_tokens));
    if (s.reused_tokens && *s.reused_tokens > 0) t += QStringLiteral(", %1 reused").arg(*s.reused_tokens);
    return t;
}

}  // namespace

QString stop_reason_words(StopReason reason) {
    switch (reason) {
        case StopReason::None:
            return {};
        case StopReason::EndOfText:
            return QStringLiteral("end of answer");
        case StopReason::StopString:
            return QStringLiteral("stop string");
        case StopReason::Length:
            return QStringLiteral("hit the token limit");
        case StopReason::Context:
            return QStringLiteral("context full");
        case StopReason::Cancelled:
            return QStringLiteral("stopped");
    }
    return {};
}

QString format_stats_line(const MessageStats& s, MessageState state) {
    QStringList parts;
    if (s.ttft_ms) parts << QStringLiteral("TTFT %1 ms").arg(*s.ttft_ms, 0, 'f', 0);
    if (s.tok_s && *s.tok_s > 0) parts << QStringLiteral("%1 tok/s").arg(*s.tok_s, 0, 'f', 1);
    if (s.n_tokens) parts << tokens_text(*s.n_tokens);
    if (const QString p = prompt_text(s); !p.isEmpty()) parts << p;
    if (!s.model.isEmpty()) parts << s.model;
    if (state == MessageState::Interrupted) parts << QStringLiteral("interrupted");
    else if (const QString why = stop_reason_words(s.stop_reason); !why.isEmpty()) parts << why;
    return parts.join(QStringLiteral(" · "));
}

}  // namespace ember::app
