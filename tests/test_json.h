// JSON fixtures for the doctest suites: nlohmann-json (header-only, Debian's
// nlohmann-json3-dev; carried by scripts/carry-headers.sh to machines without it).
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "test_util.h"

namespace ember::test {

using nlohmann::json;

// The parsed file; throws (naming the file) when it is missing or is not valid JSON.
inline json load_json(const std::string& path) {
    const std::string text = read_file(path);
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
}

}  // namespace ember::test
