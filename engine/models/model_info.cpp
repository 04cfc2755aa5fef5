#include "engine/models/model_info.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace ember {
namespace {

// general.file_type values (llama.cpp's LLAMA_FTYPE numbering), the names users search for.
std::string file_type_name(uint64_t ftype) {
    static const std::map<uint64_t, const char*> names = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
        {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},   {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
        {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},   {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
        {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},  {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
        {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},    {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
        {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"}};
    auto it = names.find(ftype);
    return it == names.end() ? "unknown (" + std::to_string(ftype) + ")" : it->second;
}

// A count stored once or per layer (gemma4's head_count_kv, feed_forward_length): the
// largest; nullopt where absent or not a count.
std::optional<uint64_t> largest_count(const GgufFile& f, const std::string& key) {
    const GgufValue* v = f.find(key);
    if (!v || v->type != GgufType::ARRAY) return f.opt_u64(key);
    std::optional<uint64_t> out;
    for (const GgufValue& x : v->as_array().items) {
        if (x.type == GgufType::ARRAY || x.type == GgufType::STRING) return std::nullopt;
        out = std::max(out.value_or(0), x.as_u64());
    }
    return out;
}

}  // namespace

ModelInfo describe_model(const GgufFile& f) {
    ModelInfo m;
    m.architecture = f.architecture();
    m.name = f.opt_string("general.name").value_or(std::filesystem::path(f.path()).filename().string());
    m.file_size = f.file_size();
    const std::string a = m.architecture + ".";
    m.context_length = f.opt_u64(a + "context_length");
    m.n_layers = f.opt_u64(a + "block_count");
    m.n_heads = largest_count(f, a + "attention.head_count");
    m.n_kv_heads = largest_count(f, a + "attention.head_count_kv");
    if (!m.n_kv_heads) m.n_kv_heads = m.n_heads;
    m.embedding_length = f.opt_u64(a + "embedding_length");
    m.ffn_length = largest_count(f, a + "feed_forward_length");
    m.head_dim = f.opt_u64(a + "attention.key_length");
    if (!m.head_dim && m.embedding_length && m.n_heads && *m.n_heads) m.head_dim = *m.embedding_length / *m.n_heads;
    if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->type == GgufType::ARRAY)
        m.vocab_size = tokens->as_array().items.size();
    m.tokenizer_model = f.opt_string("tokenizer.ggml.model").value_or("");
    m.tokenizer_pre = f.opt_string("tokenizer.ggml.pre").value_or("");
    m.has_chat_template = f.has("tokenizer.chat_template");
    for (const auto& t : f.tensors()) {
        const std::string type(dtype_name(t.type));
        m.n_params += t.n_elements;
        m.tensor_bytes += t.n_bytes;
        ++m.tensor_types[type];
        m.tensor_type_bytes[type] += t.n_bytes;
    }
    // The "file type" users recognise: general.file_type when present, else the type that
    // holds the most bytes.
    if (auto ft = f.opt_u64("general.file_type")) {
        m.file_type = file_type_name(*ft);
        return m;
    }
    auto dominant = std::max_element(m.tensor_type_bytes.begin(), m.tensor_type_bytes.end(),
                                     [](auto& x, auto& y) { return x.second < y.second; });
    if (dominant != m.tensor_type_bytes.end()) m.file_type = dominant->first;
    return m;
}

std::string format_param_count(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
    else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
    else if (n >= 1000ull) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
    else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    return buf;
}

}  // namespace ember
