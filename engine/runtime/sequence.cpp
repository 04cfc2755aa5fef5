#include "engine/runtime/sequence.h"

#include <algorithm>
#include <chrono>

#include "kernels/common/error.h"
#include "engine/sampling/stop_strings.h"
#include "engine/telemetry/telemetry.h"
#include "engine/tokenizer/detokenizer.h"

namespace ember {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Sequence::Sequence(Model& model) : model_(model), seq_(model.kv().new_sequence()) {}

Sequence::~Sequence() { model_.kv().free_sequence(seq_); }

void Sequence::reset() {
    model_.kv().truncate(seq_, 0);
    tokens_.clear();
}

void Sequence::keep_common_prefix(std::span<const int32_t> prompt) {
    size_t n = 0;
    while (n < tokens_.size() && n < prompt.size() && tokens_[n] == prompt[n]) ++n;
    // Re-run at least the last prompt token: its logits are needed to sample.
    if (n == prompt.size() && n > 0) --n;
    model_.kv().truncate(seq_, static_cast<int32_t>(n));
    tokens_.resize(n);
}

// Runs `tokens` through the model in chunks of n_batch, appending them to the cache.
void Sequence::feed(std::span<const int32_t> tokens, bool want_logits, bool download) {
    const size_t chunk = static_cast<size_t>(std::max(1, model_.n_batch()));
    std::vector<int32_t> pos, seq_of, table;
    for (size_t start = 0; start < tokens.size(); start += chunk) {
        const auto part = tokens.subspan(start, std::min(chunk, tokens.size() - start));
        const int32_t first = static_cast<int32_t>(tokens_.size());
        const std::vector<int32_t> slots = model_.kv().append(seq_, static_cast<int32_t>(part.size()));
        pos.resize(part.size());
        for (size_t i = 0; i < part.size(); ++i) pos[i] = first + static_cast<int32_t>(i);
        seq_of.assign(part.size(), 0);
        table = model_.kv().block_table(seq_);
        const bool last = start + part.size() == tokens.size();
        const int32_t out_row = static_cast<int32_t>(part.size()) - 1;
        BatchInfo b;
        b.tokens = part;
        b.positions = pos;
        b.seq_of = seq_of;
        b.kv_slot = slots;
        b.block_table = table;
        b.n_seqs = 1;
        b.max_blocks = static_cast<int32_t>(table.size());
        if (last && want_logits) b.output_rows = std::span<const int32_t>(&out_row, 1);
        try {
            if (download) model_.transformer().forward(b, model_.kv(), logits_);
            else logits_dev_ = model_.transformer().forward_device(b, model_.kv());
            model_.file().check_unchanged();  // a truncated file's weights read as zeros
        } catch (...) {
            model_.kv().truncate(seq_, first);  // the cache never holds half a chunk
            throw;
        }
        tokens_.insert(tokens_.end(), part.begin(), part.end());
    }
}

// From the backend's top-k candidates when the sampler allows (only k (id, logit) pairs
// leave the device), else from the downloaded row.
int32_t Sequence::sample_next(Sampler& sampler) {
    const int32_t k = sampler.top_k_candidates();
    if (k == 0) return sampler.sample(logits_, tokens_);
    const TopKRow row = sampler.adjustments(tokens_);
    top_.resize(static_cast<size_t>(k));
    int32_t count = 0;
    model_.transformer().output_backend().top_k(logits_dev_, k, std::span(&row, 1), top_, std::span(&count, 1));
    return sampler.sample_top(std::span(top_).first(static_cast<size_t>(count)));
}

const std::vector<float>& Sequence::prefill(std::span<const int32_t> tokens) {
    if (static_cast<int64_t>(tokens_.size() + tokens.size()) > model_.n_ctx())
        throw Error("prompt of " + std::to_string(tokens_.size() + tokens.size()) +
                    " tokens does not fit the context of " + std::to_string(model_.n_ctx()) + " tokens");
    feed(tokens, true);
    return logits_;
}

GenerateStats Sequence::generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                                 const TextCallback& on_text, const std::atomic<bool>* cancel) {
    if (prompt.empty()) throw Error("empty prompt");
    const int64_t n_ctx = model_.n_ctx();
    if (static_cast<int64_t>(prompt.size()) >= n_ctx)
        throw Error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                    std::to_string(n_ctx) + " tokens (it needs room for at least one generated token)");
    GenerateStats st;
    st.prompt_tokens = static_cast<int32_t>(prompt.size());
    const auto t0 = std::chrono::steady_clock::now();
    Sampler sampler(opts.sampling);
    const bool on_device = sampler.top_k_candidates() > 0;
    keep_common_prefix(prompt);
    st.reused_tokens = static_cast<int32_t>(tokens_.size());
    feed(prompt.subspan(tokens_.size()), true, !on_device);
    if (on_device) model_.transformer().output_backend().synchronize();  // prefill time includes the device's
    st.prefill_ms = ms_since(t0);
    Telemetry* tel = opts.telemetry;
    if (tel) tel->request_started(opts.request_id, st.prompt_tokens, st.reused_tokens, opts.queue_wait_ms, 1);
    // A request that ends by an exception is finished in the telemetry too (not left "running").
    struct Finish {
        Telemetry* tel;
        const GenerateStats& st;
        Model& model;
        ~Finish() {
            if (!tel) return;
            tel->request_finished(st.generated_tokens, st.decode_tok_s());
            tel->set_memory(model.memory_use());  // scratch may have grown for this prompt
        }
    } finish{tel, st, model_};
    if (opts.max_tokens == 0) {  // prefill only: the prompt is cached, nothing is sampled
        st.stop_reason = StopReason::Length;
        return st;
    }

    const Tokenizer& tok = model_.tokenizer();
    StopMatcher stops(opts.stop);
    StreamingDetokenizer detok(tok);
    detok.continue_text();  // the reply continues the prompt: keep its first token's space
    std::chrono::steady_clock::time_point t_first, t_prev;
    auto emit = [&](const std::string& text) { return text.empty() || !on_text || on_text(text); };
    while (true) {
        if (cancel && cancel->load()) {
            st.stop_reason = StopReason::Cancelled;
            break;
        }
        const int32_t next = sample_next(sampler);
        if (st.generated_tokens++ == 0) {
            t_first = t_prev = std::chrono::steady_clock::now();
            st.ttft_ms = ms_since(t0);
            if (tel) tel->first_token(st.ttft_ms, st.prefill_tok_s());
        } else if (tel) {
            const auto now = std::chrono::steady_clock::now();
            tel->token(std::chrono::duration<double, std::milli>(now - t_prev).count());
            t_prev = now;
        }
        if (!opts.ignore_eog && tok.is_eog(next)) {
            st.stop_reason = StopReason::EndOfText;
            break;
        }
        const auto r = stops.feed(detok.push(next));
        if (!emit(r.text)) {
            st.stop_reason = StopReason::Cancelled;
            break;
        }
        if (r.stopped) {
            st.stop_reason = StopReason::StopString;
            break;
        }
        if (opts.max_tokens >= 0 && st.generated_tokens >= opts.max_tokens) {
            st.stop_reason = StopReason::Length;
            break;
        }
        if (static_cast<int64_t>(tokens_.size()) + 1 > n_ctx) {
            st.stop_reason = StopReason::Context;
            break;
        }
        const int32_t one[1] = {next};
        feed(one, true, !on_device);
    }
    if (st.stop_reason != StopReason::StopString && st.stop_reason != StopReason::Cancelled)
        emit(stops.feed(detok.flush()).text + stops.flush());
    if (st.generated_tokens > 0) st.decode_ms = ms_since(t_first);
    return st;
}

}  // namespace ember
