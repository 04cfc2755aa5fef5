// The models' real chat templates (Gemma 4, Qwen3, Qwen3.5, Qwen3-Coder, gpt-oss) rendered by
// Ember byte-identically to Python's jinja2 as transformers configures it.
//
// render_jinja2.py renders every case with jinja2 (from the pinned venv that
// scripts/fetch-jinja2.sh makes) reading the templates from llama.cpp's models/templates in
// the llama-cpp-python source package (scripts/llama-cpp-tools.sh --src): they are the
// models' own files and are not copied into this repository. Each case's inputs (messages,
// tools, options) go through the product path, ChatTemplate::render with ChatMessage and
// ChatRenderOptions, so this also pins how Ember hands tool calls, reasoning_content,
// enable_thinking and reasoning_effort to a template. A missing venv or source package fails.
#include <doctest/doctest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "engine/template/chat_template.h"
#include "kernels/common/error.h"
#include "llama_peer.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

namespace {

using ember::ChatMessage;
using ember::ChatRenderOptions;
using ember::ChatToolCall;
using ojson = nlohmann::ordered_json;  // keeps key order, as the templates' tojson shows it

// strftime_now() reads local time; the expectations are in UTC. Set before main().
const bool kUtc = [] {
    setenv("TZ", "UTC", 1);
    tzset();
    return true;
}();

std::string templates_dir() { return ember::test::llama_cpp_source_dir() + "/models/templates"; }

// jinja2's renders of every case, once per run.
const ojson& reference() {
    static const ojson cases = [] {
        const std::string python = std::string(EMBER_JINJA2_VENV) + "/bin/python";
        const std::string script = std::string(EMBER_SOURCE_DIR) + "/tests/engine/template/render_jinja2.py";
        const auto r = ember::test::run_process({python, script, templates_dir()}, 5 * 60 * 1000);
        REQUIRE_MESSAGE(r.ok(), "jinja2 reference failed (", python,
                        " missing? run scripts/fetch-jinja2.sh, as scripts/test.sh does):\n", r.err);
        return ojson::parse(r.out).at("cases");
    }();
    return cases;
}

// A message of render_jinja2.py (the dict Ember builds) back into the ChatMessage it came from.
ChatMessage to_message(const ojson& m) {
    ChatMessage msg{m.at("role").get<std::string>(), m.at("content").get<std::string>()};
    msg.reasoning_content = m.value("reasoning_content", "");
    msg.tool_call_id = m.value("tool_call_id", "");
    msg.name = m.value("name", "");
    for (const ojson& c : m.value("tool_calls", ojson::array())) {
        const ojson& fn = c.at("function");
        const ojson& args = fn.at("arguments");
        msg.tool_calls.push_back(ChatToolCall{c.value("id", ""), fn.at("name").get<std::string>(),
                                              args.is_string() ? args.get<std::string>() : args.dump()});
    }
    return msg;
}

ChatRenderOptions to_options(const ojson& c) {
    ChatRenderOptions o;
    o.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    o.bos_token = c.at("bos_token").get<std::string>();
    o.eos_token = c.at("eos_token").get<std::string>();
    o.now = std::time_t{1700000000};  // hf_jinja.NOW
    if (!c.at("tools").is_null()) o.tools_json = c.at("tools").dump();
    for (const auto& [name, value] : c.at("extra").items()) {
        if (name == "enable_thinking") o.enable_thinking = value.get<bool>();
        else if (name == "reasoning_effort") o.reasoning_effort = value.get<std::string>();
        else o.extra_vars.emplace_back(name, value.dump());
    }
    return o;
}

const ember::ChatTemplate& compiled(const std::string& file) {
    static std::map<std::string, ember::ChatTemplate> cache;
    auto it = cache.find(file);
    if (it == cache.end())
        it = cache.emplace(file, ember::ChatTemplate::compile(ember::test::read_file(templates_dir() + "/" + file)))
                 .first;
    return it->second;
}

}  // namespace

TEST_CASE("real templates render like jinja2") {
    const ojson& cases = reference();
    REQUIRE(cases.size() >= 600);
    int same = 0, failed = 0;
    for (const ojson& c : cases) {
        const std::string name = c.at("name").get<std::string>();
        std::vector<ChatMessage> msgs;
        for (const ojson& m : c.at("messages")) msgs.push_back(to_message(m));
        std::string got, error;
        try {
            got = compiled(c.at("template").get<std::string>()).render(msgs, to_options(c));
        } catch (const ember::Error& e) {
            error = e.what();
        }
        if (c.contains("expected")) {
            const std::string want = c.at("expected").get<std::string>();
            if (error.empty() && got == want) {
                ++same;
                continue;
            }
            ++failed;
            if (failed <= 5)
                CHECK_MESSAGE(false, name, "\n--- jinja2:\n", want, "\n--- Ember:\n",
                              (error.empty() ? got : "error: " + error));
        } else if (error.empty()) {
            ++failed;
            CHECK_MESSAGE(false, name, ": jinja2 raised (", c.at("message").get<std::string>(), ") but Ember rendered");
        } else {
            ++same;
        }
    }
    MESSAGE(same, " of ", cases.size(), " cases byte-identical to jinja2");
    CHECK(failed == 0);
}
