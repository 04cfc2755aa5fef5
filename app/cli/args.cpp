#include "app/cli/args.h"

#include <cstdlib>

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

long long Args::get_int(const std::string& name, long long fallback) const {
    auto v = get(name);
    if (!v) return fallback;
    char* end = nullptr;
    const long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0') throw Error("option " + name + " expects an integer, got '" + *v + "'");
    return x;
}

double Args::get_double(const std::string& name, double fallback) const {
    auto v = get(name);
    if (!v) return fallback;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0') throw Error("option " + name + " expects a number, got '" + *v + "'");
    return x;
}

}  // namespace ember::cli
