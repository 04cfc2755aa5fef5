// Draft-model speculation: a small model with the target's vocabulary proposes the next k
// tokens of each speculating sequence, the target checks them in one pass (Scheduler::sample)
// and keeps the longest prefix it agrees with. The draft has a KV cache of its own (its Model's),
// one sequence per target request, kept in step through the same seam as the target's
// (KvCache::allocate_slots / rollback): before proposing, the draft's sequence is rolled back to
// what it shares with the target's tokens and the rest (the prompt the first time, then the
// accepted tokens and the target's own next one) is fed in one pass batched over every
// speculating sequence; then k - 1 single-token passes, batched the same way.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative.h"   // DraftProposal
#include "engine/tokenizer/vocab_match.h"  // draft_vocab_mismatch

namespace ember {

inline constexpr int32_t kDefaultDraftMax = 8;

class DraftModel {
public:
    // `draft` must outlive this object and is used only through it (on the target's engine
    // thread). Throws ember::Error when its vocabulary is not the target's, naming what differs.
    DraftModel(Model& draft, const Model& target, int32_t max_draft = kDefaultDraftMax);
    ~DraftModel();
    DraftModel(const DraftModel&) = delete;
    DraftModel& operator=(const DraftModel&) = delete;

    // One speculating sequence's request: its tokens so far (prompt and output; the last one
    // not yet in the target's cache), the most tokens to propose, its sampling parameters.
    struct Want {
        uint64_t id = 0;  // the target's request id: the draft's sequence is kept under it
        std::span<const int32_t> context;
        int32_t k = 0;
        const SamplingParams* sampling = nullptr;  // null or greedy: argmax, no probs; else drawn, with probs
    };
    // Proposals in the order of `wants`; a sequence may get fewer than k tokens (none when the
    // draft's KV pool or context has no room). Passes are batched over all of them.
    std::vector<DraftProposal> propose(std::span<const Want> wants);
    // The target kept `kept` of the sequence's tokens (after a verification pass): the draft's
    // cache is rolled back past the rejected proposals through the seam.
    void settle(uint64_t id, std::span<const int32_t> kept);
    // The request ended: its draft sequence is freed.
    void forget(uint64_t id);

    int32_t max_draft() const { return max_draft_; }
    // A draft pass's cost in target decode passes: the ratio of their weights' bytes (a decode
    // reads every weight once).
    double cost_ratio() const { return cost_ratio_; }
    // The proposal length that gives the most tokens per unit of cost for a request whose
    // proposals held `accepted` times and failed `misses` times (each token held with
    // probability a = (accepted + 1/2) / (accepted + misses + 1), so k proposals give
    // (1 - a^(k+1)) / (1 - a) tokens for 1 + k * cost_ratio() target passes); 0 when no length
    // beats plain decoding by 5 %.
    int32_t paying_length(int32_t accepted, int32_t misses) const;
    Model& model() { return draft_; }
    int32_t sequences() const { return static_cast<int32_t>(tracks_.size()); }

private:
    struct Track {
        int32_t seq = -1;
        std::vector<int32_t> tokens;  // in the draft's KV cache
    };
    struct Row {                      // a sequence in one draft pass
        size_t want = 0;              // index in wants
        std::vector<int32_t> tokens;  // fed this pass
    };
    Track& track(uint64_t id);
    void sync(Track& t, std::span<const int32_t> target);
    // Feeds each row's tokens to its sequence (chunked to the draft's n_batch); returns one
    // logits row per row whose tokens all went in (false: the pool had no room).
    std::vector<bool> feed(std::span<const Want> wants, std::vector<Row>& rows, std::vector<float>& logits);
    int32_t pick(const Want& w, std::span<float> logits, DraftProposal& out);

    Model& draft_;
    int32_t max_draft_;
    double cost_ratio_ = 1;
    std::map<uint64_t, Track> tracks_;
    std::map<uint64_t, Sampler> samplers_;  // a sampling request's draws, seeded from its seed
};

}  // namespace ember
