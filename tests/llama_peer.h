// The llama.cpp peer's tools for tests that compare against it: scripts/llama-cpp-tools.sh
// builds them once from the llama-cpp-python source package (cached) and prints their folder
// last. A missing peer fails the test (REQUIRE), never skips it. Doctest targets only.
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "test_util.h"

namespace ember::test {

// The folder holding `target` (built on first use; every target lands in the same folder).
inline std::string llama_tools_dir(const char* target = "llama-perplexity") {
    const auto r =
        run_process({std::string(EMBER_SOURCE_DIR) + "/scripts/llama-cpp-tools.sh", target}, 3 * 3600 * 1000);
    REQUIRE_MESSAGE(r.ok(), "scripts/llama-cpp-tools.sh failed:\n", r.err);
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.find_last_of('\n') + 1);
}

}  // namespace ember::test
