// Ember's built-in chat templates (Jinja sources written for Ember) and the rules that pick
// one for a model whose file carries no usable template.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ember::chat_templates {

struct NamedTemplate {
    std::string_view name;         // "chatml", "llama3", …
    std::string_view description;  // the model families that use the format
    std::string_view source;       // Jinja
};

const std::vector<NamedTemplate>& all();
const NamedTemplate* find(std::string_view name);

struct Guess {
    std::string_view name;
    std::string reason;  // e.g. "the vocabulary has <start_of_turn>"
};

// Special tokens first (they are the format's own markers), then the architecture, then
// ChatML as the most common format.
Guess guess(std::string_view architecture, const std::vector<std::string>& special_tokens_present);

}  // namespace ember::chat_templates
