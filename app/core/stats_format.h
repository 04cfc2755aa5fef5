// The one-line summary under an answer: "TTFT 85 ms · 41.3 tok/s · 120 tokens · SmolLM2".
#pragma once
#include <QString>

#include "app/storage/records.h"

namespace ember::app {

QString format_stats_line(const MessageStats& stats, MessageState state);

}  // namespace ember::app
