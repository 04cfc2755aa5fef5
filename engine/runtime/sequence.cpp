#include "engine/runtime/sequence.h"

#include <algorithm>
#include <chrono>

#include "kernels/common/error.h"
#include "engine/kv/kv_batch.h"
#include "engine/sampling/constrained.h"
#include "engine/telemetry/telemetry.h"

namespace ember {
Sequence::Sequence(Model& model) : model_(model), seq_(model.kv().new_sequence()) {}

Sequence::~Sequence() { model_.kv().free_sequence(seq_); }

void Sequence::reset() {
    model_.kv().truncate(seq_, 0);
    tokens_.clear();
}

void Sequence::keep_common_prefix(std::span<const int32_t> prompt) {
    const size_t n = reusable_prefix(tokens_, prompt);
    tokens_.resize(static_cast<size_t>(model_.kv().truncate(seq_, static_cast<int32_t>(n))));  // may keep less
}

// Runs `tokens` through the model in chunks of n_batch, appending them to the cache.
void Sequence::feed(std::span<const int32_t> tokens, bool want_logits, bool download) {
    const size_t chunk = static_cast<size_t>(std::max(1, model_.n_batch()));
    for (size_t start = 0; start < tokens.size(); start += chunk) {
        const auto part = tokens.subspan(start, std::min(chunk, tokens.size() - start));
        const int32_t first = static_cast<int32_t>(tokens_.size());
        const std::vector<int32_t> slots = model_.kv().append(seq_, static_cast<int32_t>(part.size()));
        const bool last = start + part.size() == tokens.size();
        KvBatch batch;
        batch.add(seq_, part, slots, first, last && want_logits);
        const BatchInfo b = batch.info(model_.kv());
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
// leave the device), else from the downloaded row. Under a grammar: the best allowed
// candidate, and only when none is, the whole row (adjusted in place by top_k) and the
// full mask.
int32_t Sequence::sample_next(DecodeState& ds) {
    Sampler& sampler = ds.sampler();
    const grammar::TokenMatcher* m = ds.matcher();
    const int32_t k = sampler.top_k_candidates();
    if (k == 0) return m ? sample_row_allowed(sampler, *m, logits_, tokens_) : sampler.sample(logits_, tokens_);
    const int32_t asked = m ? std::max(k, kGrammarCandidates) : k;
    const TopKRow row = sampler.adjustments(tokens_);
    top_.resize(static_cast<size_t>(asked));
    int32_t count = 0;
    Backend& out = model_.transformer().output_backend();
    out.top_k(logits_dev_, asked, std::span(&row, 1), top_, std::span(&count, 1));
    const auto top = std::span(top_).first(static_cast<size_t>(count));
    if (!m) return sampler.sample_top(top);
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<int32_t> t = sample_top_allowed(sampler, *m, top);
    if (!t) {
        row_.resize(static_cast<size_t>(logits_dev_.cols));
        out.download(logits_dev_, row_.data(), row_.size() * sizeof(float));
        t = sample_adjusted_allowed(sampler, *m, row_);
    }
    ds.stats().grammar_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return *t;
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
    Telemetry* tel = opts.telemetry;
    DecodeState ds(model_.tokenizer(), opts.sampling, {opts.max_tokens, opts.stop, opts.ignore_eog, n_ctx}, tel,
                   opts.request_id);
    if (opts.grammar) ds.constrain(opts.grammar, model_.grammar_vocab());
    GenerateStats& st = ds.stats();
    st.prompt_tokens = static_cast<int32_t>(prompt.size());
    const bool on_device = ds.sampler().top_k_candidates() > 0;
    keep_common_prefix(prompt);
    st.reused_tokens = static_cast<int32_t>(tokens_.size());
    feed(prompt.subspan(tokens_.size()), true, !on_device);
    if (on_device) model_.transformer().output_backend().synchronize();  // prefill time includes the device's
    ds.prefill_done();
    if (tel) tel->request_started(opts.request_id, st.prompt_tokens, st.reused_tokens, opts.queue_wait_ms, 1);
    // A request that ends by an exception is finished in the telemetry too (not left "running").
    struct Finish {
        Telemetry* tel;
        uint64_t id;
        const GenerateStats& st;
        Model& model;
        ~Finish() {
            if (!tel) return;
            tel->request_finished(id, st.generated_tokens, st.decode_tok_s());
            tel->set_memory(model.memory_use());  // scratch may have grown for this prompt
        }
    } finish{tel, opts.request_id, st, model_};
    if (opts.max_tokens == 0) {  // prefill only: the prompt is cached, nothing is sampled
        ds.finish(StopReason::Length);
        return st;
    }

    auto emit = [&](const std::string& text) { return text.empty() || !on_text || on_text(text); };
    StopReason reason = StopReason::None;
    while (reason == StopReason::None) {
        if (cancel && cancel->load()) {
            reason = StopReason::Cancelled;
            break;
        }
        const int32_t next = sample_next(ds);
        const DecodeState::Step step = ds.accept(next, static_cast<int64_t>(tokens_.size()));
        if (!emit(step.text)) reason = StopReason::Cancelled;
        else if (step.stop != StopReason::None) reason = step.stop;
        else {
            const int32_t one[1] = {next};
            feed(one, true, !on_device);
        }
    }
    emit(ds.finish(reason).text);
    return st;
}

}  // namespace ember
