// How much a speculating request drafts next, from how its last draft went: the rule that
// makes speculation turn itself down, and off, where it stops paying. Every guessed token
// lengthens the verification pass; a guess only pays when it stands.
//   - a draft wholly accepted: the next may be twice as long (up to max_draft);
//   - partly accepted: as long as what stood plus one;
//   - nothing accepted from several guesses: half as long;
//   - a single guess rejected: no drafting for the next `pause` decodes, the pause doubling with
//     each such miss in a row; after `max_misses` in a row the request drafts no more (off).
// Any guess that stands resets the misses. Open-ended text thus costs a few single guesses,
// then nothing.
#pragma once
#include <cstdint>

namespace ember {

struct DraftPaceOptions {
    int32_t max_draft = 8;   // tokens per draft at most
    int32_t pause = 16;      // decodes without a draft after the first single-guess miss
    int32_t max_misses = 4;  // single-guess misses in a row that turn drafting off
};

struct DraftPace {
    int32_t cap = -1;      // the next draft's length at most (-1: max_draft)
    int32_t pause = 0;     // decodes left without a draft
    int32_t misses = 0;    // single-guess misses in a row
    bool off = false;      // the request drafts no more
    int32_t refusals = 0;  // refusals in a row: passes that said a draft would not pay (pass_cost.h)
    bool probe = false;    // the next draft is a single guess to learn from (PassCost::allows)
    // Whether this decode may draft, counting down a pause (call once per decode).
    bool may_draft();
    int32_t limit(const DraftPaceOptions& o) const { return cap < 0 ? o.max_draft : cap; }
};

// The pace after a draft of `drafted` tokens of which `accepted` stood.
DraftPace next_pace(DraftPace now, const DraftPaceOptions& o, int32_t drafted, int32_t accepted);

// The pace after the pass said this request's draft would not pay for its rows: no drafting
// for a pause (doubling with each refusal in a row, up to max_misses doublings), then a single
// guess (a probe), which keeps the acceptance rate current (the text may turn repetitive) for one
// row a pause, drafted where a standing guess would tip the rule (PassCost::allows; else the pass
// refuses it too, and the next pause is longer). A pass that says yes resets the refusals.
DraftPace refused_pace(DraftPace now, const DraftPaceOptions& o);

}  // namespace ember
