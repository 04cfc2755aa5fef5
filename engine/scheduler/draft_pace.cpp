// The draft length rule (draft_pace.h).
#include "engine/scheduler/draft_pace.h"

#include <algorithm>

namespace ember {

bool DraftPace::may_draft() {
    if (off) return false;
    if (pause > 0) {
        --pause;
        return false;
    }
    return true;
}

DraftPace next_pace(DraftPace now, const DraftPaceOptions& o, int32_t drafted, int32_t accepted) {
    const int32_t cap = now.limit(o);
    now.probe = false;
    if (accepted > 0) now.misses = 0;
    if (accepted == drafted) {
        now.cap = std::min(o.max_draft, 2 * std::max(cap, drafted));
    } else if (accepted > 0) {
        now.cap = accepted + 1;
    } else if (drafted > 1) {
        now.cap = std::max(1, std::min(cap, drafted) / 2);
    } else {
        now.cap = 1;
        ++now.misses;
        now.off = now.misses >= o.max_misses;
        now.pause = o.pause << std::min(now.misses - 1, 16);
    }
    return now;
}

DraftPace refused_pace(DraftPace now, const DraftPaceOptions& o) {
    now.cap = 1;
    now.pause = o.pause << std::min(now.refusals, o.max_misses);
    now.probe = true;
    ++now.refusals;
    return now;
}

}  // namespace ember
