// Runs a list of requests through one Scheduler, with or without speculation, and collects
// what each produced (test_speculation, test_speculation_sampled).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/scheduler/scheduler.h"

namespace ember::test {

struct Ended {
    std::vector<int32_t> ids;
    std::string text;
    std::vector<TokenLogprob> logprobs;
    RequestStats stats;
    std::string error;
};

// Submits every request at once and waits for all of them; also counts the passes.
struct Batch {
    std::vector<Ended> out;
    uint64_t steps = 0;
};

// With the scheduler's options as given (a draft model, say); max_queue raised to hold them all.
inline Batch run_all(Model& model, std::vector<EngineRequest> reqs, SchedulerOptions o) {
    std::mutex mu;
    std::condition_variable cv;
    Batch b;
    b.out.resize(reqs.size());
    size_t ended = 0;
    o.max_queue = std::max<int32_t>(o.max_queue, static_cast<int32_t>(reqs.size()));
    Scheduler s(model, o);
    for (size_t i = 0; i < reqs.size(); ++i) {
        s.submit(std::move(reqs[i]), [&, i](EngineEvent&& e) {
            std::lock_guard lock(mu);
            Ended& out = b.out[i];
            out.text += e.text;
            out.logprobs.insert(out.logprobs.end(), e.tokens.begin(), e.tokens.end());
            if (e.kind == EngineEvent::Kind::Failed) out.error = e.error;
            if (e.kind == EngineEvent::Kind::Finished) {
                out.ids = e.output_ids;
                out.stats = e.stats;
            }
            if (e.kind == EngineEvent::Kind::Finished || e.kind == EngineEvent::Kind::Failed) ++ended;
            cv.notify_all();
        });
    }
    std::unique_lock lock(mu);
    REQUIRE_MESSAGE(cv.wait_for(lock, std::chrono::minutes(8), [&] { return ended == b.out.size(); }),
                    "requests did not end");
    b.steps = s.stats().steps;
    return b;
}

inline Batch run_all(Model& model, std::vector<EngineRequest> reqs, bool lookup, int32_t max_batch,
                     bool draft_by_pass_cost = true) {
    SchedulerOptions o;
    o.max_batch = max_batch;
    o.lookup = lookup;
    o.draft_by_pass_cost = draft_by_pass_cost;
    return run_all(model, std::move(reqs), o);
}

}  // namespace ember::test
