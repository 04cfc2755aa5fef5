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
}  // namespace

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
    ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    return render_chat(model, messages, std::move(options));
}

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, ChatRenderOptions options) {
    return model.chat_template().tmpl.render(messages, with_model_tokens(model, std::move(options)));
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
    return model.chat_template().tmpl.generation_prompt(messages, with_model_tokens(model, options));
}

ReasoningFormat reasoning_format(const Model& model) {
    const Tokenizer& tok = model.tokenizer();
    const bool think_tokens = tok.find_token("<think>") && tok.find_token("</think>");
    return detect_reasoning_format(model.chat_template().tmpl.source(), think_tokens);
}

ReasoningControls reasoning_controls(const Model& model) {
    return reasoning_controls(model.chat_template().tmpl.source());
}

}  // namespace ember
