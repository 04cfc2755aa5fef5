// ember::Error — the one exception type the engine throws. Messages are meant for users:
// they name the file or object and say what is wrong.
#pragma once
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace ember
