// Chat turns -> prompt tokens that fit the context, leaving room for the answer. When the
// whole history does not fit, the oldest user/assistant exchanges are left out (the system
// prompt and the newest message always stay) and the caller is told how many, so the UI can
// say so: context is never cut silently.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/runtime/model.h"
#include "kernels/common/error.h"

namespace ember {

struct FittedPrompt {
    std::vector<int32_t> tokens;
    int dropped_turns = 0;
};

// Room kept for the answer: max_tokens when set, but never more than a quarter of the
// context (a long history should not be cut to make room for a long answer that may
// never come); at least one token.
int64_t answer_room(int64_t n_ctx, int max_tokens);

// What fit_prompt throws when even the newest message alone does not fit: the numbers too,
// so a front end can offer the context that would hold it.
class ContextOverflow : public Error {
public:
    ContextOverflow(int64_t prompt_tokens, int64_t room, int64_t n_ctx);
    int64_t prompt_tokens, room, n_ctx;
    int64_t needed() const { return prompt_tokens + room; }  // the context that would hold it
};

// Throws ContextOverflow when even the newest message alone does not fit.
FittedPrompt fit_prompt(const Model& model, std::vector<ChatMessage> turns, int64_t room,
                        const TemplateKwargs& kwargs = {});

}  // namespace ember
