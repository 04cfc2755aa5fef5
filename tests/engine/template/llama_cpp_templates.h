// The real chat templates in llama.cpp's models/templates (the vendored tree of the
// llama-cpp-python source package that scripts/llama-cpp-tools.sh unpacks), read by name.
// A missing file fails the test.
#pragma once
#include <cstdlib>
#include <string>

#include "test_data.h"

namespace ember::test {

inline std::string llama_cpp_template(const std::string& name) {
    const char* home = std::getenv("HOME");
    REQUIRE(home);
    const std::string path = std::string(home) +
                             "/.cache/ember/llama-tools/src-0.3.36/llama_cpp_python-0.3.36/vendor/llama.cpp/"
                             "models/templates/" +
                             name;
    EMBER_REQUIRE_FILE(path);
    return read_file(path);
}

}  // namespace ember::test
