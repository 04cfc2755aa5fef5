// The fit badge of one downloadable file: the planner's placement turned into the short
// label the page shows ("Fits GPU", "Partial offload", "CPU only", "Too large") and the
// budget the judgement was made against. Types inside, text at the edge: this is the edge.
#pragma once
#include <QString>
#include <QVariantMap>
#include <cstdint>

#include "engine/fit/planner.h"
#include "engine/fit/quant_choice.h"

namespace ember::app {

// "gpu", "split", "cpu", "too-large" (a style key for QML) and its label.
QString badge_key(fit::Placement p);
QString badge_label(fit::Placement p);

// The budget to judge against: the typed values where given ("" = measure this machine:
// free memory of the first CUDA device, available RAM). Throws ember::Error for a budget
// that does not parse (fit::parse_byte_size's message). Blocking (it may load the CUDA
// module): call it on a worker thread.
fit::Budget resolve_budget(const QString& vram, const QString& ram);
// "8.0 GiB VRAM (set), 31.2 GiB RAM (measured)".
QString describe_budget(const fit::Budget& b, bool vram_set, bool ram_set);

// The file-row fields for one ranked file: badge, badgeText, reason, best.
QVariantMap badge_fields(const fit::RankedFile& r, bool best, const QString& best_reason);

}  // namespace ember::app
