// The OpenAI wire format as the remote engine writes and reads it: request bodies, the chunks
// of the servers Ember is pointed at (shapes as vLLM, llama-server, Ollama and Ember send
// them), model lists with their context lengths, and error bodies.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "engine/remote/remote_config.h"
#include "engine/remote/remote_wire.h"

using namespace ember;
using namespace ember::remote;
using nlohmann::json;

TEST_CASE("chatRequestCarriesOnlyOpenAiFields") {
    EngineRequest r;
    r.messages = {{"system", "be brief"}, {"user", "hi"}};
    r.messages.push_back({"assistant", "", "", {{"call_1", "f", "{\"x\":1}"}}});
    r.messages.push_back({"tool", "42", "", {}, "call_1", "f"});
    r.max_tokens = 16;
    r.sampling = SamplingParams::greedy();
    r.sampling.seed = 7;
    r.stop = {"\n\n"};
    r.template_options.enable_thinking = false;
    const json b = json::parse(request_body(r, "llama-70b"));
    CHECK(request_path(r) == "/chat/completions");
    CHECK(b["model"] == "llama-70b");
    CHECK(b["stream"] == true);
    CHECK(b["stream_options"]["include_usage"] == true);
    CHECK(b["messages"].size() == 4);
    CHECK(b["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{\"x\":1}");
    CHECK(b["messages"][3]["tool_call_id"] == "call_1");
    CHECK(b["max_tokens"] == 16);
    CHECK(b["temperature"] == 0.0);
    CHECK(b["seed"] == 7);
    r.sampling.seed = 0xF000'0000'0000'0007ull;  // the app's random seeds use all 64 bits
    CHECK(json::parse(request_body(r, "m"))["seed"] == 0x7000'0000'0000'0007ll);
    CHECK(b["stop"] == json::array({"\n\n"}));
    CHECK(b["chat_template_kwargs"]["enable_thinking"] == false);
    CHECK(b["top_p"].get<double>() == doctest::Approx(0.95));  // Ember's default travels, as a local run uses it
    for (const char* local : {"top_k", "min_p", "repeat_penalty", "ignore_eos", "reasoning_budget_tokens"})
        CHECK_FALSE(b.contains(local));
}

TEST_CASE("llamaCppFieldsTravelOnlyWhenSet") {
    EngineRequest r;
    r.messages = {{"user", "hi"}};
    r.sampling.top_k = 20;
    r.sampling.min_p = 0.1f;
    r.sampling.repeat_penalty = 1.2f;
    const json none = json::parse(request_body(r, "m"));
    for (const char* f : {"top_k", "min_p", "repeat_penalty", "reasoning_effort", "chat_template_kwargs"})
        CHECK_FALSE(none.contains(f));
    SentFields sent;
    sent.top_k = true;  // `ember chat --remote --top-k 20`: that one only
    const json one = json::parse(request_body(r, "m", sent));
    CHECK(one["top_k"] == 20);
    CHECK_FALSE(one.contains("min_p"));
    sent.set_extras(true);  // an app endpoint set to send them
    const json all = json::parse(request_body(r, "m", sent));
    CHECK(all["min_p"].get<double>() == doctest::Approx(0.1));
    CHECK(all["repeat_penalty"].get<double>() == doctest::Approx(1.2));
    r.sampling.top_k = 0;  // neutral values say nothing
    r.sampling.repeat_penalty = 1.0f;
    const json neutral = json::parse(request_body(r, "m", sent));
    CHECK_FALSE(neutral.contains("top_k"));
    CHECK_FALSE(neutral.contains("repeat_penalty"));
    r.template_options.reasoning_effort = "high";
    CHECK(json::parse(request_body(r, "m"))["reasoning_effort"] == "high");
}

TEST_CASE("promptRequestGoesToCompletions") {
    EngineRequest r;
    r.prompt = "Once upon a time";
    r.max_tokens = -1;  // until the server stops: no max_tokens sent
    const json b = json::parse(request_body(r, "m"));
    CHECK(request_path(r) == "/completions");
    CHECK(b["prompt"] == "Once upon a time");
    CHECK_FALSE(b.contains("max_tokens"));
    CHECK_FALSE(b.contains("messages"));
}

TEST_CASE("chunksOfTheServersEmberTalksTo") {
    const Chunk vllm = parse_chunk(
        R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]})");
    CHECK(vllm.reasoning == "hmm");
    CHECK(vllm.text.empty());
    const Chunk ollama = parse_chunk(R"({"choices":[{"delta":{"role":"assistant","content":"","reasoning":"r"}}]})");
    CHECK(ollama.reasoning == "r");
    const Chunk last = parse_chunk(
        R"({"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":2}}})");
    CHECK(last.finish_reason == "length");
    CHECK(last.prompt_tokens == 12);
    CHECK(last.completion_tokens == 5);
    CHECK(last.reasoning_tokens == 2);
    CHECK(stop_reason_of(last.finish_reason) == StopReason::Length);
    const Chunk usage_only = parse_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}})");
    CHECK(usage_only.prompt_tokens == 3);
    const Chunk completion = parse_chunk(R"({"choices":[{"text":" there","index":0}]})");
    CHECK(completion.text == " there");
    const Chunk whole = parse_chunk(
        R"({"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]})");
    REQUIRE(whole.tool_calls.size() == 1);
    CHECK(whole.tool_calls[0].arguments == R"({"a":1})");
    const Chunk error = parse_chunk(R"({"error":{"message":"out of memory","type":"server_error"}})");
    CHECK(error.error == "out of memory");
}

TEST_CASE("malformedChunksAreClearErrors") {
    CHECK_THROWS_WITH_AS(parse_chunk("{nope"), doctest::Contains("not valid JSON"), Error);
    CHECK_THROWS_WITH_AS(parse_chunk("[1,2]"), doctest::Contains("not a JSON object"), Error);
    CHECK_THROWS_WITH_AS(parse_chunk(R"({"choices":{"a":1}})"), doctest::Contains("'choices' is not an array"), Error);
    CHECK_THROWS_WITH_AS(parse_chunk(R"({"choices":[{"delta":{"content":5}}]})"),
                         doctest::Contains("'content' is not a string"), Error);
    CHECK_THROWS_WITH_AS(parse_chunk(R"({"choices":[{"delta":{"tool_calls":[{"index":99999}]}}]})"),
                         doctest::Contains("index is over 1024"), Error);
}

TEST_CASE("modelListsWithTheirContextLengths") {
    const auto vllm = parse_models(
        R"({"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B-Instruct","object":"model","owned_by":"vllm","max_model_len":131072}]})");
    REQUIRE(vllm.size() == 1);
    CHECK(vllm[0].context_length == 131072);
    CHECK(vllm[0].owned_by == "vllm");
    const auto llama = parse_models(
        R"({"object":"list","data":[{"id":"smollm2","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":8192,"n_params":134515008}}]})");
    CHECK(llama.at(0).context_length == 8192);
    const auto ollama =
        parse_models(R"({"object":"list","data":[{"id":"qwen3:8b","object":"model","owned_by":"library"}]})");
    CHECK(ollama.at(0).context_length == 0);
    CHECK_THROWS_WITH_AS(parse_models(R"({"models":[]})"), doctest::Contains("no 'data' array"), Error);
}

TEST_CASE("errorBodiesGiveTheServersWords") {
    CHECK(server_message(R"({"error":{"message":"model 'x' not found","code":"model_not_found"}})") ==
          "model 'x' not found");
    CHECK(server_message(R"({"error":"Unauthorized"})") == "Unauthorized");
    CHECK(server_message(R"({"detail":"Not Found"})") == "Not Found");  // FastAPI (vLLM, SGLang)
    CHECK(server_message("Bad Gateway\r\n") == "Bad Gateway  ");
    CHECK(server_message(std::string(5000, 'x')).size() == 300);
}

TEST_CASE("baseUrlsGetTheirV1AndLoseTheirSecrets") {
    CHECK(api_base("http://gpu-box:8000") == "http://gpu-box:8000/v1");
    CHECK(api_base("http://gpu-box:8000/v1/") == "http://gpu-box:8000/v1");
    CHECK(api_base("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1");
    CHECK_THROWS_WITH_AS(api_base("gpu-box:8000"), doctest::Contains("must start with http:// or https://"), Error);
    CHECK(printable_url("https://user:pw@host:1/v1/models?key=abc") == "https://host:1/v1/models");
}
