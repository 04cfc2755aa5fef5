// Stop strings over streamed text. Text that might be the start of a stop string is held
// back until it is known not to be one, so a stop string never reaches the user, even
// when it arrives split across several tokens.
#pragma once
#include <string>
#include <vector>

namespace ember {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);

    struct Result {
        std::string text;      // safe to show now
        bool stopped = false;  // a stop string was found; `text` ends right before it
    };
    Result feed(const std::string& chunk);
    std::string flush();  // end of generation: release what was held back

private:
    std::vector<std::string> stops_;
    std::string pending_;
};

}  // namespace ember
