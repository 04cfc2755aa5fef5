// The one-line summary under an answer:
// "TTFT 85 ms · 41.3 tok/s · 120 tokens · prompt 300 tokens, 250 reused · SmolLM2 · end of answer".
#pragma once
#include <QString>

#include "app/storage/records.h"

namespace ember::app {

QString format_stats_line(const MessageStats& stats, MessageState state);
// Why an answer ended, in words ("end of answer", "stopped", ...); "" for None.
QString stop_reason_words(StopReason reason);

}  // namespace ember::app
