// Op check of store_kv + attention over a paged cache shared by three sequences with
// shuffled blocks: a prefill batch (all three sequences' histories), a decode batch (one
// token each) and a mixed batch; GPU vs the CPU backend. Each case names its heads, cache
// type, window, soft-cap and error bounds.
#include <cstdio>
#include <string>
#include <utility>

#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using namespace ember::opdata;

namespace {

struct AttentionCase {
    int n_heads, n_kv_heads, head_dim;
    DType kv;
    int window;
    float softcap;
    double out_rel_l2;        // attention output, GPU vs CPU backend
    double cache_bytes_frac;  // K/V cache bytes that may differ (Q8_0: rounding ties)
};
constexpr double kOut = 1e-4, kF16Cache = 0.0, kQ8Cache = 1e-3;
// The prefill batch on tensor cores (attention.cu: head dims 64/80/96/128/256): Q, P (and a
// Q8_0 cache's K and V) rounded to FP16, 2^-11 relative each, up to four roundings.
constexpr double kOutTensorCores = 4 * 0x1p-11;
bool tensor_core_head_dim(int d) { return d == 64 || d == 80 || d == 96 || d == 128 || d == 256; }
const AttentionCase kAttentionCases[] = {
    {8, 2, 64, DType::F16, 0, 0.0f, kOut, kF16Cache},    {32, 8, 128, DType::F16, 0, 0.0f, kOut, kF16Cache},
    {32, 8, 128, DType::Q8_0, 0, 0.0f, kOut, kQ8Cache},  {4, 1, 256, DType::F16, 48, 50.0f, kOut, kF16Cache},
    {8, 4, 8, DType::F16, 0, 0.0f, kOut, kF16Cache},     {9, 3, 64, DType::F16, 0, 0.0f, kOut, kF16Cache},
    {16, 2, 64, DType::Q8_0, 100, 0.0f, kOut, kQ8Cache}, {40, 4, 128, DType::F16, 0, 30.0f, kOut, kF16Cache},
};
// Three sequences of lengths 300 / 45 / 1 after the prefill; 16-token blocks.
constexpr int kBlockTokens = 16, kBlocks = 64, kMaxBlocks = 24;

// Each sequence owns 21 of the 64 shuffled blocks.
PagedSeqs three_seqs() { return PagedSeqs(kBlocks, kMaxBlocks, kBlockTokens, {0, 21, 42}, {21, 21, 21}); }

// One batch: store its K/V and attend, on both backends.
void check_step(Pair& p, const AttentionCase& c, KvLayer& lc, KvLayer& lg, const Batch& b, const std::string& name,
                double out_rel_l2) {
    const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim, q_dim = int64_t{c.n_heads} * c.head_dim;
    const int64_t n = static_cast<int64_t>(b.tokens.size());
    const auto k = random_floats(static_cast<size_t>(n * kv_dim)), v = random_floats(static_cast<size_t>(n * kv_dim));
    const auto q = random_floats(static_cast<size_t>(n * q_dim));
    p.cpu.set_batch(b.info());
    p.gpu.set_batch(b.info());
    Tensor kc = put(p.cpu, k, kv_dim, n), vc = put(p.cpu, v, kv_dim, n), qc = put(p.cpu, q, q_dim, n);
    Tensor kg = put(p.gpu, k, kv_dim, n), vg = put(p.gpu, v, kv_dim, n), qg = put(p.gpu, q, q_dim, n);
    Tensor oc = p.cpu.alloc(MemoryKind::Activations, DType::F32, q_dim, n, "o");
    Tensor og = p.gpu.alloc(MemoryKind::Activations, DType::F32, q_dim, n, "o");
    poison(p.gpu, og);
    const AttentionParams ap = attention_params(c.n_heads, c.n_kv_heads, c.head_dim, c.window, c.softcap);
    p.cpu.store_kv(lc, kc, vc);
    p.gpu.store_kv(lg, kg, vg);
    p.cpu.attention(lc, qc, ap, oc);
    p.gpu.attention(lg, qg, ap, og);
    p.gpu.synchronize();
    const auto go = get(p.gpu, og), co = get(p.cpu, oc);
    if (count_nonfinite(go)) fail("ops", name, std::to_string(count_nonfinite(go)) + " outputs not finite/unwritten");
    else record("ops", name, "rel_l2", rel_l2(go, co), out_rel_l2);
    for (Tensor* t : {&kc, &vc, &qc, &oc}) p.cpu.free(*t);
    for (Tensor* t : {&kg, &vg, &qg, &og}) p.gpu.free(*t);
}

// The caches after all batches, byte for byte (the CPU's pool turned into the GPU's plain rows).
void check_caches(Pair& p, const AttentionCase& c, const KvLayer& lc, const KvLayer& lg, const std::string& nb) {
    for (int kvi = 0; kvi < 2; ++kvi) {
        const Tensor& tc = kvi ? lc.v : lc.k;
        const Tensor& tg = kvi ? lg.v : lg.k;
        std::vector<uint8_t> bc(tc.bytes()), bg(tg.bytes());
        p.cpu.download(tc, bc.data(), bc.size());
        p.gpu.download(tg, bg.data(), bg.size());
        if (!p.cpu_as_gpu) bc = opdata::cpu_cache_as_rows(lc, bc, kvi == 0);
        size_t diff = 0;
        for (size_t i = 0; i < bc.size(); ++i) diff += bc[i] != bg[i];
        record("ops", nb + (kvi ? " V cache" : " K cache"), "bytes_diff_frac", double(diff) / double(bc.size()),
               c.cache_bytes_frac);
    }
}

void check_attention_case(Pair& p, const AttentionCase& c, const std::string& nb) {
    KvLayer lc = alloc_kv_layer(p.cpu, c.kv, c.n_kv_heads, c.head_dim, kBlockTokens, kBlocks);
    KvLayer lg = alloc_kv_layer(p.gpu, c.kv, c.n_kv_heads, c.head_dim, kBlockTokens, kBlocks);
    PagedSeqs seqs = three_seqs();
    const std::pair<const char*, std::vector<std::pair<int, int>>> steps[] = {
        {"prefill", {{0, 300}, {1, 45}, {2, 1}}}, {"decode", {{0, 1}, {1, 1}, {2, 1}}}, {"mixed", {{0, 5}, {2, 1}}}};
    for (const auto& [label, parts] : steps) {
        const bool tc = !p.cpu_as_gpu && std::string(label) == "prefill" && tensor_core_head_dim(c.head_dim);
        check_step(p, c, lc, lg, seqs.batch(parts), nb + " " + label, tc ? kOutTensorCores : c.out_rel_l2);
    }
    check_caches(p, c, lc, lg, nb);
    for (Tensor* t : {&lc.k, &lc.v}) p.cpu.free(*t);
    for (Tensor* t : {&lg.k, &lg.v}) p.gpu.free(*t);
}

}  // namespace

void check_attention(Pair& p) {
    std::printf(
        "\n[ops] store_kv + attention: 3 sequences (lengths 300/45/1), shuffled 16-token blocks; prefill,\n"
        "      decode and mixed batches. KV bytes GPU vs CPU: F16 identical, Q8_0 <= 0.1%% bytes differ (ties);\n"
        "      attention output GPU vs CPU backend rel_l2 <= 1e-4 (prefill on tensor cores: 4 x 2^-11)\n");
    for (const AttentionCase& c : kAttentionCases) {
        char nb[128];
        std::snprintf(nb, sizeof nb, "attn h%d kv%d d%d %s%s%s", c.n_heads, c.n_kv_heads, c.head_dim,
                      std::string(dtype_name(c.kv)).c_str(),
                      c.window ? (" win" + std::to_string(c.window)).c_str() : "", c.softcap > 0 ? " cap" : "");
        try {
            check_attention_case(p, c, nb);
        } catch (const std::exception& e) {
            fail("ops", nb, e.what());
        }
    }
}

}  // namespace ember::gpucheck
