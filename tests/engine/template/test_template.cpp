// Chat-template engine tests: real templates from the model files, upstream templates with
// literal expected prompts, every Jinja construct against jinja2-generated expectations,
// errors with locations, fallback resolution, budgets and a mutation fuzz.
//
// Where expectations come from: the literal prompts in upstream_templates.h and every case in
// jinja_cases.json were produced by Python's jinja2 3.1 configured exactly like transformers'
// apply_chat_template (trim_blocks, lstrip_blocks, sandbox, HF's tojson/raise_exception/
// strftime_now) — see gen_jinja_cases.py, which regenerates the JSON. The product never uses
// Python; it is only the oracle.

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"
#include "engine/template/chat_template.h"
#include "engine/template/jinja_interpreter.h"
#include "engine/template/jinja_json.h"
#include "engine/template/jinja_parser.h"
#include "test_data.h"
#include "test_json.h"
#include "upstream_templates.h"

using ember::ChatMessage;
using ember::ChatRenderOptions;
using ember::ChatTemplate;

namespace {

constexpr std::time_t kNow = 1700000000;  // 14 Nov 2023 22:13:20 UTC

const ChatMessage kSystem{"system", "You are a helpful assistant."};
const std::vector<ChatMessage> kConversation = {
    {"user", "Hello!"},
    {"assistant", "Hi! How can I help you today?"},
    {"user", "What is the capital of France?"},
};

std::vector<ChatMessage> conversation(bool with_system) {
    std::vector<ChatMessage> m;
    if (with_system) m.push_back(kSystem);
    m.insert(m.end(), kConversation.begin(), kConversation.end());
    return m;
}

std::string render(const ChatTemplate& t, bool with_system, bool agp, const std::string& bos, const std::string& eos) {
    ChatRenderOptions o;
    o.add_generation_prompt = agp;
    o.bos_token = bos;
    o.eos_token = eos;
    o.now = kNow;
    return t.render(conversation(with_system), o);
}

// Renders a template with the system conversation and default tokens: for construct tests.
std::string run(const std::string& src) {
    ChatRenderOptions o;
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.now = kNow;
    return ChatTemplate::compile(src).render(conversation(true), o);
}

// The ember::Error message of compiling and rendering `src`, or "" if it succeeded.
std::string error_of(const std::string& src) {
    try {
        run(src);
    } catch (const ember::Error& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

#define CHECK_ERROR(src, needle)                                                                            \
    do {                                                                                                    \
        const std::string err_ = error_of(src);                                                             \
        REQUIRE_MESSAGE(contains(err_, needle),                                                             \
                        "expected error containing '" << std::string(needle) << "', got '" << err_ << "'"); \
    } while (0)

#define COMPARE_STR(actual, expected) REQUIRE_EQ(std::string(actual), std::string(expected))

// ---- jinja2-generated cases (jinja_cases.json) ----

using ember::test::json;

// JSON numbers are doubles (as jinja2's expectations were written): integral ones become ints.
ember::jinja::Value from_json(const json& j) {
    using ember::jinja::Value;
    switch (j.type()) {
        case json::value_t::null:
            return Value::none();
        case json::value_t::boolean:
            return Value(j.get<bool>());
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float: {
            const double d = j.get<double>();
            if (d == static_cast<double>(static_cast<int64_t>(d))) return Value(static_cast<int64_t>(d));
            return Value(d);
        }
        case json::value_t::string:
            return Value(j.get<std::string>());
        case json::value_t::array: {
            std::vector<Value> items;
            for (const json& x : j) items.push_back(from_json(x));
            return Value(std::move(items));
        }
        case json::value_t::object: {
            ember::jinja::Dict d;
            for (const auto& [key, value] : j.items()) d.set(key, from_json(value));  // keys sorted
            return Value(std::move(d));
        }
        default:
            return Value::undefined();
    }
}

// The "cases" array of jinja_cases.json, parsed once (a missing file throws, naming it).
const json& load_cases() {
    static const json cases = ember::test::load_json(EMBER_TEMPLATE_CASES).at("cases");
    return cases;
}

// Compiles and renders like ChatTemplate does, but with arbitrary variables.
std::string render_vars(const std::string& src, const json& vars) {
    auto program = ember::jinja::parse_template(src);
    ember::jinja::check_names(*program);
    ember::jinja::Dict d;
    for (const auto& [key, value] : vars.items()) d.set(key, from_json(value));
    ember::jinja::Interpreter in(*program, ember::jinja::RenderLimits{}, kNow);
    return in.render(d);
}

// strftime_now() reads local time; the expectations were produced in UTC. Set before main().
const bool kUtc = [] {
    setenv("TZ", "UTC", 1);
    tzset();
    return true;
}();

}  // namespace

// ------------------------------------------------------------ real model files

TEST_CASE("smollm2 template from model file") {
    const std::string path = ember::test::test_model(ember::test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    const auto gguf = ember::GgufFile::open(path);
    const auto src = gguf.opt_string("tokenizer.chat_template");
    REQUIRE(src.has_value());
    const auto resolved = ember::resolve_chat_template(src, gguf.architecture(), {"<|im_start|>", "<|im_end|>"});
    REQUIRE_MESSAGE(!resolved.warning, (resolved.warning ? resolved.warning->c_str() : ""));
    REQUIRE(contains(resolved.source_desc, "model's own"));
    const ChatTemplate& t = resolved.tmpl;
    COMPARE_STR(render(t, true, true, "<|im_start|>", "<|im_end|>"),
                "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                "<|im_start|>user\nHello!<|im_end|>\n"
                "<|im_start|>assistant\nHi! How can I help you today?<|im_end|>\n"
                "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                "<|im_start|>assistant\n");
    COMPARE_STR(render(t, true, false, "<|im_start|>", "<|im_end|>"),
                "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                "<|im_start|>user\nHello!<|im_end|>\n"
                "<|im_start|>assistant\nHi! How can I help you today?<|im_end|>\n"
                "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n");
    // No system message: SmolLM2's template adds its own default one.
    COMPARE_STR(render(t, false, true, "<|im_start|>", "<|im_end|>"),
                "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                "<|im_start|>user\nHello!<|im_end|>\n"
                "<|im_start|>assistant\nHi! How can I help you today?<|im_end|>\n"
                "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                "<|im_start|>assistant\n");
    COMPARE_STR(render(t, false, false, "<|im_start|>", "<|im_end|>"),
                "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                "<|im_start|>user\nHello!<|im_end|>\n"
                "<|im_start|>assistant\nHi! How can I help you today?<|im_end|>\n"
                "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n");
}

// The Gemma 3 270M file ships without tokenizer.chat_template: Ember falls back to its
// built-in 'gemma' template (guessed from the vocabulary), says so, and renders exactly
// what Gemma 3's upstream template renders.
TEST_CASE("gemma3 model file falls back to gemma") {
    const std::string path = ember::test::test_model(ember::test::kGemma3);
    EMBER_REQUIRE_FILE(path);
    const auto gguf = ember::GgufFile::open(path);
    const auto src = gguf.opt_string("tokenizer.chat_template");
    REQUIRE_MESSAGE(!src.has_value(), "the Gemma 3 test file now has a chat template: test it like SmolLM2's");
    const std::vector<std::string> vocab = gguf.get_string_array("tokenizer.ggml.tokens");
    const std::vector<double> types = gguf.get_number_array("tokenizer.ggml.token_type");
    std::vector<std::string> special;
    for (size_t i = 0; i < vocab.size() && i < types.size(); ++i)
        if (types[i] == 3 || types[i] == 4) special.push_back(vocab[i]);  // control, user-defined
    const auto resolved = ember::resolve_chat_template(src, gguf.architecture(), special);
    REQUIRE(resolved.warning.has_value());
    REQUIRE_MESSAGE(contains(*resolved.warning, "no chat template"), resolved.warning->c_str());
    REQUIRE_MESSAGE(contains(*resolved.warning, "'gemma'"), resolved.warning->c_str());
    REQUIRE_MESSAGE(contains(*resolved.warning, "<start_of_turn>"), resolved.warning->c_str());
    REQUIRE(contains(resolved.source_desc, "built-in 'gemma'"));
    for (bool sys : {true, false})
        for (bool agp : {true, false}) {
            const std::string got = render(resolved.tmpl, sys, agp, "<bos>", "<eos>");
            const std::string want = render(ChatTemplate::compile(upstream::kGemma3), sys, agp, "<bos>", "<eos>");
            COMPARE_STR(got, want);
        }
    COMPARE_STR(render(resolved.tmpl, true, true, "<bos>", "<eos>"), upstream::kGemma3_sys_gen);
    COMPARE_STR(render(resolved.tmpl, false, false, "<bos>", "<eos>"), upstream::kGemma3_nosys_nogen);
}

// ------------------------------------------------------------ upstream templates

TEST_CASE("upstream templates") {
    const std::pair<const char*, const char*> rows[] = {{"llama3.1", "llama31"}, {"llama3.2", "llama32"},
                                                        {"qwen2.5", "qwen25"},   {"mistral-v0.1", "mistral01"},
                                                        {"phi3-mini", "phi3"},   {"gemma3", "gemma3"}};
    std::string name;
    for (const auto& [row, key] : rows) SUBCASE(row) {
            name = key;
        }
    struct Case {
        const char *src, *bos, *eos, *sys_gen, *sys_nogen, *nosys_gen, *nosys_nogen;
    };
    using namespace upstream;
    const std::map<std::string, Case> cases = {
        {"llama31",
         {kLlama31, "<|begin_of_text|>", "<|eot_id|>", kLlama31_sys_gen, kLlama31_sys_nogen, kLlama31_nosys_gen,
          kLlama31_nosys_nogen}},
        {"llama32",
         {kLlama32, "<|begin_of_text|>", "<|eot_id|>", kLlama32_sys_gen, kLlama32_sys_nogen, kLlama32_nosys_gen,
          kLlama32_nosys_nogen}},
        {"qwen25",
         {kQwen25, "", "<|im_end|>", kQwen25_sys_gen, kQwen25_sys_nogen, kQwen25_nosys_gen, kQwen25_nosys_nogen}},
        {"mistral01", {kMistralV01, "<s>", "</s>", nullptr, nullptr, kMistralV01_nosys_gen, kMistralV01_nosys_nogen}},
        {"phi3",
         {kPhi3Mini, "<s>", "<|endoftext|>", kPhi3Mini_sys_gen, kPhi3Mini_sys_nogen, kPhi3Mini_nosys_gen,
          kPhi3Mini_nosys_nogen}},
        {"gemma3",
         {kGemma3, "<bos>", "<eos>", kGemma3_sys_gen, kGemma3_sys_nogen, kGemma3_nosys_gen, kGemma3_nosys_nogen}},
    };
    const Case& c = cases.at(name);
    const ChatTemplate t = ChatTemplate::compile(c.src);
    if (c.sys_gen) {
        COMPARE_STR(render(t, true, true, c.bos, c.eos), c.sys_gen);
        COMPARE_STR(render(t, true, false, c.bos, c.eos), c.sys_nogen);
    } else {  // Mistral v0.1: a system message breaks the user/assistant alternation
        try {
            render(t, true, true, c.bos, c.eos);
            FAIL("expected raise_exception");
        } catch (const ember::Error& e) {
            REQUIRE_MESSAGE(contains(e.what(), "raised an error at line 1, column"), e.what());
            REQUIRE_MESSAGE(contains(e.what(), "Conversation roles must alternate user/assistant/user/assistant/..."),
                            e.what());
        }
    }
    COMPARE_STR(render(t, false, true, c.bos, c.eos), c.nosys_gen);
    COMPARE_STR(render(t, false, false, c.bos, c.eos), c.nosys_nogen);
}

TEST_CASE("llama32 date follows the clock") {
    ChatRenderOptions o;
    o.now = kNow + 86400 * 40;  // 24 Dec 2023
    const std::string out = ChatTemplate::compile(upstream::kLlama32).render(conversation(false), o);
    REQUIRE_MESSAGE(contains(out, "Today Date: 24 Dec 2023\n"), out.c_str());
}

TEST_CASE("named templates render") {
    REQUIRE_EQ(ChatTemplate::named_templates().size(), size_t{7});
    COMPARE_STR(render(ChatTemplate::named("chatml"), true, true, "", ""),
                "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                "<|im_start|>user\nHello!<|im_end|>\n"
                "<|im_start|>assistant\nHi! How can I help you today?<|im_end|>\n"
                "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                "<|im_start|>assistant\n");
    // The named llama3 matches Llama 3.x minus the date header; mistral/phi3/gemma match upstream.
    COMPARE_STR(render(ChatTemplate::named("llama3"), false, true, "<|begin_of_text|>", "<|eot_id|>"),
                "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi! How can I help you today?<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    COMPARE_STR(render(ChatTemplate::named("mistral"), false, true, "<s>", "</s>"), upstream::kMistralV01_nosys_gen);
    COMPARE_STR(render(ChatTemplate::named("mistral"), true, true, "<s>", "</s>"),
                "<s>[INST] You are a helpful assistant.\n\nHello! [/INST]Hi! How can I help you today?</s>"
                "[INST] What is the capital of France? [/INST]");
    COMPARE_STR(render(ChatTemplate::named("phi3"), true, true, "<s>", "<|endoftext|>"), upstream::kPhi3Mini_sys_gen);
    COMPARE_STR(render(ChatTemplate::named("phi3"), false, false, "<s>", "<|endoftext|>"),
                upstream::kPhi3Mini_nosys_nogen);
    COMPARE_STR(render(ChatTemplate::named("gemma"), true, false, "<bos>", "<eos>"), upstream::kGemma3_sys_nogen);
    COMPARE_STR(
        render(ChatTemplate::named("llama2"), true, true, "<s>", "</s>"),
        "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST] Hi! How can I help you today? </s>"
        "<s>[INST] What is the capital of France? [/INST]");
    COMPARE_STR(render(ChatTemplate::named("zephyr"), false, true, "<s>", "</s>"),
                "<|user|>\nHello!</s>\n<|assistant|>\nHi! How can I help you today?</s>\n"
                "<|user|>\nWhat is the capital of France?</s>\n<|assistant|>\n");
    REQUIRE_THROWS_AS(ChatTemplate::named("nope"), ember::Error);
    for (std::string_view n : ChatTemplate::named_templates())  // all render any role order
        REQUIRE(!ChatTemplate::named(n).render({{"assistant", "a"}, {"assistant", "b"}}, true, "", "").empty());
}

// ------------------------------------------------------------ jinja2-generated cases

TEST_CASE("jinja2 cases") {
    const json& cases = load_cases();
    REQUIRE_MESSAGE(cases.size() > 200, "tests/engine/template/jinja_cases.json missing or empty");
    const json* row = nullptr;
    for (const json& c : cases) SUBCASE(c.at("name").get<std::string>().c_str()) {
            row = &c;
        }
    REQUIRE(row != nullptr);
    const json& want = *row;
    const std::string src = want.at("template").get<std::string>();
    const json vars = want.value("vars", json::object());
    if (want.contains("expected")) {
        std::string got;
        try {
            got = render_vars(src, vars);
        } catch (const ember::Error& e) {
            FAIL(e.what());
        }
        REQUIRE_EQ(got, want.at("expected").get<std::string>());
        return;
    }
    const std::string kind = want.value("error", std::string());
    try {
        auto program = ember::jinja::parse_template(src);
        ember::jinja::check_names(*program);
        REQUIRE_MESSAGE(kind != "syntax", "jinja2 rejects this template when compiling; Ember compiled it");
        render_vars(src, vars);
        FAIL("jinja2 fails here (" << want.value("message", std::string()) << "); Ember rendered it");
    } catch (const ember::Error& e) {
        const std::string msg = e.what();
        if (kind == "syntax") REQUIRE_MESSAGE(contains(msg, "syntax error at line"), e.what());
        if (kind == "raised") {
            REQUIRE_MESSAGE(contains(msg, "raised an error"), e.what());
            REQUIRE_MESSAGE(contains(msg, want.value("message", std::string())), e.what());
        }
        // jinja2 fails at render time; Ember may already refuse when compiling.
        if (kind == "runtime") REQUIRE_MESSAGE(contains(msg, "error at line"), e.what());
        if (kind == "unsupported") REQUIRE_MESSAGE(contains(msg, "not supported"), e.what());
    }
}

// ------------------------------------------------------------ constructs (literal)

TEST_CASE("whitespace control") {
    COMPARE_STR(run("a {{- 'b' -}}  c"), "abc");
    COMPARE_STR(run("  {% if true %}\n  x\n  {% endif %}\n  y\n"), "  x\n  y");  // trim + lstrip
    COMPARE_STR(run("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");              // both disabled
    COMPARE_STR(run("{{ 'a' }}\n{{ 'b' }}"), "a\nb");                            // no trim after }}
    COMPARE_STR(run("a\n  {#- c #}\nb"), "ab");
    COMPARE_STR(run("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
    COMPARE_STR(run("x\r\ny\r\n"), "x\ny");  // newlines normalised, one trailing newline dropped
}

TEST_CASE("loop variables") {
    COMPARE_STR(run("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ "
                    "loop.length }},{% endfor %}"),
                "10TrueFalse3,21FalseFalse3,32FalseTrue3,");
    COMPARE_STR(run("{% for x in [] %}{% else %}none{% endfor %}"), "none");
    COMPARE_STR(run("{% for m in messages if m.role == 'user' %}{{ loop.index }}/{{ loop.length }} {% endfor %}"),
                "1/2 2/2 ");
    COMPARE_STR(run("{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1");
    COMPARE_STR(run("{% for x in range(9) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 5 %}{% break %}{% "
                    "endif %}{{ x }}{% endfor %}"),
                "024");
}

TEST_CASE("filters") {
    COMPARE_STR(run("{{ '  hi  ' | trim }}|{{ messages | length }}|{{ 'ab' | upper }}|{{ x | default('d') }}"),
                "hi|4|AB|d");
    COMPARE_STR(run("{{ {'a': [1, none, 'é']} | tojson }}"), "{\"a\": [1, null, \"é\"]}");
    COMPARE_STR(run("{{ messages | map(attribute='role') | join(',') }}"), "system,user,assistant,user");
    COMPARE_STR(run("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"), "2");
    COMPARE_STR(run("{{ [3, 1, 2] | sort | first }}{{ [3, 1, 2] | last }}{{ 'x y' | title }}{{ 'aB' | capitalize }}"),
                "12X YAb");
    COMPARE_STR(run("{{ '7' | int + 1 }}{{ 3 | string ~ 'x' }}{{ 'a-b' | replace('-', '+') }}{{ {'b': 1, 'a': 2} | "
                    "dictsort | first }}"),
                "83xa+b('a', 2)");
}

// ---- what the chat stack hands a template (ChatMessage, ChatRenderOptions) ----

namespace {
std::string render_with(const std::string& src, const std::vector<ChatMessage>& msgs, const ChatRenderOptions& o) {
    return ChatTemplate::compile(src).render(msgs, o);
}
}  // namespace

TEST_CASE("message fields are set only when present") {
    ChatMessage user{"user", "hi"};
    ChatMessage assistant{"assistant", "ok"};
    assistant.reasoning_content = "think";
    ChatMessage tool{"tool", "18C"};
    tool.tool_call_id = "c1";
    tool.name = "get_weather";
    const std::string src = "{% for m in messages %}{{ m | tojson }}\n{% endfor %}";
    COMPARE_STR(render_with(src, {user, assistant, tool}, {}),
                "{\"role\": \"user\", \"content\": \"hi\"}\n"
                "{\"role\": \"assistant\", \"content\": \"ok\", \"reasoning_content\": \"think\", \"thinking\": "
                "\"think\"}\n"
                "{\"role\": \"tool\", \"content\": \"18C\", \"tool_call_id\": \"c1\", \"name\": \"get_weather\"}\n");
}

TEST_CASE("tool call arguments become a mapping") {
    ChatMessage a{"assistant", ""};
    a.tool_calls.push_back({"call_1", "f", R"({"b": [1, 2.5, null], "a": "\u00e9\ud83d\ude00"})"});
    a.tool_calls.push_back({"", "g", "not json"});
    a.tool_calls.push_back({"", "h", "{broken"});
    const std::string src =
        "{% for c in messages[0].tool_calls %}{{ c | tojson }}|{{ c.function.arguments is mapping }}\n{% endfor %}";
    COMPARE_STR(render_with(src, {a}, {}),
                "{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
                "{\"b\": [1, 2.5, null], \"a\": \"é😀\"}}}|True\n"
                "{\"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": \"not json\"}}|False\n"
                "{\"type\": \"function\", \"function\": {\"name\": \"h\", \"arguments\": \"{broken\"}}|False\n");
}

TEST_CASE("tools and options are template variables") {
    const std::string src =
        "{{ tools is none }}|{{ enable_thinking is defined }}|{{ reasoning_effort | default('medium') }}|"
        "{{ builtin_tools | default('-') }}";
    ChatRenderOptions o;
    COMPARE_STR(render_with(src, {{"user", "x"}}, o), "True|False|medium|-");
    o.tools_json = R"([{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}])";
    o.enable_thinking = false;
    o.reasoning_effort = "high";
    o.extra_vars = {{"builtin_tools", R"(["python"])"}};
    COMPARE_STR(render_with(src, {{"user", "x"}}, o), "False|True|high|['python']");
    COMPARE_STR(render_with("{{ tools[0].function.parameters | tojson }}{{ enable_thinking }}", {{"user", "x"}}, o),
                "{\"z\": 1, \"a\": 2}False");
}

TEST_CASE("bad tools JSON names the variable") {
    ChatRenderOptions o;
    o.tools_json = "[{\"type\": }]";
    CHECK_THROWS_WITH_AS(render_with("x", {{"user", "x"}}, o), doctest::Contains("tools: invalid JSON at byte 10"),
                         ember::Error);
    o.tools_json.clear();
    o.extra_vars = {{"flag", "tru"}};
    CHECK_THROWS_WITH_AS(render_with("x", {{"user", "x"}}, o), doctest::Contains("flag: invalid JSON"), ember::Error);
}

TEST_CASE("json reader follows json.loads") {
    using ember::jinja::parse_json;
    using ember::jinja::to_output;
    CHECK(to_output(parse_json(R"( {"a": 1, "b": -2.5e3, "c": [true, false, null], "a": 3} )", "t")) ==
          "{'a': 3, 'b': -2500.0, 'c': [True, False, None]}");
    CHECK(to_output(parse_json(R"("tab\t\"q\" \/ \ud83d\ude00 \ud800")", "t")) == "tab\t\"q\" / 😀 \xef\xbf\xbd");
    CHECK(parse_json("9223372036854775807", "t").as_int() == INT64_MAX);
    CHECK(parse_json("1.0", "t").is_float());
    for (const char* bad : {"", "[1,]", "{\"a\" 1}", "01", "1.", "-", "\"\x01\"", "\"\\x\"", "[1] 2", "nul",
                            "99999999999999999999", "{1: 2}", "\"abc"})
        CHECK_THROWS_AS(parse_json(bad, "t"), ember::Error);
    std::string deep(200, '[');
    CHECK_THROWS_WITH_AS(parse_json(deep, "t"), doctest::Contains("nested deeper"), ember::Error);
}

TEST_CASE("methods and slicing") {
    COMPARE_STR(run("{{ ' x '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith('a') }}|{{ 'Ab'.lower() }}|{{ "
                    "{'k': 1}.get('k') }}"),
                "x|['a', 'b']|True|ab|1");
    COMPARE_STR(run("{{ 'hello'[::-1] }}|{{ messages[1:] | length }}|{{ messages[-1].content }}|{{ 'héllo'[1] }}"),
                "olleh|3|What is the capital of France?|é");
    COMPARE_STR(run("{{ messages[0].role }}{{ messages[0]['role'] }}{{ messages[0].missing is defined }}"),
                "systemsystemFalse");
    // A [start:end] slice of the string itself (once built over views into the string it replaced).
    COMPARE_STR(run("{{ 'aloopȓastbc'.startswith('loop', 1) }}|{{ 'hello'.endswith('ll', 0, -1) }}|"
                    "{{ 'héllo wörld, a longer text'.startswith('wörld', 6, 11) }}|{{ 'x'.startswith('', 5) }}|{{ "
                    "'abc'.startswith('', -10) }}"),
                "True|True|True|False|True");
}

TEST_CASE("namespaces and scoping") {
    COMPARE_STR(
        run("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"),
        "4");
    COMPARE_STR(run("{% set n = 0 %}{% for m in messages %}{% set n = n + 1 %}{% endfor %}{{ n }}"),
                "0");  // jinja2 scoping
    COMPARE_STR(run("{% if true %}{% set n = 5 %}{% endif %}{{ n }}"), "5");
}

TEST_CASE("macros") {
    COMPARE_STR(run("{% macro turn(role, text='?') %}<{{ role }}>{{ text }}{% endmacro %}{{ turn('u') }}{{ turn('a', "
                    "text='hi') }}"),
                "<u>?<a>hi");
    COMPARE_STR(run("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
}

// ------------------------------------------------------------ errors

TEST_CASE("syntax errors have location") {
    CHECK_ERROR("line one\n{% if x %}\n{{ 1 + }}", "syntax error at line 3, column 8");
    CHECK_ERROR("{% for m in messages %}\n{{ m }}", "syntax error at line 1, column 4: 'for' is never closed");
    CHECK_ERROR("ok\n  {{ 'abc }}", "syntax error at line 2, column 6: unterminated string literal");
    CHECK_ERROR("{{ x | nosuchfilter }}", "syntax error at line 1, column 8: no filter named 'nosuchfilter'");
    CHECK_ERROR("{{ x is nosuchtest }}", "no test named 'nosuchtest'");
    CHECK_ERROR("{% endif %}", "unknown tag 'endif'");
    CHECK_ERROR("{{ 1 ]}}", "unexpected ']'");
}

TEST_CASE("runtime errors have location") {
    CHECK_ERROR("\n\n   {{ nope.attr }}", "chat template error at line 3, column 11: 'nope' is undefined");
    CHECK_ERROR("{{ 'a' + 1 }}",
                "chat template error at line 1, column 8: unsupported operand type(s) for +: 'str' and 'int'");
    CHECK_ERROR("{{ 1 // 0 }}", "division or modulo by zero");
    CHECK_ERROR("{% for x in 3 %}{% endfor %}", "'int' object is not iterable");
    CHECK_ERROR("{{ raise_exception('Only user and assistant roles are supported!') }}",
                "chat template raised an error at line 1, column 4: Only user and assistant roles are supported!");
}

TEST_CASE("unsupported constructs") {
    CHECK_ERROR("{% include 'header.j2' %}", "line 1, column 4: '{% include %}' is not supported");
    CHECK_ERROR("{% extends 'base.j2' %}", "'{% extends %}' is not supported");
    CHECK_ERROR("{% from 'x' import y %}", "'{% from %}' is not supported");
    CHECK_ERROR("{% call f() %}{% endcall %}", "'{% call %}' is not supported");
    CHECK_ERROR("{% for x in y recursive %}{% endfor %}", "recursive loops are not supported");
    CHECK_ERROR("{{ f(*args) }}", "*args and **kwargs in calls are not supported");
    CHECK_ERROR("{{ '%s' % 'x' }}", "printf-style '%' string formatting is not supported");
}

// ------------------------------------------------------------ resolution

TEST_CASE("resolve uses model template") {
    const auto r = ember::resolve_chat_template(std::string(upstream::kQwen25), "qwen2", {"<|im_start|>"});
    REQUIRE(!r.warning);
    COMPARE_STR(render(r.tmpl, true, true, "", "<|im_end|>"), upstream::kQwen25_sys_gen);
}

TEST_CASE("resolve falls back on unsupported template") {
    const std::string broken = "{% include 'chat.j2' %}";
    const auto r = ember::resolve_chat_template(broken, "llama", {"<|start_header_id|>", "<|eot_id|>"});
    REQUIRE(r.warning.has_value());
    REQUIRE_MESSAGE(contains(*r.warning, "cannot be used"), r.warning->c_str());
    REQUIRE_MESSAGE(contains(*r.warning, "'{% include %}' is not supported"), r.warning->c_str());
    REQUIRE_MESSAGE(contains(*r.warning, "built-in 'llama3'"), r.warning->c_str());
    REQUIRE_MESSAGE(contains(*r.warning, "<|start_header_id|>"), r.warning->c_str());
    REQUIRE(contains(render(r.tmpl, false, true, "<|begin_of_text|>", "<|eot_id|>"), "<|start_header_id|>user"));
}

TEST_CASE("resolve falls back when trial render fails") {
    const auto r = ember::resolve_chat_template(std::string("{{ messages[0].content.nope.deeper }}"), "gemma3", {});
    REQUIRE(r.warning.has_value());
    REQUIRE_MESSAGE(contains(*r.warning, "fails on a test conversation"), r.warning->c_str());
    REQUIRE_MESSAGE(contains(*r.warning, "architecture is 'gemma3'"), r.warning->c_str());
    REQUIRE(contains(r.source_desc, "built-in 'gemma'"));
}

TEST_CASE("resolve without template or hints") {
    const auto none = ember::resolve_chat_template(std::nullopt, "mystery", {});
    REQUIRE((none.warning && contains(*none.warning, "no chat template") && contains(*none.warning, "'chatml'")));
    const auto blank = ember::resolve_chat_template(std::string("  \n"), "qwen2", {});
    REQUIRE((blank.warning && contains(*blank.warning, "'chatml'")));
}

// Mistral's template is usable but rejects system prompts: kept, with a warning.
TEST_CASE("resolve keeps template that rejects system") {
    const auto r = ember::resolve_chat_template(std::string(upstream::kMistralV01), "llama", {});
    REQUIRE(contains(r.source_desc, "model's own"));
    REQUIRE((r.warning && contains(*r.warning, "rejects conversations with a system message")));
}

// ------------------------------------------------------------ budgets and robustness

TEST_CASE("output and work limits") {
    CHECK_ERROR("{% for i in range(1000000) %}{{ 'xxxxxxxxxxxxxxxx' }}{% endfor %}", "output exceeds the");
    CHECK_ERROR(
        "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% "
        "endfor %}",
        "work budget");
    CHECK_ERROR("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                "-byte limit");
    CHECK_ERROR("{{ 'x' * 100000000000 }}", "-byte limit");
    CHECK_ERROR("{{ range(100000000000) | length }}", "-byte limit");
    // "Billion laughs": a small value that doubles when printed or compared.
    const std::string doubling =
        "{% set ns = namespace(v=['xxxxxxxxxxxxxxxx']) %}{% for i in range(N) %}{% set ns.v = [ns.v, ns.v] %}{% endfor "
        "%}";
    auto with_n = [&](const char* n) {
        std::string s = doubling;
        for (size_t at = s.find('N'); at != std::string::npos; at = s.find('N', at + std::strlen(n)))
            s.replace(at, 1, n);
        return s;
    };
    CHECK_ERROR(with_n("40") + "{{ ns.v }}", "value too large");
    CHECK_ERROR(with_n("18") + "{{ ns.v }}", "-byte limit");
    CHECK_ERROR(with_n("18") + "{% for i in range(100000) %}{% if ns.v == ns.v %}{% endif %}{% endfor %}",
                "work budget");
    // Per-item costs that grow with the input: code-point indexing, unique, `in`.
    CHECK_ERROR("{% set big = 'x' * 1000000 %}{% for i in range(100000) %}{% set c = big[i] %}{% endfor %}",
                "work budget");
    CHECK_ERROR("{% set big = range(100000) | list %}{{ big | unique | list | length }}", "work budget");
    CHECK_ERROR("{% set big = range(100000) | list %}{{ big | select('in', big) | list | length }}", "work budget");
    COMPARE_STR(run("[{{ '' * 100000000000 }}]"), "[]");
    ChatRenderOptions small;
    small.max_output_bytes = 10;
    try {
        ChatTemplate::named("chatml").render(conversation(true), small);
        FAIL("expected the output limit");
    } catch (const ember::Error& e) {
        REQUIRE_MESSAGE(contains(e.what(), "10-byte limit"), e.what());
    }
}

TEST_CASE("recursion and nesting limits") {
    CHECK_ERROR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nested too deeply");
    CHECK_ERROR("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "nested too deeply");
    CHECK_ERROR("{{ " + std::string(20000, '[') + std::string(20000, ']') + " }}", "nested too deeply");
    std::string ifs;
    for (int i = 0; i < 3000; ++i) ifs += "{% if true %}";
    CHECK_ERROR(ifs, "nested too deeply");
    std::string chain = "{{ 1";
    for (int i = 0; i < 100000; ++i) chain += " + 1";
    CHECK_ERROR(chain + " }}", "expression nested too deeply");
    CHECK_ERROR("{% set ns = namespace(x=[]) %}{% for i in range(500) %}{% set ns.x = [ns.x] %}{% endfor %}",
                "value nested too deeply");
    CHECK_ERROR("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested too deeply");
}

// Truncated and mangled templates must give output or ember::Error, never a crash,
// hang or another exception type. Deterministic: fixed seed.
TEST_CASE("mutation fuzz") {
    std::vector<std::string> seeds = {upstream::kLlama31, upstream::kQwen25, upstream::kMistralV01, upstream::kPhi3Mini,
                                      upstream::kGemma3};
    for (std::string_view n : ChatTemplate::named_templates()) seeds.push_back(ChatTemplate::named(n).source());
    for (const json& c : load_cases()) seeds.push_back(c.at("template").get<std::string>());
    const char* fragments[] = {"{%",
                               "%}",
                               "{{",
                               "}}",
                               "{#",
                               "#}",
                               "-",
                               "(",
                               ")",
                               "[",
                               "]",
                               "{",
                               "}",
                               "'",
                               "\"",
                               "|",
                               ".",
                               ",",
                               " if ",
                               " else ",
                               "endfor",
                               "endif",
                               " in ",
                               "loop",
                               "ns.",
                               "\\",
                               "{% for x in messages %}",
                               "{% endfor %}",
                               "{% set a = ",
                               "*",
                               "**",
                               ":",
                               "~",
                               "\n"};
    std::mt19937 rng(12345);
    int rendered = 0, rejected = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::string s = seeds[rng() % seeds.size()];
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits && !s.empty(); ++e) {
            const size_t pos = rng() % (s.size() + 1);
            switch (rng() % 4) {
                case 0:
                    s.resize(pos);
                    break;  // truncate
                case 1:
                    s.erase(pos, 1 + rng() % 8);
                    break;  // delete
                case 2:
                    s.insert(pos, fragments[rng() % std::size(fragments)]);
                    break;  // insert
                default:
                    s.insert(pos, s.substr(rng() % (s.size() + 1), rng() % 16));
                    break;  // duplicate
            }
        }
        try {
            ChatRenderOptions o;
            o.now = kNow;
            ChatTemplate::compile(s).render(conversation(iter % 2 == 0), o);
            ++rendered;
        } catch (const ember::Error&) {
            ++rejected;
        } catch (const std::exception& e) {
            FAIL("non-ember exception " << e.what() << " for template:\n" << s);
        }
    }
    ember::test::info("mutation fuzz: %d rendered, %d rejected with ember::Error", rendered, rejected);
    REQUIRE((rendered > 100 && rejected > 100));
}
