// The fit planner's options as `ember fit` and `ember pull` take them (--ctx, --vram, --ram,
// --batch, --seqs, --cache-type, --margin), and the ranking table both print.
#pragma once
#include <string>
#include <cstdint>
#include <set>
#include <vector>

#include "app/cli/args.h"
#include "engine/fit/quant_choice.h"

namespace ember::cli {

// The value options above, for Args' list of options taking a value.
std::set<std::string> fit_value_options();

// Measured (free VRAM, available RAM) unless given; prints what was measured.
fit::Budget budget_from_args(const Args& a);
// --ctx 0 (the default) means the model's own context for one file, 8192 for a choice.
fit::FitOptions fit_options_from_args(const Args& a);
fit::ChoiceOptions choice_options_from_args(const Args& a);

// A byte count as text, "-" for 0 (the planner's tables: nothing of that kind there).
std::string bytes_or_dash(uint64_t n);

// Every candidate, best first, the chosen one marked, then the one-line reason.
void print_ranking(const fit::QuantChoice& c);

}  // namespace ember::cli
