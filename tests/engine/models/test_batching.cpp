// One forward pass over several sequences at once (what the scheduler will do for
// concurrent chats and API requests) must give each sequence the logits it gets alone.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_batch.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
#include "test_data.h"

using namespace ember;

namespace {

struct SeqInput {
    int32_t seq;
    std::vector<int32_t> tokens;
};

// Runs the given sequences' new tokens in one batch; returns the last row's logits per sequence.
std::vector<std::vector<float>> run_batch(Transformer& tr, KvCache& kv, const std::vector<SeqInput>& inputs) {
    KvBatch batch;
    for (const auto& in : inputs) {
        const int32_t start = kv.length(in.seq);
        const auto slots = kv.append(in.seq, static_cast<int32_t>(in.tokens.size()));
        batch.add(in.seq, in.tokens, slots, start, true);
    }
    const BatchInfo b = batch.info(kv);
    std::vector<float> logits;
    tr.forward(b, kv, logits);
    std::vector<std::vector<float>> per_seq;
    const size_t V = static_cast<size_t>(tr.config().n_vocab);
    for (size_t i = 0; i < inputs.size(); ++i)
        per_seq.emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
    return per_seq;
}

struct Diff {
    float max = 0;
    double mean = 0;
};

Diff diff(const std::vector<float>& a, const std::vector<float>& b) {
    Diff d;
    for (size_t i = 0; i < a.size(); ++i) {
        const float e = std::abs(a[i] - b[i]);
        d.max = std::max(d.max, e);
        d.mean += e;
    }
    d.mean /= static_cast<double>(a.size());
    return d;
}

}  // namespace

constexpr const char* kTypes[] = {"F32", "BF16", "F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K_M", "Q5_K", "Q6_K"};

// The synthetic models, written once into a temporary folder on first use.
const test::TempDir& synthetic_models() {
    static const test::TempDir d;
    static const bool written = [] {
        for (const char* t : kTypes)
            write_synthetic_model(d.file(std::string("tiny-") + t + ".gguf"), synthetic_shape("tiny"), t);
        // The real models' attention shapes: head_dim 64 with 3 queries per KV head (SmolLM2)
        // and head_dim 256 with 4 (Gemma 3 270M); F16 weights keep the activations unquantized.
        write_synthetic_model(d.file("hd64.gguf"), {"hd64", 576, 2, 9, 3, 1536, 1024, 2048, true}, "F16");
        write_synthetic_model(d.file("hd256.gguf"), {"hd256", 1024, 2, 4, 1, 2048, 1024, 2048, true}, "F16");
        // Gemma 3 and Qwen 2 layouts; Gemma's 4-token sliding window is shorter than the prompts.
        write_synthetic_model(d.file("gemma3.gguf"), synthetic_shape("tiny-gemma3"), "F16");
        write_synthetic_model(d.file("qwen2.gguf"), synthetic_shape("tiny-qwen2"), "F16");
        write_synthetic_model(d.file("qwen3.gguf"), synthetic_shape("tiny-qwen3"), "F16");
        write_synthetic_model(d.file("gemma4.gguf"), synthetic_shape("tiny-gemma4"), "F16");
        return true;
    }();
    (void)written;
    return d;
}

// F32 weights, and random-weight models of every type: the CPU kernels are batch-invariant
// (kernels/cpu/README.md, "canonical order"), so a sequence's logits have the same bits
// whether it runs alone or batched with others, prefill next to prefill or decode next to a
// 2-token step (gemv alone, gemm batched; the attention decode kernel alone, tiles batched).
TEST_CASE("batched equals separate") {
    const test::TempDir& dir = synthetic_models();
    std::vector<std::pair<std::string, std::string>> rows = {{"stories260K F32", test::testdata(test::kStories)}};
    for (const char* t : kTypes) rows.emplace_back(t, dir.file(std::string("tiny-") + t + ".gguf"));
    rows.emplace_back("head_dim 64, GQA 3", dir.file("hd64.gguf"));
    rows.emplace_back("head_dim 256, GQA 4", dir.file("hd256.gguf"));
    rows.emplace_back("gemma3 (sliding window 4)", dir.file("gemma3.gguf"));
    rows.emplace_back("qwen2 (qkv bias)", dir.file("qwen2.gguf"));
    rows.emplace_back("qwen3 (QK-norm, head_dim 128 > n_embd / heads)", dir.file("qwen3.gguf"));
    rows.emplace_back("gemma4 (head dims 64/128, per-layer inputs, shared K/V)", dir.file("gemma4.gguf"));
    std::string model;
    for (const auto& [name, path] : rows) SUBCASE(name.c_str()) {
            model = path;
        }
    REQUIRE(!model.empty());
    EMBER_REQUIRE_FILE(model);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(model));
    auto backend = make_cpu_backend(2);
    Transformer tr(file, *backend);
    KvCache kv(*backend, tr.kv_config(128, 4));
    const std::vector<int32_t> a = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57};
    const std::vector<int32_t> b = {1, 90, 91};
    // Alone.
    const int32_t sa = kv.new_sequence(), sb = kv.new_sequence();
    const auto la = run_batch(tr, kv, {{sa, a}})[0];
    const auto lb = run_batch(tr, kv, {{sb, b}})[0];
    const auto la2 = run_batch(tr, kv, {{sa, {60}}})[0];
    const auto lb2 = run_batch(tr, kv, {{sb, {61, 62}}})[0];
    // Together: a prefill next to another prefill, then a decode next to a 2-token step.
    const int32_t ta = kv.new_sequence(), tb = kv.new_sequence();
    const auto both = run_batch(tr, kv, {{ta, a}, {tb, b}});
    const auto both2 = run_batch(tr, kv, {{ta, {60}}, {tb, {61, 62}}});
    for (const auto& [alone, batched] :
         {std::pair{&la, &both[0]}, {&lb, &both[1]}, {&la2, &both2[0]}, {&lb2, &both2[1]}}) {
        const Diff d = diff(*alone, *batched);
        REQUIRE_MESSAGE(d.max == 0.0f, "max diff ", d.max, ", mean ", d.mean);
        REQUIRE(std::memcmp(alone->data(), batched->data(), alone->size() * sizeof(float)) == 0);
    }
}
