// Chat templates: turning a conversation into the prompt text a model was trained on.
//
// Models ship their template as Jinja source (GGUF key `tokenizer.chat_template`, from Hugging
// Face's tokenizer_config.json). ChatTemplate compiles that source with Ember's own Jinja
// interpreter (engine/template/jinja_*) and renders it the way transformers'
// apply_chat_template does: variables `messages` (see ChatMessage for each dict's keys),
// `add_generation_prompt`, `bos_token`, `eos_token`, `tools` (the tool definitions, or none),
// `documents` = none, the options the families read (`enable_thinking`, `reasoning_effort`,
// any other through ChatRenderOptions::extra_vars) only when set, and the globals
// raise_exception() and strftime_now().
//
// Supported Jinja: {{ }}, {% %}, {# #}, whitespace control (-/+) with trim_blocks and
// lstrip_blocks on, raw blocks; if/elif/else, for/else (loop.index/index0/revindex/revindex0/
// first/last/length/previtem/nextitem/cycle, `if` filters, tuple unpacking), break/continue,
// set (incl. `ns.attr`, tuple targets, block form), namespace(), macros (positional, keyword
// and default arguments), filter blocks, HF's {% generation %}; literals, all Python
// operators incl. chained comparisons, `in`/`not in`, `~`, inline if/else, indexing, slicing,
// attribute access on dicts.
// Filters: abs attr capitalize count d default dictsort e escape first float forceescape
// indent int items join last length list lower map max min reject rejectattr replace reverse
// round safe select selectattr sort string sum title tojson trim unique upper wordcount.
// Tests: defined undefined none boolean true false integer float number string mapping
// iterable sequence callable odd even divisibleby eq/equalto/== ne/!= lt/< le/<= gt/> ge/>=
// in lower upper sameas escaped.
// Methods: str.strip/lstrip/rstrip/split/rsplit/splitlines/startswith/endswith/replace/
// upper/lower/title/capitalize/find/rfind/count/join/isalnum/isalpha/isdigit/isspace/
// islower/isupper/removeprefix/removesuffix; dict.items/keys/values/get.
// Globals: range, namespace, dict, raise_exception, strftime_now.
// Not supported (clear ember::Error): include/import/extends/block/call/with/do, recursive
// loops, *args/**kwargs, printf-style '%' formatting, str.format, list/dict mutation.
// Known gaps: case mapping covers Latin, Greek and Cyrillic only (jinja_case.h); str.isalpha
// and friends are ASCII-only; integers are 64-bit (overflow is an error); range() and
// dict views print as lists; lazy generators (map/select results) are lists.
// Thread safety: a compiled ChatTemplate is immutable; render() may run concurrently.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember {

namespace jinja {
struct Program;
}

// One tool call an assistant turn made (OpenAI's tool_calls[i]). The template sees
// {"id": id (only when set), "type": "function", "function": {"name": name, "arguments": A}}
// where A is the arguments parsed into a mapping when they are a JSON object (what
// transformers passes, and what Qwen3, Gemma 4 and gpt-oss iterate or tojson), else the text
// as it is (also when it is malformed JSON: a past turn must not break the chat).
struct ChatToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text, as the API carries it
};

// One turn. The template's message dict has role and content, then only the fields that are
// set: reasoning_content and thinking (both the same text: Qwen and Gemma read the first,
// gpt-oss the second), tool_calls, tool_call_id, name.
struct ChatMessage {
    std::string role;  // "system", "user", "assistant", "tool", …
    std::string content;
    // An assistant turn's reasoning (engine/template/reasoning.h splits it from the answer),
    // kept apart from content: the template decides whether the model reads it again (Qwen3
    // drops old thinking).
    std::string reasoning_content{};
    std::vector<ChatToolCall> tool_calls{};  // an assistant turn's calls
    std::string tool_call_id{};              // role "tool": the call this result answers
    std::string name{};                      // role "tool": the function that produced it
};

struct ChatRenderOptions {
    bool add_generation_prompt = true;
    std::string bos_token;
    std::string eos_token;
    // The clock strftime_now() reads (Llama 3.x puts today's date in its system header).
    // Unset: the current local time. Tests pin it.
    std::optional<std::time_t> now;
    // Output budget. 0: 1 MiB plus four times the size of the messages.
    size_t max_output_bytes = 0;
    // Tool definitions, a JSON array as the API sends them ([{"type": "function", "function":
    // {"name", "description", "parameters"}}]); empty: `tools` is none. Keys keep their order.
    std::string tools_json{};
    // Set: `enable_thinking` is defined (Qwen3, Qwen3.5, Gemma 4 switch reasoning with it).
    std::optional<bool> enable_thinking{};
    // Non-empty: `reasoning_effort` ("low", "medium", "high"; gpt-oss puts it in its system
    // message and defaults to "medium").
    std::string reasoning_effort{};
    // Any other template variable: name -> JSON value text (e.g. {"builtin_tools",
    // "[\"python\"]"}). Set after the ones above, so it can override them.
    std::vector<std::pair<std::string, std::string>> extra_vars{};
};

class ChatTemplate {
public:
    // Compiles Jinja source. Throws ember::Error with line and column for syntax errors,
    // unknown filters/tests and unsupported constructs.
    static ChatTemplate compile(std::string source);
    // A built-in template written for Ember: see named_templates(). Throws if unknown.
    static ChatTemplate named(std::string_view name);
    static std::vector<std::string_view> named_templates();

    // Renders a conversation. Throws ember::Error (with the template location) on
    // raise_exception(), runtime errors, or when a render budget is exceeded; and, naming the
    // field, when tools_json or an extra_vars value is not valid JSON.
    std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt, const std::string& bos_token,
                       const std::string& eos_token) const;
    std::string render(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opts) const;
    // What add_generation_prompt appends for this conversation (the text the model's answer
    // continues: "<|im_start|>assistant\n", or "…<think>\n" when the template opens the
    // thinking): the render with it, less the common prefix with the render without it.
    std::string generation_prompt(const std::vector<ChatMessage>& msgs, ChatRenderOptions opts) const;

    const std::string& source() const { return *source_; }

private:
    std::shared_ptr<const std::string> source_;
    std::shared_ptr<const jinja::Program> program_;
};

struct ResolvedTemplate {
    ChatTemplate tmpl;
    std::string source_desc;             // which template is in use and why
    std::optional<std::string> warning;  // set whenever the model's own template is not used as is
};

// Picks the model's own template when it compiles and renders a trial conversation;
// otherwise a named template guessed from the special tokens in the vocabulary
// (e.g. "<|im_start|>", "<start_of_turn>", "<|start_header_id|>", "[INST]") and the
// architecture ("gemma3", "qwen2", "llama"…). Never silent: a fallback always comes with a
// warning that names the reason.
ResolvedTemplate resolve_chat_template(std::optional<std::string> model_template, std::string_view architecture,
                                       const std::vector<std::string>& special_tokens_present);

}  // namespace ember
