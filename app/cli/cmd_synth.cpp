// `ember synth --shape llama-3.2-1b --type Q4_0 -o FILE`: writes a random-weight model at a
// real shape, for benchmarks.
#include <cstdio>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "kernels/common/error.h"
#include "engine/models/synthetic.h"

namespace ember::cli {

int cmd_synth(int argc, char** argv) {
    Args args(argc, argv, 0, {"--shape", "--type", "-o", "--output", "--seed"}, {});
    const auto out = args.get("-o") ? args.get("-o") : args.get("--output");
    if (!out) {
        std::string shapes;
        for (const auto& n : synthetic_shape_names()) shapes += (shapes.empty() ? "" : "|") + n;
        throw Error("usage: ember synth --shape (" + shapes +
                    ") --type (F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q4_K|Q5_K|Q6_K|Q4_K_M) -o FILE");
    }
    const SyntheticShape shape = synthetic_shape(args.get_or("--shape", "llama-3.2-1b"));
    const std::string type = args.get_or("--type", "Q4_0");
    write_synthetic_model(*out, shape, type, args.get_u64("--seed", 42));
    std::printf("wrote %s (%s, %s)\n", out->c_str(), shape.name.c_str(), type.c_str());
    return 0;
}

}  // namespace ember::cli
