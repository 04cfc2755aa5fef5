// The reasoning splitter (engine/template/reasoning.h) on real token streams: a model's
// output text tokenized by a real tokenizer (SmolLM2's byte-level BPE, Gemma 3's SentencePiece,
// Qwen2's and Phi-3's test vocabularies), then decoded one token at a time by the streaming
// detokenizer the engine uses, and split. In these vocabularies the markers are several
// tokens (`<think>` is `<`, `think`, `>` in SmolLM2), so each stream cuts them apart; Phi-3's
// `<|end|>` is a control token, which the detokenizer must write out for the splitter.
// Formats are detected from the real templates in llama.cpp's models/templates.
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/template/chat_template.h"
#include "engine/template/reasoning.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "llama_cpp_templates.h"
#include "test_data.h"

using namespace ember;
using ember::test::llama_cpp_template;

namespace {

std::unique_ptr<Tokenizer> tokenizer(const std::string& path) {
    EMBER_REQUIRE_FILE(path);
    return Tokenizer::from_gguf(GgufFile::open(path));
}
std::unique_ptr<Tokenizer> smollm2() { return tokenizer(test::test_model(test::kSmolLM2)); }

// Tokenizes `output` (markers as text, special tokens parsed), then decodes and splits it
// token by token: what a streamed answer goes through.
struct Streamed {
    SplitText all;
    size_t tokens = 0;
};
Streamed stream(const Tokenizer& tok, ReasoningFormat f, const std::string& prompt, const std::string& output) {
    const std::vector<int32_t> ids = tok.encode(output, false, true);
    StreamingDetokenizer detok(tok);
    detok.continue_text();
    std::vector<int32_t> markers;
    for (const std::string& m : reasoning_marker_tokens(f))
        if (auto id = tok.find_token(m)) markers.push_back(*id);
    detok.write_always(markers);
    ReasoningSplitter split(f);
    split.prime(prompt);
    Streamed s;
    auto add = [&](const SplitText& t) {
        s.all.reasoning += t.reasoning;
        s.all.content += t.content;
    };
    for (int32_t id : ids) add(split.feed(detok.push(id)));
    add(split.feed(detok.flush()));
    add(split.finish());
    s.tokens = ids.size();
    return s;
}

// The same text fed in two chunks cut at every byte, and one byte at a time.
void same_at_every_cut(ReasoningFormat f, const std::string& prompt, const std::string& text, const SplitText& want) {
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        ReasoningSplitter s(f);
        s.prime(prompt);
        SplitText got = s.feed(text.substr(0, cut));
        const SplitText b = s.feed(text.substr(cut));
        const SplitText c = s.finish();
        got.reasoning += b.reasoning + c.reasoning;
        got.content += b.content + c.content;
        INFO("cut at ", cut);
        CHECK(got.reasoning == want.reasoning);
        CHECK(got.content == want.content);
    }
    ReasoningSplitter s(f);
    s.prime(prompt);
    SplitText got;
    for (char ch : text) {
        const SplitText t = s.feed(std::string(1, ch));
        got.reasoning += t.reasoning;
        got.content += t.content;
    }
    const SplitText t = s.finish();
    CHECK(got.reasoning + t.reasoning == want.reasoning);
    CHECK(got.content + t.content == want.content);
}

}  // namespace

TEST_CASE("thinkTagsSplitOnSmolLM2TokensWithTheMarkersCutAcrossTokens") {
    auto tok = smollm2();
    REQUIRE(tok->encode("<think>", false, true).size() > 1);  // the marker is cut across tokens
    const Streamed s = stream(*tok, ReasoningFormat::ThinkTags, "<|im_start|>assistant\n",
                              "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello! How can I help?");
    CHECK(s.tokens > 20);
    CHECK(s.all.reasoning == "The user greets me. I should greet back.");
    CHECK(s.all.content == "Hello! How can I help?");
}

TEST_CASE("outputStartsInsideThinkingWhenThePromptOpenedIt") {
    auto tok = smollm2();
    // Qwen3.5-style generation prompt: the template writes <think> itself.
    const Streamed s = stream(*tok, ReasoningFormat::ThinkTags, "<|im_start|>assistant\n<think>\n",
                              "Two and two.\nThat is four.\n</think>\n\nIt is 4.");
    CHECK(s.all.reasoning == "Two and two.\nThat is four.");
    CHECK(s.all.content == "It is 4.");
}

TEST_CASE("thinkingSwitchedOffInThePromptLeavesOnlyTheAnswer") {
    auto tok = smollm2();
    // Qwen3 with enable_thinking=false writes an empty think block into the prompt.
    const Streamed s =
        stream(*tok, ReasoningFormat::ThinkTags, "<|im_start|>assistant\n<think>\n\n</think>\n\n", "It is 4.");
    CHECK(s.all.reasoning.empty());
    CHECK(s.all.content == "It is 4.");
}

TEST_CASE("thinkingNeverClosedAtTheStopStaysReasoning") {
    auto tok = smollm2();
    const Streamed s =
        stream(*tok, ReasoningFormat::ThinkTags, "<|im_start|>assistant\n", "<think>\nFirst, the user wants <th");
    CHECK(s.all.reasoning == "First, the user wants <th");  // a cut-off marker is text after all
    CHECK(s.all.content.empty());
}

TEST_CASE("thinkTagsOnQwen2VocabularyTokens") {
    auto tok = tokenizer(test::testdata("tokenizer/ggml-vocab-qwen2.gguf"));
    const Streamed s = stream(*tok, ReasoningFormat::ThinkTags, "<|im_start|>assistant\n",
                              "<think>\n用户问的是天气。\n</think>\n\n今天是晴天。");
    CHECK(s.all.reasoning == "用户问的是天气。");
    CHECK(s.all.content == "今天是晴天。");
}

TEST_CASE("gemmaThoughtChannelOnGemma3Tokens") {
    auto tok = tokenizer(test::test_model(test::kGemma3));
    const Streamed on = stream(*tok, ReasoningFormat::GemmaChannel, "<|turn>model\n",
                               "<|channel>thought\nWeighing it: 2 + 2.<channel|>The answer is 4.");
    CHECK(on.all.reasoning == "Weighing it: 2 + 2.");
    CHECK(on.all.content == "The answer is 4.");
    // Thinking off: the template wrote an empty thought channel into the prompt.
    const Streamed off =
        stream(*tok, ReasoningFormat::GemmaChannel, "<|turn>model\n<|channel>thought\n<channel|>", "Four.");
    CHECK(off.all.reasoning.empty());
    CHECK(off.all.content == "Four.");
}

TEST_CASE("harmonyChannelsWithAControlTokenWrittenOut") {
    auto tok = tokenizer(test::testdata("tokenizer/ggml-vocab-phi-3.gguf"));
    const auto end = tok->find_token("<|end|>");
    REQUIRE(end);
    REQUIRE(tok->is_control(*end));  // skipped by the detokenizer unless written out
    const Streamed s = stream(
        *tok, ReasoningFormat::Harmony, "<|start|>assistant",
        "<|channel|>analysis<|message|>User asks 2+2. Simple.<|end|><|start|>assistant<|channel|>final<|message|>"
        "2 + 2 = 4.");
    CHECK(s.all.reasoning == "User asks 2+2. Simple.");
    CHECK(s.all.content == "2 + 2 = 4.");
}

TEST_CASE("harmonyCommentaryIsAnswerAndAConstrainedHeaderIsDropped") {
    ReasoningSplitter s(ReasoningFormat::Harmony);
    s.prime("<|start|>assistant");
    SplitText t = s.feed(
        "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary<|message|>Let me check."
        "<|end|><|start|>assistant<|channel|>final <|constrain|>json<|message|>{\"a\": 1}");
    const SplitText f = s.finish();
    CHECK(t.reasoning + f.reasoning == "think");
    CHECK(t.content + f.content == "Let me check.{\"a\": 1}");
}

TEST_CASE("everyChunkCutGivesTheSameSplit") {
    same_at_every_cut(ReasoningFormat::ThinkTags, "<|im_start|>assistant\n",
                      "<think>\nA <b> tag and a < sign.\n</think>\n\nAnswer </thin k>.",
                      {"A <b> tag and a < sign.", "Answer </thin k>."});
    same_at_every_cut(ReasoningFormat::GemmaChannel, "<|turn>model\n", "<|channel>thought\nhmm<channel|>Yes.",
                      {"hmm", "Yes."});
    same_at_every_cut(ReasoningFormat::Harmony, "<|start|>assistant",
                      "<|channel|>analysis<|message|>x < y<|end|><|start|>assistant<|channel|>final<|message|>y",
                      {"x < y", "y"});
}

TEST_CASE("markersNeverReachTheAnswer") {
    // A stray closing marker (Gemma 4 sometimes ends with one) and a second empty thought.
    ReasoningSplitter s(ReasoningFormat::GemmaChannel);
    SplitText t = s.feed("Done.<|channel>thought\n<channel|><channel|>");
    t.content += s.finish().content;
    CHECK(t.content == "Done.");
    CHECK(t.reasoning.empty());
}

TEST_CASE("noFormatPassesEverythingThrough") {
    ReasoningSplitter s(ReasoningFormat::None);
    s.prime("<|im_start|>assistant\n");
    CHECK(s.feed("  <think>x</think> y\n").content == "  <think>x</think> y\n");  // untrimmed too
    CHECK(s.finish().empty());
}

TEST_CASE("formatAndControlsFromRealTemplates") {
    const std::string qwen3 = llama_cpp_template("Qwen-Qwen3-0.6B.jinja");
    CHECK(detect_reasoning_format(qwen3, false) == ReasoningFormat::ThinkTags);
    CHECK(reasoning_controls(qwen3).enable_thinking);
    CHECK(!reasoning_controls(qwen3).reasoning_effort);

    const std::string gemma4 = llama_cpp_template("google-gemma-4-31B-it.jinja");
    CHECK(detect_reasoning_format(gemma4, false) == ReasoningFormat::GemmaChannel);
    CHECK(reasoning_controls(gemma4).enable_thinking);

    const std::string gptoss = llama_cpp_template("openai-gpt-oss-120b.jinja");
    CHECK(detect_reasoning_format(gptoss, false) == ReasoningFormat::Harmony);
    CHECK(reasoning_controls(gptoss).reasoning_effort);
    CHECK(!reasoning_controls(gptoss).enable_thinking);

    const std::string qwen25 = llama_cpp_template("Qwen-Qwen2.5-7B-Instruct.jinja");
    CHECK(detect_reasoning_format(qwen25, false) == ReasoningFormat::None);
    CHECK(detect_reasoning_format(qwen25, true) == ReasoningFormat::ThinkTags);  // the vocabulary says so
    CHECK(!reasoning_controls(qwen25).enable_thinking);
    CHECK(!reasoning_controls("{{ my_enable_thinking_flag }}").enable_thinking);  // a whole name only
}

TEST_CASE("qwen3TemplateReadsReasoningContentAndEnableThinking") {
    const ChatTemplate t = ChatTemplate::compile(llama_cpp_template("Qwen-Qwen3-0.6B.jinja"));
    const std::vector<ChatMessage> chat = {
        {"user", "Hi"}, {"assistant", "Hello!", "The user greets me."}, {"user", "2+2?"}};
    ChatRenderOptions o;
    CHECK(t.generation_prompt(chat, o) == "<|im_start|>assistant\n");
    o.enable_thinking = false;
    CHECK(t.generation_prompt(chat, o) == "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    // An earlier answer's thinking reaches the template, which drops it before a newer question...
    const std::string prompt = t.render(chat, o);
    CHECK(prompt.find("<|im_start|>assistant\nHello!<|im_end|>") != std::string::npos);
    CHECK(prompt.find("The user greets me.") == std::string::npos);
    // ...and keeps it in the turn after the last question (an answer being continued).
    o.add_generation_prompt = false;
    const std::string last = t.render({chat[0], chat[1]}, o);
    CHECK(last.find("<|im_start|>assistant\n<think>\nThe user greets me.\n</think>\n\nHello!") != std::string::npos);
}

TEST_CASE("gptOssTemplateTakesTheEffortAndNoThinkingMarkersInContent") {
    const ChatTemplate t = ChatTemplate::compile(llama_cpp_template("openai-gpt-oss-120b.jinja"));
    ChatRenderOptions o;
    o.now = 1700000000;
    o.reasoning_effort = "low";
    const std::vector<ChatMessage> chat = {{"user", "Hi"}, {"assistant", "Hello!", "Greeting."}, {"user", "2+2?"}};
    const std::string prompt = t.render(chat, o);
    CHECK(prompt.find("Reasoning: low\n") != std::string::npos);
    CHECK(prompt.find("Greeting.") == std::string::npos);  // gpt-oss drops earlier thinking
    CHECK(t.generation_prompt(chat, o) == "<|start|>assistant");
}
