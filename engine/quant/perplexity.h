// Perplexity of a model over a text, and its KL divergence from a saved base run: the quality
// tool behind `ember perplexity` (and the quantizer's quality table in docs/BENCHMARKS.md).
//
// Chunked as llama-perplexity does, so the numbers compare with it:
//  - the whole text is tokenized once with the vocabulary's special tokens (BOS when the
//    model adds one), then cut into n_chunk = n_tokens / n_ctx chunks of n_ctx tokens;
//  - each chunk is evaluated from an empty cache, its first token replaced by BOS when the
//    model adds BOS;
//  - only the second half is scored: positions n_ctx/2 .. n_ctx-2 predict the next token, so
//    every scored token has at least n_ctx/2 tokens of context;
//  - a text shorter than 2 * n_ctx tokens is an error (llama.cpp refuses it too).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/quant/logits_file.h"
#include "engine/runtime/model.h"

namespace ember {

struct PerplexityOptions {
    int32_t n_ctx = 512;        // tokens per chunk (the model must be loaded with at least this)
    int32_t n_chunks = -1;      // at most this many chunks (-1: all)
    std::string save_logits;    // write the base file for a later KL comparison
    std::string kl_divergence;  // compare with this base file (its tokens are used, not the text)
    // After each chunk: chunks done, of how many, the perplexity so far.
    std::function<void(int32_t, int32_t, double)> on_chunk;
    const std::atomic<bool>* cancel = nullptr;  // checked between chunks; throws ember::Error
};

struct MeanError {
    double mean = 0, error = 0;  // error: standard error of the mean
};

struct KlReport {
    MeanError kld;           // mean KL(base || model) per token, nats
    MeanError same_top;      // fraction of positions whose most likely token agrees
    MeanError ln_ppl_ratio;  // mean ln(PPL / PPL(base))
    double ppl_base = 0;
    double kld_median = 0, kld_p99 = 0, kld_max = 0;
    double rms_p_diff = 0;  // root mean square of p(token) - p_base(token)
    // KL(base || model) of every scored token in text order: two files measured against the
    // same base can be compared token by token (a paired difference has a far smaller
    // standard error than the two means' own).
    std::vector<float> kld_tokens;
};

struct PerplexityResult {
    int32_t n_ctx = 0, n_chunks = 0;
    int64_t n_scored = 0;  // tokens scored
    double ppl = 0, ppl_error = 0;
    std::optional<KlReport> kl;  // with PerplexityOptions::kl_divergence
};

// Tokenizes `text` as llama-perplexity does (unless a KL base file supplies the tokens).
PerplexityResult perplexity(Model& model, const std::string& text, const PerplexityOptions& opts);
// The same over already tokenized text (the BOS, if any, already at the front).
PerplexityResult perplexity_tokens(Model& model, std::vector<int32_t> tokens, const PerplexityOptions& opts);

}  // namespace ember
