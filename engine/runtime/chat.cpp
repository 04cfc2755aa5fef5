#include "engine/runtime/chat.h"

#include <utility>

namespace ember {

namespace {
std::string token_text_or_empty(const Tokenizer& tok, int32_t id) {
    return id >= 0 ? tok.token_text(id) : std::string();
}
}  // namespace

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
    ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    return render_chat(model, messages, std::move(options));
}

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, ChatRenderOptions options) {
    const Tokenizer& tok = model.tokenizer();
    options.bos_token = token_text_or_empty(tok, tok.bos());
    options.eos_token = token_text_or_empty(tok, tok.eos());
    return model.chat_template().tmpl.render(messages, options);
}

std::vector<int32_t> tokenize_prompt(const Model& model, const std::string& rendered) {
    const Tokenizer& tok = model.tokenizer();
    std::vector<int32_t> ids = tok.encode(rendered, false, true);
    if (tok.add_bos() && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
        ids.insert(ids.begin(), tok.bos());
    return ids;
}

std::vector<int32_t> chat_prompt_tokens(const Model& model, const std::vector<ChatMessage>& messages) {
    return tokenize_prompt(model, render_chat(model, messages, true));
}

}  // namespace ember
