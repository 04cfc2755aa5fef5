// Where tests find their data. Missing data is a hard failure (QFAIL), never a skip:
// run scripts/fetch-test-models.sh (the README's test command does) to get the models.
#pragma once
#include <QtTest>
#include <filesystem>
#include <string>

namespace ember::test {

inline std::string testdata(const std::string& rel) { return std::string(EMBER_TESTDATA_DIR) + "/" + rel; }
inline std::string test_model(const std::string& name) { return std::string(EMBER_TEST_MODELS_DIR) + "/" + name; }

inline const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline const char* kGemma3 = "gemma-3-270m-q4_k_m.gguf";
inline const char* kStories = "models/stories260K.gguf";

}  // namespace ember::test

// Fails the current test (loudly) when a required file is absent.
#define EMBER_REQUIRE_FILE(path)                                                                    \
    do {                                                                                            \
        if (!std::filesystem::exists(path))                                                         \
            QFAIL(qPrintable(QString("missing test resource %1 (run scripts/fetch-test-models.sh)") \
                                 .arg(QString::fromStdString(path))));                              \
    } while (0)
