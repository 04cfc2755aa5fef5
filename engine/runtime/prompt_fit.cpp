#include "engine/runtime/prompt_fit.h"

#include <algorithm>
#include <string>

#include "engine/runtime/chat.h"
#include "kernels/common/error.h"

namespace ember {

ContextOverflow::ContextOverflow(int64_t prompt, int64_t room_, int64_t ctx)
    : Error("the message is " + std::to_string(prompt) + " tokens long; with room for the answer (" +
            std::to_string(room_) + " tokens) it needs a context of " + std::to_string(prompt + room_) +
            " tokens, and the model is loaded with " + std::to_string(ctx)),
      prompt_tokens(prompt),
      room(room_),
      n_ctx(ctx) {}

int64_t answer_room(int64_t n_ctx, int max_tokens) {
    const int64_t quarter = std::max<int64_t>(1, n_ctx / 4);
    return max_tokens > 0 ? std::min<int64_t>(max_tokens, quarter) : quarter;
}

FittedPrompt fit_prompt(const Model& model, std::vector<ChatMessage> turns, int64_t room,
                        const TemplateKwargs& kwargs) {
    FittedPrompt f;
    const int64_t budget = model.n_ctx() - room;
    while (true) {
        f.tokens = chat_prompt_tokens(model, turns, kwargs);
        if (static_cast<int64_t>(f.tokens.size()) <= budget) return f;
        // Drop from the first non-system turn; drop a whole exchange (user + assistant) so
        // templates that insist on alternating roles still render.
        auto first = std::find_if(turns.begin(), turns.end(), [](const auto& t) { return t.role != "system"; });
        const auto remaining = std::distance(first, turns.end());
        if (remaining <= 1) throw ContextOverflow(static_cast<int64_t>(f.tokens.size()), room, model.n_ctx());
        const auto n = std::min<std::ptrdiff_t>(remaining - 1, first->role == "user" && remaining > 2 ? 2 : 1);
        turns.erase(first, first + n);
        f.dropped_turns += static_cast<int>(n);
    }
}

}  // namespace ember
