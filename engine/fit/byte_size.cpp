#include "engine/fit/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "kernels/common/error.h"

namespace ember::fit {
namespace {

std::string lower(std::string_view s) {
    std::string out;
    for (char c : s)
        if (!std::isspace(static_cast<unsigned char>(c)))
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Powers of 1024 by unit name, or 0 for an unknown unit.
double unit_scale(const std::string& unit) {
    static const char* const prefixes = "kmgt";
    if (unit.empty() || unit == "b") return 1.0;
    const size_t p = std::string_view(prefixes).find(unit[0]);
    if (p == std::string_view::npos) return 0.0;
    const std::string rest = unit.substr(1);
    if (rest != "" && rest != "b" && rest != "ib") return 0.0;
    return std::pow(1024.0, static_cast<double>(p + 1));
}

}  // namespace

uint64_t parse_byte_size(std::string_view text, std::string_view what) {
    const std::string s = lower(text);
    auto bad = [&](const std::string& why) -> Error {
        return Error(std::string(what) + ": '" + std::string(text) + "' " + why +
                     " (write a size such as 24GiB, 24G, 512MiB or 8000000000)");
    };
    size_t n = 0;
    while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
    if (n == 0) throw bad(s.empty() ? "is empty" : "does not start with a number");
    double value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + n, value);
    if (ec != std::errc() || end != s.data() + n) throw bad("is not a number");
    const double scale = unit_scale(s.substr(n));
    if (scale == 0.0) throw bad("has an unknown unit");
    const double bytes = value * scale;
    if (!(bytes + 0.5 < 18446744073709551616.0)) throw bad("is more than 16 EiB");
    return static_cast<uint64_t>(bytes + 0.5);
}

}  // namespace ember::fit
