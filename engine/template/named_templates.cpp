#include "engine/template/named_templates.h"

#include <algorithm>

namespace ember::chat_templates {

namespace {

// The fallbacks accept any role order and never raise: they exist for files whose own
// template is missing or broken, so they should render whatever the user sends.

constexpr std::string_view kChatml = R"({%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %})";

constexpr std::string_view kLlama3 = R"({{- bos_token }}
{%- for message in messages %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})";

constexpr std::string_view kLlama2 = R"({%- if messages and messages[0]['role'] == 'system' %}
{%- set system = messages[0]['content'] %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set system = none %}
{%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
{%- if message['role'] == 'assistant' %}
{{- ' ' + message['content'] | trim + ' ' + eos_token }}
{%- else %}
{%- set content = message['content'] %}
{%- if loop.first and system is not none %}
{%- set content = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content %}
{%- endif %}
{{- bos_token + '[INST] ' + content | trim + ' [/INST]' }}
{%- endif %}
{%- endfor %})";

constexpr std::string_view kMistral = R"({{- bos_token }}
{%- if messages and messages[0]['role'] == 'system' %}
{%- set prefix = messages[0]['content'] + '\n\n' %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set prefix = '' %}
{%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
{%- if message['role'] == 'assistant' %}
{{- message['content'] + eos_token }}
{%- else %}
{{- '[INST] ' + (prefix if loop.first else '') + message['content'] + ' [/INST]' }}
{%- endif %}
{%- endfor %})";

// Gemma folds the system prompt into the first user turn and calls the assistant "model".
constexpr std::string_view kGemma = R"({{- bos_token }}
{%- if messages and messages[0]['role'] == 'system' %}
{%- set first_user_prefix = messages[0]['content'] + '\n\n' %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set first_user_prefix = '' %}
{%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}
{{- '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<start_of_turn>model\n' }}
{%- endif %})";

constexpr std::string_view kPhi3 = R"({%- for message in messages %}
{{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|assistant|>\n' }}
{%- else %}
{{- eos_token }}
{%- endif %})";

constexpr std::string_view kZephyr = R"({%- for message in messages %}
{{- '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|assistant|>\n' }}
{%- endif %})";

bool has(const std::vector<std::string>& tokens, std::string_view t) {
    return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

}  // namespace

const std::vector<NamedTemplate>& all() {
    static const std::vector<NamedTemplate> table = {
        {"chatml", "ChatML: Qwen, SmolLM, Hermes, many fine-tunes", kChatml},
        {"llama3", "Llama 3.x Instruct", kLlama3},
        {"llama2", "Llama 2 Chat", kLlama2},
        {"mistral", "Mistral / Mixtral Instruct ([INST])", kMistral},
        {"gemma", "Gemma 1/2/3 instruction-tuned", kGemma},
        {"phi3", "Phi-3 / Phi-3.5", kPhi3},
        {"zephyr", "Zephyr, TinyLlama Chat", kZephyr},
    };
    return table;
}

const NamedTemplate* find(std::string_view name) {
    for (const NamedTemplate& t : all())
        if (t.name == name) return &t;
    return nullptr;
}

Guess guess(std::string_view arch, const std::vector<std::string>& tokens) {
    static const struct {
        std::string_view token, name;
    } kByToken[] = {
        {"<start_of_turn>", "gemma"}, {"<|start_header_id|>", "llama3"},
        {"<|im_start|>", "chatml"},   {"<|end|>", "phi3"},
        {"<|user|>", "zephyr"},       {"[INST]", "mistral"},
    };
    for (const auto& [token, name] : kByToken)
        if (has(tokens, token)) return {name, "the vocabulary has the special token " + std::string(token)};
    static const struct {
        std::string_view arch, name;
    } kByArch[] = {
        {"gemma", "gemma"},  {"gemma2", "gemma"}, {"gemma3", "gemma"}, {"qwen2", "chatml"},
        {"qwen3", "chatml"}, {"qwen3", "chatml"}, {"phi3", "phi3"},    {"llama", "llama2"},
    };
    for (const auto& [a, name] : kByArch)
        if (a == arch) return {name, "the architecture is '" + std::string(arch) + "'"};
    return {"chatml", "nothing in the model identifies its format; ChatML is the most common one"};
}

}  // namespace ember::chat_templates
