// `ember synth --shape llama-3.2-1b --type Q4_0 -o FILE`: writes a random-weight model at a
// real shape, for benchmarks. `--layers N`: its first N layers, a draft model for it.
#include <cstdio>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "kernels/common/error.h"
#include "engine/models/synthetic.h"

namespace ember::cli {

int cmd_synth(int argc, char** argv) {
    Args args(argc, argv, 0, {"--shape", "--type", "-o", "--output", "--seed", "--layers"}, {});
    const auto out = args.get("-o") ? args.get("-o") : args.get("--output");
    if (!out) {
        std::string shapes;
        for (const auto& n : synthetic_shape_names()) shapes += (shapes.empty() ? "" : "|") + n;
        throw Error(
            "usage: ember synth --shape (" + shapes +
            ") --type (F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q4_K|Q5_K|Q6_K|Q4_K_M) [--seed S] [--layers N] -o FILE");
    }
    SyntheticShape shape = synthetic_shape(args.get_or("--shape", "llama-3.2-1b"));
    // --layers N: the shape's first N layers only. The weights are drawn in file order from the
    // seed, so they are the full model's first N layers and embeddings (a tied output head is
    // the embeddings): with the same --seed and --type, a draft model for the full one.
    if (args.get("--layers")) {
        if (shape.arch != "llama" || !shape.tied_embeddings)
            throw Error("--layers: only for llama shapes with tied embeddings (the output head is drawn last)");
        shape.n_layers = static_cast<int32_t>(args.get_int("--layers", shape.n_layers, 1, shape.n_layers));
    }
    const std::string type = args.get_or("--type", "Q4_0");
    write_synthetic_model(*out, shape, type, args.get_u64("--seed", 42));
    std::printf("wrote %s (%s, %s)\n", out->c_str(), shape.name.c_str(), type.c_str());
    return 0;
}

}  // namespace ember::cli
