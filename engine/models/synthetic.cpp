#include "engine/models/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/common/error.h"
#include "engine/gguf/gguf_split.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/quant/quant_plan.h"
#include "kernels/common/fp16.h"

namespace ember {

namespace {

// gemma4's shapes (the models' published text configs): E2B and E4B with per-layer
// embeddings and KV sharing, 31B with 4 KV heads on its global layers and no V projection
// there. tiny-gemma4 keeps every feature at test size: two head sizes and KV head counts,
// wider FFNs on the sharing layers, its last own-KV layers a sliding one then a global one
// (as in the real models, which llama.cpp's KV reuse assumes), and a soft-cap small enough
// to bend logits of order 1.
SyntheticShape gemma4_shape(const std::string& name) {
    SyntheticShape s;
    s.name = name, s.arch = "gemma4", s.tied_embeddings = true;
    s.n_vocab = 262144, s.head_dim = 512, s.gemma4.head_dim_swa = 256;
    if (name == "tiny-gemma4") {
        s.n_embd = 256, s.n_layers = 9, s.n_heads = 4, s.n_kv_heads = 2, s.n_ff = 512, s.n_vocab = 1024;
        s.n_ctx = 2048, s.head_dim = 128, s.sliding_window = 4;
        s.gemma4 = {64, 1, 1024, 3, 3, 32, true, 3.0f};
    } else if (name == "gemma4-e2b") {
        s.n_embd = 1536, s.n_layers = 35, s.n_heads = 8, s.n_kv_heads = 1, s.n_ff = 6144, s.n_ctx = 131072;
        s.sliding_window = 512;
        s.gemma4 = {256, 1, 12288, 5, 20, 256, false, 30.0f};
    } else if (name == "gemma4-e4b") {
        s.n_embd = 2560, s.n_layers = 42, s.n_heads = 8, s.n_kv_heads = 2, s.n_ff = 10240, s.n_ctx = 131072;
        s.sliding_window = 512;
        s.gemma4 = {256, 2, 10240, 6, 18, 256, false, 30.0f};
    } else if (name == "tiny-gemma4moe") {  // 16 experts of 96 (fused gate+up rows 192), 4 used
        s.n_embd = 256, s.n_layers = 6, s.n_heads = 4, s.n_kv_heads = 2, s.n_ff = 512, s.n_vocab = 1024;
        s.n_ctx = 2048, s.head_dim = 128, s.sliding_window = 4;
        s.gemma4 = {64, 1, 512, 6, 0, 0, true, 3.0f};
        s.n_expert = 16, s.n_expert_used = 4, s.n_ff_exp = 96;
    } else if (name == "gemma4-26b-a4b" || name == "gemma4-26b-a4b-mini") {
        // google/gemma-4-26B-A4B's text config: hidden 2816, 30 layers (25 sliding of 16
        // heads x 256 with 8 KV heads, 5 global of 16 x 512 with 2 KV heads and K = V),
        // window 1024, dense FFN 2112, 128 experts of 704, 8 used, no per-layer embeddings,
        // no KV sharing (the parameter count checks it: 25.2B total, 3.8B active).
        s.n_embd = 2816, s.n_layers = name == "gemma4-26b-a4b" ? 30 : 6, s.n_heads = 16, s.n_kv_heads = 8;
        s.n_ff = 2112, s.n_ctx = 262144, s.sliding_window = 1024;
        s.gemma4 = {256, 2, 2112, 6, 0, 0, true, 30.0f};
        s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 704;
    } else {  // gemma4-31b
        s.n_embd = 5376, s.n_layers = 60, s.n_heads = 32, s.n_kv_heads = 16, s.n_ff = 21504, s.n_ctx = 262144;
        s.sliding_window = 1024;
        s.gemma4 = {256, 4, 21504, 6, 0, 0, true, 30.0f};
    }
    return s;
}

// Qwen3-30B-A3B (config.json: 48 layers, hidden 2048, 32 heads of 128, 4 KV heads, 128
// experts of 768, 8 used, intermediate 6144, vocabulary 151936, untied) and scaled copies.
SyntheticShape qwen3moe_shape(const std::string& name) {
    SyntheticShape s{name, 2048, 48, 32, 4, 6144, 151936, 40960, false, "qwen3moe", 128};
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 768;
    if (name == "qwen3-30b-a3b-mini") s.n_layers = 8;  // every layer as large, 3.5 GB in Q4_K_M
    if (name == "tiny-qwen3moe") {  // 16 experts of 96 rows (3 panels each), down rows of 96: K-quant fallbacks
        s = {name, 256, 2, 4, 2, 512, 1024, 2048, true, "qwen3moe", 64};
        s.n_expert = 16;
        s.n_expert_used = 4;
        s.n_ff_exp = 96;
    }
    return s;
}

// gpt-oss-20b (config.json: 24 layers, hidden 2880, 64 heads of 64, 8 KV heads, 32 experts
// of 2880, 4 used, sliding window 128, vocabulary 201088, untied) and a tiny copy whose q_dim
// (8 x 64) differs from n_embd as the real one's does; every width a multiple of MXFP4's 32.
SyntheticShape gpt_oss_shape(const std::string& name) {
    SyntheticShape s{name, 2880, 24, 64, 8, 2880, 201088, 131072, false, "gpt-oss", 64, 128};
    s.n_expert = 32, s.n_expert_used = 4, s.n_ff_exp = 2880;
    if (name == "tiny-gpt-oss") {
        s = {name, 256, 4, 8, 2, 128, 1024, 4096, false, "gpt-oss", 64, 8};
        s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 128;
    }
    return s;
}

// tiny-qwen35: Qwen3.5's layout at test size. Its full-attention heads rotate a quarter of
// their dims (as the real 256-dim heads rotate 64); more value than key heads in the linear
// layers (as the real models' 16 key and 32 value heads, 0.8B to 9B).
// tiny-qwen35moe: the same with 16 experts of 96, 4 used, and a shared expert of 128 (the
// real 35B-A3B: 256 experts of 512, 8 used, a shared one of 512).
// tiny-qwen3next: tiny-qwen35moe's shape as qwen3next (grouped value heads, ssm_ba, no rope
// sections). qwen3-next-80b-a3b: Qwen3-Next-80B-A3B's config.json (48 layers, hidden 2048,
// 16 heads of 256 with 2 KV heads rotating 64 dims, linear attention of 16 key and 32 value
// heads of 128, 512 experts of 512, 10 used, a shared expert of 512, vocabulary 151936,
// untied); "-mini" keeps 4 of its layers (one full-attention period).
// qwen3.5-4b (config.json: 32 layers, hidden 2560, full attention every 4th layer with 16
// heads of 256 and 4 KV heads, a quarter of each head rotated; linear attention with 16 key
// and 32 value heads of 128, a convolution of 4; FFN 9216; vocabulary 248320, tied): 4.2 B
// parameters. qwen3.5-35b-a3b (40 layers, hidden 2048, 16 heads of 256 and 2 KV heads; the
// same linear heads; 256 experts of 512, 8 used, a shared expert of 512; untied): 35 B.
// qwen3.5-35b-a3b-mini keeps 8 of its 40 layers (two full-attention periods, every layer as
// large): 7.75 B parameters, 4.45 GiB in Q4_K_M, small enough for two engines' page cache here.
SyntheticShape qwen35_shape(const std::string& name) {
    if (name == "qwen3-next-80b-a3b" || name == "qwen3-next-80b-a3b-mini") {
        SyntheticShape s{name, 2048, 48, 16, 2, 5120, 151936, 262144, false, "qwen3next", 256};
        s.qwen35 = {16, 32, 128, 4, 4, 64, 512};
        s.n_expert = 512, s.n_expert_used = 10, s.n_ff_exp = 512;
        if (name == "qwen3-next-80b-a3b-mini") s.n_layers = 4;
        return s;
    }
    SyntheticShape s{name, 256, 8, 4, 2, 512, 1024, 4096, true, "qwen35", 64};
    s.qwen35 = {2, 4, 32, 4, 4, 16};
    if (name == "tiny-qwen35moe" || name == "tiny-qwen3next") {
        s.arch = name == "tiny-qwen3next" ? "qwen3next" : "qwen35moe";
        s.n_expert = 16, s.n_expert_used = 4, s.n_ff_exp = 96, s.qwen35.n_ff_shexp = 128;
    } else if (name == "qwen3.5-4b") {
        s = {name, 2560, 32, 16, 4, 9216, 248320, 262144, true, "qwen35", 256};
        s.qwen35 = {16, 32, 128, 4, 4, 64};
    } else if (name == "qwen3.5-35b-a3b" || name == "qwen3.5-35b-a3b-mini") {
        s = {name, 2048, name == "qwen3.5-35b-a3b" ? 40 : 8, 16, 2, 512, 248320, 262144, false, "qwen35moe", 256};
        s.qwen35 = {16, 32, 128, 4, 4, 64, 512};
        s.n_expert = 256, s.n_expert_used = 8, s.n_ff_exp = 512;
    }
    return s;
}

}  // namespace

SyntheticShape synthetic_shape(const std::string& name) {
    if (name == "tiny-qwen35" || name == "tiny-qwen35moe" || name == "tiny-qwen3next" || name == "qwen3-next-80b-a3b" ||
        name == "qwen3-next-80b-a3b-mini" || name == "qwen3.5-4b" || name == "qwen3.5-35b-a3b" ||
        name == "qwen3.5-35b-a3b-mini")
        return qwen35_shape(name);
    if (name == "tiny-gemma4" || name == "gemma4-e2b" || name == "gemma4-e4b" || name == "gemma4-31b" ||
        name == "tiny-gemma4moe" || name == "gemma4-26b-a4b" || name == "gemma4-26b-a4b-mini")
        return gemma4_shape(name);
    if (name == "tiny") return {name, 256, 2, 8, 2, 512, 1024, 2048, true};
    if (name == "tiny-qwen2") return {name, 256, 2, 8, 2, 512, 1024, 2048, true, "qwen2"};
    if (name == "tiny-qwen3") return {name, 256, 2, 4, 2, 512, 1024, 2048, true, "qwen3", 128};
    if (name == "tiny-qwen3moe" || name == "qwen3-30b-a3b" || name == "qwen3-30b-a3b-mini") return qwen3moe_shape(name);
    if (name == "tiny-gpt-oss" || name == "gpt-oss-20b") return gpt_oss_shape(name);
    if (name == "tiny-gemma3") return {name, 256, 6, 4, 1, 512, 1024, 2048, true, "gemma3", 64, 4};
    if (name == "llama-3.2-1b") return {name, 2048, 16, 32, 8, 8192, 128256, 131072, true};
    if (name == "llama-3-8b") return {name, 4096, 32, 32, 8, 14336, 128256, 8192, false};
    if (name == "llama-3-70b") return {name, 8192, 80, 64, 8, 28672, 128256, 8192, false};
    if (name == "smollm2-135m") return {name, 576, 30, 9, 3, 1536, 49152, 8192, true};
    if (name == "gemma3-270m") return {name, 640, 18, 4, 1, 2048, 262144, 32768, true, "gemma3", 256, 512};
    if (name == "qwen2.5-0.5b") return {name, 896, 24, 14, 2, 4864, 151936, 32768, true, "qwen2"};
    if (name == "qwen3-0.6b") return {name, 1024, 28, 16, 8, 3072, 151936, 40960, true, "qwen3", 128};
    // Qwen3-4B (36 layers, hidden 2560, 32 heads of 128, 8 KV heads, FFN 9728, tied): the
    // full-attention model of Qwen3.5-4B's size, for memory per sequence beside it.
    if (name == "qwen3-4b") return {name, 2560, 36, 32, 8, 9728, 151936, 40960, true, "qwen3", 128};
    std::string known;
    for (const auto& n : synthetic_shape_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown synthetic shape '" + name + "' (known: " + known + ")");
}

std::vector<std::string> synthetic_shape_names() {
    return {"tiny",           "tiny-qwen2",         "tiny-qwen3",           "tiny-qwen3moe",
            "tiny-gemma3",    "tiny-gemma4",        "llama-3.2-1b",         "llama-3-8b",
            "smollm2-135m",   "gemma3-270m",        "qwen2.5-0.5b",         "qwen3-0.6b",
            "qwen3-30b-a3b",  "qwen3-30b-a3b-mini", "llama-3-70b",          "gemma4-e2b",
            "gemma4-e4b",     "gemma4-31b",         "tiny-gpt-oss",         "gpt-oss-20b",
            "tiny-gemma4moe", "gemma4-26b-a4b",     "gemma4-26b-a4b-mini",  "tiny-qwen35",
            "tiny-qwen35moe", "tiny-qwen3next",     "qwen3-next-80b-a3b",   "qwen3-next-80b-a3b-mini",
            "qwen3.5-4b",     "qwen3.5-35b-a3b",    "qwen3.5-35b-a3b-mini", "qwen3-4b"};
}

namespace {

uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void put_f16(uint8_t* p, float v) {
    const uint16_t h = f32_to_fp16(v);
    std::memcpy(p, &h, 2);
}

// Random but well-formed blocks: random quant bits, with every scale field set to a small
// finite value so activations stay bounded (~N(0, 1) per layer output).
void fill_random(DType type, uint8_t* dst, size_t n, uint64_t seed, float scale) {
    for (size_t i = 0; i < n; i += 8) {
        const uint64_t r = splitmix(seed);
        std::memcpy(dst + i, &r, std::min<size_t>(8, n - i));
    }
    const auto info = *dtype_info(static_cast<uint32_t>(type));
    const size_t bb = info.block_bytes;
    switch (type) {
        case DType::F32:
            for (size_t i = 0; i + 4 <= n; i += 4) {
                const float v = (static_cast<float>(dst[i] % 200) / 100.0f - 1.0f) * scale;
                std::memcpy(dst + i, &v, 4);
            }
            break;
        case DType::F16:
            for (size_t i = 0; i + 2 <= n; i += 2)
                put_f16(dst + i, (static_cast<float>(dst[i] % 200) / 100.0f - 1.0f) * scale);
            break;
        case DType::BF16:
            for (size_t i = 0; i + 2 <= n; i += 2) {
                const uint16_t b = f32_to_bf16((static_cast<float>(dst[i] % 200) / 100.0f - 1.0f) * scale);
                std::memcpy(dst + i, &b, 2);
            }
            break;
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q8_0:
            for (size_t b = 0; b < n; b += bb) put_f16(dst + b, scale / 8);
            break;
        case DType::Q4_1:
        case DType::Q5_1:
            for (size_t b = 0; b < n; b += bb) {
                put_f16(dst + b, scale / 8);
                put_f16(dst + b + 2, -scale);
            }
            break;
        case DType::Q4_K:
        case DType::Q5_K:
            for (size_t b = 0; b < n; b += bb) {
                put_f16(dst + b, scale / 256);
                put_f16(dst + b + 2, scale / 64);
            }
            break;
        case DType::MXFP4:  // random codes (mean |value| ~ 4.5 d): d = scale / 4 as a power of two
            for (size_t b = 0; b < n; b += bb)
                dst[b] = static_cast<uint8_t>(128 + static_cast<int>(std::lround(std::log2(scale / 4))));
            break;
        case DType::Q6_K:
            for (size_t b = 0; b < n; b += bb) {
                for (int s = 0; s < 16; ++s) dst[b + 192 + s] = static_cast<uint8_t>(dst[b + 192 + s] % 32);
                put_f16(dst + b + 208, scale / 512);
            }
            break;
        default:
            throw Error("synthetic models cannot use type " + std::string(info.name));
    }
}

void add_vocab(GgufWriter& w, int32_t n_vocab) {
    std::vector<GgufValue> tokens, scores, types;
    auto add = [&](std::string text, float score, int32_t type) {
        tokens.push_back(GgufValue::str(std::move(text)));
        scores.push_back(GgufValue::f32(score));
        types.push_back(GgufValue::i32(type));
    };
    add("<unk>", 0, 2);
    add("<s>", 0, 3);
    add("</s>", 0, 3);
    char buf[16];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        add(buf, 0, 6);
    }
    for (int32_t i = static_cast<int32_t>(tokens.size()); i < n_vocab; ++i)
        add("\xE2\x96\x81t" + std::to_string(i), -static_cast<float>(i), 1);
    w.set("tokenizer.ggml.model", GgufValue::str("llama"));
    w.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::STRING, std::move(tokens)));
    w.set("tokenizer.ggml.scores", GgufValue::array(GgufType::F32, std::move(scores)));
    w.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
    w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
    w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
    w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
}

}  // namespace

namespace {

// Adds a model's tensors to a writer: matrices of the type `ember quantize` would choose
// (quant_plan.h) with random blocks, and F32 norm weights.
struct TensorAdder {
    GgufWriter& w;
    const QuantPlanner& planner;
    uint64_t seed;

    // n_mats > 1: a 3-D tensor of n_mats matrices (the experts).
    void add(const std::string& name, int64_t cols, int64_t rows, float scale, int64_t n_mats = 1) {
        std::vector<uint64_t> dims{static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
        if (n_mats > 1) dims.push_back(static_cast<uint64_t>(n_mats));
        const DType type = planner.choose({name, dims, DType::F32}).type;
        const uint64_t s = splitmix(seed);
        w.add_tensor_lazy(name, type, dims,
                          [type, s, scale](uint8_t* dst, size_t n) { fill_random(type, dst, n, s, scale); });
    }
    // add(), with the rows of successive groups of `group_rows` (heads) at 0.3, 1 and 2.5
    // times the scale in F32 files (other types: one scale): heads of unequal magnitude.
    void add_uneven(const std::string& name, int64_t cols, int64_t rows, float scale, int64_t group_rows) {
        const std::vector<uint64_t> dims{static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
        const DType type = planner.choose({name, dims, DType::F32}).type;
        const uint64_t s = splitmix(seed);
        w.add_tensor_lazy(name, type, dims, [=](uint8_t* dst, size_t n) {
            fill_random(type, dst, n, s, scale);
            if (type != DType::F32) return;
            constexpr float kGains[] = {0.3f, 1.0f, 2.5f};
            auto* v = reinterpret_cast<float*>(dst);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < cols; ++c) v[r * cols + c] *= kGains[(r / group_rows) % 3];
        });
    }
    void add_values(const std::string& name, const std::vector<float>& v) {
        std::vector<uint8_t> bytes(v.size() * 4);
        std::memcpy(bytes.data(), v.data(), bytes.size());
        w.add_tensor(name, DType::F32, {static_cast<uint64_t>(v.size())}, std::move(bytes));
    }
    // F32 values in [lo, hi) whatever the scheme (llama.cpp keeps these tensors F32).
    void add_uniform(const std::string& name, std::vector<uint64_t> dims, float lo, float hi) {
        uint64_t n = 1, s = splitmix(seed);
        for (uint64_t d : dims) n *= d;
        std::vector<uint8_t> bytes(n * 4);
        for (uint64_t i = 0; i < n; ++i) {
            const float v = lo + (hi - lo) * static_cast<float>(splitmix(s) >> 40) / 16777216.0f;
            std::memcpy(&bytes[i * 4], &v, 4);
        }
        w.add_tensor(name, DType::F32, std::move(dims), std::move(bytes));
    }
    void add_norm(const std::string& name, int64_t n, float value = 1.0f) {
        add_values(name, std::vector<float>(static_cast<size_t>(n), value));
    }
    // gain x (1 + a random value in [-0.25, 0.25)) per element.
    void add_scaled_norm(const std::string& name, int64_t n, float gain) {
        std::vector<float> v(static_cast<size_t>(n));
        uint64_t s = splitmix(seed);
        for (float& x : v) x = gain * (1.0f + (static_cast<float>(splitmix(s) >> 40) / 16777216.0f - 0.5f) * 0.5f);
        add_values(name, v);
    }
};

// The metadata every synthetic file has: names, sizes, the vocabulary.
void add_common_keys(GgufWriter& w, const SyntheticShape& sh, const QuantScheme& scheme,
                     const std::string& scheme_name) {
    const std::string a = sh.arch + ".";
    auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
    w.set("general.architecture", GgufValue::str(sh.arch));
    w.set("general.name", GgufValue::str("synthetic " + sh.name + " " + scheme_name));
    w.set("general.file_type", GgufValue::u32(scheme.file_type));
    w.set(a + "context_length", u32(sh.n_ctx));
    w.set(a + "embedding_length", u32(sh.n_embd));
    w.set(a + "block_count", u32(sh.n_layers));
    w.set(a + "attention.head_count", u32(sh.n_heads));
    w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(1e-6f));
    add_vocab(w, sh.n_vocab);
}

// gemma4's expert branch of one layer (llama.cpp's tensor names): the router and its input
// scale, the experts (gate and up fused), each expert's output scale, the branch's norms.
void add_gemma4_experts(TensorAdder& t, const SyntheticShape& sh, const std::string& b) {
    const int64_t d = sh.n_embd, E = sh.n_expert, ff = sh.n_ff_exp;
    const float ws = 1.0f / std::sqrt(static_cast<float>(d));
    t.add(b + "ffn_gate_inp.weight", d, E, 1.0f);          // its input is scaled by 1/sqrt(d) already
    t.add_scaled_norm(b + "ffn_gate_inp.scale", d, 4.0f);  // logits of order 1: routing matters
    t.add_scaled_norm(b + "pre_ffw_norm_2.weight", d, 1.0f);
    if (sh.gemma4.split_gate_up) {
        t.add(b + "ffn_gate_exps.weight", d, ff, ws, E);
        t.add(b + "ffn_up_exps.weight", d, ff, ws, E);
    } else {
        t.add(b + "ffn_gate_up_exps.weight", d, 2 * ff, ws, E);
    }
    t.add(b + "ffn_down_exps.weight", ff, d, 1.0f / std::sqrt(static_cast<float>(ff)), E);
    // Per-expert scales 1/4 .. 4: post_ffw_norm_2 undoes a common factor, so only their
    // spread between a token's experts shows.
    std::vector<float> scales(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) scales[static_cast<size_t>(e)] = 0.25f * static_cast<float>(1 << ((e * 3) % 5));
    t.add_values(b + "ffn_down_exps.scale", scales);
    t.add_scaled_norm(b + "post_ffw_norm_1.weight", d, 1.0f);
    t.add_scaled_norm(b + "post_ffw_norm_2.weight", d, 1.0f);
}

// gemma4 (SyntheticShape::Gemma4), with the keys and tensor names llama.cpp reads.
GgufWriter gemma4_writer(const SyntheticShape& sh, const std::string& scheme_name, uint64_t seed) {
    const SyntheticShape::Gemma4& g = sh.gemma4;
    const QuantScheme scheme = quant_scheme(scheme_name);
    const QuantPlanner planner(scheme, sh.n_layers, sh.tied_embeddings);
    const std::string a = "gemma4.";
    auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
    const int32_t L = sh.n_layers, first_shared = L - g.shared_kv_layers;
    auto global = [&](int32_t i) { return (i + 1) % g.global_period == 0; };
    auto ff = [&](int32_t i) { return i >= first_shared ? g.n_ff_shared : sh.n_ff; };
    auto kv_heads = [&](int32_t i) { return global(i) ? g.n_kv_heads_global : sh.n_kv_heads; };
    auto per_layer = [&](auto value) {
        std::vector<GgufValue> v;
        for (int32_t i = 0; i < L; ++i) v.push_back(value(i));
        return v;
    };
    GgufWriter w;
    add_common_keys(w, sh, scheme, scheme_name);
    if (g.n_ff_shared != sh.n_ff && g.shared_kv_layers > 0)
        w.set(a + "feed_forward_length",
              GgufValue::array(GgufType::U32, per_layer([&](int32_t i) { return u32(ff(i)); })));
    else w.set(a + "feed_forward_length", u32(sh.n_ff));
    if (g.n_kv_heads_global != sh.n_kv_heads)
        w.set(a + "attention.head_count_kv",
              GgufValue::array(GgufType::U32, per_layer([&](int32_t i) { return u32(kv_heads(i)); })));
    else w.set(a + "attention.head_count_kv", u32(sh.n_kv_heads));
    w.set(a + "attention.key_length", u32(sh.head_dim));
    w.set(a + "attention.value_length", u32(sh.head_dim));
    w.set(a + "attention.key_length_swa", u32(g.head_dim_swa));
    w.set(a + "attention.value_length_swa", u32(g.head_dim_swa));
    w.set(a + "rope.dimension_count", u32(sh.head_dim));
    w.set(a + "rope.dimension_count_swa", u32(g.head_dim_swa));
    w.set(a + "rope.freq_base", GgufValue::f32(1000000.0f));
    w.set(a + "rope.freq_base_swa", GgufValue::f32(10000.0f));
    w.set(a + "attention.sliding_window", u32(sh.sliding_window));
    w.set(a + "attention.sliding_window_pattern",
          GgufValue::array(GgufType::BOOL, per_layer([&](int32_t i) { return GgufValue::boolean(!global(i)); })));
    w.set(a + "attention.shared_kv_layers", u32(g.shared_kv_layers));
    w.set(a + "embedding_length_per_layer_input", u32(g.n_embd_per_layer));
    w.set(a + "final_logit_softcapping", GgufValue::f32(g.final_softcap));
    if (sh.n_expert > 0) {
        w.set(a + "expert_count", u32(sh.n_expert));
        w.set(a + "expert_used_count", u32(sh.n_expert_used));
        w.set(a + "expert_feed_forward_length", u32(sh.n_ff_exp));
    }

    TensorAdder t{w, planner, seed};
    const int64_t d = sh.n_embd, P = g.n_embd_per_layer;
    const float ws = 1.0f / std::sqrt(static_cast<float>(d));
    t.add("token_embd.weight", d, sh.n_vocab, 1.0f);
    // Proportional RoPE on the global layers: a quarter of the pairs rotate, the rest are
    // "divided by 1e30" (llama.cpp's converter writes the same factors).
    std::vector<float> factors(static_cast<size_t>(sh.head_dim / 2), 1e30f);
    std::fill(factors.begin(), factors.begin() + sh.head_dim / 8, 1.0f);
    t.add_values("rope_freqs.weight", factors);
    if (P > 0) {
        t.add("per_layer_token_embd.weight", L * P, sh.n_vocab, 1.0f);
        t.add("per_layer_model_proj.weight", d, L * P, ws);
        t.add_scaled_norm("per_layer_proj_norm.weight", P, 1.0f);
    }
    for (int32_t i = 0; i < L; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        const int64_t hd = global(i) ? sh.head_dim : g.head_dim_swa;
        const int64_t q = sh.n_heads * hd, kv = kv_heads(i) * hd;
        t.add_norm(b + "attn_norm.weight", d);
        t.add(b + "attn_q.weight", d, q, ws * sh.qk_gain);
        t.add_scaled_norm(b + "attn_q_norm.weight", hd, sh.qk_gain);
        if (i < first_shared) {  // the sharing layers have no K/V of their own
            t.add(b + "attn_k.weight", d, kv, ws * sh.qk_gain);
            // V heads of unequal size: V's norm (it has no weight) evens them out.
            if (!(g.k_eq_v && global(i))) t.add_uneven(b + "attn_v.weight", d, kv, ws, hd);
            t.add_scaled_norm(b + "attn_k_norm.weight", hd, sh.qk_gain);
        }
        t.add(b + "attn_output.weight", q, d, ws * sh.attn_gain);
        t.add_scaled_norm(b + "post_attention_norm.weight", d, 1.0f);
        t.add_norm(b + "ffn_norm.weight", d);
        t.add(b + "ffn_gate.weight", d, ff(i), ws);
        t.add(b + "ffn_up.weight", d, ff(i), ws);
        t.add(b + "ffn_down.weight", ff(i), d, 1.0f / std::sqrt(static_cast<float>(ff(i))));
        t.add_scaled_norm(b + "post_ffw_norm.weight", d, 1.0f);
        if (sh.n_expert > 0) add_gemma4_experts(t, sh, b);
        if (P > 0) {
            t.add(b + "inp_gate.weight", d, P, ws);
            t.add(b + "proj.weight", P, d, 1.0f / std::sqrt(static_cast<float>(P)));
            t.add_scaled_norm(b + "post_norm.weight", d, 1.0f);
        }
        t.add_values(b + "layer_output_scale.weight", {i % 2 ? 0.75f : 1.25f});
    }
    t.add_norm("output_norm.weight", d, sh.output_norm);
    if (!sh.tied_embeddings) t.add("output.weight", d, sh.n_vocab, ws);
    return w;
}

// qwen35moe's FFN: the router, the routed experts, the shared expert and its gate (logits
// x . w of order 1: its sigmoid varies per token).
void add_qwen35_experts(TensorAdder& t, const SyntheticShape& sh, const std::string& b) {
    const int64_t d = sh.n_embd, E = sh.n_expert, ff = sh.n_ff_exp, sff = sh.qwen35.n_ff_shexp;
    const float ws = 1.0f / std::sqrt(static_cast<float>(d));
    t.add(b + "ffn_gate_inp.weight", d, E, ws);
    t.add(b + "ffn_gate_exps.weight", d, ff, ws, E);
    t.add(b + "ffn_up_exps.weight", d, ff, ws, E);
    t.add(b + "ffn_down_exps.weight", ff, d, 1.0f / std::sqrt(static_cast<float>(ff)), E);
    t.add_uniform(b + "ffn_gate_inp_shexp.weight", {static_cast<uint64_t>(d)}, -2 * ws, 2 * ws);
    t.add(b + "ffn_gate_shexp.weight", d, sff, ws);
    t.add(b + "ffn_up_shexp.weight", d, sff, ws);
    t.add(b + "ffn_down_shexp.weight", sff, d, 1.0f / std::sqrt(static_cast<float>(sff)));
}

// qwen35 (SyntheticShape::Qwen35) with llama.cpp's keys and tensor names. The decays are
// slow (exp(softplus(alpha + dt_bias) * a) near 0.9 per token), so that the recurrent state
// carries tokens far back, and the convolution's weights are of order 1: both states matter.
// qwen3next: always experts, alpha and beta as one ssm_ba, no rope.dimension_sections.
GgufWriter qwen35_writer(const SyntheticShape& sh, const std::string& scheme_name, uint64_t seed) {
    const SyntheticShape::Qwen35& r = sh.qwen35;
    const QuantScheme scheme = quant_scheme(scheme_name);
    const QuantPlanner planner(scheme, sh.n_layers, sh.tied_embeddings);
    const std::string a = sh.arch + ".";
    const bool next = sh.arch == "qwen3next", moe = sh.arch == "qwen35moe" || next;
    auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
    GgufWriter w;
    add_common_keys(w, sh, scheme, scheme_name);
    const int64_t d = sh.n_embd, hd = sh.head_dim, q = int64_t{sh.n_heads} * hd, kv = int64_t{sh.n_kv_heads} * hd;
    const int64_t key = int64_t{r.n_k_heads} * r.ssm_head_dim, value = int64_t{r.n_v_heads} * r.ssm_head_dim;
    const int64_t conv = 2 * key + value;
    w.set(a + "feed_forward_length", u32(sh.n_ff));
    w.set(a + "attention.head_count_kv", u32(sh.n_kv_heads));
    w.set(a + "attention.key_length", u32(hd));
    w.set(a + "attention.value_length", u32(hd));
    w.set(a + "rope.dimension_count", u32(r.n_rot));
    w.set(a + "rope.freq_base", GgufValue::f32(10000000.0f));
    // Qwen3.5's [11, 11, 10, 0] of 32 pairs, scaled to n_rot / 2 (text uses the first three alike).
    const int32_t pairs = r.n_rot / 2, s0 = (pairs + 2) / 3, s2 = pairs - 2 * s0;
    if (!next)
        w.set(a + "rope.dimension_sections", GgufValue::array(GgufType::I32, {GgufValue::i32(s0), GgufValue::i32(s0),
                                                                              GgufValue::i32(s2), GgufValue::i32(0)}));
    w.set(a + "full_attention_interval", u32(r.full_attention_interval));
    w.set(a + "ssm.conv_kernel", u32(r.conv_kernel));
    w.set(a + "ssm.state_size", u32(r.ssm_head_dim));
    w.set(a + "ssm.group_count", u32(r.n_k_heads));
    w.set(a + "ssm.time_step_rank", u32(r.n_v_heads));
    w.set(a + "ssm.inner_size", u32(value));
    if (moe) {
        w.set(a + "expert_count", u32(sh.n_expert));
        w.set(a + "expert_used_count", u32(sh.n_expert_used));
        w.set(a + "expert_feed_forward_length", u32(sh.n_ff_exp));
        w.set(a + "expert_shared_feed_forward_length", u32(r.n_ff_shexp));
    }

    TensorAdder t{w, planner, seed};
    const float ws = 1.0f / std::sqrt(static_cast<float>(d));
    t.add("token_embd.weight", d, sh.n_vocab, 1.0f);
    for (int32_t i = 0; i < sh.n_layers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        t.add_norm(b + "attn_norm.weight", d);
        if ((i + 1) % r.full_attention_interval == 0) {  // q and its gate, per head
            t.add(b + "attn_q.weight", d, 2 * q, ws * sh.qk_gain);
            t.add(b + "attn_k.weight", d, kv, ws * sh.qk_gain);
            t.add(b + "attn_v.weight", d, kv, ws);
            t.add_scaled_norm(b + "attn_q_norm.weight", hd, sh.qk_gain);
            t.add_scaled_norm(b + "attn_k_norm.weight", hd, sh.qk_gain);
            t.add(b + "attn_output.weight", q, d, ws * sh.attn_gain);
        } else {
            if (r.fused_qkvz) {
                t.add(b + "ssm_in.weight", d, conv + value, ws);
            } else {
                t.add(b + "attn_qkv.weight", d, conv, ws);
                t.add(b + "attn_gate.weight", d, value, ws);
            }
            t.add_uniform(b + "ssm_conv1d.weight", {static_cast<uint64_t>(r.conv_kernel), static_cast<uint64_t>(conv)},
                          -1.0f, 1.0f);
            t.add_uniform(b + "ssm_dt.bias", {static_cast<uint64_t>(r.n_v_heads)}, -3.0f, -2.0f);
            t.add_uniform(b + "ssm_a", {static_cast<uint64_t>(r.n_v_heads)}, -0.3f, -0.05f);
            if (next) {
                t.add(b + "ssm_ba.weight", d, 2 * int64_t{r.n_v_heads}, ws);
            } else {
                t.add(b + "ssm_beta.weight", d, r.n_v_heads, ws);
                t.add(b + "ssm_alpha.weight", d, r.n_v_heads, ws);
            }
            t.add_scaled_norm(b + "ssm_norm.weight", r.ssm_head_dim, 1.0f);
            t.add(b + "ssm_out.weight", value, d, ws * sh.attn_gain);
        }
        t.add_norm(b + "post_attention_norm.weight", d);
        if (moe) {
            add_qwen35_experts(t, sh, b);
            continue;
        }
        t.add(b + "ffn_gate.weight", d, sh.n_ff, ws);
        t.add(b + "ffn_up.weight", d, sh.n_ff, ws);
        t.add(b + "ffn_down.weight", sh.n_ff, d, 1.0f / std::sqrt(static_cast<float>(sh.n_ff)));
    }
    t.add_norm("output_norm.weight", d, sh.output_norm);
    if (!sh.tied_embeddings) t.add("output.weight", d, sh.n_vocab, ws);
    return w;
}

}  // namespace

namespace {

GgufWriter synthetic_writer(const SyntheticShape& sh, const std::string& scheme_name, uint64_t seed) {
    const QuantScheme scheme = quant_scheme(scheme_name);
    const QuantPlanner planner(scheme, sh.n_layers, sh.tied_embeddings);
    const int32_t head_dim = sh.head_dim > 0 ? sh.head_dim : sh.n_embd / sh.n_heads;
    const bool gemma = sh.arch == "gemma3", qwen = sh.arch == "qwen2", moe = sh.arch == "qwen3moe",
               qwen3 = sh.arch == "qwen3" || moe, oss = sh.arch == "gpt-oss";
    if (sh.arch == "gemma4") return gemma4_writer(sh, scheme_name, seed);
    if (sh.arch == "qwen35" || sh.arch == "qwen35moe" || sh.arch == "qwen3next")
        return qwen35_writer(sh, scheme_name, seed);
    if (sh.arch != "llama" && !gemma && !qwen && !qwen3 && !oss)
        throw Error("synthetic models: unknown architecture '" + sh.arch + "'");
    const std::string a = sh.arch + ".";
    auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
    GgufWriter w;
    add_common_keys(w, sh, scheme, scheme_name);
    w.set(a + "feed_forward_length", u32(sh.n_ff));
    w.set(a + "attention.head_count_kv", u32(sh.n_kv_heads));
    w.set(a + "attention.key_length", u32(head_dim));
    w.set(a + "attention.value_length", u32(head_dim));
    w.set(a + "rope.dimension_count", u32(head_dim));
    w.set(a + "rope.freq_base", GgufValue::f32(sh.arch == "llama" ? 500000.0f : oss ? 150000.0f : 1000000.0f));
    if (gemma || oss) w.set(a + "attention.sliding_window", u32(sh.sliding_window));
    if (oss) {  // gpt-oss-20b's YaRN: 32x over 4096 tokens
        w.set(a + "rope.scaling.type", GgufValue::str("yarn"));
        w.set(a + "rope.scaling.factor", GgufValue::f32(32.0f));
        w.set(a + "rope.scaling.original_context_length", u32(4096));
    }
    if (moe || oss) {
        w.set(a + "expert_count", u32(sh.n_expert));
        w.set(a + "expert_used_count", u32(sh.n_expert_used));
        w.set(a + "expert_feed_forward_length", u32(sh.n_ff_exp));
    }

    TensorAdder t{w, planner, seed};
    auto add = [&](const std::string& name, int64_t cols, int64_t rows, float scale, int64_t n_mats = 1) {
        t.add(name, cols, rows, scale, n_mats);
    };
    auto add_norm = [&](const std::string& name, int64_t n, float value = 1.0f) { t.add_norm(name, n, value); };
    auto add_scaled_norm = [&](const std::string& name, int64_t n, float gain) { t.add_scaled_norm(name, n, gain); };
    const int64_t d = sh.n_embd, q = int64_t{sh.n_heads} * head_dim, kv = int64_t{sh.n_kv_heads} * head_dim;
    const float ws = 1.0f / std::sqrt(static_cast<float>(d));
    // gpt-oss's layer past q/k/v: output bias, sinks, the FFN norm (stored as
    // post_attention_norm), the router and the experts, each with biases.
    auto add_gpt_oss_layer = [&](const std::string& b) {
        const int64_t e = sh.n_expert, ff = sh.n_ff_exp;
        add(b + "attn_output.bias", d, 1, 0.1f);
        // Sinks near the largest scores (q.k grows as qk_gain^2), so that the share they take
        // differs per head and position: ones far below them change nothing (measured).
        add_scaled_norm(b + "attn_sinks.weight", sh.n_heads, 5.0f * sh.qk_gain * sh.qk_gain);
        add_norm(b + "post_attention_norm.weight", d);
        add(b + "ffn_gate_inp.weight", d, e, ws);
        add(b + "ffn_gate_inp.bias", e, 1, 0.1f);
        add(b + "ffn_gate_exps.weight", d, ff, ws, e);
        add(b + "ffn_gate_exps.bias", ff, e, 0.1f);
        add(b + "ffn_up_exps.weight", d, ff, ws, e);
        add(b + "ffn_up_exps.bias", ff, e, 0.1f);
        add(b + "ffn_down_exps.weight", ff, d, 1.0f / std::sqrt(static_cast<float>(ff)), e);
        add(b + "ffn_down_exps.bias", d, e, 0.1f);
    };
    add("token_embd.weight", d, sh.n_vocab, 1.0f);
    for (int i = 0; i < sh.n_layers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        add_norm(b + "attn_norm.weight", d);
        add(b + "attn_q.weight", d, q, ws * sh.qk_gain);
        add(b + "attn_k.weight", d, kv, ws * sh.qk_gain);
        add(b + "attn_v.weight", d, kv, ws);
        add(b + "attn_output.weight", q, d, ws * sh.attn_gain);
        if (qwen || oss) {
            add(b + "attn_q.bias", q, 1, 0.1f);
            add(b + "attn_k.bias", kv, 1, 0.1f);
            add(b + "attn_v.bias", kv, 1, 0.1f);
        }
        if (qwen3) {  // weights around 1, not 1: a norm whose weight is ignored shows
            add_scaled_norm(b + "attn_q_norm.weight", head_dim, sh.qk_gain);
            add_scaled_norm(b + "attn_k_norm.weight", head_dim, sh.qk_gain);
        }
        if (gemma) {
            add_norm(b + "attn_q_norm.weight", head_dim, sh.qk_gain);
            add_norm(b + "attn_k_norm.weight", head_dim, sh.qk_gain);
            add_norm(b + "post_attention_norm.weight", d);
            add_norm(b + "post_ffw_norm.weight", d);
        }
        if (oss) {
            add_gpt_oss_layer(b);
            continue;
        }
        add_norm(b + "ffn_norm.weight", d);
        if (moe) {
            add(b + "ffn_gate_inp.weight", d, sh.n_expert, ws);
            add(b + "ffn_gate_exps.weight", d, sh.n_ff_exp, ws, sh.n_expert);
            add(b + "ffn_up_exps.weight", d, sh.n_ff_exp, ws, sh.n_expert);
            add(b + "ffn_down_exps.weight", sh.n_ff_exp, d, 1.0f / std::sqrt(static_cast<float>(sh.n_ff_exp)),
                sh.n_expert);
            continue;
        }
        add(b + "ffn_gate.weight", d, sh.n_ff, ws);
        add(b + "ffn_up.weight", d, sh.n_ff, ws);
        add(b + "ffn_down.weight", sh.n_ff, d, 1.0f / std::sqrt(static_cast<float>(sh.n_ff)));
    }
    add_norm("output_norm.weight", d, sh.output_norm);
    if (!sh.tied_embeddings) add("output.weight", d, sh.n_vocab, ws);
    return w;
}

}  // namespace

void write_synthetic_model(const std::string& path, const SyntheticShape& sh, const std::string& scheme_name,
                           uint64_t seed) {
    synthetic_writer(sh, scheme_name, seed).write_file(path);
}

SyntheticHeader synthetic_header(const SyntheticShape& shape, const std::string& scheme) {
    const GgufWriter w = synthetic_writer(shape, scheme, 42);
    return {w.header_bytes(), w.file_size()};
}

std::vector<std::string> write_synthetic_split_model(const std::string& stem, const SyntheticShape& shape,
                                                     const std::string& scheme, uint32_t n_parts, uint64_t seed) {
    std::vector<std::string> paths;
    const std::vector<GgufWriter> parts = synthetic_writer(shape, scheme, seed).split(n_parts);
    for (uint32_t i = 0; i < n_parts; ++i) {
        paths.push_back(split_part_name(stem, i + 1, n_parts));
        parts[i].write_file(paths.back());
    }
    return paths;
}

std::vector<SyntheticHeader> synthetic_split_headers(const SyntheticShape& shape, const std::string& scheme,
                                                     uint32_t n_parts) {
    std::vector<SyntheticHeader> out;
    for (const GgufWriter& w : synthetic_writer(shape, scheme, 42).split(n_parts))
        out.push_back({w.header_bytes(), w.file_size()});
    return out;
}

}  // namespace ember
