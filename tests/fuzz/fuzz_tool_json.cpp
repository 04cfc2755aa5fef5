// libFuzzer target for the JSON a chat request hands a template: the input is used as the tool
// definitions (ChatRenderOptions::tools_json), as one extra template variable and as a tool
// call's arguments (ChatToolCall::arguments), then printed back with tojson and iterated.
// Any input must render or throw ember::Error (tools and extra variables name the field;
// arguments fall back to the text). Anything else (a crash, a sanitizer report, another
// exception, a hang) is a bug. Build with the `fuzz` preset; run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/template/chat_template.h"
#include "kernels/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const ember::ChatTemplate t = ember::ChatTemplate::compile(
        "{{ tools | tojson }}{{ extra | tojson(indent=2) }}{% for m in messages %}{% for c in m.tool_calls %}"
        "{{ c.function.arguments | tojson }}{% if c.function.arguments is mapping %}{% for k, v in "
        "c.function.arguments | dictsort %}{{ k }}={{ v }};{% endfor %}{% endif %}{% endfor %}{% endfor %}");
    const std::string text(reinterpret_cast<const char*>(data), size);
    ember::ChatMessage call{"assistant", ""};
    call.tool_calls.push_back({"id", "f", text});
    ember::ChatRenderOptions opts;
    opts.now = 1700000000;
    try {
        t.render({{"user", "hi"}, call}, opts);  // arguments alone never throw but on budgets
    } catch (const ember::Error&) {}
    opts.tools_json = text;
    opts.extra_vars = {{"extra", text}};
    try {
        t.render({{"user", "hi"}, call}, opts);
    } catch (const ember::Error&) {
        // A clear error is the expected answer to bad JSON.
    }
    return 0;
}
