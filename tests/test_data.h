// Where the doctest suites (engine, kernels) find their data. Missing data is a hard failure,
// never a skip: run scripts/fetch-test-models.sh (the README's test command does) to get the
// models. Helpers (temp folder, files, child processes): test_util.h; JSON: test_json.h.
// The Qt Test suites (app, QML) use test_paths.h, which has the same paths.
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "test_util.h"  // TempDir, read_file, write_file, run_process

namespace ember::test {

inline std::string testdata(const std::string& rel) { return std::string(EMBER_TESTDATA_DIR) + "/" + rel; }
inline std::string test_model(const std::string& name) { return std::string(EMBER_TEST_MODELS_DIR) + "/" + name; }

inline const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline const char* kGemma3 = "gemma-3-270m-q4_k_m.gguf";
inline const char* kStories = "models/stories260K.gguf";

}  // namespace ember::test

// Fails the current test case (loudly) when a required file is absent.
#define EMBER_REQUIRE_FILE(path)                                                     \
    REQUIRE_MESSAGE(std::filesystem::exists(path), "missing test resource ", (path), \
                    " (run scripts/fetch-test-models.sh)")
