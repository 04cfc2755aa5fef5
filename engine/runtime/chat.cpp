#include "engine/runtime/chat.h"

#include <utility>

namespace ember {

namespace {
std::string token_text_or_empty(const Tokenizer& tok, int32_t id) {
    return id >= 0 ? tok.token_text(id) : std::string();
}

// The request's variables with the model's own bos_token and eos_token.
ChatRenderOptions with_model_tokens(const Model& model, ChatRenderOptions options) {
    const Tokenizer& tok = model.tokenizer();
    options.bos_token = token_text_or_empty(tok, tok.bos());
    options.eos_token = token_text_or_empty(tok, tok.eos());
    return options;
}

bool has_tool_turns(const std::vector<ChatMessage>& messages) {
    for (const ChatMessage& m : messages)
        if (m.role == "tool" || !m.tool_calls.empty()) return true;
    return false;
}

// The template renders the conversation as it is, or, when it cannot show tools and the
// request has some (or earlier turns used them), the generic fallback's rewrite of it.
template <typename Render>
auto with_tools(const Model& model, const std::vector<ChatMessage>& messages, ChatRenderOptions options,
                Render render) {
    const ChatTemplate& t = model.chat_template().tmpl;
    options = with_model_tokens(model, std::move(options));
    if (template_reads_tools(t.source()) || (options.tools_json.empty() && !has_tool_turns(messages)))
        return render(t, messages, options);
    const std::vector<ChatMessage> rewritten = with_generic_tools(messages, options.tools_json);
    options.tools_json.clear();
    return render(t, rewritten, options);
}
}  // namespace

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
    ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    return render_chat(model, messages, std::move(options));
}

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, ChatRenderOptions options) {
    return with_tools(model, messages, std::move(options),
                      [](const ChatTemplate& t, const std::vector<ChatMessage>& m, const ChatRenderOptions& o) {
                          return t.render(m, o);
                      });
}

std::vector<int32_t> tokenize_prompt(const Model& model, const std::string& rendered) {
    const Tokenizer& tok = model.tokenizer();
    std::vector<int32_t> ids = tok.encode(rendered, false, true);
    if (tok.add_bos() && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
        ids.insert(ids.begin(), tok.bos());
    return ids;
}

std::vector<int32_t> chat_prompt_tokens(const Model& model, const std::vector<ChatMessage>& messages,
                                        const ChatRenderOptions& options) {
    ChatRenderOptions o = options;
    o.add_generation_prompt = true;
    return tokenize_prompt(model, render_chat(model, messages, std::move(o)));
}

std::string chat_generation_prompt(const Model& model, const std::vector<ChatMessage>& messages,
                                   const ChatRenderOptions& options) {
    return with_tools(model, messages, options,
                      [](const ChatTemplate& t, const std::vector<ChatMessage>& m, const ChatRenderOptions& o) {
                          return t.generation_prompt(m, o);
                      });
}

ReasoningFormat reasoning_format(const Model& model) {
    const Tokenizer& tok = model.tokenizer();
    const bool think_tokens = tok.find_token("<think>") && tok.find_token("</think>");
    return detect_reasoning_format(model.chat_template().tmpl.source(), think_tokens);
}

ToolCallFormat tool_call_format(const Model& model) {
    return detect_tool_call_format(model.chat_template().tmpl.source());
}

ReasoningControls reasoning_controls(const Model& model) {
    return reasoning_controls(model.chat_template().tmpl.source());
}

}  // namespace ember
