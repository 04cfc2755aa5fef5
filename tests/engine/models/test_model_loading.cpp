// Loading real and synthetic model files, and the errors a user gets for files Ember cannot
// run: each must name what is wrong, never crash.
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

#include "engine/gguf/gguf_writer.h"
#include "engine/models/synthetic.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

// Copies `src` to `dst`, letting `edit` change metadata and tensor types on the way.
void rewrite(const std::string& src, const std::string& dst, const std::function<void(GgufWriter&)>& edit_metadata,
             const std::function<DType(const GgufTensor&)>& type_of = nullptr) {
    const GgufFile f = GgufFile::open(src);
    GgufWriter w;
    for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
    edit_metadata(w);
    for (const auto& t : f.tensors()) {
        const DType type = type_of ? type_of(t) : t.type;
        if (type == t.type) {
            w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
        } else {  // fill with zeros of the new type's size (only loading is tested)
            const auto info = *dtype_info(static_cast<uint32_t>(type));
            w.add_tensor(t.name, type, t.dims,
                         std::vector<uint8_t>(t.n_elements / info.block_elems * info.block_bytes));
        }
    }
    w.write_file(dst);
}

std::string load_error(const std::string& path) {
    try {
        LoadOptions o;
        o.path = path;
        o.device = BackendPreference::Cpu;
        Model::load(o);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("synthetic model runs") {
    test::TempDir dir;
    for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K_M", "Q5_K", "Q6_K"}) {
        const std::string path = dir.file(std::string("tiny-") + type + ".gguf");
        write_synthetic_model(path, synthetic_shape("tiny"), type);
        LoadOptions o;
        o.path = path;
        o.device = BackendPreference::Cpu;
        o.n_ctx = 64;
        auto model = Model::load(o);
        REQUIRE_EQ(model->config().n_layers, 2);
        Sequence seq(*model);
        const std::vector<int32_t> prompt = {1, 300, 301, 302};
        const auto& logits = seq.prefill(prompt);
        REQUIRE_EQ(logits.size(), size_t(model->config().n_vocab));
        for (float l : logits) REQUIRE_MESSAGE(std::isfinite(l), type);
    }
}
// A split model (llama.cpp's gguf-split layout): opening its first part loads all parts as
// one model, whose logits are the single file's bit for bit; a missing or foreign part, or a
// part truncated while loaded, is an error naming that part.
TEST_CASE("split model loads as one") {
    test::TempDir dir;
    const SyntheticShape shape = synthetic_shape("tiny");
    const std::string whole = dir.file("tiny-Q8_0.gguf");
    write_synthetic_model(whole, shape, "Q8_0");
    const std::vector<std::string> parts = write_synthetic_split_model(dir.file("tiny-split-Q8_0"), shape, "Q8_0", 3);
    REQUIRE(parts.size() == 3);
    CHECK(parts[0] == dir.file("tiny-split-Q8_0-00001-of-00003.gguf"));
    auto logits = [](const std::string& path) {
        LoadOptions o;
        o.path = path;
        o.device = BackendPreference::Cpu;
        o.n_ctx = 64;
        auto model = Model::load(o);
        Sequence seq(*model);
        const std::vector<int32_t> prompt = {1, 300, 301, 302};
        return std::vector<float>(seq.prefill(prompt));
    };
    CHECK(logits(parts[0]) == logits(whole));
    const GgufFile joined = GgufFile::open(parts[0]);
    CHECK(joined.split_count() == 3);
    CHECK(joined.tensors().size() == GgufFile::open(whole).tensors().size());
    // A part opened alone is only its own tensors (and no model).
    CHECK(GgufFile::open(parts[1]).tensors().size() < joined.tensors().size());
    CHECK(load_error(parts[1]).find("architecture") != std::string::npos);

    const std::string moved = dir.file("elsewhere.gguf");
    std::filesystem::rename(parts[2], moved);
    const std::string err = load_error(parts[0]);
    CHECK_MESSAGE(err.find("tiny-split-Q8_0-00003-of-00003.gguf") != std::string::npos, err);
    std::filesystem::copy_file(parts[1], parts[2]);  // part 2 again where part 3 belongs
    const std::string wrong = load_error(parts[0]);
    CHECK_MESSAGE(wrong.find("is not part 3 of 3") != std::string::npos, wrong);
    std::filesystem::remove(parts[2]);
    std::filesystem::rename(moved, parts[2]);
    {
        const GgufFile f = GgufFile::open(parts[0]);
        std::filesystem::resize_file(parts[2], 100);
        CHECK_THROWS_WITH_AS(f.check_unchanged(), doctest::Contains("00003-of-00003.gguf"), Error);
    }
}
TEST_CASE("synthetic architectures run") {
    test::TempDir dir;
    for (const char* shape : {"tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-gemma4"}) {
        const std::string path = dir.file(std::string(shape) + ".gguf");
        write_synthetic_model(path, synthetic_shape(shape), "Q4_K_M");
        LoadOptions o;
        o.path = path;
        o.device = BackendPreference::Cpu;
        o.n_ctx = 64;
        auto model = Model::load(o);
        const ModelConfig& c = model->config();
        REQUIRE_EQ(c.arch, synthetic_shape(shape).arch);
        REQUIRE_EQ(c.qkv_bias, c.arch == "qwen2");
        REQUIRE_EQ(c.qk_norm, c.arch == "gemma3" || c.arch == "qwen3" || c.arch == "gemma4");
        if (c.arch == "qwen3") {
            REQUIRE_EQ(c.head_dim, 128);  // not n_embd / n_heads (64): attention.key_length
            REQUIRE(c.rope_neox);
        }
        if (c.arch == "gemma3") {
            REQUIRE_EQ(c.head_dim, 64);
            REQUIRE_EQ(c.sliding_window, 4);
            REQUIRE_EQ(c.layer_sliding, (std::vector<bool>{true, true, true, true, true, false}));
        }
        if (c.arch == "gemma4") {  // synthetic.cpp's tiny-gemma4, read back
            REQUIRE_EQ(c.layer_sliding, (std::vector<bool>{true, true, false, true, true, false, true, true, false}));
            for (int i = 0; i < c.n_layers; ++i) {
                const LayerShape& l = c.layers[static_cast<size_t>(i)];
                INFO("layer " << i);
                CHECK(l.head_dim == (l.sliding ? 64 : 128));
                CHECK(l.n_rot == l.head_dim);
                CHECK(l.n_kv_heads == (l.sliding ? 2 : 1));
                CHECK(l.n_ff == (i >= 6 ? 1024 : 512));
                // Layers 6..8 share the K/V of the last sliding (4) and global (5) layer before them.
                CHECK(l.kv_source == (i < 6 ? i : l.sliding ? 4 : 5));
            }
            CHECK(c.attn_scale == 1.0f);
            CHECK(c.v_norm);
            CHECK(c.final_softcap == 3.0f);
            CHECK(c.n_embd_per_layer == 32);
            CHECK(c.rope_base_local == 10000.0f);
            CHECK(model->kv().config().n_layers == 6);
        }
        Sequence seq(*model);
        const std::vector<int32_t> prompt = {1, 300, 301, 302, 303, 304, 305, 306};
        for (float l : seq.prefill(prompt)) REQUIRE_MESSAGE(std::isfinite(l), shape);
    }
}
TEST_CASE("gemma4 with experts (26B-A4B's layout): the config, every shape, and the separate-scale refusal") {
    test::TempDir dir;
    const std::string path = dir.file("tiny-gemma4moe.gguf");
    write_synthetic_model(path, synthetic_shape("tiny-gemma4moe"), "F16");
    const ModelConfig c = read_model_config(GgufFile::open(path));
    CHECK(c.moe());
    CHECK(c.shared_ffn);
    CHECK(c.expert_gate_up);
    CHECK(c.n_expert == 16);
    CHECK(c.n_expert_used == 4);
    CHECK(c.n_ff_exp == 96);
    CHECK(c.n_ff == 512);
    CHECK(c.expert_weights_norm);
    CHECK(c.n_embd_per_layer == 0);
    // The real shape's header: 30 layers, 128 experts of 704, 8 used.
    const SyntheticShape real = synthetic_shape("gemma4-26b-a4b");
    CHECK(real.n_layers == 30);
    CHECK(real.n_expert == 128);
    CHECK(real.n_expert_used == 8);
    auto model = Model::load([&] {
        LoadOptions lo;
        lo.path = path, lo.device = BackendPreference::Cpu, lo.n_threads = 2, lo.n_ctx = 256;
        return lo;
    }());
    Sequence seq(*model);
    const std::vector<int32_t> prompt = {1, 300, 301, 302, 303, 304, 305, 306};
    for (float l : seq.prefill(prompt)) REQUIRE(std::isfinite(l));
    const std::string dst = dir.file("gate-scale.gguf");
    rewrite(path, dst, [](GgufWriter& w) {
        w.add_tensor("blk.0.ffn_gate_exps.scale", DType::F32, {16}, std::vector<uint8_t>(64, 0));
    });
    CHECK(load_error(dst).find("blk.0.ffn_gate_exps.scale") != std::string::npos);
}
TEST_CASE("gemma4 files with an expert count but dense layers are refused by name") {
    test::TempDir dir;
    const std::string src = dir.file("tiny-gemma4.gguf"), dst = dir.file("moe.gguf");
    write_synthetic_model(src, synthetic_shape("tiny-gemma4"), "F16");
    rewrite(src, dst, [](GgufWriter& w) { w.set("gemma4.expert_count", GgufValue::u32(128)); });
    const std::string err = load_error(dst);
    REQUIRE_MESSAGE(err.find("layer 0 has no router") != std::string::npos, err);
}
TEST_CASE("unsupported architecture is named") {
    test::TempDir dir;
    const std::string src = dir.file("tiny.gguf"), dst = dir.file("mamba.gguf");
    write_synthetic_model(src, synthetic_shape("tiny"), "F16");
    rewrite(src, dst, [](GgufWriter& w) { w.set("general.architecture", GgufValue::str("mamba")); });
    const std::string err = load_error(dst);
    REQUIRE_MESSAGE(err.find("unsupported architecture 'mamba'") != std::string::npos, err.c_str());
}
TEST_CASE("unsupported weight type is named") {
    test::TempDir dir;
    const std::string src = dir.file("tiny.gguf"), dst = dir.file("iq2.gguf");
    write_synthetic_model(src, synthetic_shape("tiny"), "F16");
    rewrite(
        src, dst, [](GgufWriter&) {},
        [](const GgufTensor& t) { return t.name == "blk.1.ffn_up.weight" ? DType::IQ2_XXS : t.type; });
    const std::string err = load_error(dst);
    REQUIRE_MESSAGE(err.find("blk.1.ffn_up.weight") != std::string::npos, err.c_str());
    REQUIRE_MESSAGE(err.find("IQ2_XXS") != std::string::npos, err.c_str());
}
TEST_CASE("missing tensor is named") {
    test::TempDir dir;
    const std::string src = dir.file("tiny.gguf"), dst = dir.file("cut.gguf");
    write_synthetic_model(src, synthetic_shape("tiny"), "F16");
    const GgufFile f = GgufFile::open(src);
    GgufWriter w;
    for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
    for (const auto& t : f.tensors())
        if (t.name != "blk.0.attn_k.weight")
            w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    w.write_file(dst);
    const std::string err = load_error(dst);
    REQUIRE_MESSAGE(err.find("missing tensor 'blk.0.attn_k.weight'") != std::string::npos, err.c_str());
}
TEST_CASE("not a model file") {
    test::TempDir dir;
    const std::string path = dir.file("x.gguf");
    test::write_file(path, "this is not a model");
    REQUIRE(load_error(path).find("bad magic") != std::string::npos);
    REQUIRE(load_error(dir.file("absent.gguf")).find("cannot open") != std::string::npos);
}
TEST_CASE("invalid utf8 prompt is handled") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    LoadOptions o;
    o.path = path;
    o.n_ctx = 256;
    auto model = Model::load(o);
    // Truncated and stray UTF-8 sequences come back byte for byte. (Bytes the vocabulary
    // cannot spell at all, like 0xFF in SmolLM2's, are dropped, never a crash.)
    const std::string bad = "caf\xC3 ok \xE2\x82 \x80!";
    const auto ids = model->tokenizer().encode(bad, false, false);
    REQUIRE(!ids.empty());
    REQUIRE_EQ(model->tokenizer().decode(ids), bad);
    REQUIRE_EQ(model->tokenizer().decode(model->tokenizer().encode("a\xFF\xFE"
                                                                   "b",
                                                                   false, false)),
               std::string("ab"));
    Sequence seq(*model);
    GenerateOptions g;
    g.sampling = SamplingParams::greedy();
    g.max_tokens = 8;
    std::string out;
    seq.generate(ids, g, [&](std::string_view t) {
        out += t;
        return true;
    });
    REQUIRE(!out.empty());
}
