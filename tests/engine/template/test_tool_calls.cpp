// Tool calls in model output (engine/template/tool_calls.h): each family's form parsed whole,
// cut in two at every byte and fed one byte at a time (markers split across chunks); text
// before and after calls; several calls; malformed JSON given back as content; the format
// told by the real templates of llama.cpp's models/templates and by the test models' files;
// the generic fallback rendered through SmolLM2's own template and Gemma 3's.
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/template/chat_template.h"
#include "engine/template/reasoning.h"
#include "engine/template/tool_calls.h"
#include "llama_cpp_templates.h"
#include "test_data.h"

using namespace ember;
using ember::test::llama_cpp_template;

namespace {

struct Parsed {
    std::string content;
    std::vector<ToolCallDelta> calls;
    std::vector<std::string> problems;
};

void add(Parsed& p, const ToolCallChunk& c) {
    p.content += c.content;
    for (const ToolCallDelta& d : c.calls) p.calls.push_back(d);
}

Parsed parse_chunks(ToolCallFormat f, const std::vector<std::string>& chunks, size_t max_calls = SIZE_MAX) {
    ToolCallParser parser(f, "call_x", max_calls);
    Parsed p;
    for (const std::string& c : chunks) add(p, parser.feed(c));
    add(p, parser.finish());
    p.problems = parser.problems();
    return p;
}

Parsed parse_whole(ToolCallFormat f, const std::string& text) { return parse_chunks(f, {text}); }

struct Want {
    std::string name, arguments;
};

void check_same(const Parsed& got, const std::string& content, const std::vector<Want>& calls) {
    CHECK(got.content == content);
    REQUIRE(got.calls.size() == calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
        CHECK(got.calls[i].index == i);
        CHECK(got.calls[i].id == "call_x" + std::to_string(i));
        CHECK(got.calls[i].name == calls[i].name);
        CHECK(got.calls[i].arguments == calls[i].arguments);
    }
}

// Whole, in two chunks cut at every byte, and one byte at a time: the same result.
void check_streams(ToolCallFormat f, const std::string& text, const std::string& content,
                   const std::vector<Want>& calls) {
    check_same(parse_whole(f, text), content, calls);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        CAPTURE(cut);
        check_same(parse_chunks(f, {text.substr(0, cut), text.substr(cut)}), content, calls);
    }
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    check_same(parse_chunks(f, bytes), content, calls);
}

const char* kWeatherTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",)"
    R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

}  // namespace

TEST_CASE("hermesCallsWithTextBeforeStreamedAtEveryCut") {
    check_streams(ToolCallFormat::Hermes,
                  "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                  "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
                  "Let me check.", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}});
}

TEST_CASE("hermesTextAfterACallIsContent") {
    check_streams(ToolCallFormat::Hermes,
                  "<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":[1,2.5,\"}\"]}}</tool_call>\n\nDone. a < b",
                  "Done. a < b", {{"f", R"({"a":[1,2.5,"}"]})"}});
}

TEST_CASE("plainAnswerPassesThroughUntouched") {
    check_streams(ToolCallFormat::Hermes, "  Hello <tool and <b>bold</b>\n", "  Hello <tool and <b>bold</b>\n", {});
    check_streams(ToolCallFormat::Generic, "<tool_cal", "<tool_cal", {});  // a partial marker at the end is text
}

TEST_CASE("malformedJsonComesBackAsContentWithAReason") {
    const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call> after";
    const Parsed p = parse_whole(ToolCallFormat::Hermes, text);
    CHECK(p.calls.empty());
    CHECK(p.content == text);
    REQUIRE(p.problems.size() == 1);
    CHECK(p.problems[0].find("malformed tool call") != std::string::npos);
    check_streams(ToolCallFormat::Hermes, text, text, {});

    // valid JSON that is no call: no name, arguments not an object
    for (const std::string bad :
         {"<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": 5}</tool_call>",
          "<tool_call>[]</tool_call>", "<tool_call>\"f\"</tool_call>"}) {
        CAPTURE(bad);
        const Parsed q = parse_whole(ToolCallFormat::Hermes, bad);
        CHECK(q.calls.empty());
        CHECK(q.content == bad);
        CHECK(q.problems.size() == 1);
    }
}

TEST_CASE("anUnclosedCallIsACallWhenItsJsonIsWholeElseText") {
    // the model stopped (end of generation) before </tool_call>
    check_streams(ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": true}}\n", "",
                  {{"f", R"({"x":true})"}});
    const std::string cut = "<tool_call>\n{\"name\": \"f\", \"argum";  // max_tokens cut it
    check_streams(ToolCallFormat::Hermes, cut, cut, {});
    // cut inside the closing marker: the call is whole
    check_streams(ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_c", "",
                  {{"f", "{}"}});
}

TEST_CASE("argumentsWrittenAsAJsonStringAreUnwrapped") {
    check_streams(ToolCallFormat::Hermes, R"(<tool_call>{"name": "f", "arguments": "{\"q\": \"x\"}"}</tool_call>)", "",
                  {{"f", R"({"q":"x"})"}});
}

TEST_CASE("parallelToolCallsFalseKeepsTheFirstCall") {
    const Parsed p = parse_chunks(ToolCallFormat::Hermes,
                                  {"<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>",
                                   "<tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>"},
                                  1);
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].name == "a");
    REQUIRE(p.problems.size() == 1);
    CHECK(p.problems[0].find("'b' dropped") != std::string::npos);
}

TEST_CASE("llama3BareJsonAndPythonTag") {
    check_streams(ToolCallFormat::Llama3, "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
                  {{"get_weather", R"({"city":"Oslo"})"}});
    check_streams(ToolCallFormat::Llama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", {{"f", "{}"}});
    // JSON that is no call, and JSON after text, stay the answer
    check_streams(ToolCallFormat::Llama3, "{\"answer\": 42}", "{\"answer\": 42}", {});
    check_streams(ToolCallFormat::Llama3, "Here: {\"name\": \"f\", \"parameters\": {}}",
                  "Here: {\"name\": \"f\", \"parameters\": {}}", {});
    check_streams(ToolCallFormat::Llama3, "<|python_tag|>brave_search.call(query=\"x\")",
                  "<|python_tag|>brave_search.call(query=\"x\")", {});
}

TEST_CASE("mistralArrayAndArgsForms") {
    check_streams(ToolCallFormat::Mistral,
                  "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abcdefghi\"}, "
                  "{\"name\": \"b\", \"arguments\": {}}]",
                  "", {{"a", R"({"x":1})"}, {"b", "{}"}});
    check_streams(ToolCallFormat::Mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]f[ARGS]{}", "",
                  {{"get_weather", R"({"city":"Rome"})"}, {"f", "{}"}});
}

TEST_CASE("harmonyCommentaryCall") {
    check_streams(ToolCallFormat::Harmony,
                  "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                  "<|message|>{\"city\": \"Tokyo\"}<|call|>",
                  "<|start|>assistant<|channel|>commentary", {{"get_weather", R"({"city":"Tokyo"})"}});
    // the engine does not write <|call|> (an end-of-generation token): the output just ends
    check_streams(ToolCallFormat::Harmony, "to=functions.f<|message|>{}", "", {{"f", "{}"}});
}

TEST_CASE("gemma4CallNotation") {
    check_streams(ToolCallFormat::Gemma4,
                  "<|tool_call>call:get_weather{city:<|\"|>Paris, \"FR\"<|\"|>,days:3,opts:{metric:true,"
                  "tags:[<|\"|>a<|\"|>,null]}}<tool_call|>",
                  "",
                  {{"get_weather", R"({"city":"Paris, \"FR\"","days":3,"opts":{"metric":true,"tags":["a",null]}})"}});
}

TEST_CASE("formatFromRealTemplates") {
    CHECK(detect_tool_call_format(llama_cpp_template("Qwen-Qwen2.5-7B-Instruct.jinja")) == ToolCallFormat::Hermes);
    CHECK(detect_tool_call_format(llama_cpp_template("Qwen-Qwen3-0.6B.jinja")) == ToolCallFormat::Hermes);
    // SmolLM3's template reads xml_tools, not tools: the generic prompt, whose call form is its own
    CHECK(detect_tool_call_format(llama_cpp_template("HuggingFaceTB-SmolLM3-3B.jinja")) == ToolCallFormat::Generic);
    CHECK(detect_tool_call_format(llama_cpp_template("meta-llama-Llama-3.2-3B-Instruct.jinja")) ==
          ToolCallFormat::Llama3);
    CHECK(detect_tool_call_format(llama_cpp_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")) ==
          ToolCallFormat::Mistral);
    CHECK(detect_tool_call_format(llama_cpp_template("openai-gpt-oss-120b.jinja")) == ToolCallFormat::Harmony);
    CHECK(detect_tool_call_format(llama_cpp_template("google-gemma-4-31B-it.jinja")) == ToolCallFormat::Gemma4);
    // the test models' templates cannot show tools: the generic fallback
    const std::string smol = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(smol);
    const auto src = GgufFile::open(smol).opt_string("tokenizer.chat_template");
    REQUIRE(src);
    CHECK(detect_tool_call_format(*src) == ToolCallFormat::Generic);
    CHECK(detect_tool_call_format(ChatTemplate::named("gemma").source()) == ToolCallFormat::Generic);
}

TEST_CASE("genericPromptText") {
    CHECK(generic_tool_prompt(R"([{"type": "function", "function": {"name": "f"}}])") ==
          "You can call tools. These are the tools, one JSON object each:\n"
          "<tools>\n"
          "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n"
          "</tools>\n"
          "To call a tool, write only this, one block per call:\n"
          "<tool_call>\n"
          "{\"name\": \"the tool's name\", \"arguments\": {the arguments, as a JSON object}}\n"
          "</tool_call>\n"
          "Each result comes back as <tool_response>the result</tool_response>. "
          "When no tool is needed, answer normally.");
    CHECK_THROWS_WITH(generic_tool_prompt("{}"), doctest::Contains("JSON array"));
}

// A two-step agent conversation through the Gemma 3 fallback template, which raises on roles
// that do not alternate: the tool results become one user turn, the call the assistant's text.
TEST_CASE("genericFallbackRendersAnAgentLoopThroughGemma3sTemplate") {
    ChatMessage call{"assistant", ""};
    call.tool_calls.push_back({"call_1", "get_weather", R"({"city": "Paris"})"});
    call.tool_calls.push_back({"call_2", "get_weather", R"({"city": "Rome"})"});
    ChatMessage r1{"tool", "18C"}, r2{"tool", "21C"};
    r1.tool_call_id = "call_1";
    r2.tool_call_id = "call_2";
    const std::vector<ChatMessage> chat = {{"user", "Weather in Paris and Rome?"}, call, r1, r2};
    const std::vector<ChatMessage> g = with_generic_tools(chat, kWeatherTools);
    REQUIRE(g.size() == 4);
    CHECK(g[0].role == "system");
    CHECK(g[0].content == generic_tool_prompt(kWeatherTools));
    CHECK(g[2].content ==
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>");
    CHECK(g[2].tool_calls.empty());
    CHECK(g[3].role == "user");
    CHECK(g[3].content == "<tool_response>\n18C\n</tool_response>\n<tool_response>\n21C\n</tool_response>");

    const std::string out = ChatTemplate::named("gemma").render(g, true, "<bos>", "<eos>");
    CHECK(out.find("<start_of_turn>model\n<tool_call>") != std::string::npos);
    CHECK(out.find("<start_of_turn>user\n<tool_response>\n18C") != std::string::npos);
    CHECK(out.substr(out.size() - 21) == "<start_of_turn>model\n");

    // a system message of its own keeps its text, the tools follow it
    const auto s = with_generic_tools({{"system", "Be brief."}, {"user", "hi"}}, kWeatherTools);
    REQUIRE(s.size() == 2);
    CHECK(s[0].content == "Be brief.\n\n" + generic_tool_prompt(kWeatherTools));
}

TEST_CASE("forcedCallGrammarText") {
    const std::vector<ToolGrammarTool> tools = {{"get_weather", "args-0"}, {"now", "args-1"}};
    CHECK(tool_call_grammar(ToolCallFormat::Generic, tools, true) ==
          "tool-call ::= tool-call-0 | tool-call-1\n"
          "tool-call-0 ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": \" args-0 "
          "\"}\\n</tool_call>\"\n"
          "tool-call-1 ::= \"<tool_call>\\n{\\\"name\\\": \\\"now\\\", \\\"arguments\\\": \" args-1 "
          "\"}\\n</tool_call>\"\n"
          "root ::= tool-call (\"\\n\" tool-call)*\n");
    CHECK(tool_call_grammar(ToolCallFormat::Hermes, {tools[0]}, false).find("root ::= tool-call\n") !=
          std::string::npos);
    CHECK(tool_call_grammar(ToolCallFormat::Mistral, tools, true)
              .find("root ::= \"[TOOL_CALLS][\" tool-call (\", \" "
                    "tool-call)* \"]\"\n") != std::string::npos);
    CHECK(tool_call_grammar(ToolCallFormat::Llama3, tools, true).find("root ::= tool-call\n") != std::string::npos);
    CHECK_THROWS_WITH(tool_call_grammar(ToolCallFormat::None, tools, true), doctest::Contains("not known"));
    CHECK_THROWS_WITH(tool_call_grammar(ToolCallFormat::Hermes, {{"a\"b", "x"}}, true),
                      doctest::Contains("bad function name"));
    CHECK_THROWS(tool_call_grammar(ToolCallFormat::Hermes, {}, true));
}

// What a constrained Gemma 4 call writes (JSON arguments in its own markers) parses too.
TEST_CASE("gemma4CallWithJsonArguments") {
    check_streams(ToolCallFormat::Gemma4, R"(<|tool_call>call:f{"q": "a, b:{c}", "n": [1, {"k": "v"}]}<tool_call|>)",
                  "", {{"f", R"({"q":"a, b:{c}","n":[1,{"k":"v"}]})"}});
}

// gpt-oss: the reasoning splitter runs first (the engine splits thinking from the answer) and
// hands a call's head through; the parser then finds the call in the answer.
TEST_CASE("harmonyCallThroughTheReasoningSplitter") {
    const std::string out =
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>";
    for (size_t cut = 0; cut <= out.size(); ++cut) {
        CAPTURE(cut);
        ReasoningSplitter split(ReasoningFormat::Harmony);
        split.prime("<|start|>assistant");
        ToolCallParser parser(ToolCallFormat::Harmony, "call_", SIZE_MAX);
        Parsed p;
        std::string reasoning;
        for (const std::string& piece : {out.substr(0, cut), out.substr(cut)}) {
            const SplitText t = split.feed(piece);
            reasoning += t.reasoning;
            add(p, parser.feed(t.content));
        }
        const SplitText t = split.finish();
        reasoning += t.reasoning;
        add(p, parser.feed(t.content));
        add(p, parser.finish());
        CHECK(reasoning == "Need weather.");
        CHECK(p.content.empty());
        REQUIRE(p.calls.size() == 1);
        CHECK(p.calls[0].name == "get_weather");
        CHECK(p.calls[0].arguments == R"({"city":"Oslo"})");
    }
}

namespace {
// Deltas joined per call: {name, arguments}; checks each call's head comes first.
std::vector<Want> joined(const std::vector<ToolCallDelta>& deltas) {
    std::vector<Want> calls;
    for (const ToolCallDelta& d : deltas) {
        if (!d.id.empty()) {
            CHECK(d.index == calls.size());
            CHECK(d.arguments.empty());
            calls.push_back({d.name, ""});
            continue;
        }
        REQUIRE(d.index + 1 == calls.size());
        calls.back().arguments += d.arguments;
    }
    return calls;
}
}  // namespace

// Forced calls (decoded under their grammar) stream their arguments as they are written.
TEST_CASE("streamedArgumentsOfForcedCallsArriveAsWritten") {
    const std::string text =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris {x}\", \"n\": [1]}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        CAPTURE(cut);
        ToolCallParser p(ToolCallFormat::Generic, "call_x");
        p.stream_arguments(true);
        ToolCallChunk all;
        for (const std::string& piece : {text.substr(0, cut), text.substr(cut)}) {
            ToolCallChunk c = p.feed(piece);
            all.content += c.content;
            all.calls.insert(all.calls.end(), c.calls.begin(), c.calls.end());
        }
        ToolCallChunk c = p.finish();
        all.calls.insert(all.calls.end(), c.calls.begin(), c.calls.end());
        CHECK(all.content + c.content == "");
        const std::vector<Want> calls = joined(all.calls);
        REQUIRE(calls.size() == 2);
        CHECK(calls[0].name == "get_weather");
        CHECK(calls[0].arguments == R"({"city": "Paris {x}", "n": [1]})");
        CHECK(calls[1].name == "now");
        CHECK(calls[1].arguments == "{}");
        CHECK(p.problems().empty());
    }
    // one byte at a time: the head as soon as the name is read, then the arguments piece by piece
    ToolCallParser p(ToolCallFormat::Llama3, "call_x");
    p.stream_arguments(true);
    std::vector<ToolCallDelta> deltas;
    const std::string llama = "{\"name\": \"f\", \"parameters\": {\"q\": \"}\"}}";
    for (char ch : llama)
        for (ToolCallDelta& d : p.feed(std::string(1, ch)).calls) deltas.push_back(d);
    for (ToolCallDelta& d : p.finish().calls) deltas.push_back(d);
    REQUIRE(deltas.size() == 1 + std::string(R"({"q": "}"})").size());
    CHECK(deltas[0].name == "f");
    CHECK(joined(deltas)[0].arguments == R"({"q": "}"})");
}
