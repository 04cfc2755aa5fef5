#include "app/build_info/build_info.h"

#include "build_commit.h"
#include "build_config.h"

namespace ember::build {

const BuildInfo& build_info() {
    static const BuildInfo info{EMBER_BUILD_VERSION,      EMBER_BUILD_COMMIT,        EMBER_BUILD_TYPE,
                                EMBER_BUILD_CXX_COMPILER, EMBER_BUILD_CUDA_COMPILER, EMBER_BUILD_CUDA_ARCHS};
    return info;
}

std::string version_line(const std::string& program) {
    const BuildInfo& b = build_info();
    std::string line = program + " " + b.version + " (commit " + b.commit + ", " + b.build_type + ", " + b.cxx_compiler;
    if (b.cuda_architectures.empty()) {
        line += ", built without CUDA)";
        return line;
    }
    std::string archs;
    for (char c : b.cuda_architectures) archs += c == ',' ? std::string(" sm_") : std::string(1, c);
    line += ", CUDA " + b.cuda_compiler + " sm_" + archs + ")";
    return line;
}

}  // namespace ember::build
