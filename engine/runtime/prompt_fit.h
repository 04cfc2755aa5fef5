// Chat turns -> prompt tokens that fit the context, leaving room for the answer. When the
// whole history does not fit, the oldest user/assistant exchanges are left out (the system
// prompt and the newest message always stay) and the caller is told how many, so the UI can
// say so: context is never cut silently. Whether that happens at all is the request's
// OverflowPolicy: stop refuses the turn instead.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/runtime/model.h"
#include "kernels/common/error.h"

namespace ember {

// What a conversation that outgrows the context does (EngineRequest::context_overflow).
enum class OverflowPolicy : uint8_t {
    Stop,      // the turn is refused before anything is computed (ContextOverflow says how far over)
    Truncate,  // the oldest whole turns after the system prompt are left out; the kept prefix
               // still comes from the KV cache, the rest is computed again
    Roll,      // the same turns left out, but the turns after them are moved down in the KV
               // cache (their keys re-rotated, Transformer::roll_kv) instead of computed again
};
std::string_view overflow_policy_name(OverflowPolicy p);  // "stop", "truncate", "roll"
std::optional<OverflowPolicy> parse_overflow_policy(std::string_view name);

struct FittedPrompt {
    std::vector<int32_t> tokens;
    int dropped_turns = 0;
};

// Room kept for the answer: max_tokens when set, but never more than a quarter of the
// context (a long history should not be cut to make room for a long answer that may
// never come); at least one token.
int64_t answer_room(int64_t n_ctx, int max_tokens);

// What fit_prompt throws when even the newest message alone does not fit, and what the stop
// policy throws for a conversation that does not: the numbers too, so a front end can offer
// the context that would hold it.
class ContextOverflow : public Error {
public:
    ContextOverflow(int64_t prompt_tokens, int64_t room, int64_t n_ctx);
    // The stop policy's refusal: how far over the whole conversation is, and what to do.
    static ContextOverflow conversation(int64_t prompt_tokens, int64_t room, int64_t n_ctx);
    int64_t prompt_tokens, room, n_ctx;
    int64_t needed() const { return prompt_tokens + room; }  // the context that would hold it

private:
    ContextOverflow(const std::string& message, int64_t prompt_tokens, int64_t room, int64_t n_ctx);
};

// Where a fitted prompt leaves the whole conversation's tokens: the first `at` are the same,
// then come `dropped` (the turns left out), then the rest is the same again.
struct DroppedSpan {
    int32_t at = 0;
    std::vector<int32_t> dropped;
};
// nullopt when nothing was dropped, or when the template renders the kept turns differently
// once others are gone (then nothing cached after `at` matches: roll falls back to truncate).
std::optional<DroppedSpan> dropped_span(std::span<const int32_t> full, std::span<const int32_t> fitted);
// `fitted` with the dropped tokens put back: what the whole conversation's cache holds.
std::vector<int32_t> with_dropped(std::span<const int32_t> fitted, const DroppedSpan& d);

// How a cached sequence becomes the start of `target` by dropping one run of its tokens:
// cached[0, at) == target[0, at), then `by` cached tokens are skipped, then
// cached[at + by, at + by + kept) == target[at, at + kept). Of all `by`, the one that keeps
// the most (the smallest on a tie); kept 0: no run after a drop matches. This finds the turns
// a chat dropped since its cache was written, whichever turns were dropped before.
struct CachedDrop {
    int32_t at = 0, by = 0, kept = 0;
};
CachedDrop find_drop(std::span<const int32_t> cached, std::span<const int32_t> target);

// Throws ContextOverflow when even the newest message alone does not fit.
FittedPrompt fit_prompt(const Model& model, std::vector<ChatMessage> turns, int64_t room,
                        const ChatRenderOptions& options = {});

}  // namespace ember
