#include "engine/sampling/stop_strings.h"

#include <algorithm>

namespace ember {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::feed(const std::string& chunk) {
    pending_ += chunk;
    // Earliest complete stop string wins.
    size_t first = std::string::npos;
    for (const auto& s : stops_) first = std::min(first, pending_.find(s));
    if (first != std::string::npos) {
        Result r{pending_.substr(0, first), true};
        pending_.clear();
        return r;
    }
    // Hold back the longest tail that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const auto& s : stops_) {
        for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
            if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
                hold = n;
                break;
            }
        }
    }
    Result r{pending_.substr(0, pending_.size() - hold), false};
    pending_.erase(0, pending_.size() - hold);
    return r;
}

std::string StopMatcher::flush() {
    std::string out;
    out.swap(pending_);
    return out;
}

}  // namespace ember
