#include "engine/quant/perplexity.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/error.h"

namespace ember {

namespace {

MeanError mean_error(double sum, double sum2, int64_t n) {
    if (n < 1) return {};
    const double mean = sum / double(n);
    const double var = sum2 / double(n) - mean * mean;
    return {mean, n > 1 && var > 0 ? std::sqrt(var / double(n - 1)) : 0.0};
}

float percentile(const std::vector<float>& sorted, double fraction) {
    const double p = fraction * double(sorted.size() - 1);
    const size_t i = static_cast<size_t>(p);
    const double t = p - double(i);
    return static_cast<float>((1 - t) * sorted[i] + t * sorted[std::min(i + 1, sorted.size() - 1)]);
}

// Evaluates one chunk from an empty cache and returns the logits of its scored positions
// [first, n - 1) in `out` (row-major, n_vocab per row).
void eval_chunk(Model& m, int32_t seq, std::span<const int32_t> chunk, int32_t first, std::vector<float>& out) {
    const int32_t n = static_cast<int32_t>(chunk.size());
    const int32_t n_batch = std::max(1, m.n_batch());
    const size_t n_vocab = static_cast<size_t>(m.config().n_vocab);
    out.clear();
    std::vector<int32_t> pos, seq_of, rows;
    std::vector<float> logits;
    for (int32_t s = 0; s < n; s += n_batch) {
        const int32_t e = std::min(n, s + n_batch);
        const std::vector<int32_t> slots = m.kv().append(seq, e - s);
        pos.resize(static_cast<size_t>(e - s));
        for (int32_t i = s; i < e; ++i) pos[static_cast<size_t>(i - s)] = i;
        seq_of.assign(pos.size(), 0);
        rows.clear();
        for (int32_t i = std::max(s, first); i < std::min(e, n - 1); ++i) rows.push_back(i - s);
        const std::vector<int32_t> table = m.kv().block_table(seq);
        BatchInfo b;
        b.tokens = chunk.subspan(static_cast<size_t>(s), static_cast<size_t>(e - s));
        b.positions = pos;
        b.seq_of = seq_of;
        b.kv_slot = slots;
        b.block_table = table;
        b.n_seqs = 1;
        b.max_blocks = static_cast<int32_t>(table.size());
        b.output_rows = rows;
        const int32_t state_slot = m.kv().state_slot(seq);
        if (m.kv().has_recurrent()) b.state_slot = std::span(&state_slot, 1);
        m.transformer().forward(b, m.kv(), logits);
        m.file().check_unchanged();
        out.insert(out.end(), logits.begin(), logits.begin() + static_cast<ptrdiff_t>(rows.size() * n_vocab));
    }
    m.kv().truncate(seq, 0);
}

KlReport kl_report(KlSums& k) {
    KlReport r;
    r.kld = mean_error(k.kld, k.kld2, k.count);
    const double top = double(k.same_top) / double(k.count);
    r.same_top = {top, k.count > 1 ? std::sqrt(top * (1 - top) / double(k.count - 1)) : 0.0};
    const MeanError a = mean_error(k.nll, k.nll2, k.count), b = mean_error(k.nll_base, k.nll_base2, k.count);
    const double cov = k.count > 1 ? (k.nll_nll_base / double(k.count) - a.mean * b.mean) / double(k.count - 1) : 0;
    const double var = a.error * a.error + b.error * b.error - 2 * cov;
    r.ln_ppl_ratio = {a.mean - b.mean, var > 0 ? std::sqrt(var) : 0.0};
    r.ppl_base = std::exp(b.mean);
    r.kld_tokens = k.kld_values;
    std::sort(k.kld_values.begin(), k.kld_values.end());
    r.kld_median = percentile(k.kld_values, 0.5);
    r.kld_p99 = percentile(k.kld_values, 0.99);
    r.kld_max = k.kld_values.back();
    r.rms_p_diff = std::sqrt(std::max(0.0, k.p_diff2 / double(k.count)));
    return r;
}

// Frees the sequence however the run ends.
struct SeqGuard {
    KvCache& kv;
    int32_t seq;
    ~SeqGuard() { kv.free_sequence(seq); }
};

}  // namespace

PerplexityResult perplexity(Model& model, const std::string& text, const PerplexityOptions& opts) {
    if (!opts.kl_divergence.empty()) {
        LogitsFileReader base(opts.kl_divergence);
        return perplexity_tokens(model, base.tokens(), opts);
    }
    return perplexity_tokens(model, model.tokenizer().encode(text, true, false), opts);
}

PerplexityResult perplexity_tokens(Model& model, std::vector<int32_t> tokens, const PerplexityOptions& opts) {
    std::optional<LogitsFileReader> base;
    if (!opts.kl_divergence.empty()) base.emplace(opts.kl_divergence);
    const int32_t n_ctx = base ? base->n_ctx() : opts.n_ctx;
    const int32_t n_vocab = model.config().n_vocab;
    if (base && base->n_vocab() != n_vocab)
        throw Error(opts.kl_divergence + ": saved with a vocabulary of " + std::to_string(base->n_vocab()) +
                    " tokens, but the model has " + std::to_string(n_vocab) + " (a different model family?)");
    if (n_ctx < 4) throw Error("perplexity: the context (--ctx) must be at least 4 tokens");
    if (n_ctx > model.n_ctx())
        throw Error("perplexity: chunks of " + std::to_string(n_ctx) + " tokens do not fit the loaded context of " +
                    std::to_string(model.n_ctx()));
    if (static_cast<int64_t>(tokens.size()) < 2 * int64_t{n_ctx})
        throw Error("perplexity needs at least " + std::to_string(2 * n_ctx) +
                    " tokens (two chunks) for a context of " + std::to_string(n_ctx) + "; the text has only " +
                    std::to_string(tokens.size()) + ". Use a longer text or a smaller --ctx");
    int32_t n_chunks = static_cast<int32_t>(tokens.size() / static_cast<size_t>(n_ctx));
    if (base) n_chunks = base->n_chunk();
    if (opts.n_chunks > 0) n_chunks = std::min(n_chunks, opts.n_chunks);

    std::optional<LogitsFileWriter> save;
    if (!opts.save_logits.empty())
        save.emplace(opts.save_logits, n_ctx, n_vocab, n_chunks,
                     std::span(tokens).first(static_cast<size_t>(n_chunks) * static_cast<size_t>(n_ctx)));

    const Tokenizer& tok = model.tokenizer();
    const bool add_bos = tok.add_bos() && tok.bos() >= 0;
    const int32_t first = n_ctx / 2;
    const size_t n_scored = static_cast<size_t>(n_ctx - 1 - first);
    const int64_t rec = logits_record_u16(n_vocab);
    SeqGuard guard{model.kv(), model.kv().new_sequence()};
    std::vector<float> logits;
    std::vector<uint16_t> records, base_records;
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    KlSums kl;
    std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
    for (int32_t c = 0; c < n_chunks; ++c) {
        if (opts.cancel && opts.cancel->load()) throw Error("perplexity: cancelled");
        const auto begin = tokens.begin() + static_cast<ptrdiff_t>(c) * n_ctx;
        std::copy(begin, begin + n_ctx, chunk.begin());
        if (add_bos) chunk[0] = tok.bos();
        eval_chunk(model, guard.seq, chunk, first, logits);
        if (save) records.resize(n_scored * static_cast<size_t>(rec));
        if (base) base->read_chunk(base_records);
        for (size_t i = 0; i < n_scored; ++i) {
            const std::span<const float> row(logits.data() + i * static_cast<size_t>(n_vocab),
                                             static_cast<size_t>(n_vocab));
            const int32_t next = chunk[static_cast<size_t>(first) + i + 1];
            const double v = save ? encode_log_probs(row, next, records.data() + i * static_cast<size_t>(rec))
                                  : token_nll(row, next);
            if (base) score_against_base(row, next, base_records.data() + i * static_cast<size_t>(rec), kl);
            nll += v, nll2 += v * v;
        }
        if (save) save->write_records(records);
        count += static_cast<int64_t>(n_scored);
        if (opts.on_chunk) opts.on_chunk(c + 1, n_chunks, std::exp(nll / double(count)));
    }
    if (save) save->finish();
    PerplexityResult r;
    r.n_ctx = n_ctx, r.n_chunks = n_chunks, r.n_scored = count;
    const MeanError m = mean_error(nll, nll2, count);
    r.ppl = std::exp(m.mean);
    r.ppl_error = m.error * r.ppl;
    if (base) r.kl = kl_report(kl);
    return r;
}

}  // namespace ember
