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
#include "engine/template/tool_calls.h"

namespace ember {

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt);
// With the template variables a request sets (tools, enable_thinking, reasoning_effort…);
// bos_token and eos_token are always the model's. A template that cannot show tools (it does
// not read `tools`) renders the generic fallback's rewrite of a conversation with tools or
// tool turns (with_generic_tools in engine/template/tool_calls.h); so do the functions below.
std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, ChatRenderOptions options);
std::vector<int32_t> tokenize_prompt(const Model& model, const std::string& rendered);
// The prompt for the assistant's next turn (add_generation_prompt is set here): `options`
// carries the request's template variables (tools, enable_thinking, reasoning_effort, …).
std::vector<int32_t> chat_prompt_tokens(const Model& model, const std::vector<ChatMessage>& messages,
                                        const ChatRenderOptions& options = {});
// The text the answer continues (ChatTemplate::generation_prompt) under the same options, so
// the splitter knows whether the template already opened the thinking.
std::string chat_generation_prompt(const Model& model, const std::vector<ChatMessage>& messages,
                                   const ChatRenderOptions& options = {});

// How the model writes its thinking: from its chat template, else its vocabulary.
ReasoningFormat reasoning_format(const Model& model);
// How the model writes tool calls: from its chat template (Generic when it cannot show tools).
ToolCallFormat tool_call_format(const Model& model);
// The template variables its chat template reads (a chat offers those switches only).
ReasoningControls reasoning_controls(const Model& model);

}  // namespace ember
