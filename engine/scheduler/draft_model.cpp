#include "engine/scheduler/draft_model.h"

#include <algorithm>

#include "engine/kv/kv_batch.h"
#include "engine/tokenizer/vocab_match.h"
#include "kernels/common/error.h"

namespace ember {
namespace {

int32_t argmax(std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

DraftModel::DraftModel(Model& draft, const Model& target, int32_t max_draft) : draft_(draft), max_draft_(max_draft) {
    if (max_draft < 1) throw Error("--draft-max must be at least 1, not " + std::to_string(max_draft));
    if (draft_.kv().has_recurrent())
        throw Error("draft model " + draft_.file().path() + ": models with recurrent layers cannot draft (" +
                    draft_.config().arch + " cannot roll back its state)");
    if (const std::string why = draft_vocab_mismatch(target.tokenizer(), draft_.tokenizer()); !why.empty())
        throw Error("draft model " + draft_.file().path() + " does not share the vocabulary of " +
                    target.file().path() + ": " + why);
    cost_ratio_ = std::max(0.01, static_cast<double>(draft_.info().file_size) /
                                     static_cast<double>(std::max<uint64_t>(1, target.info().file_size)));
    if (draft_.config().n_vocab < target.tokenizer().n_vocab())
        throw Error("draft model " + draft_.file().path() + ": its output has " +
                    std::to_string(draft_.config().n_vocab) + " rows, fewer than the vocabulary's " +
                    std::to_string(target.tokenizer().n_vocab()));
}

int32_t DraftModel::paying_length(int32_t accepted, int32_t misses) const {
    // A margin over plain decoding: a verification pass of k + 1 tokens costs a little more
    // than a decode's, which the weight-bytes ratio leaves out.
    constexpr double kMinGain = 1.05;
    const double a = (accepted + 0.5) / (accepted + misses + 1.0);  // no history yet: 1/2
    int32_t best = 0;
    double best_gain = kMinGain;
    double tokens = 1, p = 1;  // expected tokens of a pass with k proposals; a^k
    for (int32_t k = 1; k <= max_draft_; ++k) {
        p *= a;
        tokens += p;
        const double gain = tokens / (1 + k * cost_ratio_);
        if (gain > best_gain) best = k, best_gain = gain;
    }
    return best;
}

DraftModel::~DraftModel() {
    for (auto& [id, t] : tracks_) draft_.kv().free_sequence(t.seq);
}

DraftModel::Track& DraftModel::track(uint64_t id) {
    auto it = tracks_.find(id);
    if (it == tracks_.end()) it = tracks_.emplace(id, Track{draft_.kv().new_sequence(), {}}).first;
    return it->second;
}

// Rolls the draft's sequence back to what it shares with `target` (rejected proposals, an
// edited conversation): the rest is fed again.
void DraftModel::sync(Track& t, std::span<const int32_t> target) {
    const auto common = static_cast<size_t>(
        std::mismatch(t.tokens.begin(), t.tokens.end(), target.begin(), target.end()).first - t.tokens.begin());
    if (common == t.tokens.size()) return;
    const auto n = static_cast<int32_t>(t.tokens.size() - common);
    t.tokens.resize(static_cast<size_t>(draft_.kv().rollback(t.seq, n)));
}

void DraftModel::settle(uint64_t id, std::span<const int32_t> kept) {
    if (const auto it = tracks_.find(id); it != tracks_.end()) sync(it->second, kept);
}

void DraftModel::forget(uint64_t id) {
    if (const auto it = tracks_.find(id); it != tracks_.end()) {
        draft_.kv().free_sequence(it->second.seq);
        tracks_.erase(it);
    }
    samplers_.erase(id);
}

// Chunked over passes of at most the draft's n_batch tokens, all sequences together; a
// sequence's logits row comes from the pass that takes its last token.
std::vector<bool> DraftModel::feed(std::span<const Want> wants, std::vector<Row>& rows, std::vector<float>& logits) {
    KvCache& kv = draft_.kv();
    const auto V = static_cast<size_t>(draft_.config().n_vocab);
    logits.assign(rows.size() * V, 0.0f);
    std::vector<bool> ok(rows.size(), true);
    std::vector<size_t> done(rows.size(), 0);  // tokens of each row fed so far
    std::vector<float> out;
    while (true) {
        KvBatch pass;
        std::vector<size_t> outputs;  // rows whose logits this pass gives, in batch order
        int32_t budget = draft_.n_batch();
        for (size_t i = 0; i < rows.size() && budget > 0; ++i) {
            const size_t left = rows[i].tokens.size() - done[i];
            if (!ok[i] || left == 0) continue;
            const auto n = static_cast<int32_t>(std::min<size_t>(left, static_cast<size_t>(budget)));
            Track& t = tracks_.at(wants[rows[i].want].id);
            std::optional<std::vector<int32_t>> slots = kv.allocate_slots(t.seq, n);
            if (!slots) {
                ok[i] = false;  // the draft's pool is full: this sequence gets no more proposals
                continue;
            }
            const auto chunk = std::span(rows[i].tokens).subspan(done[i], static_cast<size_t>(n));
            const bool last = done[i] + static_cast<size_t>(n) == rows[i].tokens.size();
            pass.add(t.seq, chunk, *slots, static_cast<int32_t>(t.tokens.size()), last ? 1 : 0);
            t.tokens.insert(t.tokens.end(), chunk.begin(), chunk.end());
            done[i] += static_cast<size_t>(n);
            budget -= n;
            if (last) outputs.push_back(i);
        }
        if (pass.n_seqs() == 0) break;
        draft_.transformer().forward(pass.info(kv), kv, out);
        for (size_t j = 0; j < outputs.size(); ++j)
            std::copy_n(out.begin() + static_cast<std::ptrdiff_t>(j * V), V,
                        logits.begin() + static_cast<std::ptrdiff_t>(outputs[j] * V));
    }
    return ok;
}

// The proposal's next token: the argmax for a greedy request (a point mass: probs left empty);
// a sampling request draws from the draft's row with its own sampler, and the distribution it
// drew from goes with the token (probs), so the rejection rule accepts at the rate it should.
int32_t DraftModel::pick(const Want& w, std::span<float> logits, DraftProposal& out) {
    if (!w.sampling) {
        out.tokens.push_back(argmax(logits));
        return out.tokens.back();
    }
    if (w.sampling->temperature <= 0) {
        // Greedy, but the request's penalties and logit bias (the app's chats have a repeat
        // penalty by default) move the target's argmax: propose the token the target will pick.
        // A greedy Sampler draws nothing, so a fresh one per call is exact.
        Sampler greedy(*w.sampling);
        out.tokens.push_back(greedy.sample(logits, w.context));
        return out.tokens.back();
    }
    auto it = samplers_.find(w.id);
    if (it == samplers_.end()) {
        SamplingParams p = *w.sampling;
        p.seed ^= 0x9E3779B97F4A7C15ull;  // its own stream, not the target's draws
        it = samplers_.emplace(w.id, Sampler(p)).first;
    }
    std::vector<TokenProb> dist = it->second.distribution(logits, w.context);
    const int32_t token = it->second.draw_from(dist);
    // The support only, by id (DraftProposal::probs): the draw above used the sampler's order.
    std::sort(dist.begin(), dist.end(), [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
    out.probs.push_back(std::move(dist));
    out.tokens.push_back(token);
    return token;
}

std::vector<DraftProposal> DraftModel::propose(std::span<const Want> wants) {
    std::vector<DraftProposal> out(wants.size());
    std::vector<Row> rows;
    const int64_t n_ctx = draft_.n_ctx();
    for (size_t i = 0; i < wants.size(); ++i) {
        const Want& w = wants[i];
        if (w.k <= 0 || w.context.empty() || static_cast<int64_t>(w.context.size()) + w.k > n_ctx) continue;
        Track& t = track(w.id);
        // The last context token is always fed: its row gives the first proposal.
        sync(t, w.context.first(w.context.size() - 1));
        rows.push_back({i, std::vector<int32_t>(w.context.begin() + static_cast<std::ptrdiff_t>(t.tokens.size()),
                                                w.context.end())});
    }
    const auto V = static_cast<size_t>(draft_.config().n_vocab);
    const auto n_vocab = static_cast<size_t>(draft_.tokenizer().n_vocab());
    std::vector<float> logits;
    while (!rows.empty()) {
        const std::vector<bool> ok = feed(wants, rows, logits);
        std::vector<Row> next;
        for (size_t r = 0; r < rows.size(); ++r) {
            if (!ok[r]) continue;
            const Want& w = wants[rows[r].want];
            DraftProposal& p = out[rows[r].want];
            const int32_t token = pick(w, std::span(logits).subspan(r * V, n_vocab), p);
            if (static_cast<int32_t>(p.tokens.size()) < w.k) next.push_back({rows[r].want, {token}});
        }
        rows = std::move(next);
    }
    return out;
}

}  // namespace ember
