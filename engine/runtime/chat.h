// Chat turns -> prompt tokens: render the model's own template, then tokenize the result
// once, with special tokens parsed (the template writes them as text) and BOS added only
// if the template did not already write it (no double BOS). Also what the answer's text
// continues (the generation prompt) and how the model writes its thinking, for the
// reasoning splitter (engine/template/reasoning.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/template/reasoning.h"

namespace ember {

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const TemplateKwargs& kwargs = {});
std::vector<int32_t> tokenize_prompt(const Model& model, const std::string& rendered);
std::vector<int32_t> chat_prompt_tokens(const Model& model, const std::vector<ChatMessage>& messages,
                                        const TemplateKwargs& kwargs = {});
std::string chat_generation_prompt(const Model& model, const std::vector<ChatMessage>& messages,
                                   const TemplateKwargs& kwargs = {});

// How the model writes its thinking: from its chat template, else its vocabulary.
ReasoningFormat reasoning_format(const Model& model);
// The template variables its chat template reads (a chat offers those switches only).
ReasoningControls reasoning_controls(const Model& model);

}  // namespace ember
