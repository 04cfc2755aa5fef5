#include "app/cli/args.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "kernels/common/error.h"

namespace ember::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& value_options,
           const std::set<std::string>& flag_options) {
    for (int i = first; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i) positional_.emplace_back(argv[i]);
            break;
        }
        if (a.size() < 2 || a[0] != '-') {
            positional_.push_back(a);
            continue;
        }
        std::optional<std::string> inline_value;
        if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_value = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        if (value_options.count(a)) {
            if (!inline_value && i + 1 >= argc) throw Error("option " + a + " needs a value");
            values_[a] = inline_value ? *inline_value : argv[++i];
        } else if (flag_options.count(a) && !inline_value) {
            flags_.insert(a);
        } else {
            throw Error("unknown option " + a);
        }
    }
}

std::optional<std::string> Args::get(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::nullopt : std::optional(it->second);
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
    return get(name).value_or(fallback);
}

namespace {

[[noreturn]] void out_of_range(const std::string& name, const std::string& v, const std::string& lo,
                               const std::string& hi) {
    throw Error("option " + name + ": " + v + " is out of range (" + lo + ".." + hi + ")");
}

}  // namespace

long long Args::get_int(const std::string& name, long long fallback, long long lo, long long hi) const {
    auto v = get(name);
    if (!v) return fallback;
    long long x = 0;
    const char* end = v->data() + v->size();
    const auto [p, ec] = std::from_chars(v->data(), end, x);
    if (ec == std::errc::result_out_of_range && p == end)
        out_of_range(name, *v, std::to_string(lo), std::to_string(hi));
    if (v->empty() || ec != std::errc() || p != end)
        throw Error("option " + name + " expects an integer, got '" + *v + "'");
    if (x < lo || x > hi) out_of_range(name, *v, std::to_string(lo), std::to_string(hi));
    return x;
}

uint64_t Args::get_u64(const std::string& name, uint64_t fallback) const {
    auto v = get(name);
    if (!v) return fallback;
    uint64_t x = 0;
    const char* end = v->data() + v->size();
    const auto [p, ec] = std::from_chars(v->data(), end, x);
    if (ec == std::errc::result_out_of_range && p == end) out_of_range(name, *v, "0", std::to_string(UINT64_MAX));
    if (v->empty() || ec != std::errc() || p != end)
        throw Error("option " + name + " expects a non-negative integer, got '" + *v + "'");
    return x;
}

double Args::get_double(const std::string& name, double fallback, double lo, double hi) const {
    auto v = get(name);
    if (!v) return fallback;
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || std::isspace(static_cast<unsigned char>((*v)[0])) || !std::isfinite(x))
        throw Error("option " + name + " expects a finite number, got '" + *v + "'");
    if (x < lo || x > hi) {
        std::ostringstream a, b;
        a << lo;
        b << hi;
        out_of_range(name, *v, a.str(), b.str());
    }
    return x;
}

}  // namespace ember::cli
