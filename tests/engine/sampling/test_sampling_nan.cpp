// A row of NaN logits (a model whose weights are NaN) is named as such, on both sampling
// paths, instead of being reported as "every token is banned by logit bias".
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "engine/sampling/sampler.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

bool names_nan(const std::string& err) {
    return err.find("every logit the model produced is NaN") != std::string::npos;
}

SamplingParams with_temperature(float t) {
    SamplingParams p;
    p.temperature = t;
    return p;
}

}  // namespace

TEST_CASE("a row of NaN is named on the full-row path") {
    for (float t : {0.0f, 0.8f}) {
        Sampler s(with_temperature(t));
        std::vector<float> row(16, kNaN);
        const std::string err = error_of([&] { s.sample(row, {}); });
        INFO("temperature ", t, ": ", err);
        CHECK(names_nan(err));
        CHECK(err.find("banned") == std::string::npos);
    }
}

TEST_CASE("no candidates from the backend (every logit NaN) is named on the candidates path") {
    for (float t : {0.0f, 0.8f}) {
        Sampler s(with_temperature(t));
        CHECK(names_nan(error_of([&] { s.sample_top({}); })));
    }
}

TEST_CASE("a banned row is still reported as banned, and a few NaN are ignored") {
    SamplingParams p = with_temperature(0.8f);
    for (int32_t id = 0; id < 4; ++id) p.logit_bias[id] = -kInf;
    Sampler banned(p);
    std::vector<float> row = {1.0f, 2.0f, kNaN, 0.5f};
    CHECK(error_of([&] { banned.sample(row, {}); }).find("every token is banned by logit bias") != std::string::npos);
    Sampler greedy(SamplingParams::greedy());
    std::vector<float> some_nan = {kNaN, 1.0f, 3.0f, kNaN};
    CHECK(greedy.sample(some_nan, {}) == 2);
}

TEST_CASE("a model whose output weights are NaN fails generation naming NaN") {
    const std::string src = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(src);
    const GgufFile f = GgufFile::open(src);
    GgufWriter w;
    for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
    for (const auto& t : f.tensors()) {
        std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
        if (t.name == "output.weight") {
            REQUIRE(t.type == DType::F32);
            auto* x = reinterpret_cast<float*>(bytes.data());
            std::fill(x, x + t.n_elements, kNaN);
        }
        w.add_tensor(t.name, t.type, t.dims, std::move(bytes));
    }
    const auto path = std::filesystem::temp_directory_path() / "ember-nan-output.gguf";
    w.write_file(path.string());

    LoadOptions o;
    o.path = path.string();
    o.device = BackendPreference::Cpu;
    o.n_ctx = 64;
    auto model = Model::load(o);
    // Greedy and top-k go through the backend's candidates; top_k = 0 samples the full row.
    for (const SamplingParams& sp : {SamplingParams::greedy(), with_temperature(0.8f), [] {
                                         SamplingParams p = with_temperature(0.8f);
                                         p.top_k = 0;
                                         return p;
                                     }()}) {
        Sequence seq(*model);
        GenerateOptions g;
        g.sampling = sp;
        g.max_tokens = 4;
        const std::vector<int32_t> prompt = {1, 403};
        const std::string err = error_of([&] { seq.generate(prompt, g, nullptr); });
        INFO("temperature ", sp.temperature, " top_k ", sp.top_k, ": ", err);
        CHECK(names_nan(err));
    }
    model.reset();
    std::filesystem::remove(path);
}
