// What this build of Ember is: shown by `ember --version` and the About dialog, and asked for
// in bug reports (a commit and the CUDA architectures say which kernels a user ran).
#pragma once
#include <string>

namespace ember::build {

struct BuildInfo {
    std::string version;             // "0.1.0" (the project version)
    std::string commit;              // "1a2b3c4d5e6f", "...-dirty" for uncommitted changes, "unknown"
    std::string build_type;          // "Release", "RelWithDebInfo", ...
    std::string cxx_compiler;        // "GNU 12.2.0"
    std::string cuda_compiler;       // "NVIDIA 13.0.48"; "" when built without CUDA
    std::string cuda_architectures;  // "90" or "75,80,86"; "" when built without CUDA
};

const BuildInfo& build_info();

// The one-line summary of `ember --version`:
// "ember 0.1.0 (commit 1a2b3c4d5e6f, Release, GNU 12.2.0, CUDA NVIDIA 13.0.48 sm_90)".
std::string version_line(const std::string& program);

}  // namespace ember::build
