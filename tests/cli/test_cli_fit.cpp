// `ember fit` as a user runs it: the breakdown table and the decision for one file with a
// stated budget, the ranking of a folder of quant files, and bad budgets refused by name.
#include <string>

#include "engine/models/synthetic.h"
#include "test_data.h"

using namespace ember;

namespace {

test::ProcessResult ember_fit(std::vector<std::string> args) {
    args.insert(args.begin(), {EMBER_CLI, "fit"});
    return test::run_process(args, 120000);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ember fit --draft plans the draft in what the model leaves") {
    const std::string smol = test::test_model(test::kSmolLM2);
    const std::string stories = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(smol);
    EMBER_REQUIRE_FILE(stories);
    auto r = ember_fit({smol, "--draft", stories, "--ctx", "2048", "--vram", "24GiB", "--ram", "32GiB"});
    INFO(r.out, r.err);
    CHECK(r.ok());
    CHECK(has(r.out, "model: "));
    CHECK(has(r.out, "draft: "));
    CHECK(has(r.out, "gpu: all 5 layers on the GPU with a 2048-token context"));  // the draft's 5 layers
    CHECK(has(r.out, "model + draft: "));
    r = ember_fit({smol, "--draft", stories, "--vram", "0", "--ram", "16MiB"});
    CHECK(r.exit_code == 1);
}

TEST_CASE("ember fit prints the breakdown and the placement") {
    const std::string smol = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(smol);
    // Everything on a 24 GiB GPU: weights, 180 MiB of F16 KV for 8192 tokens x 30 layers x
    // 192 x 2 x 2 B (K and V), the estimates.
    auto r = ember_fit({smol, "--ctx", "8192", "--vram", "24GiB", "--ram", "32GiB"});
    INFO(r.out, r.err);
    CHECK(r.ok());
    CHECK(has(r.out, "KV cache                  180.0 MiB"));
    CHECK(has(r.out, "gpu: all 30 layers on the GPU with an 8192-token context"));
    // No GPU: all on the CPU, the weights mapped from the file.
    r = ember_fit({smol, "--ctx", "2048", "--vram", "0", "--ram", "8G"});
    CHECK(r.ok());
    CHECK(has(r.out, "cpu: on the CPU (no GPU) with a 2048-token context"));
    CHECK(has(r.out, "weights (mapped file)"));
    // Too little of both: exit status 1 and how much it needs.
    r = ember_fit({smol, "--vram", "0", "--ram", "16MiB"});
    CHECK(r.exit_code == 1);
    CHECK(has(r.out, "too large: does not fit"));
}

TEST_CASE("ember fit with a Q8_0 cache: the KV cache and its bytes per token at 17/32 of F16's") {
    const std::string smol = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(smol);
    // Per token: 30 layers x (K + V) x 192 values; F16 2 B each (23040 B), Q8_0 34 B per 32
    // (6 blocks: 204 B a row, 12240 B).
    auto r = ember_fit({smol, "--ctx", "8192", "--vram", "24GiB", "--ram", "32GiB"});
    INFO(r.out, r.err);
    CHECK(has(r.out, "KV cache per token: 22.5 KiB (F16)"));
    r = ember_fit({smol, "--ctx", "8192", "--vram", "24GiB", "--ram", "32GiB", "--cache-type", "q8_0"});
    CHECK(r.ok());
    CHECK(has(r.out, "KV cache                   95.6 MiB"));  // 12240 B x 8192
    CHECK(has(r.out, "KV cache per token: 12.0 KiB (Q8_0)"));
    r = ember_fit({smol, "--cache-type", "q4"});
    CHECK(r.exit_code == 1);
    CHECK(has(r.err, "option --cache-type: 'q4' is not a KV cache type (f16 or q8_0)"));
}

TEST_CASE("ember fit ranks a folder of quant files and names the one to use") {
    test::TempDir dir;
    for (const char* scheme : {"Q8_0", "Q4_K_M", "F16"})
        write_synthetic_model(dir.path() + "/tiny-" + scheme + ".gguf", synthetic_shape("tiny"), scheme);
    const auto r = ember_fit({dir.path(), "--vram", "8GiB", "--ram", "8GiB", "--ctx", "2048"});
    INFO(r.out, r.err);
    CHECK(r.ok());
    CHECK(has(r.out, "F16: fits your 8.0 GiB GPU with a 2048-token context"));
    CHECK(has(r.out, "use: " + dir.path() + "/tiny-F16.gguf --ctx 2048"));
}

TEST_CASE("ember fit refuses a bad budget by name") {
    const std::string smol = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(smol);
    const auto r = ember_fit({smol, "--vram", "24 potatoes"});
    CHECK(r.exit_code == 1);
    CHECK(has(r.err, "ember fit: error: --vram: '24 potatoes' has an unknown unit"));
}
