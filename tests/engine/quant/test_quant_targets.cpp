// The quantize targets offered for a file (engine/quant/quant_targets.h): which schemes, in
// which order, and that each expected size is what the quantizer really writes. Also that a
// requantization offered from a quantized source is one the quantizer runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/quant/quant_targets.h"
#include "engine/quant/quantizer.h"
#include "test_data.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> schemes(const QuantOffer& o) {
    std::vector<std::string> out;
    for (const QuantTarget& t : o.targets) out.push_back(t.scheme);
    return out;
}

bool offers(const QuantOffer& o, const std::string& scheme) {
    const auto names = schemes(o);
    return std::find(names.begin(), names.end(), scheme) != names.end();
}

QuantizeResult run(const std::string& in, const std::string& out, const std::string& type, bool requantize) {
    QuantizeOptions q;
    q.input = in, q.output = out, q.type = type, q.n_threads = 2, q.allow_requantize = requantize;
    return quantize_model(q);
}

}  // namespace

TEST_CASE("an F32 source is offered every smaller type, never F32, sized as written") {
    const std::string src = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(src);
    const QuantOffer o = quant_offer(GgufFile::open(src));
    CHECK(o.source == DType::F32);
    CHECK_FALSE(o.requantize);
    CHECK(o.recommended == "Q4_K_M");
    CHECK(schemes(o) == std::vector<std::string>{"F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K", "Q5_1", "Q5_0",
                                                 "Q4_K_M", "Q4_K", "Q4_1", "Q4_0"});
    // Each expected size is the real output's, to the byte.
    test::TempDir dir;
    for (const QuantTarget& t : o.targets) {
        CAPTURE(t.scheme);
        const std::string out = dir.file(t.scheme + ".gguf");
        REQUIRE_FALSE(run(src, out, t.scheme, false).cancelled);
        CHECK(t.bytes == fs::file_size(out));
    }
}

TEST_CASE("a quantized source is offered only smaller quantized files, which the quantizer makes") {
    const std::string src = test::test_model(test::kSmolLM2);  // Q4_1
    EMBER_REQUIRE_FILE(src);
    const QuantOffer o = quant_offer(GgufFile::open(src));
    CHECK(o.source == DType::Q4_1);
    CHECK(o.requantize);
    CHECK(o.source_bytes == fs::file_size(src));
    // No float and no larger type: they cannot gain back what Q4_1 lost.
    for (const char* up : {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q4_1"}) {
        CAPTURE(up);
        CHECK_FALSE(offers(o, up));
    }
    REQUIRE(offers(o, "Q4_0"));
    for (const QuantTarget& t : o.targets) CHECK(t.bytes < o.source_bytes);
    CHECK(o.recommended == o.targets.front().scheme);
    // The quantizer refuses it without allow_requantize, and writes the expected size with it.
    test::TempDir dir;
    const std::string out = dir.file("q4_0.gguf");
    CHECK_THROWS(run(src, out, "Q4_0", false));
    REQUIRE_FALSE(run(src, out, "Q4_0", true).cancelled);
    const auto want = std::find_if(o.targets.begin(), o.targets.end(), [](auto& t) { return t.scheme == "Q4_0"; });
    CHECK(want->bytes == fs::file_size(out));
}

TEST_CASE("a 16-bit float source is not offered the other 16-bit float") {
    const std::string src = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(src);
    test::TempDir dir;
    const std::string f16 = dir.file("f16.gguf");
    REQUIRE_FALSE(run(src, f16, "F16", false).cancelled);
    const QuantOffer o = quant_offer(GgufFile::open(f16));
    CHECK(o.source == DType::F16);
    CHECK_FALSE(o.requantize);
    CHECK_FALSE(offers(o, "F32"));
    CHECK_FALSE(offers(o, "F16"));
    CHECK_FALSE(offers(o, "BF16"));
    CHECK(offers(o, "Q8_0"));
}
