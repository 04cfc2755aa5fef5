#include "engine/runtime/chat.h"

namespace ember {

namespace {
std::string token_text_or_empty(const Tokenizer& tok, int32_t id) {
    return id >= 0 ? tok.token_text(id) : std::string();
}

ChatRenderOptions render_options(const Model& model, bool add_generation_prompt, const TemplateKwargs& kwargs) {
    const Tokenizer& tok = model.tokenizer();
    ChatRenderOptions o;
    o.add_generation_prompt = add_generation_prompt;
    o.bos_token = token_text_or_empty(tok, tok.bos());
    o.eos_token = token_text_or_empty(tok, tok.eos());
    o.kwargs = kwargs;
    return o;
}
}  // namespace

std::string render_chat(const Model& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const TemplateKwargs& kwargs) {
    return model.chat_template().tmpl.render(messages, render_options(model, add_generation_prompt, kwargs));
}

std::vector<int32_t> tokenize_prompt(const Model& model, const std::string& rendered) {
    const Tokenizer& tok = model.tokenizer();
    std::vector<int32_t> ids = tok.encode(rendered, false, true);
    if (tok.add_bos() && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
        ids.insert(ids.begin(), tok.bos());
    return ids;
}

std::vector<int32_t> chat_prompt_tokens(const Model& model, const std::vector<ChatMessage>& messages,
                                        const TemplateKwargs& kwargs) {
    return tokenize_prompt(model, render_chat(model, messages, true, kwargs));
}

std::string chat_generation_prompt(const Model& model, const std::vector<ChatMessage>& messages,
                                   const TemplateKwargs& kwargs) {
    return model.chat_template().tmpl.generation_prompt(messages, render_options(model, true, kwargs));
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
