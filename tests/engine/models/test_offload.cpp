// Partial offload: layers split between two backends (on a GPU machine: the first N layers
// on the GPU, the rest on the CPU). Here both are CPU backends, which checks the mechanics —
// weights and KV cache placed per layer, activations crossing over — exactly: the logits
// must equal those of a single backend bit for bit. A synthetic gemma4 (per-layer inputs
// crossing over beside the activations, layers that share an earlier layer's K/V) too, and
// the splits that would part a layer from the K/V it shares are refused.
#include <algorithm>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_batch.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

// Prefill `prompt`, then two single-token steps; returns all three logit rows.
std::vector<float> run(Transformer& tr, KvCache& kv, const std::vector<int32_t>& prompt) {
    const int32_t seq = kv.new_sequence();
    std::vector<float> all, logits;
    auto step = [&](const std::vector<int32_t>& toks) {
        const int32_t start = kv.length(seq);
        const auto slot_ids = kv.append(seq, static_cast<int32_t>(toks.size()));
        KvBatch batch;
        batch.add(seq, toks, slot_ids, start, true);
        const BatchInfo b = batch.info(kv);
        tr.forward(b, kv, logits);
        all.insert(all.end(), logits.begin(), logits.end());
    };
    step(prompt);
    step({7});
    step({8});
    return all;
}

}  // namespace

// tiny-gemma4 at F32, once per test run.
std::string tiny_gemma4() {
    static test::TempDir dir;
    static const std::string path = [] {
        const std::string p = dir.file("tiny-gemma4.gguf");
        write_synthetic_model(p, synthetic_shape("tiny-gemma4"), "F32");
        return p;
    }();
    return path;
}

// tiny-qwen35 at F32 (linear-attention layers with their recurrent state), once per run.
std::string tiny_qwen35() {
    static test::TempDir dir;
    static const std::string path = [] {
        const std::string p = dir.file("tiny-qwen35.gguf");
        write_synthetic_model(p, synthetic_shape("tiny-qwen35"), "F32");
        return p;
    }();
    return path;
}

TEST_CASE("split equals single") {
    struct Row {
        const char* name;
        std::string model;
        int first_layers;
    };
    const std::string stories = test::testdata(test::kStories);
    const Row rows[] = {
        {"stories260K, 2 of 5 layers first", stories, 2},
        {"stories260K, 0 of 5 (all on the second)", stories, 0},
        {"stories260K, 5 of 5 (all on the first)", stories, 5},
        {"SmolLM2, 17 of 30", test::test_model(test::kSmolLM2), 17},
        {"Gemma 3, 9 of 18", test::test_model(test::kGemma3), 9},
        {"tiny-gemma4, 4 of 9 (the KV-sharing layers and their sources second)", "gemma4", 4},
        {"tiny-gemma4, 2 of 9", "gemma4", 2},
        {"tiny-gemma4, 0 of 9", "gemma4", 0},
        {"tiny-qwen35, 3 of 8 (linear-attention states on both sides)", "qwen35", 3},
        {"tiny-qwen35, 5 of 8", "qwen35", 5},
    };
    std::string model;
    int first_layers = -1;
    for (const Row& r : rows) SUBCASE(r.name) {
            model = r.model;
            first_layers = r.first_layers;
        }
    REQUIRE(!model.empty());
    if (model == "gemma4") model = tiny_gemma4();
    if (model == "qwen35") model = tiny_qwen35();
    EMBER_REQUIRE_FILE(model);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(model));
    const std::vector<int32_t> prompt = {2, 40, 41, 42, 43, 44, 45, 46, 47, 48};

    auto single_backend = make_cpu_backend(2);
    Transformer single(file, *single_backend);
    KvCache single_kv(*single_backend, single.kv_config(64, 1));
    const auto expected = run(single, single_kv, prompt);

    auto first = make_cpu_backend(2), rest = make_cpu_backend(2);
    Transformer split(file, *first, *rest, first_layers);
    const auto placement = split.layer_backends();
    for (size_t i = 0; i < placement.size(); ++i)
        REQUIRE_EQ(placement[i], static_cast<int>(i) < first_layers ? first.get() : rest.get());
    const auto kv_placement = split.kv_backends();
    const auto state_placement = split.recurrent_backends();
    KvCache split_kv(kv_placement, split.kv_config(64, 1), state_placement);
    // Each backend holds its cache layers' K and V pools, and its linear-attention layers' states.
    uint64_t want_first = 0, want_rest = 0, state_first = 0, state_rest = 0;
    for (size_t i = 0; i < kv_placement.size(); ++i)
        (kv_placement[i] == first.get() ? want_first : want_rest) +=
            2 * split_kv.config().layer_pool_bytes(static_cast<int32_t>(i));
    for (Backend* b : state_placement)
        (b == first.get() ? state_first : state_rest) += split_kv.config().recurrent.bytes_per_slot();
    REQUIRE(first->memory().bytes[static_cast<int>(MemoryKind::KvCache)] >= want_first);
    REQUIRE(rest->memory().bytes[static_cast<int>(MemoryKind::KvCache)] >= want_rest);
    REQUIRE(first->memory().bytes[static_cast<int>(MemoryKind::State)] >= state_first);
    REQUIRE(rest->memory().bytes[static_cast<int>(MemoryKind::State)] >= state_rest);
    const auto got = run(split, split_kv, prompt);
    REQUIRE_EQ(got.size(), expected.size());
    REQUIRE(got == expected);
}

// tiny-gemma4: layers 6..8 attend over the K/V of layers 4 and 5, so a split between 5 and 8
// would put a layer on the other side of its K/V.
TEST_CASE("a split that parts a layer from the K/V it shares is refused") {
    auto file = std::make_shared<const GgufFile>(GgufFile::open(tiny_gemma4()));
    const ModelConfig c = read_model_config(*file);
    for (int n = 0; n <= c.n_layers; ++n) CHECK(Transformer::split_supported(c, n) == (n <= 4 || n == 9));
    auto first = make_cpu_backend(1), rest = make_cpu_backend(1);
    CHECK_THROWS_WITH_AS(Transformer(file, *first, *rest, 6),
                         doctest::Contains("would separate a layer from the layer whose K/V it shares"), Error);
}
