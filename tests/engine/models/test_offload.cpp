// Partial offload: layers split between two backends (on a GPU machine: the first N layers
// on the GPU, the rest on the CPU). Here both are CPU backends, which checks the mechanics —
// weights and KV cache placed per layer, activations crossing over — exactly: the logits
// must equal those of a single backend bit for bit.
#include <algorithm>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_batch.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
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
    };
    std::string model;
    int first_layers = -1;
    for (const Row& r : rows) SUBCASE(r.name) {
            model = r.model;
            first_layers = r.first_layers;
        }
    REQUIRE(!model.empty());
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
    KvCache split_kv(placement, split.kv_config(64, 1));
    // Each backend holds exactly its layers' share of the KV cache.
    const uint64_t per_layer = split_kv.config().total_bytes() / static_cast<uint64_t>(placement.size());
    const int n_first = std::min<int>(first_layers, static_cast<int>(placement.size()));
    REQUIRE(first->memory().bytes[static_cast<int>(MemoryKind::KvCache)] >= per_layer * static_cast<uint64_t>(n_first));
    REQUIRE(rest->memory().bytes[static_cast<int>(MemoryKind::KvCache)] >=
            per_layer * static_cast<uint64_t>(placement.size() - static_cast<size_t>(n_first)));
    const auto got = run(split, split_kv, prompt);
    REQUIRE_EQ(got.size(), expected.size());
    REQUIRE(got == expected);
}
