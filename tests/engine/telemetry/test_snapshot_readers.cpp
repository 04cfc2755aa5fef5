// Telemetry::snapshot() under several reader threads calling it as fast as they can while a
// real model (stories260K, CPU) generates three answers on the writer thread: what the
// monitor panel, `ember ps` and /metrics do at once. Every snapshot must be self-consistent
// (totals only grow, p50 <= p95 <= p99 inside [min, max], the memory report is one the
// engine published, whole), and the final totals must equal what generate() returned.
// The asan preset runs this test under AddressSanitizer + UBSan (scripts/test.sh).
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "engine/telemetry/telemetry.h"
#include "test_data.h"

using namespace ember;

namespace {

// The first inconsistency a reader saw (one is enough to fail; the rest would repeat it).
struct Findings {
    std::mutex mutex;
    std::string first;
    std::atomic<int> count{0};
    void note(const std::string& what) {
        if (count.fetch_add(1) == 0) {
            std::lock_guard lock(mutex);
            first = what;
        }
    }
};

void check_window(const char* name, const WindowStats& w, Findings& f) {
    if (w.count == 0) return;
    if (!(w.min <= w.p50 && w.p50 <= w.p95 && w.p95 <= w.p99 && w.p99 <= w.max))
        f.note(std::string(name) + ": percentiles out of order");
    if (w.mean < w.min || w.mean > w.max) f.note(std::string(name) + ": mean outside [min, max]");
    if (w.min < 0) f.note(std::string(name) + ": negative sample");
}

// The engine republishes its memory report when a prompt makes the scratch buffers grow
// (Sequence::generate), so a snapshot holds one of several whole reports: the same device,
// layers, weights and KV cache as at load, and scratch that never shrinks.
bool same_placement(const DeviceMemory& a, const DeviceMemory& b) {
    return a.device == b.device && a.layers == b.layers && a.weights == b.weights &&
           a.mapped_weights == b.mapped_weights && a.kv_cache == b.kv_cache && a.device_total == b.device_total;
}

// One reader: snapshots back to back until told to stop, checking each against the last.
void read_until(const Telemetry& tel, const std::vector<DeviceMemory>& memory, const std::atomic<bool>& done,
                Findings& f, std::atomic<int64_t>& reads) {
    TelemetrySnapshot last;
    uint64_t last_scratch = 0;
    while (!done.load()) {
        const TelemetrySnapshot s = tel.snapshot();
        if (s.requests < last.requests || s.prompt_tokens < last.prompt_tokens ||
            s.reused_tokens < last.reused_tokens || s.generated_tokens < last.generated_tokens)
            f.note("a total went down");
        check_window("inter_token_ms", s.inter_token_ms, f);
        check_window("ttft_ms", s.ttft_ms, f);
        check_window("decode_tok_s", s.decode_tok_s, f);
        if (s.inter_token_ms.count > static_cast<int64_t>(s.generated_tokens))
            f.note("more inter-token samples than tokens generated");
        if (s.decode_tok_s_now < 0) f.note("negative decode rate");
        if (s.memory.size() != memory.size() || !same_placement(s.memory[0], memory[0]))
            f.note("memory report differs from the model's placement");
        else if (s.memory[0].scratch < last_scratch) f.note("scratch shrank (a torn or stale memory report)");
        else if (s.memory[0].device_total && s.memory[0].held() > s.memory[0].device_total)
            f.note("Ember holds more than the device has");
        if (!s.memory.empty()) last_scratch = s.memory[0].scratch;
        if (s.current.id > 3) f.note("a request id nobody issued");
        last = s;
        ++reads;
        std::this_thread::yield();  // two shared cores: let the writer run between reads
    }
}

}  // namespace

TEST_CASE("snapshotStaysConsistentUnderConcurrentReadersWhileAModelGenerates") {
    LoadOptions lo;
    lo.path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(lo.path);
    lo.device = BackendPreference::Cpu;
    lo.n_threads = 1;
    lo.n_ctx = 512;
    auto model = Model::load(lo);
    Telemetry tel;
    const std::vector<DeviceMemory> memory = model->memory_use();
    REQUIRE(memory.size() == 1);
    tel.set_memory(memory);

    constexpr int kReaders = 3;
    std::atomic<bool> done{false};
    std::atomic<int64_t> reads{0};
    Findings findings;
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) readers.emplace_back([&] { read_until(tel, memory, done, findings, reads); });

    // Three answers in one sequence; the later prompts start with the earlier ones, so the
    // KV cache supplies part of them (reused tokens), as in a chat.
    Sequence seq(*model);
    const std::vector<std::vector<int32_t>> prompts{
        {1, 400, 401}, {1, 400, 401, 402, 403}, {1, 400, 401, 402, 403, 404}};
    int64_t prompt_total = 0, reused_total = 0, generated_total = 0, decode_samples = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        GenerateOptions go;
        go.sampling.temperature = 0;
        go.max_tokens = 200;
        go.ignore_eog = true;
        go.telemetry = &tel;
        const GenerateStats st = seq.generate(prompts[i], go, nullptr);
        prompt_total += st.prompt_tokens;
        reused_total += st.reused_tokens;
        generated_total += st.generated_tokens;
        decode_samples += st.generated_tokens - 1;
    }
    done = true;
    for (auto& t : readers) t.join();

    INFO("first inconsistency: ", findings.first);
    CHECK(findings.count.load() == 0);
    CHECK(reads.load() >= kReaders);  // every reader got through at least one snapshot
    const TelemetrySnapshot s = tel.snapshot();
    CHECK(s.requests == 3);
    CHECK(s.prompt_tokens == static_cast<uint64_t>(prompt_total));
    CHECK(s.reused_tokens == static_cast<uint64_t>(reused_total));
    CHECK(s.reused_tokens > 0);  // the later prompts found their start in the cache
    CHECK(s.reused_tokens < s.prompt_tokens);
    CHECK(s.generated_tokens == static_cast<uint64_t>(generated_total));
    CHECK(s.inter_token_ms.count == decode_samples);
    CHECK(s.ttft_ms.count == 3);
    CHECK(s.current.id == 3);
    CHECK_FALSE(s.current.running);
    MESSAGE("snapshots read by ", kReaders, " threads during generation: ", reads.load());
}
