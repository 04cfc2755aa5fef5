// The token level of grammar-constrained decoding (engine/grammar/token_matcher.h) on real
// vocabularies (SmolLM2's byte-level BPE, Gemma 3's SentencePiece BPE): the trie walk's mask
// equals a brute-force check of every token, at many positions of a JSON schema's grammar,
// and control tokens never pass while end-of-generation passes only where the grammar ends.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/grammar/json_schema.h"
#include "engine/sampling/constrained.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_data.h"

using namespace ember;
using namespace ember::grammar;

namespace {

const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},
    "when":{"type":"string","format":"date"},"ok":{"type":"boolean"},
    "tags":{"type":"array","items":{"enum":["a b","c\"d","é€"]},"maxItems":3}},
    "required":["name","age","when","ok","tags"]})";

// A text the schema's grammar accepts, walked byte by byte to reach its positions (the
// required properties come in key order).
const char* kText = R"({ "age": 42, "name": "Zoé \"x\"", "ok": true, "tags": ["a b", "é€"], "when": "2024-02-28"})";

// Every token on its own through a copy of the state (no trie, no cached transitions).
std::vector<int32_t> brute_force(const TokenMatcher& m) {
    std::vector<int32_t> ids;
    int disagree = 0;  // allows() (the cached transitions) against the plain state
    for (int32_t id = 0; id < m.vocab().n_vocab(); ++id) {
        GrammarState s = m.state();
        const bool ok = m.vocab().is_eog(id) ? s.can_end()
                                             : m.vocab().usable(id) && !m.vocab().piece(id).empty() &&
                                                   s.accept_bytes(m.vocab().piece(id));
        if (ok) ids.push_back(id);
        disagree += ok != m.allows(id);
    }
    CHECK(disagree == 0);
    return ids;
}

void check_masks(const std::string& model, size_t stride) {
    EMBER_REQUIRE_FILE(model);
    auto tok = Tokenizer::from_gguf(GgufFile::open(model));
    auto vocab = grammar_vocab(*tok);
    auto g = Grammar::parse(json_schema_to_gbnf(nlohmann::json::parse(kSchema)));
    TokenMatcher m(g, vocab);
    const std::string text = kText;
    size_t checked = 0;
    std::vector<int32_t> fast;
    for (size_t i = 0; i <= text.size(); ++i) {
        if (i % stride == 0 || i == text.size()) {
            CAPTURE(text.substr(0, i));
            m.allowed_tokens(fast);
            std::sort(fast.begin(), fast.end());
            const std::vector<int32_t> slow = brute_force(m);
            CHECK(fast == slow);
            CHECK_FALSE(fast.empty());
            const auto wrong = std::count_if(fast.begin(), fast.end(), [&](int32_t id) {
                return tok->is_eog(id) ? !m.can_end() : tok->is_control(id);
            });
            CHECK(wrong == 0);
            ++checked;
        }
        if (i < text.size()) REQUIRE(m.accept_bytes(text.substr(i, 1)));
    }
    CHECK(m.can_end());
    MESSAGE(model, ": ", checked, " positions, masks equal to the brute force");
}

}  // namespace

TEST_CASE("maskEqualsBruteForceOnSmolLM2") { check_masks(test::test_model(test::kSmolLM2), 1); }

TEST_CASE("maskEqualsBruteForceOnGemma3") { check_masks(test::test_model(test::kGemma3), 7); }

TEST_CASE("tokensAdvanceTheMatcherByTheirBytes") {
    EMBER_REQUIRE_FILE(test::test_model(test::kSmolLM2));
    auto tok = Tokenizer::from_gguf(GgufFile::open(test::test_model(test::kSmolLM2)));
    TokenMatcher m(Grammar::parse(R"(root ::= "{\"a\": " [0-9]+ "}")"), grammar_vocab(*tok));
    for (int32_t id : tok->encode("{\"a\": 12", false, false)) {
        REQUIRE(m.allows(id));
        m.accept(id);
    }
    const int32_t eos = tok->eos();
    CHECK_FALSE(m.allows(eos));
    CHECK_THROWS_AS(m.accept(eos), ember::Error);
    CHECK_THROWS_AS(m.accept(tok->encode("x", false, false)[0]), ember::Error);
    m.accept(tok->encode("}", false, false)[0]);
    CHECK(m.allows(eos));
    CHECK(m.state().must_end());
}

// The masks kept per grammar position: an array of equal strings revisits the same positions,
// and each kept mask holds the same tokens as a fresh walk there.
TEST_CASE("keptMasksEqualFreshWalks") {
    EMBER_REQUIRE_FILE(test::test_model(test::kSmolLM2));
    auto tok = Tokenizer::from_gguf(GgufFile::open(test::test_model(test::kSmolLM2)));
    auto g =
        Grammar::parse(json_schema_to_gbnf(nlohmann::json::parse(R"({"type":"array","items":{"type":"string"}})")));
    TokenMatcher m(g, grammar_vocab(*tok));
    const std::string text = R"(["ab c", "ab c", "ab c"])";
    std::vector<int32_t> kept, walked;
    for (size_t i = 0; i <= text.size(); ++i) {
        CAPTURE(text.substr(0, i));
        m.allowed_tokens(kept);
        m.walk_mask(walked);
        std::sort(kept.begin(), kept.end());
        std::sort(walked.begin(), walked.end());
        CHECK(kept == walked);
        if (i < text.size()) REQUIRE(m.accept_bytes(text.substr(i, 1)));
    }
    MESSAGE(m.mask_stats().walked, " masks walked, ", m.mask_stats().kept, " taken from those kept");
    CHECK(m.mask_stats().kept >= 12);  // the second and third strings, and the separators
    CHECK(m.mask_stats().walked + m.mask_stats().kept == static_cast<int64_t>(text.size() + 1));
}
