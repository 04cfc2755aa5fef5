// A draft model that proposes only for the requests that ask (SchedulerOptions::
// draft_every_request false, EngineRequest::draft: the desktop app's chats set to "Draft
// model"), loaded the way every front door loads one (load_draft_model, draft_load.h):
// stories260K F32 drafted by its Q8_0 copy. The requests that ask are drafted for, the others
// are not, every request's ids are those of plain decoding, and the scheduler's memory figure
// counts the draft's bytes with the target's.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cpu_model.h"
#include "engine/quant/quantizer.h"
#include "engine/scheduler/draft_load.h"
#include "engine/scheduler/scheduler.h"
#include "spec_runs.h"
#include "test_data.h"
#include "test_util.h"

namespace ember {
namespace {

EngineRequest greedy(std::string prompt, bool draft) {
    EngineRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = 80;
    r.sampling = SamplingParams::greedy();
    r.ignore_eog = true;
    r.draft = draft;
    return r;
}

uint64_t held(const std::vector<DeviceMemory>& memory) {
    uint64_t n = 0;
    for (const DeviceMemory& m : memory) n += m.held();
    return n;
}

}  // namespace

TEST_CASE("a draft for the requests that ask only: those drafted for, all the same ids as plain decoding") {
    test::TempDir dir;
    const std::string target_path = test::testdata(test::kStories);
    auto target = test::load_cpu_model(target_path, 512, 4, 1);
    QuantizeOptions q;
    q.input = target_path;
    q.output = dir.file("draft-Q8_0.gguf");
    q.type = "Q8_0";
    q.n_threads = 1;
    quantize_model(q);
    LoadOptions lo;
    lo.path = target_path;
    lo.device = BackendPreference::Cpu;
    lo.n_threads = 1;
    lo.n_seqs = 4;
    const LoadedDraft draft = load_draft_model(q.output, lo, *target);
    CHECK(draft.model->n_ctx() == target->n_ctx());  // it follows every token the target holds

    const std::vector<EngineRequest> reqs{greedy("Once upon a time", true), greedy("The little dog", false),
                                          greedy("Lily wanted to", true)};
    SchedulerOptions o;
    o.max_batch = 4;
    const test::Batch plain = test::run_all(*target, reqs, o);
    o.draft = draft.get();
    o.draft_every_request = false;
    const test::Batch mixed = test::run_all(*target, reqs, o);
    for (size_t i = 0; i < reqs.size(); ++i) {
        CAPTURE(i);
        CHECK(mixed.out[i].error.empty());
        CHECK(mixed.out[i].ids == plain.out[i].ids);
        CHECK(plain.out[i].stats.drafted_tokens == 0);
    }
    CHECK(mixed.out[0].stats.drafted_tokens > 0);
    CHECK(mixed.out[1].stats.drafted_tokens == 0);  // it did not ask
    CHECK(mixed.out[2].stats.drafted_tokens > 0);
    CHECK(draft.proposer->sequences() == 0);

    // The memory the scheduler reports (the monitor's figure) is the target's and the draft's.
    Scheduler s(*target, o);
    const auto target_bytes = held(target->memory_use()), draft_bytes = held(draft.model->memory_use());
    CHECK(draft_bytes > 0);
    // Published by the engine thread when it starts.
    for (int tries = 0; tries < 1000 && held(s.status().memory) == 0; ++tries)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(held(s.status().memory) == target_bytes + draft_bytes);
}

}  // namespace ember
