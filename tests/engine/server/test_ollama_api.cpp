// Ollama's API, pure layer: /api/chat and /api/generate bodies -> OllamaRequest (defaults,
// options, think, keep_alive, every refusal), the answer objects and NDJSON lines, errors, and
// what /api/tags, /api/show and /api/ps say about a real model file. The routes themselves are
// tested with the official ollama client (ollama_compat.py).
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/runtime/model.h"
#include "engine/scheduler/scheduler.h"
#include "engine/server/ollama_format.h"
#include "engine/server/ollama_models.h"
#include "engine/server/ollama_parser.h"
#include "test_data.h"

using namespace ember;
using namespace ember::server;
using nlohmann::json;

namespace {

OllamaRequest ok(OllamaEndpoint e, const json& body, const ServerLimits& limits = {}) {
    auto r = parse_ollama_request(e, body.dump(), limits);
    if (auto* err = std::get_if<ApiError>(&r)) FAIL("unexpected error: ", err->message);
    return std::get<OllamaRequest>(r);
}

ApiError refused(OllamaEndpoint e, const json& body, const ServerLimits& limits = {}) {
    const std::string text = body.is_string() ? body.get<std::string>() : body.dump();
    auto r = parse_ollama_request(e, text, limits);
    REQUIRE_MESSAGE(std::holds_alternative<ApiError>(r), "accepted: ", text);
    return std::get<ApiError>(r);
}

const json kHello = {{"role", "user"}, {"content", "Hello"}};
constexpr auto Chat = OllamaEndpoint::Chat;
constexpr auto Generate = OllamaEndpoint::Generate;

}  // namespace

TEST_CASE("ollamaStreamsUnlessToldNotTo") {
    const OllamaRequest r = ok(Chat, {{"model", "m"}, {"messages", {kHello}}});
    CHECK(r.stream);
    CHECK_FALSE(r.load_only);
    CHECK(r.model == "m");
    REQUIRE(r.engine.messages.size() == 1);
    CHECK(r.engine.messages[0].content == "Hello");
    CHECK(r.engine.max_tokens == ServerLimits{}.max_tokens);
    const SamplingParams d;  // options left out: the engine's defaults, as on the OpenAI routes
    CHECK(r.engine.sampling.temperature == d.temperature);
    CHECK(r.engine.sampling.top_p == d.top_p);
    CHECK(r.engine.sampling.repeat_penalty == d.repeat_penalty);
    CHECK_FALSE(r.seed_given);
    CHECK_FALSE(ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"stream", false}}).stream);
}

TEST_CASE("ollamaOptionsMapOntoSamplingAndLimits") {
    const OllamaRequest r = ok(Chat, {{"model", "m"},
                                      {"messages", {kHello}},
                                      {"options",
                                       {{"temperature", 0.3},
                                        {"top_k", 7},
                                        {"top_p", 0.5},
                                        {"min_p", 0.02},
                                        {"repeat_penalty", 1.1},
                                        {"repeat_last_n", 32},
                                        {"presence_penalty", 0.5},
                                        {"frequency_penalty", -0.5},
                                        {"seed", 42},
                                        {"num_predict", 9},
                                        {"stop", {"\n\n", "END"}}}}});
    const SamplingParams& s = r.engine.sampling;
    CHECK(s.temperature == doctest::Approx(0.3));
    CHECK(s.top_k == 7);
    CHECK(s.top_p == doctest::Approx(0.5));
    CHECK(s.min_p == doctest::Approx(0.02));
    CHECK(s.repeat_penalty == doctest::Approx(1.1));
    CHECK(s.repeat_last_n == 32);
    CHECK(s.presence_penalty == doctest::Approx(0.5));
    CHECK(s.frequency_penalty == doctest::Approx(-0.5));
    CHECK(s.seed == 42);
    CHECK(r.seed_given);
    CHECK(r.engine.max_tokens == 9);
    CHECK(r.engine.stop == std::vector<std::string>{"\n\n", "END"});
    CHECK(r.ignored.empty());
}

TEST_CASE("ollamaSpecialValues") {
    // seed -1: a fresh one; num_predict -1 / -2: up to the server's limit; top_p 0: greedy
    ServerLimits limits;
    limits.max_tokens = 77;
    const auto r =
        ok(Generate, {{"model", "m"}, {"prompt", "Hi"}, {"options", {{"seed", -1}, {"num_predict", -2}, {"top_p", 0}}}},
           limits);
    CHECK_FALSE(r.seed_given);
    CHECK(r.engine.max_tokens == 77);
    CHECK(r.engine.sampling.temperature == 0.0f);
}

TEST_CASE("ollamaIgnoresUnknownAndLoadTimeOptionsButListsThem") {
    const auto r = ok(Chat, {{"model", "m"},
                             {"messages", {kHello}},
                             {"options", {{"num_ctx", 4096}, {"num_gpu", 99}, {"my_own_knob", true}}}});
    REQUIRE(r.ignored.size() == 3);
    const std::string all = r.ignored[0] + "|" + r.ignored[1] + "|" + r.ignored[2];
    CHECK(all.find("options.num_ctx=4096") != std::string::npos);
    CHECK(all.find("options.num_gpu (a load-time option)") != std::string::npos);
    CHECK(all.find("options.my_own_knob (unknown)") != std::string::npos);
    json many = json::object();
    for (int i = 0; i < 1000; ++i) many[std::string("k").append(std::to_string(i))] = i;
    const auto flood = ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"options", many}});
    REQUIRE(flood.ignored.size() == 17);  // 16 named, then a count
    CHECK(flood.ignored.back() == "and 984 more options");
}

TEST_CASE("ollamaGenerateRendersSystemAndPromptOrSendsRaw") {
    const auto r = ok(Generate, {{"model", "m"}, {"prompt", "Why?"}, {"system", "Be brief."}});
    REQUIRE(r.engine.messages.size() == 2);
    CHECK(r.engine.messages[0].role == "system");
    CHECK(r.engine.messages[0].content == "Be brief.");
    CHECK(r.engine.messages[1].role == "user");
    CHECK(r.engine.messages[1].content == "Why?");
    CHECK(r.engine.prompt.empty());
    const auto raw = ok(Generate, {{"model", "m"}, {"prompt", "<|im_start|>user"}, {"raw", true}});
    CHECK(raw.engine.messages.empty());
    CHECK(raw.engine.prompt == "<|im_start|>user");
    CHECK(raw.engine.prompt_parse_special);
    CHECK(refused(Generate, {{"model", "m"}, {"prompt", "x"}, {"raw", true}, {"system", "s"}}).param == "system");
}

TEST_CASE("ollamaNothingToGenerateIsALoadRequest") {
    CHECK(ok(Chat, {{"model", "m"}}).load_only);
    CHECK(ok(Chat, {{"model", "m"}, {"messages", json::array()}}).load_only);
    CHECK(ok(Generate, {{"model", "m"}, {"prompt", ""}}).load_only);
    const json j = ollama_load_json({Generate, "m:latest", false});
    CHECK(j["done"] == true);
    CHECK(j["done_reason"] == "load");
    CHECK(j["response"] == "");
}

TEST_CASE("ollamaThinkAndEarlierThinking") {
    const auto on = ok(Chat, {{"model", "m"},
                              {"messages", {{{"role", "assistant"}, {"content", "4"}, {"thinking", "2+2"}}, kHello}},
                              {"think", true}});
    CHECK(on.engine.template_options.enable_thinking == true);
    CHECK(on.engine.messages[0].reasoning_content == "2+2");
    CHECK(
        ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"think", false}}).engine.template_options.enable_thinking ==
        false);
    const auto high = ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"think", "high"}});
    CHECK(high.engine.template_options.reasoning_effort == "high");
    CHECK(refused(Chat, {{"model", "m"}, {"messages", {kHello}}, {"think", "very"}}).param == "think");
}

TEST_CASE("ollamaKeepAliveDurations") {
    CHECK(parse_keep_alive("5m") == 300.0);
    CHECK(parse_keep_alive("1h30m") == 5400.0);
    CHECK(parse_keep_alive("300ms") == doctest::Approx(0.3));
    CHECK(parse_keep_alive("1.5s") == 1.5);
    CHECK(parse_keep_alive("-1m") == -60.0);
    CHECK(parse_keep_alive("0") == 0.0);
    CHECK(parse_keep_alive("120") == 120.0);
    for (const char* bad : {"", "m", "5", "5x", "5 m", "1.2.3s", "--1s", "1h-3m"})
        if (std::string(bad) != "5") CHECK_MESSAGE(!parse_keep_alive(bad), bad);
    CHECK(ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"keep_alive", "10m"}}).keep_alive_s == 600.0);
    CHECK(ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"keep_alive", -1}}).keep_alive_s == -1.0);
    CHECK(ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"keep_alive", 0}}).keep_alive_s == 0.0);
    CHECK(refused(Chat, {{"model", "m"}, {"messages", {kHello}}, {"keep_alive", "soon"}}).param == "keep_alive");
    CHECK(refused(Chat, {{"model", "m"}, {"messages", {kHello}}, {"keep_alive", true}}).param == "keep_alive");
}

TEST_CASE("ollamaRefusesWhatItCannotHonourNamingTheField") {
    const json msgs = {kHello};
    const auto param = [&](OllamaEndpoint e, json body) {
        body["model"] = "m";
        if (e == Chat && !body.contains("messages")) body["messages"] = msgs;
        if (e == Generate && !body.contains("prompt")) body["prompt"] = "Hi";
        return refused(e, body).param;
    };
    CHECK(param(Chat, {{"messages", {{{"role", "user"}, {"content", "?"}, {"images", {"aGk="}}}}}}) ==
          "messages[0].images");
    CHECK(param(Chat, {{"messages", {{{"role", "user"}, {"content", "?"}, {"tool_calls", json::array()}}}}}) ==
          "messages[0].tool_calls");
    CHECK(param(Chat, {{"messages", {{{"role", "robot"}, {"content", "?"}}}}}) == "messages[0].role");
    CHECK(param(Chat, {{"messages", {{{"content", "?"}}}}}) == "messages[0].role");
    CHECK(param(Chat, {{"format", "yaml"}}) == "format");
    CHECK(param(Chat, {{"format", {{"type", "object"}, {"patternProperties", json::object()}}}}) == "format");
    CHECK(param(Chat, {{"tools", {{{"type", "function"}}}}}) == "tools[0].function");
    CHECK(param(Chat, {{"tools", "all"}}) == "tools");
    CHECK(param(Generate, {{"tools", {{{"type", "function"}}}}}) == "tools");
    CHECK(param(Generate, {{"template", "{{ .Prompt }}"}}) == "template");
    CHECK(param(Generate, {{"context", {1, 2, 3}}}) == "context");
    CHECK(param(Generate, {{"suffix", "end"}}) == "suffix");
    CHECK(param(Generate, {{"images", {"aGk="}}}) == "images");
    CHECK(param(Generate, {{"width", 512}}) == "width");
    CHECK(param(Chat, {{"options", {{"mirostat", 2}}}}) == "options.mirostat");
    CHECK(param(Chat, {{"options", {{"typical_p", 0.5}}}}) == "options.typical_p");
    CHECK(param(Chat, {{"options", {{"temperature", -1}}}}) == "temperature");
    CHECK(param(Chat, {{"options", {{"repeat_penalty", 0}}}}) == "repeat_penalty");
    CHECK(param(Chat, {{"options", {{"num_predict", 100000}}}}) == "num_predict");
    CHECK(param(Chat, {{"options", {{"stop", {1}}}}}) == "stop");
    CHECK(param(Chat, {{"options", "fast"}}) == "options");
    CHECK(param(Chat, {{"stream", "yes"}}) == "stream");
    CHECK(refused(Chat, {{"model", ""}, {"messages", msgs}}).param == "model");
    CHECK(refused(Chat, {{"messages", msgs}}).message == "model is required");
    // what the Python client always sends is no refusal: empty tools, empty format
    CHECK(ok(Chat, {{"model", "m"}, {"messages", msgs}, {"tools", json::array()}, {"format", ""}}).stream);
}

TEST_CASE("ollamaFormatIsAGrammar") {
    CHECK(ok(Chat, {{"model", "m"}, {"messages", {kHello}}}).engine.grammar == nullptr);
    CHECK(ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"format", ""}}).engine.grammar == nullptr);
    const auto json_mode = ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"format", "json"}});
    REQUIRE(json_mode.engine.grammar);
    grammar::GrammarState any(json_mode.engine.grammar);
    CHECK(any.accept_bytes(R"({"a": [1, 2]})"));
    CHECK(any.can_end());
    const json schema = {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}}}, {"population", {{"type", "integer"}}}}},
                         {"required", {"city", "population"}}};
    const auto with_schema = ok(Generate, {{"model", "m"}, {"prompt", "Paris?"}, {"format", schema}});
    REQUIRE(with_schema.engine.grammar);
    grammar::GrammarState s(with_schema.engine.grammar);
    CHECK(s.accept_bytes(R"({"city": "Paris", "population": 2100000})"));
    CHECK(s.can_end());
    grammar::GrammarState wrong(with_schema.engine.grammar);
    CHECK_FALSE(wrong.accept_bytes(R"({"city": 7)"));
    const ApiError e =
        refused(Chat, {{"model", "m"}, {"messages", {kHello}}, {"format", {{"type", "object"}, {"$ref", "#/x"}}}});
    CHECK(e.param == "format");
    CHECK(e.message.find("$ref") != std::string::npos);
}

TEST_CASE("ollamaToolsCallsAndResults") {
    const json weather = json::parse(R"({"type": "function", "function": {"name": "get_weather",
        "description": "Weather in a city", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}})");
    const json call = {{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}};
    const OllamaRequest r = ok(Chat, {{"model", "m"},
                                      {"tools", {weather}},
                                      {"messages",
                                       {kHello,
                                        {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}},
                                        {{"role", "tool"}, {"content", "18 C"}}}}});
    REQUIRE(r.tools.tools.size() == 1);
    CHECK(r.tools.tools[0].name == "get_weather");
    CHECK(r.tools.choice == ToolChoice::Auto);
    CHECK(r.tools.parse());
    CHECK(json::parse(r.engine.template_options.tools_json)[0]["function"]["name"] == "get_weather");
    REQUIRE(r.engine.messages.size() == 3);
    REQUIRE(r.engine.messages[1].tool_calls.size() == 1);
    CHECK(r.engine.messages[1].tool_calls[0].name == "get_weather");
    CHECK(json::parse(r.engine.messages[1].tool_calls[0].arguments) == json{{"city", "Paris"}});
    CHECK(r.engine.messages[2].role == "tool");
    CHECK(r.engine.messages[2].name == "get_weather");  // the call it answers, by order
    const auto named =
        ok(Chat, {{"model", "m"}, {"messages", {{{"role", "tool"}, {"content", "1"}, {"tool_name", "other"}}}}});
    CHECK(named.engine.messages[0].name == "other");
    CHECK_FALSE(ok(Chat, {{"model", "m"}, {"messages", {kHello}}, {"tools", json::array()}}).tools.parse());
}

TEST_CASE("ollamaToolCallsComeWholeWithObjectArguments") {
    const ToolCallDelta d{0, "call_1", "get_weather", R"({"city": "Paris"})"};
    const json calls = ollama_tool_calls_json({d});
    CHECK(calls ==
          json::array({{{"id", "call_1"},
                        {"function", {{"index", 0}, {"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}}));
    // A streamed chat whose text is a call in the Hermes form: no marker in the content, the
    // call in the chunk where it became complete.
    OllamaAnswer chat({Chat, "m", false},
                      ToolCallText(std::make_unique<ToolCallParser>(ToolCallFormat::Hermes, "call_"), "test"));
    std::string out;
    for (const char* piece :
         {"<tool_", "call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}\n", "</tool_call>"}) {
        EngineEvent e;
        e.text = piece;
        out += chat.text(e);
    }
    out += chat.finished(RequestStats{});
    json got_calls = json::array();
    std::string content;
    for (size_t at = 0; at < out.size();) {
        const size_t end = out.find('\n', at);
        const json line = json::parse(out.substr(at, end - at));
        content += line["message"]["content"].get<std::string>();
        if (line["message"].contains("tool_calls"))
            for (const json& c : line["message"]["tool_calls"]) got_calls.push_back(c);
        at = end + 1;
    }
    CHECK(content.empty());
    REQUIRE(got_calls.size() == 1);
    CHECK(got_calls[0]["function"]["name"] == "get_weather");
    CHECK(got_calls[0]["function"]["arguments"] == json{{"city", "Paris"}});

    OllamaAnswer whole({Chat, "m", false},
                       ToolCallText(std::make_unique<ToolCallParser>(ToolCallFormat::Hermes, "call_"), "test"));
    const json j = json::parse(whole.whole(
        "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>", "",
        {}, RequestStats{}));
    CHECK(j["message"]["content"] == "Let me look.");
    CHECK(j["message"]["tool_calls"][0]["function"]["arguments"]["city"] == "Rome");
    CHECK(j["done_reason"] == "stop");
}

TEST_CASE("ollamaBodyLimitsAndBadJson") {
    CHECK(refused(Chat, "{not json").status == 400);
    CHECK(refused(Chat, std::string(200, '[')).message.find("nests deeper") != std::string::npos);
    CHECK(refused(Chat, "[1]").status == 400);
    ServerLimits small;
    small.max_prompt_bytes = 8;
    const ApiError big =
        refused(Chat, {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "123456789"}}}}}, small);
    CHECK(big.status == 413);
    CHECK(refused(Generate, {{"model", "m"}, {"prompt", "12345"}, {"system", "6789"}}, small).status == 413);
}

TEST_CASE("ollamaErrorsAreAnErrorString") {
    CHECK(ollama_error_json(ApiError{404, "model 'x' not found", "", "", ""}) == R"({"error":"model 'x' not found"})");
    CHECK(ollama_error_json(ApiError{400, "bad \xFF byte", "", "", ""}) == "{\"error\":\"bad \xEF\xBF\xBD byte\"}");
}

TEST_CASE("ollamaStreamedLinesThenTheFinalObject") {
    OllamaAnswer chat({Chat, "smol:latest", false});
    CHECK(std::string(chat.stream_type()) == "application/x-ndjson");
    CHECK(chat.keepalive().empty());
    EngineEvent e;
    e.text = "Hel";
    e.reasoning = "hmm";
    const std::string line = chat.text(e);
    REQUIRE(line.back() == '\n');
    CHECK(line.find('\n') == line.size() - 1);
    const json j = json::parse(line);
    CHECK(j["model"] == "smol:latest");
    CHECK(j["done"] == false);
    CHECK(j["message"] == json{{"role", "assistant"}, {"content", "Hel"}, {"thinking", "hmm"}});
    CHECK(j["created_at"].get<std::string>().size() == 30);  // 2026-12-05T15:39:57.123456789Z
    CHECK(chat.text(EngineEvent{}).empty());

    RequestStats s;
    s.prompt_tokens = 31;
    s.generated_tokens = 5;
    s.queue_wait_ms = 2;
    s.ttft_ms = 12.5;
    s.decode_ms = 40;
    s.stop_reason = StopReason::Length;
    const json last = json::parse(chat.finished(s));
    CHECK(last["done"] == true);
    CHECK(last["done_reason"] == "length");
    CHECK(last["message"]["content"] == "");
    CHECK(last["prompt_eval_count"] == 31);
    CHECK(last["prompt_eval_duration"] == 10'500'000);
    CHECK(last["eval_count"] == 5);
    CHECK(last["eval_duration"] == 40'000'000);
    CHECK(last["load_duration"] == 0);
    CHECK(last["total_duration"].get<int64_t>() > 0);
    CHECK(json::parse(chat.failed(ApiError{500, "boom", "", "", ""})) == json{{"error", "boom"}});
}

TEST_CASE("ollamaWholeGenerateAnswerWithLogprobs") {
    OllamaAnswer gen({Generate, "smol", true});
    TokenLogprob t{5, "Hi", -0.25f, {{5, "Hi", -0.25f}, {6, "Ho", -2.0f}}};
    RequestStats s;
    s.stop_reason = StopReason::EndOfText;
    const json j = json::parse(gen.whole("Hi", "", {t}, s));
    CHECK(j["response"] == "Hi");
    CHECK_FALSE(j.contains("thinking"));
    CHECK(j["done"] == true);
    CHECK(j["done_reason"] == "stop");
    REQUIRE(j["logprobs"].size() == 1);
    CHECK(j["logprobs"][0]["token"] == "Hi");
    CHECK(j["logprobs"][0]["logprob"] == doctest::Approx(-0.25));
    CHECK(j["logprobs"][0]["top_logprobs"][1]["token"] == "Ho");
    const auto lp = ok(Generate, {{"model", "m"}, {"prompt", "Hi"}, {"logprobs", true}, {"top_logprobs", 3}});
    CHECK(lp.logprobs);
    CHECK(lp.engine.top_logprobs == 3);
}

TEST_CASE("ollamaModelEndpointsDescribeTheRealFile") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    const ServedModel m = describe_served_model("SmolLM2-135M-Instruct.Q4_1", path);
    CHECK(m.name == "SmolLM2-135M-Instruct.Q4_1:latest");
    CHECK(m.size > 90'000'000);
    CHECK(m.digest.size() == 16);
    CHECK(m.details["format"] == "gguf");
    CHECK(m.details["family"] == "llama");
    CHECK(m.details["parameter_size"] == "134.5M");
    CHECK(m.details["quantization_level"] == "Q4_1");
    CHECK(m.model_info["general.architecture"] == "llama");
    CHECK(m.model_info["llama.context_length"] == 8192);
    CHECK(m.model_info["tokenizer.ggml.tokens"].is_null());  // arrays left out, as Ollama does
    CHECK(m.chat_template.find("<|im_start|>") != std::string::npos);
    CHECK(model_name_matches("SmolLM2-135M-Instruct.Q4_1:latest", "SmolLM2-135M-Instruct.Q4_1"));
    CHECK(model_name_matches("SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct.Q4_1"));
    CHECK_FALSE(model_name_matches("SmolLM2-135M-Instruct.Q4_1:7b", "SmolLM2-135M-Instruct.Q4_1"));
    CHECK_FALSE(model_name_matches("llama3", "SmolLM2-135M-Instruct.Q4_1"));

    EngineStatus status;
    status.model_path = path;
    status.n_ctx = 2048;
    status.memory = {{"cpu", 30, 0, 90, 10, 5}, {"cuda:0", 0, 100, 0, 20, 5}};
    const json ps = ollama_ps_json(m, status)["models"][0];
    CHECK(ps["size"] == 230);
    CHECK(ps["size_vram"] == 125);
    CHECK(ps["context_length"] == 2048);
    const json tags = ollama_tags_json(m)["models"][0];
    CHECK(tags["name"] == m.name);
    CHECK(tags["digest"] == m.digest);
    const json show = ollama_show_json(m, status);
    CHECK(show["template"] == m.chat_template);
    status.chat_template = "{{ messages }}";  // what the engine says it renders with comes first
    CHECK(ollama_show_json(m, status)["template"] == "{{ messages }}");
    status.chat_template.clear();
    CHECK(show["capabilities"] == json::array({"completion"}));
    status.tool_call_format = ToolCallFormat::Generic;
    CHECK(ollama_show_json(m, status)["capabilities"] == json::array({"completion", "tools"}));
    CHECK(show["modelfile"].get<std::string>().find("FROM " + path) != std::string::npos);
    CHECK(show["parameters"].get<std::string>().find("temperature 0.8") != std::string::npos);
    CHECK(ollama_version_json()["version"].is_string());
    CHECK(ollama_tags_json(std::nullopt) == json{{"models", json::array()}});  // no model loaded
    CHECK(ollama_ps_json(std::nullopt, status) == json{{"models", json::array()}});
    CHECK(ollama_time(std::chrono::system_clock::time_point{}) == "1970-01-01T00:00:00.000000000Z");
}

// stories260K.gguf has no tokenizer.chat_template: /api/show gives the built-in template the
// engine falls back to and really renders with, not an empty string.
TEST_CASE("ollamaShowGivesTheBuiltInTemplateWhenTheFileHasNone") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    LoadOptions lo;
    lo.path = path;
    lo.device = BackendPreference::Cpu;
    lo.n_ctx = 256;
    auto model = Model::load(lo);
    Scheduler scheduler(*model, {});
    const EngineStatus status = scheduler.status();
    const ServedModel m = describe_served_model("stories260K", path);
    CHECK(m.chat_template.empty());
    const std::string shown = ollama_show_json(m, status)["template"];
    CHECK(shown == model->chat_template().tmpl.source());
    CHECK(shown == ChatTemplate::named("llama2").source());  // a llama file with no special markers
}
