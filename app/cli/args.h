// Minimal command-line parsing for the `ember` CLI: positionals, `--flag`, `--opt VALUE`,
// `--opt=VALUE` and `-x VALUE`. Plain C++ so the CLI builds on bare CUDA machines.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ember::cli {

class Args {
public:
    // `value_options` lists the options that take a value (e.g. {"-n", "--temp"}); every
    // other `-x`/`--x` is a boolean flag. Throws ember::Error on unknown or incomplete options.
    Args(int argc, char** argv, int first, const std::set<std::string>& value_options,
         const std::set<std::string>& flag_options);

    const std::vector<std::string>& positional() const { return positional_; }
    bool flag(const std::string& name) const { return flags_.count(name) > 0; }
    std::optional<std::string> get(const std::string& name) const;
    std::string get_or(const std::string& name, const std::string& fallback) const;
    // Numbers: the whole value must parse and lie in [lo, hi], else ember::Error names the
    // option, the value and the range (no wrapping, no narrowing, no NaN).
    long long get_int(const std::string& name, long long fallback, long long lo, long long hi) const;
    uint64_t get_u64(const std::string& name, uint64_t fallback) const;
    double get_double(const std::string& name, double fallback, double lo, double hi) const;

private:
    std::vector<std::string> positional_;
    std::set<std::string> flags_;
    std::map<std::string, std::string> values_;
};

}  // namespace ember::cli
