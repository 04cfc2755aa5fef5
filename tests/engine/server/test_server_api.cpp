// The server's pure layer: request bodies -> ApiRequest (every field, every refusal),
// events -> OpenAI JSON and SSE chunks, and the Prometheus page. No HTTP here; the server
// itself is tested end to end in test_server.cpp.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "engine/server/request_parser.h"
#include "engine/server/response_format.h"
#include "engine/server/server_metrics.h"
#include "engine/server/tool_grammar.h"

using namespace ember;
using namespace ember::server;
using nlohmann::json;

namespace {

ApiRequest ok(Endpoint e, const json& body, const ServerLimits& limits = {}) {
    auto r = parse_request(e, body.dump(), limits);
    if (auto* err = std::get_if<ApiError>(&r)) FAIL("unexpected error: ", err->message);
    return std::get<ApiRequest>(r);
}

ApiError refused(Endpoint e, const std::string& body, const ServerLimits& limits = {}) {
    auto r = parse_request(e, body, limits);
    REQUIRE_MESSAGE(std::holds_alternative<ApiError>(r), "accepted: ", body);
    return std::get<ApiError>(r);
}
ApiError refused(Endpoint e, const json& body, const ServerLimits& limits = {}) {
    return refused(e, body.dump(), limits);
}

const json kHello = {{"role", "user"}, {"content", "Hello"}};

}  // namespace

TEST_CASE("chatRequestTakesEveryOpenAIField") {
    const ApiRequest a = ok(Endpoint::Chat, {{"model", "SmolLM2"},
                                             {"messages", {{{"role", "developer"}, {"content", "Be brief."}}, kHello}},
                                             {"stream", true},
                                             {"stream_options", {{"include_usage", true}}},
                                             {"max_completion_tokens", 7},
                                             {"max_tokens", 99},
                                             {"temperature", 0.5},
                                             {"top_p", 0.9},
                                             {"top_k", 12},
                                             {"min_p", 0.1},
                                             {"seed", -1},
                                             {"presence_penalty", 0.25},
                                             {"frequency_penalty", -0.5},
                                             {"logprobs", true},
                                             {"top_logprobs", 3},
                                             {"stop", {"\n\n", "END"}},
                                             {"ignore_eos", true},
                                             {"cache_prompt", false},
                                             {"n", 1},
                                             {"user", "someone"},
                                             {"some_future_field", {1, 2}}});
    CHECK(a.endpoint == Endpoint::Chat);
    CHECK(a.engine.model == "SmolLM2");
    REQUIRE(a.engine.messages.size() == 2);
    CHECK(a.engine.messages[0].role == "system");  // developer is OpenAI's new name for it
    CHECK(a.engine.messages[0].content == "Be brief.");
    CHECK(a.engine.messages[1].role == "user");
    CHECK(a.stream);
    CHECK(a.include_usage);
    CHECK(a.engine.max_tokens == 7);  // max_completion_tokens wins over max_tokens
    CHECK(a.engine.sampling.temperature == doctest::Approx(0.5));
    CHECK(a.engine.sampling.top_p == doctest::Approx(0.9));
    CHECK(a.engine.sampling.top_k == 12);
    CHECK(a.engine.sampling.min_p == doctest::Approx(0.1));
    CHECK(a.engine.sampling.seed == ~uint64_t(0));
    CHECK(a.seed_given);
    CHECK(a.engine.sampling.presence_penalty == doctest::Approx(0.25));
    CHECK(a.engine.sampling.frequency_penalty == doctest::Approx(-0.5));
    CHECK(a.logprobs);
    CHECK(a.engine.top_logprobs == 3);
    CHECK(a.engine.stop == std::vector<std::string>{"\n\n", "END"});
    CHECK(a.engine.ignore_eog);
    CHECK_FALSE(a.engine.reuse_prefix);
    CHECK(a.engine.prompt.empty());
    CHECK(a.engine.prompt_tokens.empty());
}

TEST_CASE("leftOutFieldsTakeTheDefaults") {
    ServerLimits limits;
    limits.max_tokens = 321;
    const ApiRequest a = ok(Endpoint::Chat, {{"messages", {kHello}}}, limits);
    const SamplingParams defaults;
    CHECK(a.engine.model.empty());  // the loaded model
    CHECK_FALSE(a.stream);
    CHECK_FALSE(a.include_usage);
    CHECK_FALSE(a.logprobs);
    CHECK(a.engine.top_logprobs == -1);
    CHECK(a.engine.max_tokens == 321);
    CHECK_FALSE(a.seed_given);
    CHECK(a.engine.reuse_prefix);
    CHECK(a.engine.sampling.temperature == defaults.temperature);
    CHECK(a.engine.sampling.top_k == defaults.top_k);
    CHECK(a.engine.stop.empty());
    CHECK_FALSE(a.engine.ignore_eog);
    // null is "not given", as OpenAI's clients send it
    const ApiRequest b = ok(Endpoint::Chat, {{"messages", {kHello}}, {"temperature", nullptr}, {"stop", nullptr}});
    CHECK(b.engine.sampling.temperature == defaults.temperature);
}

TEST_CASE("chatContentPartsAndAssistantWithoutContent") {
    const ApiRequest a = ok(
        Endpoint::Chat,
        {{"messages",
          {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hel"}}, {{"type", "text"}, {"text", "lo"}}}}},
           {{"role", "assistant"}, {"content", nullptr}},
           {{"role", "assistant"}, {"content", "Hi"}, {"tool_calls", json::array()}}}}});
    REQUIRE(a.engine.messages.size() == 3);
    CHECK(a.engine.messages[0].content == "Hello");
    CHECK(a.engine.messages[1].content.empty());
    CHECK(a.engine.messages[2].content == "Hi");
}

TEST_CASE("completionPromptAsTextOrTokenIds") {
    CHECK(ok(Endpoint::Completion, {{"prompt", "Once upon"}}).engine.prompt == "Once upon");
    CHECK(ok(Endpoint::Completion, {{"prompt", {"Once upon"}}}).engine.prompt == "Once upon");
    CHECK(ok(Endpoint::Completion, {{"prompt", {1, 403, 407}}}).engine.prompt_tokens ==
          std::vector<int32_t>{1, 403, 407});
    CHECK(ok(Endpoint::Completion, {{"prompt", {{1, 2}}}}).engine.prompt_tokens == std::vector<int32_t>{1, 2});
    const ApiRequest lp = ok(Endpoint::Completion, {{"prompt", "x"}, {"logprobs", 2}, {"max_tokens", 0}});
    CHECK(lp.logprobs);
    CHECK(lp.engine.top_logprobs == 2);
    CHECK(lp.engine.max_tokens == 0);
    CHECK(lp.engine.messages.empty());
}

TEST_CASE("badBodiesGetA400NamingTheField") {
    struct Case {
        Endpoint endpoint;
        std::string body;
        std::string param;
    };
    const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
    const Case cases[] = {
        {Endpoint::Chat, "", ""},
        {Endpoint::Chat, "{", ""},
        {Endpoint::Chat, "[1,2]", ""},
        {Endpoint::Chat, "\"text\"", ""},
        {Endpoint::Chat, "{}", "messages"},
        {Endpoint::Chat, R"({"messages":[]})", "messages"},
        {Endpoint::Chat, R"({"messages":"hi"})", "messages"},
        {Endpoint::Chat, R"({"messages":[1]})", "messages[0]"},
        {Endpoint::Chat, R"({"messages":[{"content":"hi"}]})", "messages[0].role"},
        {Endpoint::Chat, R"({"messages":[{"role":"wizard","content":"hi"}]})", "messages[0].role"},
        {Endpoint::Chat, R"({"messages":[{"role":"user"}]})", "messages[0].content"},
        {Endpoint::Chat, R"({"messages":[{"role":"user","content":7}]})", "messages[0].content"},
        {Endpoint::Chat, R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content[0]"},
        {Endpoint::Chat, "{" + msgs + R"(,"model":5})", "model"},
        {Endpoint::Chat, "{" + msgs + R"(,"stream":"yes"})", "stream"},
        {Endpoint::Chat, "{" + msgs + R"(,"stream_options":true})", "stream_options"},
        {Endpoint::Chat, "{" + msgs + R"(,"stream_options":{"include_usage":1}})", "include_usage"},
        {Endpoint::Chat, "{" + msgs + R"(,"max_tokens":"10"})", "max_tokens"},
        {Endpoint::Chat, "{" + msgs + R"(,"max_tokens":1.5})", "max_tokens"},
        {Endpoint::Chat, "{" + msgs + R"(,"max_tokens":-1})", "max_tokens"},
        {Endpoint::Chat, "{" + msgs + R"(,"max_completion_tokens":100000})", "max_completion_tokens"},
        {Endpoint::Chat, "{" + msgs + R"(,"temperature":"hot"})", "temperature"},
        {Endpoint::Chat, "{" + msgs + R"(,"temperature":2.5})", "temperature"},
        {Endpoint::Chat, "{" + msgs + R"(,"top_p":1.5})", "top_p"},
        {Endpoint::Chat, "{" + msgs + R"(,"top_k":-1})", "top_k"},
        {Endpoint::Chat, "{" + msgs + R"(,"seed":1e30})", "seed"},
        {Endpoint::Chat, "{" + msgs + R"(,"seed":18446744073709551615})", "seed"},
        {Endpoint::Chat, "{" + msgs + R"(,"presence_penalty":3})", "presence_penalty"},
        {Endpoint::Chat, "{" + msgs + R"(,"logprobs":1})", "logprobs"},
        {Endpoint::Chat, "{" + msgs + R"(,"top_logprobs":2})", "top_logprobs"},
        {Endpoint::Chat, "{" + msgs + R"(,"logprobs":true,"top_logprobs":21})", "top_logprobs"},
        {Endpoint::Chat, "{" + msgs + R"(,"stop":5})", "stop"},
        {Endpoint::Chat, "{" + msgs + R"(,"stop":[""]})", "stop"},
        {Endpoint::Chat, "{" + msgs + R"(,"stop":["a",1]})", "stop"},
        {Endpoint::Chat, "{" + msgs + R"(,"ignore_eos":"true"})", "ignore_eos"},
        {Endpoint::Chat, "{" + msgs + R"(,"cache_prompt":0})", "cache_prompt"},
        {Endpoint::Chat, "{" + msgs + R"(,"user":3})", "user"},
        {Endpoint::Completion, "{}", "prompt"},
        {Endpoint::Completion, R"({"prompt":""})", "prompt"},
        {Endpoint::Completion, R"({"prompt":[]})", "prompt"},
        {Endpoint::Completion, R"({"prompt":{"text":"x"}})", "prompt"},
        {Endpoint::Completion, R"({"prompt":[1,-2]})", "prompt"},
        {Endpoint::Completion, R"({"prompt":[1,"a"]})", "prompt"},
        {Endpoint::Completion, R"({"prompt":[1,4294967296]})", "prompt"},
        {Endpoint::Completion, R"({"prompt":"x","logprobs":true})", "logprobs"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.body);
        const ApiError e = refused(c.endpoint, c.body);
        CHECK(e.status == 400);
        CHECK(e.type == "invalid_request_error");
        CHECK(e.param == c.param);
        CHECK_FALSE(e.message.empty());
    }
}

TEST_CASE("fieldsThatWouldChangeTheAnswerAreRefusedNotIgnored") {
    const json base = {{"messages", {kHello}}};
    const std::pair<const char*, json> cases[] = {
        {"n", 2},
        {"functions", {{{"name", "f"}}}},
        {"function_call", "auto"},
        {"logit_bias", {{"50256", -100}}},
        {"modalities", {"text", "audio"}},
    };
    for (const auto& [key, value] : cases) {
        CAPTURE(key);
        json body = base;
        body[key] = value;
        const ApiError e = refused(Endpoint::Chat, body);
        CHECK(e.status == 400);
        CHECK(e.param == key);
        CHECK(e.code == "unsupported_parameter");
    }
    // ... while their harmless forms pass
    json harmless = base;
    harmless["n"] = 1;
    harmless["tools"] = json::array();
    harmless["tool_choice"] = "none";
    harmless["response_format"] = {{"type", "text"}};
    harmless["logit_bias"] = json::object();
    ok(Endpoint::Chat, harmless);
    // images
    CHECK(refused(Endpoint::Chat,
                  {{"messages",
                    {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}})
              .code == "unsupported_parameter");
    CHECK(refused(Endpoint::Chat, {{"messages", {{{"role", "function"}, {"content", "42"}}}}}).param ==
          "messages[0].role");
    // completions' own
    CHECK(refused(Endpoint::Completion, {{"prompt", {"a", "b"}}}).code == "unsupported_parameter");
    CHECK(refused(Endpoint::Completion, {{"prompt", "a"}, {"echo", true}}).param == "echo");
    CHECK(refused(Endpoint::Completion, {{"prompt", "a"}, {"suffix", "z"}}).param == "suffix");
    CHECK(refused(Endpoint::Completion, {{"prompt", "a"}, {"best_of", 3}}).param == "best_of");
}

// response_format, llama-server's json_schema and grammar: compiled in the parser (the engine
// gets a Grammar), and a schema it cannot honour is a 400 naming the field and the keyword.
TEST_CASE("responseFormatBecomesAGrammarOrA400") {
    const json base = {{"messages", {kHello}}};
    const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
    auto grammar_of = [&](const char* key, const json& value) {
        json body = base;
        body[key] = value;
        return ok(Endpoint::Chat, body).engine.grammar;
    };
    auto accepts = [](const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
        grammar::GrammarState st(g);
        return st.accept_bytes(text) && st.can_end();
    };
    CHECK(grammar_of("response_format", {{"type", "text"}}) == nullptr);
    CHECK(ok(Endpoint::Chat, base).engine.grammar == nullptr);
    const auto any = grammar_of("response_format", {{"type", "json_object"}});
    REQUIRE(any);
    CHECK(accepts(any, R"({"x": [1, "y"]})"));
    CHECK_FALSE(accepts(any, "[1]"));
    const auto typed =
        grammar_of("response_format",
                   {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"strict", true}, {"schema", schema}}}});
    REQUIRE(typed);
    CHECK(accepts(typed, R"({"a": 5})"));
    CHECK_FALSE(accepts(typed, R"({"a": "5"})"));
    CHECK(accepts(grammar_of("json_schema", schema), R"({"a":1})"));
    CHECK(accepts(grammar_of("grammar", "root ::= \"yes\" | \"no\""), "no"));
    // Completions take them too.
    CHECK(ok(Endpoint::Completion, {{"prompt", "a"}, {"response_format", {{"type", "json_object"}}}}).engine.grammar);

    struct Bad {
        const char* key;
        json value;
        const char* param;
        const char* in_message;
    };
    const Bad bad[] = {
        {"response_format",
         json::parse(R"J({"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"^(?=a)"}}})J"),
         "response_format", "keyword 'pattern'"},
        {"response_format", json::parse(R"({"type":"json_schema","json_schema":{"schema":{"not":{}}}})"),
         "response_format", "keyword 'not'"},
        {"response_format", json::parse(R"({"type":"json_schema","json_schema":{"schema":{"$ref":"#"}}})"),
         "response_format", "keyword '$ref'"},
        {"response_format", json::parse(R"({"type":"json_schema"})"), "response_format", "json_schema"},
        {"response_format", json::parse(R"({"type":"xml"})"), "response_format", "'xml'"},
        {"json_schema", json::parse(R"({"type":"object","minProperties":1})"), "json_schema",
         "keyword 'minProperties'"},
        {"grammar", "root ::= (\"a\"", "grammar", "line 1"},
    };
    for (const Bad& b : bad) {
        CAPTURE(b.value.dump());
        json body = base;
        body[b.key] = b.value;
        const ApiError e = refused(Endpoint::Chat, body);
        CHECK(e.status == 400);
        CHECK(e.param == b.param);
        CHECK(e.message.find(b.in_message) != std::string::npos);
    }
    json both = base;
    both["grammar"] = "root ::= \"a\"";
    both["json_schema"] = schema;
    CHECK(refused(Endpoint::Chat, both).status == 400);
    // The limits come from ServerLimits.
    ServerLimits small;
    small.grammar.max_enum = 3;
    json big_enum = base;
    big_enum["json_schema"] = json::parse(R"({"enum":[1,2,3,4]})");
    CHECK(refused(Endpoint::Chat, big_enum, small).message.find("keyword 'enum'") != std::string::npos);
}

TEST_CASE("limitsOnBodyPromptAndDepth") {
    ServerLimits limits;
    limits.max_body_bytes = 1000;
    limits.max_prompt_bytes = 20;
    limits.max_prompt_ids = 3;
    limits.max_stop = 2;
    CHECK(refused(Endpoint::Completion, json{{"prompt", std::string(2000, 'x')}}, limits).status == 413);
    const ApiError long_prompt = refused(Endpoint::Completion, json{{"prompt", std::string(21, 'x')}}, limits);
    CHECK(long_prompt.status == 413);
    CHECK(long_prompt.code == "prompt_too_long");
    ok(Endpoint::Completion, {{"prompt", std::string(20, 'x')}}, limits);
    // messages count together
    CHECK(refused(Endpoint::Chat,
                  json{{"messages",
                        {{{"role", "user"}, {"content", std::string(15, 'a')}},
                         {{"role", "user"}, {"content", std::string(15, 'b')}}}}},
                  limits)
              .status == 413);
    CHECK(refused(Endpoint::Completion, json{{"prompt", {1, 2, 3, 4}}}, limits).status == 413);
    CHECK(refused(Endpoint::Completion, json{{"prompt", "a"}, {"stop", {"x", "y", "z"}}}, limits).param == "stop");
    // deep nesting is refused before any parser recurses into it
    const ApiError deep = refused(Endpoint::Chat, std::string(100000, '['));
    CHECK(deep.status == 400);
    CHECK(deep.message.find("nests deeper") != std::string::npos);
    // brackets inside strings are text, not nesting
    ok(Endpoint::Completion, {{"prompt", std::string(500, '[')}});
}

TEST_CASE("errorObjectIsOpenAIShaped") {
    const json e = json::parse(error_json({404, "no such model", "invalid_request_error", "model", "model_not_found"}));
    CHECK(e == json{{"error",
                     {{"message", "no such model"},
                      {"type", "invalid_request_error"},
                      {"param", "model"},
                      {"code", "model_not_found"}}}});
    const json n = json::parse(error_json({400, "bad", "invalid_request_error", "", ""}));
    CHECK(n["error"]["param"].is_null());
    CHECK(n["error"]["code"].is_null());
    // invalid UTF-8 from a client (echoed in a message) is replaced, never a throw
    const json u = json::parse(error_json({400, std::string("bad \xff\xfe byte"), "invalid_request_error", "", ""}));
    CHECK(u["error"]["message"] == "bad \xEF\xBF\xBD\xEF\xBF\xBD byte");
}

namespace {

RequestStats stats(int32_t prompt, int32_t generated, StopReason why) {
    RequestStats s;
    s.prompt_tokens = prompt;
    s.reused_tokens = 2;
    s.generated_tokens = generated;
    s.stop_reason = why;
    return s;
}

json sse_data(const std::string& event) {
    REQUIRE(event.rfind("data: ", 0) == 0);
    REQUIRE(event.size() >= 8);
    REQUIRE(event.substr(event.size() - 2) == "\n\n");
    return json::parse(event.substr(6, event.size() - 8));
}

}  // namespace

TEST_CASE("wholeChatAnswerWithUsageAndLogprobs") {
    ResponseMeta meta{Endpoint::Chat, "chatcmpl-1", 1700000000, "SmolLM2", true, false};
    TokenLogprob t;
    t.id = 7;
    t.piece = "Hi";
    t.logprob = -0.25f;
    t.top = {{7, "Hi", -0.25f}, {9, " there", -1.5f}};
    const json j = json::parse(response_json(meta, "Hi", {t}, stats(12, 1, StopReason::EndOfText)));
    CHECK(j["id"] == "chatcmpl-1");
    CHECK(j["object"] == "chat.completion");
    CHECK(j["created"] == 1700000000);
    CHECK(j["model"] == "SmolLM2");
    CHECK(j["choices"][0]["message"] == json{{"role", "assistant"}, {"content", "Hi"}});
    CHECK(j["choices"][0]["finish_reason"] == "stop");
    CHECK(j["usage"]["prompt_tokens"] == 12);
    CHECK(j["usage"]["completion_tokens"] == 1);
    CHECK(j["usage"]["total_tokens"] == 13);
    CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 2);
    const json& lp = j["choices"][0]["logprobs"]["content"][0];
    CHECK(lp["token"] == "Hi");
    CHECK(lp["logprob"] == doctest::Approx(-0.25));
    CHECK(lp["bytes"] == json{72, 105});
    REQUIRE(lp["top_logprobs"].size() == 2);
    CHECK(lp["top_logprobs"][0]["token"] == "Hi");
    CHECK(lp["top_logprobs"][1]["token"] == " there");
    CHECK(lp["top_logprobs"][1]["logprob"] == doctest::Approx(-1.5));
    CHECK(lp["top_logprobs"][1]["bytes"] == json{32, 116, 104, 101, 114, 101});
}

TEST_CASE("wholeCompletionAnswer") {
    ResponseMeta meta{Endpoint::Completion, "cmpl-1", 5, "stories260K", true, false};
    TokenLogprob a, b;
    a.id = 1, a.piece = "Once", a.logprob = -0.5f, a.top = {{1, "Once", -0.5f}, {5, "Twice", -2.0f}};
    b.id = 2, b.piece = " upon", b.logprob = -0.1f;
    const json j = json::parse(response_json(meta, "Once upon", {a, b}, stats(3, 2, StopReason::Length)));
    CHECK(j["object"] == "text_completion");
    CHECK(j["choices"][0]["text"] == "Once upon");
    CHECK(j["choices"][0]["finish_reason"] == "length");
    const json& lp = j["choices"][0]["logprobs"];
    CHECK(lp["tokens"] == json{"Once", " upon"});
    CHECK(lp["text_offset"] == json{0, 4});
    CHECK(lp["top_logprobs"][0] == json{{"Once", -0.5}, {"Twice", -2.0}});
    // no logprobs asked: null
    meta.logprobs = false;
    CHECK(json::parse(response_json(meta, "x", {}, stats(1, 1, StopReason::Context)))["choices"][0]["logprobs"]
              .is_null());
}

TEST_CASE("streamedChatChunksInOrder") {
    ResponseMeta meta{Endpoint::Chat, "chatcmpl-2", 9, "m", false, true};
    const json first = sse_data(first_chunk(meta));
    CHECK(first["object"] == "chat.completion.chunk");
    CHECK(first["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
    CHECK(first["usage"].is_null());  // include_usage: null in every chunk but the last
    CHECK(first.contains("usage"));
    const json text = sse_data(text_chunk(meta, "Hel", {}, 0));
    CHECK(text["choices"][0]["delta"] == json{{"content", "Hel"}});
    CHECK(text["choices"][0]["finish_reason"].is_null());
    const json fin = sse_data(finish_chunk(meta, StopReason::StopString));
    CHECK(fin["choices"][0]["delta"] == json::object());
    CHECK(fin["choices"][0]["finish_reason"] == "stop");
    const json usage = sse_data(usage_chunk(meta, stats(4, 3, StopReason::StopString)));
    CHECK(usage["choices"] == json::array());
    CHECK(usage["usage"]["total_tokens"] == 7);
    CHECK(kSseDone == "data: [DONE]\n\n");
    // completions: no role chunk, text in "text"
    ResponseMeta c{Endpoint::Completion, "cmpl-2", 9, "m", false, false};
    CHECK(first_chunk(c).empty());
    const json ct = sse_data(text_chunk(c, " upon", {}, 4));
    CHECK(ct["object"] == "text_completion");
    CHECK(ct["choices"][0]["text"] == " upon");
    CHECK_FALSE(ct.contains("usage"));
}

TEST_CASE("statusJsonForEmberPs") {
    EngineStatus s;
    s.model = "SmolLM2";
    s.device = "cpu";
    s.n_ctx = 2048;
    s.kv_blocks_total = 64;
    s.kv_blocks_used = 5;
    s.kv_blocks_cached = 7;
    s.kv_host_cache_bytes = 4096;
    s.kv_disk_cache_bytes = 8192;
    DeviceMemory m;
    m.device = "cpu";
    m.mapped_weights = 1000;
    m.kv_cache = 200;
    m.state = 30;  // a linear-attention model's recurrent state
    s.memory = {m};
    s.requests = {{1, "decode", 10, 3, 50.0, 8, 5, 2}, {2, "queued", 4, 0, 1.0}};
    s.speculation = {40, 25, 10, 35};  // drafted, accepted, passes, tokens
    const json j = status_json(s);
    CHECK(j["requests"][0]["drafted_tokens"] == 8);
    CHECK(j["requests"][0]["accepted_tokens"] == 5);
    CHECK(j["requests"][0]["passes"] == 2);
    CHECK(j["speculation"]["acceptance_rate"] == 0.625);
    CHECK(j["speculation"]["tokens_per_pass"] == 3.5);
    CHECK(j["speculation"]["passes"] == 10);
    CHECK(j["memory"][0]["state"] == 30);
    CHECK(j["model"] == "SmolLM2");
    CHECK(j["kv_blocks"] == json{{"total", 64}, {"used", 5}, {"cached", 7}});
    CHECK(j["kv_host_cache_bytes"] == 4096);
    CHECK(j["kv_disk_cache_bytes"] == 8192);
    CHECK(j["memory"][0]["held"] == 1230);
    CHECK(j["running"] == 1);
    CHECK(j["queued"] == 1);
    CHECK(j["requests"][0]["state"] == "decode");
}

TEST_CASE("prometheusTextHasCountersHistogramsAndGauges") {
    ServerMetrics m;
    m.count_request("/v1/completions", 200);
    m.count_request("/v1/completions", 200);
    m.count_request("/v1/chat/completions", 400);
    RequestStats s = stats(10, 4, StopReason::Length);
    s.reused_tokens = 6;
    s.ttft_ms = 30;  // 0.03 s: in the 0.05 bucket
    m.finished(s);
    m.inter_token(0.004);
    m.inter_token(2.0);  // above every bound: only +Inf
    EngineStatus st;
    st.kv_blocks_total = 10;
    st.kv_blocks_used = 4;
    st.kv_blocks_cached = 3;
    st.kv_host_cache_bytes = 65536;
    st.kv_disk_cache_bytes = 131072;
    st.speculation = {40, 25, 10, 35};
    st.requests = {{1, "decode", 1, 1, 1}, {2, "queued", 1, 0, 1}, {3, "queued", 1, 0, 1}};
    const std::string text = prometheus_text(m.snapshot(), st);
    const auto has = [&](const std::string& line) {
        CAPTURE(line);
        CHECK(text.find(line + "\n") != std::string::npos);
    };
    has("# TYPE ember_http_requests_total counter");
    has("ember_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2");
    has("ember_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1");
    has("ember_generations_total{stop_reason=\"length\"} 1");
    has("ember_prompt_tokens_total 10");
    has("ember_prompt_tokens_cached_total 6");
    has("ember_generated_tokens_total 4");
    has("# TYPE ember_time_to_first_token_seconds histogram");
    has("ember_time_to_first_token_seconds_bucket{le=\"0.025\"} 0");
    has("ember_time_to_first_token_seconds_bucket{le=\"0.05\"} 1");
    has("ember_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1");
    has("ember_time_to_first_token_seconds_count 1");
    has("ember_inter_token_seconds_bucket{le=\"0.005\"} 1");
    has("ember_inter_token_seconds_bucket{le=\"1\"} 1");
    has("ember_inter_token_seconds_bucket{le=\"+Inf\"} 2");
    has("ember_inter_token_seconds_sum 2.004");
    has("ember_requests_running 1");
    has("ember_requests_queued 2");
    has("ember_kv_blocks_used 4");
    has("ember_kv_cache_usage_ratio 0.4");
    has("ember_kv_blocks_cached 3");
    has("ember_kv_host_cache_bytes 65536");
    has("ember_kv_disk_cache_bytes 131072");
    has("# TYPE ember_speculative_drafted_tokens_total counter");
    has("ember_speculative_drafted_tokens_total 40");
    has("ember_speculative_accepted_tokens_total 25");
    has("ember_speculative_passes_total 10");
    has("ember_speculative_tokens_total 35");
}

TEST_CASE("reasoningRequestFieldsBecomeTemplateVariablesAndABudget") {
    const json assistant = {{"role", "assistant"}, {"content", "Hi!"}, {"reasoning_content", "They greet me."}};
    const ApiRequest a = ok(Endpoint::Chat, {{"messages", {kHello, assistant, kHello}},
                                             {"reasoning_effort", "low"},
                                             {"chat_template_kwargs", {{"enable_thinking", false}, {"depth", 2}}},
                                             {"reasoning_budget_tokens", 64}});
    CHECK(a.engine.messages[1].content == "Hi!");
    CHECK(a.engine.messages[1].reasoning_content == "They greet me.");
    // The variables the template options name take their fields; others are JSON text.
    const ember::ChatRenderOptions& o = a.engine.template_options;
    CHECK(o.reasoning_effort == "low");
    CHECK(o.enable_thinking == false);
    CHECK(o.extra_vars == std::vector<std::pair<std::string, std::string>>{{"depth", "2"}});
    CHECK(a.engine.reasoning_budget == 64);
    // chat_template_kwargs win over reasoning_effort (extra variables are set after it)
    const ApiRequest effort = ok(Endpoint::Chat, {{"messages", {kHello}},
                                                  {"reasoning_effort", "low"},
                                                  {"chat_template_kwargs", {{"reasoning_effort", "high"}}}});
    CHECK(effort.engine.template_options.reasoning_effort == "high");
    const ApiRequest none = ok(Endpoint::Chat, {{"messages", {kHello}}});
    CHECK(!none.engine.template_options.enable_thinking.has_value());
    CHECK(none.engine.template_options.reasoning_effort.empty());
    CHECK(none.engine.template_options.extra_vars.empty());
    CHECK(none.engine.reasoning_budget == -1);
    // vLLM's newer name for an earlier answer's thinking
    const json vllm = {{"role", "assistant"}, {"content", "Hi!"}, {"reasoning", "Hmm."}};
    CHECK(ok(Endpoint::Chat, {{"messages", {kHello, vllm, kHello}}}).engine.messages[1].reasoning_content == "Hmm.");

    CHECK(refused(Endpoint::Chat, {{"messages", {kHello}}, {"reasoning_effort", "max"}}).param == "reasoning_effort");
    CHECK(refused(Endpoint::Chat, {{"messages", {kHello}}, {"chat_template_kwargs", "x"}}).param ==
          "chat_template_kwargs");
    CHECK(
        refused(Endpoint::Chat, {{"messages", {kHello}}, {"chat_template_kwargs", {{"tools", json::array()}}}}).param ==
        "chat_template_kwargs.tools");
    CHECK(refused(Endpoint::Chat, {{"messages", {kHello}}, {"reasoning_budget_tokens", -2}}).param ==
          "reasoning_budget_tokens");
    const json bad = {{"role", "assistant"}, {"content", "x"}, {"reasoning_content", 3}};
    CHECK(refused(Endpoint::Chat, {{"messages", {kHello, bad}}}).param == "messages[1].reasoning_content");
}

TEST_CASE("reasoningContentIsApartFromContentWholeAndStreamed") {
    ResponseMeta meta{Endpoint::Chat, "chatcmpl-3", 9, "m", false, false};
    RequestStats st;
    st.prompt_tokens = 10;
    st.generated_tokens = 20;
    st.reasoning_tokens = 12;
    st.stop_reason = ember::StopReason::EndOfText;
    const json whole = json::parse(response_json(meta, "Paris.", {}, st, "The capital: Paris."));
    CHECK(whole["choices"][0]["message"] ==
          json{{"role", "assistant"}, {"content", "Paris."}, {"reasoning_content", "The capital: Paris."}});
    CHECK(whole["usage"]["completion_tokens_details"]["reasoning_tokens"] == 12);
    const json plain = json::parse(response_json(meta, "Paris.", {}, stats(10, 2, ember::StopReason::EndOfText)));
    CHECK_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
    CHECK_FALSE(plain["usage"].contains("completion_tokens_details"));
    CHECK(sse_data(text_chunk(meta, "", {}, 0, "The "))["choices"][0]["delta"] == json{{"reasoning_content", "The "}});
    CHECK(sse_data(text_chunk(meta, "Paris", {}, 0, "."))["choices"][0]["delta"] ==
          json{{"content", "Paris"}, {"reasoning_content", "."}});
    CHECK(sse_data(text_chunk(meta, "Paris", {}, 0))["choices"][0]["delta"] == json{{"content", "Paris"}});
}

// ---- tools (issue #37) -------------------------------------------------------------------

namespace {
const json kWeatherTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "Weather in a city"},
      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}};

json with_tools(json extra = json::object()) {
    json body = {{"messages", {kHello}}, {"tools", {kWeatherTool}}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return body;
}
}  // namespace

TEST_CASE("toolsToolChoiceAndParallelCallsAreParsed") {
    const ApiRequest a = ok(Endpoint::Chat, with_tools());
    REQUIRE(a.tools.tools.size() == 1);
    CHECK(a.tools.tools[0].name == "get_weather");
    CHECK(a.tools.tools[0].parameters["required"] == json{"city"});
    CHECK(a.tools.choice == ToolChoice::Auto);
    CHECK(a.tools.parallel);
    CHECK(a.tools.parse());
    // the template's tools: OpenAI's key order outside the schema
    CHECK(a.engine.template_options.tools_json ==
          R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", )"
          R"("parameters": {"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}}}])");

    CHECK(ok(Endpoint::Chat, with_tools({{"tool_choice", "required"}})).tools.choice == ToolChoice::Required);
    const ApiRequest none = ok(Endpoint::Chat, with_tools({{"tool_choice", "none"}}));
    CHECK(none.tools.choice == ToolChoice::None);
    CHECK(!none.tools.parse());  // shown to the model, not parsed
    CHECK(!none.engine.template_options.tools_json.empty());
    const ApiRequest named =
        ok(Endpoint::Chat, with_tools({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                                       {"parallel_tool_calls", false}}));
    CHECK(named.tools.choice == ToolChoice::Named);
    CHECK(named.tools.named == "get_weather");
    CHECK(!named.tools.parallel);
    // a tool without parameters gets an empty schema
    const ApiRequest bare = ok(
        Endpoint::Chat, {{"messages", {kHello}}, {"tools", {{{"type", "function"}, {"function", {{"name", "now"}}}}}}});
    CHECK(bare.tools.tools[0].parameters == json::object());
}

TEST_CASE("toolTurnsInTheConversation") {
    const json msgs = {kHello,
                       {{"role", "assistant"},
                        {"content", nullptr},
                        {"tool_calls",
                         {{{"id", "call_1"},
                           {"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
                       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18C"}}};
    const ApiRequest a = ok(Endpoint::Chat, with_tools({{"messages", msgs}}));
    REQUIRE(a.engine.messages.size() == 3);
    const ChatMessage& call = a.engine.messages[1];
    CHECK(call.content.empty());
    REQUIRE(call.tool_calls.size() == 1);
    CHECK(call.tool_calls[0].id == "call_1");
    CHECK(call.tool_calls[0].name == "get_weather");
    CHECK(call.tool_calls[0].arguments == "{\"city\": \"Paris\"}");
    const ChatMessage& result = a.engine.messages[2];
    CHECK(result.role == "tool");
    CHECK(result.tool_call_id == "call_1");
    CHECK(result.name == "get_weather");  // from the call it answers
    CHECK(result.content == "18C");
    // arguments sent as an object are taken as their JSON text
    json obj = msgs;
    obj[1]["tool_calls"][0]["function"]["arguments"] = {{"city", "Rome"}};
    CHECK(ok(Endpoint::Chat, with_tools({{"messages", obj}})).engine.messages[1].tool_calls[0].arguments ==
          R"({"city":"Rome"})");
}

TEST_CASE("badToolRequestsGetA400NamingTheField") {
    struct Case {
        json body;
        std::string param, code;
    };
    json two = with_tools();
    two["tools"].push_back(kWeatherTool);
    json bad_msg = {
        kHello, {{"role", "assistant"}, {"tool_calls", {{{"type", "function"}, {"function", {{"arguments", "{}"}}}}}}}};
    const Case cases[] = {
        {with_tools({{"tool_choice", {{"type", "function"}, {"function", {{"name", "launch"}}}}}}), "tool_choice",
         "unknown_tool"},
        {with_tools({{"tool_choice", "always"}}), "tool_choice", ""},
        {with_tools({{"tool_choice", 1}}), "tool_choice", ""},
        {{{"messages", {kHello}}, {"tool_choice", "required"}}, "tool_choice", ""},
        {with_tools({{"tools", {{{"type", "retrieval"}}}}}), "tools[0].type", "unsupported_parameter"},
        {with_tools({{"tools", {{{"type", "function"}}}}}), "tools[0].function", ""},
        {with_tools({{"tools", {{{"type", "function"}, {"function", {{"name", "rm -rf"}}}}}}}),
         "tools[0].function.name", ""},
        {with_tools({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}}),
         "tools[0].function.parameters", ""},
        {with_tools({{"tools", "get_weather"}}), "tools", ""},
        {two, "tools[1].function.name", ""},
        {with_tools({{"parallel_tool_calls", "yes"}}), "parallel_tool_calls", ""},
        {with_tools({{"messages", bad_msg}}), "messages[1].tool_calls[0].function.name", ""},
        {with_tools({{"messages", {{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array({1})}}}}}),
         "messages[0].tool_calls", ""},
        {{{"prompt", "x"}, {"tools", {kWeatherTool}}}, "tools", "unsupported_parameter"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.body.dump());
        const bool completion = c.body.contains("prompt");
        const ApiError e = refused(completion ? Endpoint::Completion : Endpoint::Chat, c.body);
        CHECK(e.status == 400);
        CHECK(e.param == c.param);
        if (!c.code.empty()) CHECK(e.code == c.code);
    }
}

TEST_CASE("tooManyOrTooLargeToolsAgainstTheLimits") {
    ServerLimits limits;
    limits.max_tools = 2;
    limits.max_tool_bytes = 300;
    json three = with_tools();
    for (const char* n : {"a", "b"}) {
        json t = kWeatherTool;
        t["function"]["name"] = n;
        three["tools"].push_back(t);
    }
    CHECK(refused(Endpoint::Chat, three, limits).param == "tools");
    json big = with_tools();
    big["tools"][0]["function"]["description"] = std::string(400, 'x');
    const ApiError e = refused(Endpoint::Chat, big, limits);
    CHECK(e.param == "tools[0]");
    CHECK(e.code == "tool_too_large");
    limits = {};
    limits.max_prompt_bytes = 100;  // tools count against the prompt's bytes
    CHECK(refused(Endpoint::Chat, with_tools(), limits).status == 413);
}

TEST_CASE("toolCallsInWholeAndStreamedAnswers") {
    ResponseMeta meta{Endpoint::Chat, "chatcmpl-4", 9, "m", false, false};
    const std::vector<ToolCallDelta> calls = {{0, "call_a0", "get_weather", R"({"city":"Paris"})"},
                                              {1, "call_a1", "now", "{}"}};
    const json whole = json::parse(response_json(meta, "", {}, stats(5, 9, StopReason::EndOfText), "", calls));
    const json& msg = whole["choices"][0]["message"];
    CHECK(msg["content"].is_null());
    CHECK(
        msg["tool_calls"] ==
        json::parse(
            R"([{"id":"call_a0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                          {"id":"call_a1","type":"function","function":{"name":"now","arguments":"{}"}}])"));
    CHECK(whole["choices"][0]["finish_reason"] == "tool_calls");
    // a call cut by max_tokens is still "length"
    CHECK(finish_reason(StopReason::Length, true) == "length");
    CHECK(json::parse(response_json(meta, "hi", {}, stats(5, 1, StopReason::EndOfText)))["choices"][0]["message"]
              .contains("tool_calls") == false);

    // streamed: the head (index, id, type, name, empty arguments), then the arguments by index
    const std::string sse = tool_call_chunks(meta, {calls[0]});
    const size_t cut = sse.find("\n\n") + 2;
    const json head = sse_data(sse.substr(0, cut));
    CHECK(head["choices"][0]["delta"] == json::parse(R"({"tool_calls":[{"index":0,"id":"call_a0","type":"function",
                          "function":{"name":"get_weather","arguments":""}}]})"));
    const json args = sse_data(sse.substr(cut));
    CHECK(args["choices"][0]["delta"] ==
          json::parse(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]})"));
    CHECK(sse_data(finish_chunk(meta, StopReason::EndOfText, true))["choices"][0]["finish_reason"] == "tool_calls");
}

namespace {
// Feeds `text` to a fresh state of `g`: accepted whole and able to end there.
bool admits(const std::shared_ptr<const grammar::Grammar>& g, const std::string& text) {
    grammar::GrammarState s(g);
    return s.accept_bytes(text) && s.can_end();
}
std::shared_ptr<const grammar::Grammar> forced(const json& body, ToolCallFormat f) {
    const auto r = forced_call_grammar(ok(Endpoint::Chat, body).tools, f);
    REQUIRE(std::holds_alternative<std::shared_ptr<const grammar::Grammar>>(r));
    return std::get<std::shared_ptr<const grammar::Grammar>>(r);
}
}  // namespace

TEST_CASE("forcedCallsGetAGrammarOfTheCallFormAndTheToolsSchemas") {
    CHECK(forced(with_tools(), ToolCallFormat::Generic) == nullptr);  // auto: free
    CHECK(forced(with_tools({{"tool_choice", "none"}}), ToolCallFormat::Generic) == nullptr);

    json time_tool = kWeatherTool;
    time_tool["function"]["name"] = "get_time";
    time_tool["function"]["parameters"] = {
        {"type", "object"}, {"properties", {{"zone", {{"enum", {"UTC", "CET"}}}}}}, {"required", {"zone"}}};
    json body = with_tools({{"tool_choice", "required"}});
    body["tools"].push_back(time_tool);
    const auto g = forced(body, ToolCallFormat::Generic);
    const std::string paris =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const std::string utc = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";
    CHECK(admits(g, paris));
    CHECK(admits(g, utc));
    CHECK(admits(g, paris + "\n" + utc));  // parallel calls
    CHECK(!admits(g, "Sure! " + paris));
    CHECK(!admits(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"PST\"}}\n</tool_call>"));
    CHECK(!admits(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // city required
    CHECK(!admits(g, "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"));
    // what the grammar admits, the parser reads as the same call
    ToolCallParser p(ToolCallFormat::Generic);
    ToolCallChunk c = p.feed(paris);
    const ToolCallChunk end = p.finish();
    c.calls.insert(c.calls.end(), end.calls.begin(), end.calls.end());
    REQUIRE(c.calls.size() == 1);
    CHECK(c.calls[0].arguments == R"({"city":"Paris"})");

    // named: only that function; parallel_tool_calls false: one call
    json named = body;
    named["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
    named["parallel_tool_calls"] = false;
    const auto n = forced(named, ToolCallFormat::Hermes);
    CHECK(admits(n, utc));
    CHECK(!admits(n, paris));
    CHECK(!admits(n, utc + "\n" + utc));
    // other families' forms
    CHECK(admits(forced(body, ToolCallFormat::Llama3), R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
    CHECK(admits(
        forced(body, ToolCallFormat::Mistral),
        R"([TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "CET"}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}])"));
}

TEST_CASE("forcedCallsWithSchemasTheGrammarRefusesAre400s") {
    json body = with_tools({{"tool_choice", "required"}});
    body["tools"][0]["function"]["parameters"] = {{"type", "object"}, {"not", {{"type", "string"}}}};
    auto r = forced_call_grammar(ok(Endpoint::Chat, body).tools, ToolCallFormat::Generic);
    REQUIRE(std::holds_alternative<ApiError>(r));
    CHECK(std::get<ApiError>(r).param == "tools[0].function.parameters");
    CHECK(std::get<ApiError>(r).message.find("not") != std::string::npos);
    r = forced_call_grammar(ok(Endpoint::Chat, with_tools({{"tool_choice", "required"}})).tools, ToolCallFormat::None);
    REQUIRE(std::holds_alternative<ApiError>(r));
    CHECK(std::get<ApiError>(r).param == "tool_choice");
}
