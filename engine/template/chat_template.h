// Chat templates: turning a conversation into the prompt text a model was trained on.
//
// Models ship their template as Jinja source (GGUF key `tokenizer.chat_template`, from Hugging
// Face's tokenizer_config.json). ChatTemplate compiles that source with Ember's own Jinja
// interpreter (engine/template/jinja_*) and renders it the way transformers'
// apply_chat_template does: variables `messages` (list of {role, content}),
// `add_generation_prompt`, `bos_token`, `eos_token`, `tools` = none, `documents` = none, and
// the globals raise_exception() and strftime_now().
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
#include <variant>
#include <vector>

namespace ember {

namespace jinja {
struct Program;
}

struct ChatMessage {
    ChatMessage() = default;
    ChatMessage(std::string r, std::string c, std::string reasoning = {})
        : role(std::move(r)), content(std::move(c)), reasoning_content(std::move(reasoning)) {}
    std::string role;  // "system", "user", "assistant", …
    std::string content;
    // An earlier answer's thinking (engine/template/reasoning.h), given to the template as the
    // message's `reasoning_content` (and `thinking`, gpt-oss's name) when not empty: the
    // template decides whether the model reads it again (Qwen3 drops old thinking).
    std::string reasoning_content;
};

// A variable a caller adds to the template's globals (OpenAI-style `chat_template_kwargs`,
// e.g. enable_thinking = false, reasoning_effort = "low"): a JSON scalar.
using TemplateArg = std::variant<bool, int64_t, double, std::string>;
using TemplateKwargs = std::vector<std::pair<std::string, TemplateArg>>;

struct ChatRenderOptions {
    bool add_generation_prompt = true;
    std::string bos_token;
    std::string eos_token;
    // The clock strftime_now() reads (Llama 3.x puts today's date in its system header).
    // Unset: the current local time. Tests pin it.
    std::optional<std::time_t> now;
    // Output budget. 0: 1 MiB plus four times the size of the messages.
    size_t max_output_bytes = 0;
    // Set after the standard variables, so they may replace them as the keyword arguments of
    // transformers' apply_chat_template do (`messages` excepted).
    TemplateKwargs kwargs;
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
    // raise_exception(), runtime errors, or when a render budget is exceeded.
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
