// Chat turns -> prompt tokens: render the model's own template, then tokenize the result
// once, with special tokens parsed (the template writes them as text) and BOS added only
// if the template did not already write it (no double BOS).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/model.h"

namespace ember {

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt);
// With the template variables a request sets (tools, enable_thinking, reasoning_effort…);
// bos_token and eos_token are always the model's.
std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, ChatRenderOptions options);
std::vector<int32_t> tokenize_prompt(const Model& model, const std::string& rendered);
std::vector<int32_t> chat_prompt_tokens(const Model& model, const std::vector<ChatMessage>& messages);

}  // namespace ember
