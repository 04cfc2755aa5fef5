#include "engine/runtime/prompt_fit.h"

#include <algorithm>
#include <string>

#include "engine/runtime/chat.h"
#include "kernels/common/error.h"

namespace ember {

std::string_view overflow_policy_name(OverflowPolicy p) {
    switch (p) {
        case OverflowPolicy::Stop:
            return "stop";
        case OverflowPolicy::Truncate:
            return "truncate";
        case OverflowPolicy::Roll:
            return "roll";
    }
    return "stop";
}

std::optional<OverflowPolicy> parse_overflow_policy(std::string_view name) {
    for (const OverflowPolicy p : {OverflowPolicy::Stop, OverflowPolicy::Truncate, OverflowPolicy::Roll})
        if (name == overflow_policy_name(p)) return p;
    return std::nullopt;
}

ContextOverflow::ContextOverflow(const std::string& message, int64_t prompt, int64_t room_, int64_t ctx)
    : Error(message), prompt_tokens(prompt), room(room_), n_ctx(ctx) {}

ContextOverflow::ContextOverflow(int64_t prompt, int64_t room_, int64_t ctx)
    : ContextOverflow("the message is " + std::to_string(prompt) + " tokens long; with room for the answer (" +
                          std::to_string(room_) + " tokens) it needs a context of " + std::to_string(prompt + room_) +
                          " tokens, and the model is loaded with " + std::to_string(ctx),
                      prompt, room_, ctx) {}

ContextOverflow ContextOverflow::conversation(int64_t prompt, int64_t room_, int64_t ctx) {
    return ContextOverflow("the conversation is " + std::to_string(prompt) + " tokens; with room for the answer (" +
                               std::to_string(room_) + ") that is " + std::to_string(prompt + room_ - ctx) +
                               " tokens more than the context of " + std::to_string(ctx) +
                               " holds. Start a new chat, send a shorter message, load the model with a longer "
                               "context, or let the oldest turns go (context overflow policy truncate or roll)",
                           prompt, room_, ctx);
}

int64_t answer_room(int64_t n_ctx, int max_tokens) {
    const int64_t quarter = std::max<int64_t>(1, n_ctx / 4);
    return max_tokens > 0 ? std::min<int64_t>(max_tokens, quarter) : quarter;
}

std::optional<DroppedSpan> dropped_span(std::span<const int32_t> full, std::span<const int32_t> fitted) {
    if (fitted.size() >= full.size()) return std::nullopt;
    const auto at =
        static_cast<size_t>(std::mismatch(fitted.begin(), fitted.end(), full.begin()).first - fitted.begin());
    const size_t by = full.size() - fitted.size();
    if (!std::equal(fitted.begin() + static_cast<std::ptrdiff_t>(at), fitted.end(),
                    full.begin() + static_cast<std::ptrdiff_t>(at + by)))
        return std::nullopt;
    const auto first = full.begin() + static_cast<std::ptrdiff_t>(at);
    return DroppedSpan{static_cast<int32_t>(at), std::vector<int32_t>(first, first + static_cast<std::ptrdiff_t>(by))};
}

std::vector<int32_t> with_dropped(std::span<const int32_t> fitted, const DroppedSpan& d) {
    std::vector<int32_t> out(fitted.begin(), fitted.begin() + d.at);
    out.insert(out.end(), d.dropped.begin(), d.dropped.end());
    out.insert(out.end(), fitted.begin() + d.at, fitted.end());
    return out;
}

CachedDrop find_drop(std::span<const int32_t> cached, std::span<const int32_t> target) {
    CachedDrop best;
    best.at = static_cast<int32_t>(std::mismatch(cached.begin(), cached.end(), target.begin(), target.end()).first -
                                   cached.begin());
    const auto at = static_cast<size_t>(best.at);
    if (at >= target.size()) return best;
    for (size_t from = at + 1; from < cached.size(); ++from) {
        if (cached[from] != target[at]) continue;
        const auto rest = cached.subspan(from);
        const auto kept = static_cast<int32_t>(
            std::mismatch(rest.begin(), rest.end(), target.begin() + static_cast<std::ptrdiff_t>(at), target.end())
                .first -
            rest.begin());
        if (kept > best.kept) best.by = static_cast<int32_t>(from - at), best.kept = kept;
    }
    return best;
}

FittedPrompt fit_prompt(const Model& model, std::vector<ChatMessage> turns, int64_t room,
                        const ChatRenderOptions& options) {
    FittedPrompt f;
    const int64_t budget = model.n_ctx() - room;
    while (true) {
        f.tokens = chat_prompt_tokens(model, turns, options);
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
