// End-to-end CPU inference on real models against independent references:
//  - stories260K: 256 greedy tokens from BOS equal an independent float32 reference exactly;
//  - SmolLM2-135M (Q4_1) and Gemma 3 270M (Q4_K_M): teacher-forced top-5 logits and greedy
//    tokens against llama.cpp (tests/fixtures/reference/*.json, see its README), and 32
//    free-running greedy tokens equal to llama.cpp's on the prompts without near-ties;
//  - chat through SmolLM2's own template answers "Paris".
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/runtime/chat.h"
#include "kernels/common/error.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "test_data.h"
#include "test_json.h"

using namespace ember;
using ember::test::json;

namespace {

// Tolerances against llama.cpp. Both engines quantize activations to 8 bits for the integer
// dot products (~0.5% relative error per matmul, see tests/kernels), each with its own
// rounding, through 18-30 layers. Against the float64 reference below, llama.cpp itself is
// off by up to 1.32 (mean 0.10-0.33) on these prompts and Ember by less; the two errors add
// up here, and grow over 33 teacher-forced steps (measured max 2.57 on one step, mean
// 0.16-0.38; a Debug build rounds differently: max 2.91, mean 0.45). Gemma 3's "chat" prompt
// sits near the top: mean 0.4985 at 25359ff, 0.516 once the activation scales were rounded to
// half floats as ggml's q8_0 (tests/kernels/test_matmul.cpp; 5 of its 10 prompts came closer,
// 5 moved away: noise of this size): bound 0.6. With the weights dequantized to f32, Ember
// matches float64 to 1e-3. A real bug (a wrong RoPE base, a missing norm) moves the mean by
// whole units.
constexpr float kLogitTolMax = 4.0f;
constexpr float kLogitTolMean = 0.6f;
// Where llama.cpp's best token leads the runner-up by more than this, ours must agree.
constexpr float kTieMargin = 1.0f;

std::unique_ptr<Model> load(const std::string& path, int64_t n_ctx = 512) {
    LoadOptions o;
    o.path = path;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    return Model::load(o);
}

std::vector<int32_t> ints(const json& a) {
    std::vector<int32_t> v;
    for (const auto& x : a) v.push_back(x.get<int32_t>());
    return v;
}

// A fixture of tests/fixtures/reference; a missing or malformed one throws, naming the file.
json read_fixture(const std::string& name) {
    return test::load_json(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/reference/" + name);
}

// The prompt's name in the fixture, for messages.
std::string id_of(const json& p) { return p.value("id", std::string()); }

int argmax(const std::vector<float>& l) { return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin()); }

struct Errors {
    float max = 0;
    double sum = 0;
    int n = 0;
    bool argmax_ok = true;
};

// Teacher-forced comparison of one prompt: feeds llama.cpp's greedy tokens and compares the
// top-5 logits after the prompt and after every step.
Errors compare_prompt(Model& model, const json& p) {
    Sequence seq(model);
    const auto prompt = ints(p.at("prompt_ids"));
    const auto greedy = ints(p.at("greedy_ids"));
    const json& top5 = p.at("top5");
    const json& margins = p.at("margins");
    Errors err;
    std::vector<float> logits = seq.prefill(prompt);
    for (int s = 0; s <= static_cast<int>(greedy.size()); ++s) {
        float step_err = 0;
        for (const auto& entry : top5.at(size_t(s))) {
            const int id = entry.at(0).get<int>();
            const float ref = static_cast<float>(entry.at(1).get<double>());
            const float e = std::abs(logits[static_cast<size_t>(id)] - ref);
            step_err = std::max(step_err, e);
            err.sum += e;
            ++err.n;
        }
        if (std::getenv("EMBER_TEST_VERBOSE")) test::info("step %d: top-5 error %.4f", s, step_err);
        err.max = std::max(err.max, step_err);
        const int ref_top = top5.at(size_t(s)).at(0).at(0).get<int>();
        const double margin = margins.at(size_t(s)).get<double>();
        if (margin > kTieMargin && argmax(logits) != ref_top) {
            test::warn("%s step %d: argmax %d, llama.cpp %d (margin %.3f)", id_of(p).c_str(), s, argmax(logits),
                       ref_top, margin);
            err.argmax_ok = false;
        }
        if (s == static_cast<int>(greedy.size())) break;
        const int32_t next[1] = {greedy[static_cast<size_t>(s)]};
        logits = seq.prefill(next);
    }
    return err;
}

void compare_model(const std::string& path, const std::string& fixture) {
    EMBER_REQUIRE_FILE(path);
    auto model = load(path);
    const json fx = read_fixture(fixture);
    for (const json& p : fx.at("prompts")) {
        // Our tokenizer must produce llama.cpp's prompt ids.
        const std::string text = p.at("text").get<std::string>();
        auto ids = model->tokenizer().encode(text, false, p.value("parse_special", false));
        if (p.value("add_bos", false)) ids.insert(ids.begin(), model->tokenizer().bos());
        REQUIRE_EQ(ids, ints(p.at("prompt_ids")));
        const Errors e = compare_prompt(*model, p);
        const double mean = e.sum / e.n;
        test::info("%s / %s: top-5 logit error max %.4f mean %.4f", fixture.c_str(), id_of(p).c_str(), e.max, mean);
        REQUIRE_MESSAGE(e.max <= kLogitTolMax, id_of(p) << ": max logit error " << e.max);
        REQUIRE_MESSAGE(mean <= kLogitTolMean, id_of(p) << ": mean logit error " << mean);
        REQUIRE_MESSAGE(e.argmax_ok, id_of(p) << ": greedy token differs where llama.cpp is decisive");
    }
}

// Free-running greedy decoding against llama.cpp's 32 greedy tokens, for the prompts where
// llama.cpp's best token leads the runner-up by at least kDecisiveMargin at every step (the
// counting prompts of the fixture): no step is a near-tie that either engine's rounding may
// decide, so the sequences must be identical. Requires at least 3 such prompts per model, so
// the check cannot silently become empty.
constexpr double kDecisiveMargin = 0.9;

void free_running_greedy(const std::string& path, const std::string& fixture) {
    EMBER_REQUIRE_FILE(path);
    auto model = load(path);
    const json fx = read_fixture(fixture);
    int checked = 0;
    for (const json& p : fx.at("prompts")) {
        const json& margins = p.at("margins");
        const auto expected = ints(p.at("greedy_ids"));
        double min_margin = 1e9;
        for (size_t s = 0; s < expected.size(); ++s) min_margin = std::min(min_margin, margins.at(s).get<double>());
        if (min_margin < kDecisiveMargin) continue;
        Sequence seq(*model);
        GenerateOptions g;
        g.sampling = SamplingParams::greedy();
        g.max_tokens = static_cast<int32_t>(expected.size()) + 1;  // the last one is not fed back
        g.ignore_eog = true;
        const auto prompt = ints(p.at("prompt_ids"));
        seq.generate(prompt, g, {});
        const std::vector<int32_t> got(seq.tokens().begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                       seq.tokens().end());
        test::info("%s / %s: %zu free-running greedy tokens, min llama.cpp margin %.3f", fixture.c_str(),
                   id_of(p).c_str(), got.size(), min_margin);
        REQUIRE_EQ(got, expected);
        ++checked;
    }
    REQUIRE_MESSAGE(checked >= 3, "only " << checked << " decisive prompts in " << fixture);
}

// Against the float64 numpy reference (tests/reference/numpy_forward.py) run on the same
// dequantized weights: only Ember's own rounding (8-bit activations in the integer dot
// products, F16 KV cache) separates the two, so the bound is tight.
// Measured (2026-11-30): max 1.27, mean 0.07-0.31 over the top-10 of 9 steps per prompt;
// llama.cpp on the same prompts: max 1.32, mean 0.10-0.33 (no looser than its own error).
// The max is one draw of the 8-bit activation rounding, which moves with any last-bit change
// upstream: on the "chat" prompt (AVX2, 2026-12-02) the old kernels gave 0.70, the batch-
// invariant matmul alone 1.38, with the new attention too 1.65 (at one decode step; the mean
// stayed 0.20-0.34, the other prompts 0.52-0.84). So the max bound has the room of that
// spread; the mean bound, the steadier statistic, is unchanged.
constexpr float kF64TolMax = 2.0f;
constexpr float kF64TolMean = 0.35f;

void compare_f64(const std::string& path, const std::string& fixture) {
    EMBER_REQUIRE_FILE(path);
    auto model = load(path);
    const json fx = read_fixture(fixture);
    for (const json& p : fx.at("prompts")) {
        Sequence seq(*model);
        const auto greedy = ints(p.at("greedy_ids"));
        const json& rows = p.at("top10");
        std::vector<float> logits = seq.prefill(ints(p.at("prompt_ids")));
        float max_err = 0;
        double sum = 0;
        int n = 0;
        for (size_t s = 0; s < rows.size(); ++s) {
            const json& top = rows[s];
            for (const auto& e : top) {
                const float err = std::abs(logits[static_cast<size_t>(e.at(0).get<int>())] -
                                           static_cast<float>(e.at(1).get<double>()));
                max_err = std::max(max_err, err);
                sum += err;
                ++n;
            }
            const double margin = top.at(0).at(1).get<double>() - top.at(1).at(1).get<double>();
            if (margin > 2 * kF64TolMax) REQUIRE_EQ(argmax(logits), top.at(0).at(0).get<int>());
            if (s + 1 < rows.size()) {
                const int32_t next[1] = {greedy[s]};
                logits = seq.prefill(next);
            }
        }
        test::info("%s / %s: top-10 logit error vs float64 max %.4f mean %.4f", fixture.c_str(), id_of(p).c_str(),
                   max_err, sum / n);
        REQUIRE_MESSAGE(max_err <= kF64TolMax, id_of(p));
        REQUIRE_MESSAGE(sum / n <= kF64TolMean, id_of(p));
    }
}

}  // namespace

TEST_CASE("stories greedy matches reference") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    std::ifstream in(test::testdata("models/stories260K.greedy256.ids.txt"));
    std::string header;
    std::getline(in, header);
    std::vector<int32_t> expected;
    for (int32_t id; in >> id;) expected.push_back(id);
    REQUIRE_EQ(expected.size(), size_t(256));
    auto model = load(path, 512);
    Sequence seq(*model);
    GenerateOptions g;
    g.sampling = SamplingParams::greedy();
    g.max_tokens = 256;
    g.ignore_eog = true;
    const int32_t bos[1] = {1};
    std::vector<int32_t> got;
    // Collect ids by re-reading the sequence's tokens after generation.
    const GenerateStats st = seq.generate(bos, g, {});
    REQUIRE_EQ(st.generated_tokens, 256);
    got.assign(seq.tokens().begin() + 1, seq.tokens().end());
    // The last sampled token is not fed back, so the cache holds 255 generated tokens.
    REQUIRE_EQ(got.size(), size_t(255));
    REQUIRE_EQ(got, std::vector<int32_t>(expected.begin(), expected.begin() + 255));
}
TEST_CASE("SmolLM2 matches float64 reference") { compare_f64(test::test_model(test::kSmolLM2), "smollm2.f64.json"); }
TEST_CASE("Gemma 3 matches float64 reference") { compare_f64(test::test_model(test::kGemma3), "gemma3.f64.json"); }
TEST_CASE("SmolLM2 matches llama.cpp") { compare_model(test::test_model(test::kSmolLM2), "smollm2.json"); }
TEST_CASE("Gemma 3 matches llama.cpp") { compare_model(test::test_model(test::kGemma3), "gemma3.json"); }
TEST_CASE("SmolLM2 free running greedy matches llama.cpp") {
    free_running_greedy(test::test_model(test::kSmolLM2), "smollm2.json");
}
TEST_CASE("Gemma 3 free running greedy matches llama.cpp") {
    free_running_greedy(test::test_model(test::kGemma3), "gemma3.json");
}
TEST_CASE("chat answers Paris") {
    // SmolLM2 through its own ChatML template (with its default system prompt), greedy.
    // The bare question starts at a near-tie between "The" and "L'"/"La" (margin 0.09 in
    // a float64 reference), so either engine may answer in French; with "Answer in
    // English." every greedy step leads by >= 1.0 in llama.cpp.
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    auto model = load(path, 1024);
    REQUIRE(model->chat_template().source_desc.find("model") != std::string::npos);
    Sequence seq(*model);
    GenerateOptions g;
    g.sampling = SamplingParams::greedy();
    g.max_tokens = 48;
    auto ask = [&](const std::vector<ChatMessage>& msgs, GenerateStats* st = nullptr) {
        std::string reply;
        const auto s = seq.generate(chat_prompt_tokens(*model, msgs), g, [&](std::string_view t) {
            reply += t;
            return true;
        });
        if (st) *st = s;
        test::info("reply: %s", reply.c_str());
        return reply;
    };
    const std::vector<ChatMessage> q1 = {{"user", "What is the capital of France? Answer in English."}};
    GenerateStats st1;
    const std::string reply = ask(q1, &st1);
    REQUIRE_MESSAGE(reply.find("Paris") != std::string::npos, reply.c_str());
    REQUIRE(reply.find("<|im_end|>") == std::string::npos);
    REQUIRE(st1.stop_reason == StopReason::EndOfText);
    // The next turn reuses the first turn's cache: only the new tokens are processed.
    auto q2 = q1;
    q2.push_back({"assistant", reply});
    q2.push_back({"user", "And of Italy?"});
    GenerateStats st2;
    ask(q2, &st2);
    REQUIRE_MESSAGE(st2.reused_tokens >= st1.prompt_tokens, st2.reused_tokens);
}
namespace {
// BOS, then `text` encoded as a completion prompt (no space prefix, no special tokens).
std::vector<int32_t> bos_and(Model& model, const std::string& text) {
    auto prompt = model.tokenizer().encode(text, false, false);
    prompt.insert(prompt.begin(), model.tokenizer().bos());
    return prompt;
}
}  // namespace

TEST_CASE("completion keeps the space before its first word") {
    // SentencePiece marks word starts with a space; a completion continues the prompt, so
    // "Once upon a" + " time" must not lose that space (the encoder's own space prefix is
    // only dropped at the very start of a text).
    auto model = load(test::testdata(test::kStories), 64);
    Sequence seq(*model);
    const std::vector<int32_t> prompt = bos_and(*model, "Once upon a");
    GenerateOptions g;
    g.sampling = SamplingParams::greedy();
    g.max_tokens = 3;
    std::string text;
    seq.generate(prompt, g, [&](std::string_view t) {
        text += t;
        return true;
    });
    REQUIRE_EQ(text.substr(0, 5), std::string(" time"));
}
TEST_CASE("max_tokens 0 prefills the prompt and generates nothing") {
    auto model = load(test::testdata(test::kStories), 64);
    Sequence seq(*model);
    const std::vector<int32_t> prompt = bos_and(*model, "Once upon a");
    GenerateOptions g;
    g.sampling = SamplingParams::greedy();
    g.max_tokens = 0;
    std::string text;
    const GenerateStats st = seq.generate(prompt, g, [&](std::string_view t) {
        text += t;
        return true;
    });
    CHECK_EQ(st.generated_tokens, 0);
    CHECK(st.stop_reason == StopReason::Length);
    CHECK_EQ(st.prompt_tokens, static_cast<int32_t>(prompt.size()));
    CHECK_EQ(text, std::string());
    REQUIRE(seq.tokens() == prompt);  // prefilled: the whole prompt is in the cache, nothing after it
    // The same sequence then continues from its cache with one token.
    g.max_tokens = 1;
    const GenerateStats st1 = seq.generate(prompt, g, {});
    CHECK_EQ(st1.generated_tokens, 1);
    CHECK_EQ(st1.reused_tokens, static_cast<int32_t>(prompt.size()) - 1);
}
TEST_CASE("prompt longer than context is a clear error") {
    auto model = load(test::testdata(test::kStories), 64);
    Sequence seq(*model);
    std::vector<int32_t> prompt(100, 5);
    try {
        seq.generate(prompt, GenerateOptions{}, {});
        FAIL("no error");
    } catch (const Error& e) {
        REQUIRE(std::string(e.what()).find("does not fit the context of 64") != std::string::npos);
    }
    REQUIRE_EQ(seq.tokens().size(), size_t(0));
}
