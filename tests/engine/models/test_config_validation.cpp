// Model hyperparameters are checked against the tensor table before anything is sized by
// them: a hostile block_count fails at once (it used to take 19 s and 8.8 GB), 64-bit values
// are never narrowed to int32, and load options out of range are refused with the reason.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>

#include "engine/core/log.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/models/model_config.h"
#include "engine/models/synthetic.h"
#include "engine/runtime/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend_loader.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

// stories260K (llama, 5 layers, n_embd 64, n_ff 172) with `edit` applied to its metadata.
std::string stories_with(const std::string& name, const std::function<void(GgufWriter&)>& edit) {
    const std::string src = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(src);
    const GgufFile f = GgufFile::open(src);
    GgufWriter w;
    for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
    edit(w);
    for (const auto& t : f.tensors())
        w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    const std::string dst = (std::filesystem::temp_directory_path() / ("ember-config-" + name + ".gguf")).string();
    w.write_file(dst);
    return dst;
}

std::string load_error(const LoadOptions& o) {
    try {
        Model::load(o);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::string load_error(const std::string& path) {
    LoadOptions o;
    o.path = path;
    o.device = BackendPreference::Cpu;
    return load_error(o);
}

std::string config_error(const std::string& path) {
    try {
        read_model_config(GgufFile::open(path));
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

int64_t max_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return int64_t{u.ru_maxrss} * 1024;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the unedited model passes the checks (the edits below are what fails)") {
    const std::string path = stories_with("plain", [](GgufWriter&) {});
    CHECK(config_error(path).empty());
    CHECK(load_error(path).empty());
    std::filesystem::remove(path);
}

TEST_CASE("block_count 0x7fffffff fails at once, against the tensor table") {
    const std::string path =
        stories_with("layers-huge", [](GgufWriter& w) { w.set("llama.block_count", GgufValue::u32(0x7fffffff)); });
    const auto t0 = std::chrono::steady_clock::now();
    const std::string err = load_error(path);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(err);
    CHECK(contains(err, "llama.block_count = 2147483647 but the tensors describe 5 layers (blk.0 .. blk.4)"));
    CHECK(s < 2.0);
    CHECK(max_rss_bytes() < (int64_t{1} << 30));  // it used to reach 8.8 GB
    CHECK(config_error(path) == err);
    std::filesystem::remove(path);
}

TEST_CASE("block_count smaller than the layers present is named") {
    const std::string path =
        stories_with("layers-few", [](GgufWriter& w) { w.set("llama.block_count", GgufValue::u32(3)); });
    CHECK(contains(load_error(path), "llama.block_count = 3 but the tensors describe 5 layers"));
    std::filesystem::remove(path);
}

TEST_CASE("64-bit values are range-checked, never narrowed") {
    // 2^32 + 5 narrowed to int32 is 5, the real layer count: it used to load silently.
    struct Case {
        const char* key;
        GgufValue value;
        const char* expect;
    };
    const Case cases[] = {
        {"llama.block_count", GgufValue::u64((uint64_t{1} << 32) + 5),
         "llama.block_count = 4294967301 is out of range (1..2147483647)"},
        {"llama.embedding_length", GgufValue::u64((uint64_t{1} << 32) + 64),
         "llama.embedding_length = 4294967360 is out of range"},
        {"llama.attention.head_count", GgufValue::u64((uint64_t{1} << 33) + 8),
         "llama.attention.head_count = 8589934600 is out of range"},
        {"llama.feed_forward_length", GgufValue::u64(uint64_t{1} << 63),
         "llama.feed_forward_length = 9223372036854775808 is out of range"},
        {"llama.context_length", GgufValue::u64(uint64_t{1} << 40),
         "llama.context_length = 1099511627776 is out of range"},
        {"llama.attention.head_count", GgufValue::u32(0), "llama.attention.head_count = 0 is out of range"},
        {"llama.attention.head_count_kv", GgufValue::i32(-4), "llama.attention.head_count_kv"},
    };
    for (const Case& c : cases) {
        const std::string path = stories_with("narrow", [&](GgufWriter& w) { w.set(c.key, c.value); });
        const std::string err = load_error(path);
        INFO(c.key, ": ", err);
        CHECK(contains(err, c.expect));
        std::filesystem::remove(path);
    }
}

TEST_CASE("widths that disagree with layer 0's tensors are named before anything is allocated") {
    {
        const std::string path =
            stories_with("ffn", [](GgufWriter& w) { w.set("llama.feed_forward_length", GgufValue::u32(4096)); });
        CHECK(contains(load_error(path),
                       "tensor 'blk.0.ffn_down.weight' has shape 172 x 64, but the metadata implies 4096 x 64"));
        std::filesystem::remove(path);
    }
    {
        // 8 heads of 2^28: q_dim overflows int32.
        const std::string path = stories_with("headdim", [](GgufWriter& w) {
            w.set("llama.attention.key_length", GgufValue::u32(1u << 28));
            w.set("llama.rope.dimension_count", GgufValue::u32(8));
        });
        CHECK(contains(load_error(path), "8 heads of 268435456 do not fit"));
        std::filesystem::remove(path);
    }
    {
        const std::string path =
            stories_with("kvheads", [](GgufWriter& w) { w.set("llama.attention.head_count_kv", GgufValue::u32(2)); });
        CHECK(contains(load_error(path),
                       "tensor 'blk.0.attn_k.weight' has shape 64 x 32, but the metadata implies 64 x 16"));
        std::filesystem::remove(path);
    }
}

TEST_CASE("non-finite float hyperparameters are refused") {
    const std::string path = stories_with("eps", [](GgufWriter& w) {
        w.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(std::numeric_limits<float>::quiet_NaN()));
    });
    CHECK(contains(load_error(path), "llama.attention.layer_norm_rms_epsilon = nan must be a positive finite number"));
    std::filesystem::remove(path);
}

TEST_CASE("load options out of range are refused with the reason") {
    LoadOptions o;
    o.path = test::testdata(test::kStories);
    o.device = BackendPreference::Cpu;
    EMBER_REQUIRE_FILE(o.path);
    o.n_ctx = (int64_t{1} << 36) + 16;  // used to become a 16-token cache
    CHECK(contains(load_error(o), "context size 68719476752 is out of range"));
    o.n_ctx = kMaxContext;  // in range, but 640 GiB of KV cache
    CHECK(contains(load_error(o), "needs 640.0 GiB, more than this machine's"));
    o.n_ctx = 64;
    o.n_threads = -1;
    CHECK(contains(load_error(o), "thread count -1 is negative"));
    o.n_threads = 1;
    o.n_batch = 0;
    CHECK(contains(load_error(o), "batch size 0 must be at least 1"));
    o.n_batch = 16;
    CHECK(load_error(o).empty());
}

TEST_CASE("device cuda without a usable GPU is an error, not a quiet CPU run") {
    LoadOptions o;
    o.path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(o.path);
    o.n_ctx = 64;
    std::string why;
    const bool have_gpu = list_devices({}, &why).size() > 1;
    o.device = BackendPreference::Cuda;
    const std::string err = load_error(o);
    if (have_gpu) {
        CHECK_MESSAGE(err.empty(), err);
    } else {
        INFO(err);
        CHECK(contains(err, "device cuda was requested but no CUDA device can be used: "));
        CHECK(contains(err, why));  // and the reason there is none
    }
    o.device = BackendPreference::Auto;  // falls back to the CPU, no error
    CHECK(load_error(o).empty());
}

// Issue #34: llama.vocab_size = 10 beside a 512-token list was accepted.
TEST_CASE("a vocab_size that disagrees with the token list is refused with both numbers") {
    const std::string bad =
        stories_with("vocab-size", [](GgufWriter& w) { w.set("llama.vocab_size", GgufValue::u32(10)); });
    const std::string e = config_error(bad);
    CHECK(contains(e,
                   "llama.vocab_size is 10, but token_embd.weight has 512 rows and tokenizer.ggml.tokens 512 entries"));
    CHECK(contains(load_error(bad), "llama.vocab_size is 10"));
    const std::string good =
        stories_with("vocab-size-ok", [](GgufWriter& w) { w.set("llama.vocab_size", GgufValue::u32(512)); });
    CHECK(config_error(good).empty());
    std::filesystem::remove(bad);
    std::filesystem::remove(good);
}

// Issue #34: an out-of-range BOS id was dropped without the warning EOS got. Every special id
// that is no token (past the vocab, or negative other than -1) is ignored with a warning.
TEST_CASE("special ids that are no token are ignored with a warning, BOS as EOS") {
    struct Case {
        const char* key;
        GgufValue value;
        const char* said;
    };
    const Case cases[] = {
        {"tokenizer.ggml.bos_token_id", GgufValue::u32(600), "ignoring bos id 600 outside the vocab of 512"},
        {"tokenizer.ggml.eos_token_id", GgufValue::u32(600), "ignoring eos id 600 outside the vocab of 512"},
        {"tokenizer.ggml.bos_token_id", GgufValue::i32(-7),
         "ignoring tokenizer.ggml.bos_token_id = -7, not a token id"},
        {"tokenizer.ggml.eos_token_id", GgufValue::i32(-7),
         "ignoring tokenizer.ggml.eos_token_id = -7, not a token id"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.said);
        const std::string path = stories_with("special-id", [&](GgufWriter& w) { w.set(c.key, c.value); });
        std::vector<std::string> said;
        set_log_sink([&](LogLevel, std::string_view m) { said.emplace_back(m); });
        const auto t = Tokenizer::from_gguf(GgufFile::open(path));
        set_log_sink({});
        bool found = false;
        for (const std::string& m : said) found = found || contains(m, c.said);
        CHECK(found);
        std::filesystem::remove(path);
    }
    std::vector<std::string> said;  // -1 is the file's way to say "none": nothing to warn about
    const std::string none =
        stories_with("no-eos", [](GgufWriter& w) { w.set("tokenizer.ggml.eos_token_id", GgufValue::i32(-1)); });
    set_log_sink([&](LogLevel, std::string_view m) { said.emplace_back(m); });
    const auto t = Tokenizer::from_gguf(GgufFile::open(none));
    set_log_sink({});
    CHECK(said.empty());
    std::filesystem::remove(none);
}

// Expert hyperparameters (qwen3moe): the used count within the experts, and the experts'
// tensors as wide as the metadata says, named before any expert is loaded.
TEST_CASE("expert counts that disagree with the experts' tensors are named") {
    const std::string src = (std::filesystem::temp_directory_path() / "ember-config-qwen3moe.gguf").string();
    write_synthetic_model(src, synthetic_shape("tiny-qwen3moe"), "F32");
    const auto edited = [&](const std::string& name, uint32_t experts, uint32_t used) {
        const GgufFile f = GgufFile::open(src);
        GgufWriter w;
        for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
        w.set("qwen3moe.expert_count", GgufValue::u32(experts));
        w.set("qwen3moe.expert_used_count", GgufValue::u32(used));
        for (const auto& t : f.tensors())
            w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
        const std::string dst = (std::filesystem::temp_directory_path() / ("ember-config-" + name + ".gguf")).string();
        w.write_file(dst);
        return dst;
    };
    const ModelConfig ok = read_model_config(GgufFile::open(edited("moe-ok", 16, 4)));
    CHECK(ok.n_expert == 16);
    CHECK(ok.n_expert_used == 4);
    CHECK(ok.n_ff_exp == 96);
    CHECK(ok.n_ff_shexp == 0);
    CHECK(ok.expert_weights_norm);
    const std::string too_many = config_error(edited("moe-used", 16, 17));
    CHECK(too_many.find("qwen3moe.expert_used_count = 17 is out of range (1..16)") != std::string::npos);
    const std::string wrong = config_error(edited("moe-count", 32, 4));
    CHECK(wrong.find("blk.0.ffn_gate_inp.weight") != std::string::npos);
    CHECK(wrong.find("256 x 32") != std::string::npos);
    std::filesystem::remove(src);
}

// qwen3next (a tiny-qwen3next file): its description as llama.cpp's qwen3next reads it (value
// heads grouped by key head, alpha and beta in one ssm_ba, a shared expert, NeoX RoPE over a
// quarter of the head without sections); an ssm_in (the first conversions' fused q/k/v/z) of
// the wrong width, and a file without ssm_ba, are refused by tensor name.
TEST_CASE("qwen3next: its layout is read, a wrong ssm_in or a missing ssm_ba refused by name") {
    const auto tmp = std::filesystem::temp_directory_path();
    const std::string src = (tmp / "ember-config-qwen3next.gguf").string();
    write_synthetic_model(src, synthetic_shape("tiny-qwen3next"), "F32");
    const ModelConfig c = read_model_config(GgufFile::open(src));
    CHECK(c.arch == "qwen3next");
    CHECK(c.ssm_grouped_heads);
    CHECK(c.ssm_ba);
    CHECK(c.shared_expert);
    CHECK(c.n_ff_shexp == 128);
    CHECK(c.rope_neox);
    CHECK(c.n_rot == 16);
    CHECK(c.ssm_n_k_heads == 2);
    CHECK(c.ssm_n_v_heads == 4);
    CHECK(!c.ssm_in_fused);
    int recurrent = 0;
    for (const LayerShape& l : c.layers) recurrent += l.recurrent ? 1 : 0;
    CHECK(recurrent == 6);
    // The same file with blk.0's `from` tensor stored under the name `to`.
    const auto renamed = [&](const std::string& from, const std::string& to) {
        const GgufFile f = GgufFile::open(src);
        GgufWriter w;
        for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
        for (const auto& t : f.tensors())
            w.add_tensor(t.name == from ? to : t.name, t.type, t.dims,
                         std::vector<uint8_t>(t.data, t.data + t.n_bytes));
        const std::string dst = (tmp / ("ember-config-qwen3next-" + to + ".gguf")).string();
        w.write_file(dst);
        return dst;
    };
    const std::string legacy = renamed("blk.0.attn_qkv.weight", "blk.0.ssm_in.weight");
    CHECK(contains(config_error(legacy),
                   "tensor 'blk.0.ssm_in.weight' has shape 256 x 256, but the metadata implies "
                   "256 x 384"));
    const std::string no_ba = renamed("blk.0.ssm_ba.weight", "blk.0.ssm_alpha.weight");
    CHECK(contains(config_error(no_ba), "blk.0.ssm_ba.weight"));
    SyntheticShape fused = synthetic_shape("tiny-qwen3next");
    fused.qwen35.fused_qkvz = true;  // the first conversions' layout (test_arch_peer runs it)
    const std::string fused_path = (tmp / "ember-config-qwen3next-fused.gguf").string();
    write_synthetic_model(fused_path, fused, "F32");
    CHECK(read_model_config(GgufFile::open(fused_path)).ssm_in_fused);
    for (const std::string& p : {src, legacy, no_ba, fused_path}) std::filesystem::remove(p);
}
