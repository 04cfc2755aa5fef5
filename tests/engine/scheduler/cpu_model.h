// A real model loaded on the CPU backend for the scheduler's tests (test_scheduler,
// test_speculation): context, KV sequences and threads as each test needs them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/runtime/model.h"
#include "test_data.h"

namespace ember::test {

// threads: 1 for the tiny model, whose passes are too small to split (and a busy machine
// makes a thread pool wait for its slowest thread).
inline std::unique_ptr<Model> load_cpu_model(const std::string& path, int64_t n_ctx, int32_t n_seqs, int threads = 2) {
    EMBER_REQUIRE_FILE(path);
    LoadOptions o;
    o.path = path;
    o.device = BackendPreference::Cpu;
    o.n_threads = threads;
    o.n_ctx = n_ctx;
    o.n_seqs = n_seqs;
    return Model::load(o);
}

}  // namespace ember::test
