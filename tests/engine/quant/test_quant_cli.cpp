// `ember quantize` and `ember perplexity` as a user runs them: exit status, output, messages.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_data.h"

namespace {

ember::test::ProcessResult ember_cli(std::vector<std::string> args) {
    args.insert(args.begin(), EMBER_CLI);
    return ember::test::run_process(args, 120000);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kText = "/usr/share/common-licenses/GPL-3";

}  // namespace

TEST_CASE("ember quantize writes the file and says what it did; bad types are named") {
    const std::string src = ember::test::testdata(ember::test::kStories);
    EMBER_REQUIRE_FILE(src);
    ember::test::TempDir dir;
    const auto ok = ember_cli({"quantize", src, dir.file("q.gguf"), "Q4_K_M", "--verbose", "--quiet"});
    CHECK(ok.ok());
    CHECK(contains(ok.out, "wrote " + dir.file("q.gguf") + " (Q4_K_M)"));
    CHECK(contains(ok.out, "blk.4.attn_v.weight"));  // more_bits layer: Q6_K, 64 columns -> Q8_0
    CHECK(contains(ok.out, "-> Q8_0   (row length: fallback)"));
    CHECK(std::filesystem::exists(dir.file("q.gguf")));
    const auto bad = ember_cli({"quantize", src, dir.file("x.gguf"), "Q9"});
    CHECK(bad.exit_code == 1);
    CHECK(contains(bad.err, "unknown quantization type 'Q9'"));
    CHECK_FALSE(std::filesystem::exists(dir.file("x.gguf")));
    CHECK(contains(ember_cli({"quantize", src}).err, "usage: ember quantize"));
}

TEST_CASE("ember perplexity: report lines, base file round trip, short text error") {
    const std::string model = ember::test::testdata(ember::test::kStories);
    EMBER_REQUIRE_FILE(model);
    EMBER_REQUIRE_FILE(kText);
    ember::test::TempDir dir;
    const std::string base = dir.file("base.kld");
    const auto a = ember_cli({"perplexity", model, "-f", kText, "--ctx", "64", "--chunks", "2", "--save-logits", base,
                              "--threads", "1", "--quiet"});
    REQUIRE(a.ok());
    CHECK(contains(a.out, "chunks: 2\n"));
    CHECK(contains(a.out, "tokens_scored: 62\n"));
    const auto b = ember_cli({"perplexity", model, "--kl-divergence", base, "--threads", "1", "--quiet"});
    REQUIRE(b.ok());
    // Against its own base run: zero but for the base file's 16-bit rounding of the logits
    // (which can leave it a hair below zero, as in llama-perplexity's report).
    const size_t at = b.out.find("kld_mean: ");
    REQUIRE(at != std::string::npos);
    CHECK(std::abs(std::stod(b.out.substr(at + 10))) < 1e-4);
    CHECK(contains(b.out, "same_top_percent: 100.000"));
    // --kl-values: one line per scored token (62 here), and only with a base file.
    const std::string values = dir.file("kl.txt");
    const auto v = ember_cli({"perplexity", model, "--kl-divergence", base, "--kl-values", values, "--quiet"});
    REQUIRE(v.ok());
    std::ifstream in(values);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) lines += std::abs(std::stod(line)) < 1e-3;
    CHECK(lines == 62);
    CHECK_FALSE(std::filesystem::exists(values + ".tmp"));
    const auto nv = ember_cli({"perplexity", model, "-f", kText, "--kl-values", values});
    CHECK(nv.exit_code == 1);
    CHECK(contains(nv.err, "--kl-values needs --kl-divergence"));
    ember::test::write_file(dir.file("short.txt"), "Once upon a time there was a tiny model.");
    const auto c = ember_cli({"perplexity", model, "-f", dir.file("short.txt"), "--ctx", "512"});
    CHECK(c.exit_code == 1);
    CHECK(contains(c.err, "needs at least 1024 tokens"));
}
