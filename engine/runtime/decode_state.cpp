#include "engine/runtime/decode_state.h"

#include "engine/telemetry/telemetry.h"
#include "engine/tokenizer/tokenizer.h"

namespace ember {
namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) {
    size_t n = 0;
    while (n < cached.size() && n < prompt.size() && cached[n] == prompt[n]) ++n;
    if (n == prompt.size() && n > 0) --n;
    return n;
}

DecodeState::DecodeState(const Tokenizer& tok, const SamplingParams& sampling, DecodeLimits limits,
                         Telemetry* telemetry, uint64_t request_id)
    : sampler_(sampling),
      detok_(tok),
      stops_(limits.stop),
      limits_(std::move(limits)),
      tok_(tok),
      tel_(telemetry),
      id_(request_id),
      t0_(Clock::now()) {
    detok_.continue_text();  // the reply continues the prompt: keep its first token's space
}

void DecodeState::split_reasoning(const ReasoningSetup& setup) {
    std::vector<std::string> texts = reasoning_marker_tokens(setup.format);
    texts.insert(texts.end(), setup.write_tokens.begin(), setup.write_tokens.end());
    std::vector<int32_t> markers;
    for (const std::string& m : texts)
        if (auto id = tok_.find_token(m)) markers.push_back(*id);
    detok_.write_always(std::move(markers));
    if (setup.format == ReasoningFormat::None) return;
    split_ = std::make_unique<ReasoningSplitter>(setup.format);
    split_->prime(setup.generation_prompt);
    budget_ = setup.budget;
    if (budget_ >= 0) close_tokens_ = tok_.encode(std::string(reasoning_close_text(setup.format)), false, true);
}

std::optional<int32_t> DecodeState::forced_token() {
    if (forced_.empty()) return std::nullopt;
    const int32_t t = forced_.front();
    forced_.pop_front();
    return t;
}

void DecodeState::constrain(std::shared_ptr<const grammar::Grammar> g,
                            std::shared_ptr<const grammar::TokenVocab> vocab) {
    matcher_.emplace(std::move(g), std::move(vocab));
}

void DecodeState::prefill_done() { st_.prefill_ms = ms_between(t0_, Clock::now()); }

DecodeState::Step DecodeState::accept(int32_t token, int64_t cached) {
    const auto now = Clock::now();
    if (st_.generated_tokens++ == 0) {
        t_first_ = t_prev_ = now;
        st_.ttft_ms = ms_between(t0_, now);
        if (tel_) tel_->first_token(id_, st_.ttft_ms, st_.prefill_tok_s());
    } else {
        if (tel_) tel_->token(id_, ms_between(t_prev_, now));
        t_prev_ = now;
    }
    Step s;
    if (!limits_.ignore_eog && tok_.is_eog(token)) {
        s.stop = StopReason::EndOfText;
        return s;
    }
    if (matcher_) {
        const auto t = Clock::now();
        matcher_->accept(token);
        st_.grammar_ms += ms_between(t, Clock::now());
    }
    StopMatcher::Result r = stops_.feed(detok_.push(token));
    s.text = std::move(r.text);
    if (split_) split(s);
    if (r.stopped) s.stop = StopReason::StopString;
    else if (matcher_ && matcher_->state().must_end()) s.stop = StopReason::EndOfText;
    else if (limits_.max_tokens >= 0 && st_.generated_tokens >= limits_.max_tokens) s.stop = StopReason::Length;
    else if (cached + 1 > limits_.n_ctx) s.stop = StopReason::Context;
    return s;
}

// The thinking so far is counted by token; at the budget, the closing marker is queued.
void DecodeState::split(Step& s) {
    const bool thinking = split_->in_reasoning();
    SplitText t = split_->feed(s.text);
    s.text = std::move(t.content);
    s.reasoning = std::move(t.reasoning);
    if (!thinking && !split_->in_reasoning()) return;
    ++st_.reasoning_tokens;
    if (budget_ >= 0 && split_->in_reasoning() && forced_.empty() && st_.reasoning_tokens >= budget_) {
        forced_.assign(close_tokens_.begin(), close_tokens_.end());
        budget_ = -1;  // once
    }
}

DecodeState::Step DecodeState::finish(StopReason reason) {
    st_.stop_reason = reason;
    if (st_.generated_tokens > 0) st_.decode_ms = ms_between(t_first_, Clock::now());
    if (matcher_) {
        st_.masks_walked = static_cast<int32_t>(matcher_->mask_stats().walked);
        st_.masks_kept = static_cast<int32_t>(matcher_->mask_stats().kept);
    }
    Step s;
    if (reason != StopReason::StopString && reason != StopReason::Cancelled)
        s.text = stops_.feed(detok_.flush()).text + stops_.flush();
    if (!split_) return s;
    SplitText t = split_->feed(s.text);
    const SplitText end = split_->finish();
    s.text = std::move(t.content) + end.content;
    s.reasoning = std::move(t.reasoning) + end.reasoning;
    return s;
}

}  // namespace ember
