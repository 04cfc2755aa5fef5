#include "app/core/stats_format.h"

#include <QStringList>

namespace ember::app {

QString format_stats_line(const MessageStats& s, MessageState state) {
    QStringList parts;
    if (s.ttft_ms) parts << QStringLiteral("TTFT %1 ms").arg(*s.ttft_ms, 0, 'f', 0);
    if (s.tok_s && *s.tok_s > 0) parts << QStringLiteral("%1 tok/s").arg(*s.tok_s, 0, 'f', 1);
    if (s.n_tokens)
        parts << (*s.n_tokens == 1 ? QStringLiteral("1 token") : QStringLiteral("%1 tokens").arg(*s.n_tokens));
    if (!s.model.isEmpty()) parts << s.model;
    if (state == MessageState::Interrupted) parts << QStringLiteral("interrupted");
    else if (s.stop_reason == StopReason::Cancelled) parts << QStringLiteral("stopped");
    else if (s.stop_reason == StopReason::Length) parts << QStringLiteral("hit the token limit");
    else if (s.stop_reason == StopReason::Context) parts << QStringLiteral("context full");
    return parts.join(QStringLiteral(" · "));
}

}  // namespace ember::app
