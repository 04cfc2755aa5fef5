// The fit badge of one downloadable file: the planner's placement turned into the short
// label the page shows ("Fits your GPU", "GPU + CPU", "CPU only", "Too large"), a plain
// sentence saying what happens when it runs here, with the numbers ("Runs fully on your GPU:
// 1.2 GiB of 8.0 GiB VRAM, for chats up to 8192 tokens"), and the budget it was judged
// against. Types inside, text at the edge: this is the edge. The engine's own one-line
// reasons (precise, in the planner's terms) stay what `ember fit` prints.
#pragma once
#include <QString>
#include <QVariantMap>
#include <cstdint>
#include <optional>

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

// What happens when a file with this plan runs here, in plain words with the numbers.
QString plain_reason(const fit::FitPlan& p);
// Which file is recommended and why, in plain words ("Q6_K is the best quality that runs
// fully on your GPU."); empty when nothing was chosen and nothing could be judged.
QString plain_choice(const fit::QuantChoice& c, const fit::ChoiceOptions& o);

// The quantization chooser's options for how the app loads a model (AppSettings: n_ctx 0 =
// automatic, n_seqs = chats kept): each file judged by what its load would allocate. An
// automatic context is judged at the longest the model was made for, shorter (down to
// 4,096) where that is what fits, as the load chooses it (engine/fit/context_choice.h).
fit::ChoiceOptions load_choice_options(int n_ctx, int n_seqs);

// The file-row fields for one ranked file: badge, badgeText, reason, best. `plan`: the plan
// to describe (the chosen file's may be at a shorter context than its ranked plan).
QVariantMap badge_fields(const fit::RankedFile& r, bool best, const std::optional<fit::FitPlan>& plan);

}  // namespace ember::app
