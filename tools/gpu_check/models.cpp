// ember-gpu-check (b): each real model found runs on both backends over the same prompt;
// final logits are compared (max |error|) and 32 greedy tokens must be identical. The GPU run
// is repeated with CUDA graphs off: tokens and every step's logits must be bit-identical, and
// the graphs-on run must have replayed its decode.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/transformer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using opdata::Batch;

namespace {

struct RunOut {
    std::vector<float> prefill_logits;
    std::vector<std::vector<float>> step_logits;  // logits before each greedy token
    std::vector<int32_t> tokens;
    double prefill_s = 0, decode_s = 0;
};

// Prefill `prompt` (one pass, logits of the last token) then `n_gen` greedy steps.
RunOut run_model(std::shared_ptr<const GgufFile> file, Backend& backend, const std::vector<int32_t>& prompt,
                 int n_gen) {
    Transformer tr(file, backend);
    KvCache kv(backend, tr.kv_config(static_cast<int64_t>(prompt.size()) + n_gen + 16, 1));
    const int32_t seq = kv.new_sequence();
    RunOut out;
    auto step = [&](const std::vector<int32_t>& toks, std::vector<float>& logits) {
        const int32_t start = kv.length(seq);
        const auto slots = kv.append(seq, static_cast<int32_t>(toks.size()));
        Batch b;
        b.tokens = toks;
        for (size_t i = 0; i < toks.size(); ++i) {
            b.positions.push_back(start + static_cast<int32_t>(i));
            b.seq_of.push_back(0);
        }
        b.kv_slot = slots;
        b.block_table = kv.block_table(seq);
        b.max_blocks = static_cast<int32_t>(b.block_table.size());
        b.output_rows = {static_cast<int32_t>(toks.size() - 1)};
        tr.forward(b.info(), kv, logits);
    };
    auto t0 = std::chrono::steady_clock::now();
    step(prompt, out.prefill_logits);
    auto t1 = std::chrono::steady_clock::now();
    std::vector<float> logits = out.prefill_logits;
    for (int i = 0; i < n_gen; ++i) {
        out.step_logits.push_back(logits);
        const int32_t next = argmax(logits);
        out.tokens.push_back(next);
        if (i + 1 < n_gen) step({next}, logits);
    }
    auto t2 = std::chrono::steady_clock::now();
    out.prefill_s = std::chrono::duration<double>(t1 - t0).count();
    out.decode_s = std::chrono::duration<double>(t2 - t1).count();
    return out;
}

// The GPU's greedy decode again with CUDA graphs off: a replay issues the very launches the
// eager path does, so tokens and every step's logits must be bit-identical. `used` is what
// the graphs-on run did: its decode steps must (nearly all) have been replays.
void check_graphs(const std::shared_ptr<const GgufFile>& file, const std::string& label,
                  const std::vector<int32_t>& prompt, int n_gen, const RunOut& on, const GraphStats& used,
                  Backend& gpu) {
    if (!gpu.set_graphs(false)) {
        record("models", label + " graphs on vs off", "skipped", 0, -1, "this backend has no graphs");
        return;
    }
    RunOut off;
    try {
        off = run_model(file, gpu, prompt, n_gen);
    } catch (...) {
        gpu.set_graphs(true);
        throw;
    }
    gpu.set_graphs(true);
    size_t bad = bits_differ(on.prefill_logits, off.prefill_logits);
    for (size_t i = 0; i < on.step_logits.size() && i < off.step_logits.size(); ++i)
        bad += bits_differ(on.step_logits[i], off.step_logits[i]);
    for (size_t i = 0; i < on.tokens.size(); ++i) bad += i >= off.tokens.size() || on.tokens[i] != off.tokens[i];
    char note[160];
    std::snprintf(note, sizeof note, "decode %.3f s with graphs, %.3f s without", on.decode_s, off.decode_s);
    record("models", label + " graphs on vs off", "bits_differ", static_cast<double>(bad), 0, note);
    std::snprintf(note, sizeof note, "%llu replayed, %llu captured, %llu eager, %llu failed captures",
                  static_cast<unsigned long long>(used.replayed), static_cast<unsigned long long>(used.captured),
                  static_cast<unsigned long long>(used.eager), static_cast<unsigned long long>(used.failures));
    // n_gen - 1 decode passes: the first runs eagerly, the second is captured, the rest replay.
    record("models", label + " decode passes not replayed", "passes",
           static_cast<double>(used.eager + used.captured + used.failures), 4, note);
}

}  // namespace

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

GraphStats stats_delta(const GraphStats& a, const GraphStats& b) {
    return {b.eager - a.eager, b.captured - a.captured, b.replayed - a.replayed, b.failures - a.failures};
}

void check_model(const std::string& path, const std::string& label, double logit_tol, Pair& p) {
    std::printf("\n[models] %s: %s\n", label.c_str(), path.c_str());
    try {
        auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
        auto tok = Tokenizer::from_gguf(*file);
        const std::string prompt_text =
            "Once upon a time, in a small village by the sea, there lived a curious girl who";
        std::vector<int32_t> prompt = tok->encode(prompt_text, true, false);
        if (prompt.empty() || (tok->bos() >= 0 && prompt.front() != tok->bos()))
            prompt.insert(prompt.begin(), tok->bos() >= 0 ? tok->bos() : 1);
        const int n_gen = 32;
        const RunOut c = run_model(file, p.cpu, prompt, n_gen);
        const GraphStats before = p.gpu.graph_stats();
        const RunOut g = run_model(file, p.gpu, prompt, n_gen);
        const GraphStats used = stats_delta(before, p.gpu.graph_stats());
        std::printf("  prompt %zu tokens; CPU prefill %.3f s, %d tokens %.3f s; GPU prefill %.3f s, %d tokens %.3f s\n",
                    prompt.size(), c.prefill_s, n_gen, c.decode_s, g.prefill_s, n_gen, g.decode_s);
        record("models", label + " prefill logits", "max_abs", max_abs_diff(g.prefill_logits, c.prefill_logits),
               logit_tol);
        // Greedy tokens: identical, except where the CPU's top-2 margin is within 2x the
        // logit tolerance (a near-tie either backend may break either way).
        int first_diff = -1;
        for (int i = 0; i < n_gen; ++i)
            if (g.tokens[static_cast<size_t>(i)] != c.tokens[static_cast<size_t>(i)]) {
                first_diff = i;
                break;
            }
        double step_err = 0;
        const int same_until = first_diff < 0 ? n_gen : first_diff;
        for (int i = 0; i < same_until; ++i)
            step_err = std::max(
                step_err, max_abs_diff(g.step_logits[static_cast<size_t>(i)], c.step_logits[static_cast<size_t>(i)]));
        record("models", label + " logits, every step", "max_abs", step_err, -1, "info (same tokens fed)");
        if (first_diff < 0) {
            record("models", label + " 32 greedy tokens", "mismatches", 0, 0);
        } else {
            auto l = c.step_logits[static_cast<size_t>(first_diff)];
            std::vector<float> s = l;
            std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
            const double margin = s[0] - s[1];
            const bool tie = margin < 2 * logit_tol;
            char note[160];
            std::snprintf(note, sizeof note, "first differs at step %d (CPU %d, GPU %d), CPU top-2 margin %.3f%s",
                          first_diff, c.tokens[static_cast<size_t>(first_diff)],
                          g.tokens[static_cast<size_t>(first_diff)], margin, tie ? ": near-tie, not counted" : "");
            record("models", label + " 32 greedy tokens", "mismatches", tie ? 0 : n_gen - first_diff, 0, note);
        }
        std::string cs, gs;
        for (int32_t t : c.tokens) cs += std::to_string(t) + " ";
        for (int32_t t : g.tokens) gs += std::to_string(t) + " ";
        std::printf("  CPU tokens: %s\n  GPU tokens: %s\n", cs.c_str(), gs.c_str());
        std::printf("  GPU text: %s\n", tok->decode(g.tokens).c_str());
        check_graphs(file, label, prompt, n_gen, g, used, p.gpu);
    } catch (const std::exception& e) {
        fail("models", label, e.what());
    }
}

}  // namespace ember::gpucheck
