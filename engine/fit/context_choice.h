// The context a model is loaded with when the user has not chosen one: the longest the
// model was trained for, halved until the whole load (weights, the KV cache for every
// sequence, scratch) fits this machine without costing a worse placement. A longer context
// is only taken where it keeps every layer the shortest one would put on the GPU (a longer
// memory is not worth slower tokens), and on the CPU it may take at most a share of the free
// RAM (the rest is the user's other programs').
//
// The same planner (engine/fit/planner.h) judges it, so "fits" means the bytes the load will
// allocate, not a rule of thumb.
#pragma once
#include <cstdint>
#include <string>

#include "engine/fit/planner.h"

namespace ember::fit {

struct ContextOptions {
    int32_t n_seqs = 1;     // sequences the KV cache holds (the app's cached chats)
    int32_t n_batch = 512;  // prompt tokens per pass
    DType kv_type = DType::F16;
    int64_t min_ctx = 4096;    // never chosen below this (or the trained length, if shorter)
    int64_t max_ctx = 131072;  // never above this, whatever the model was trained for
    double margin = 0.05;      // of the VRAM kept free (fragmentation, the estimates' error)
    double ram_share = 0.5;    // of the free RAM a CPU-side load may take
};

struct ContextChoice {
    int64_t n_ctx = 0;       // chosen
    int64_t trained = 0;     // the model's own limit (n_ctx_train)
    int64_t fits_up_to = 0;  // the longest context (of the halvings) that fits, >= n_ctx
    FitPlan plan;            // at n_ctx
    std::string reason;      // one line, in plain words
};

// Throws nothing; a model that fits nowhere gets min_ctx and a plan that says so.
ContextChoice choose_context(const FitModel& m, const Budget& b, const ContextOptions& o = {});

}  // namespace ember::fit
