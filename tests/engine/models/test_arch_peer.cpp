// Every architecture Ember runs, against llama.cpp (the peer, built from the llama-cpp-python
// source package by scripts/llama-cpp-tools.sh, cached): a synthetic random-weight file of each
// (real metadata keys and tensor names, a tiny shape), run by llama-perplexity, which saves
// its log-probabilities as a --kl-divergence-base file; Ember scores the same file against it.
// F32 weights: neither engine rounds activations, so what remains is summation order. The
// files are shaped so that attention decides the output (SyntheticShape's gains: random
// weights alone make every position's output follow from its own token, and an error in
// attention would hardly show). Quantized synthetic files check the quantized weight paths
// only (their random blocks need the output norm kept small, and attention's gains off, or
// 8-bit activation rounding alone moves KL by 0.1); the quantized kernels are also checked
// against llama.cpp on a real model, test_quant_peer.
// The peer is real, not a mock; a missing peer fails the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/models/synthetic.h"
#include "engine/quant/perplexity.h"
#include "engine/quant/quantizer.h"
#include "engine/runtime/model.h"
#include "llama_peer.h"
#include "test_data.h"

using namespace ember;

namespace {

struct Agreement {
    double llama_ppl = 0, ember_ppl = 0, kl = 0, same_top = 0;
};

// llama.cpp's and Ember's distributions over the same text on the same file; Ember feeds
// each 128-token chunk in passes of n_batch tokens.
Agreement compare(const std::string& bin, const std::string& model, const test::TempDir& dir, int32_t n_batch = 512) {
    const std::string text = "/usr/share/common-licenses/GPL-3", base = dir.file("base.kld");
    EMBER_REQUIRE_FILE(text);
    const auto r = test::run_process({bin + "/llama-perplexity", "-m", model, "-f", text, "-c", "128", "--chunks", "3",
                                      "-t", "2", "--kl-divergence-base", base},
                                     600 * 1000);
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.ok());
    // llama.cpp's PPL comes from its logits in the base file, not from its log: llama.cpp
    // writes its log from a thread of its own, and the last lines were sometimes missing.
    Agreement a;
    LoadOptions lo;
    lo.path = model, lo.device = BackendPreference::Cpu, lo.n_threads = 2, lo.n_ctx = 128, lo.n_batch = n_batch;
    auto loaded = Model::load(lo);
    PerplexityOptions po;
    po.kl_divergence = base;
    const PerplexityResult e = perplexity(*loaded, "", po);
    REQUIRE(e.kl);
    REQUIRE(e.n_chunks == 3);
    a.llama_ppl = e.kl->ppl_base, a.ember_ppl = e.ppl, a.kl = e.kl->kld.mean, a.same_top = e.kl->same_top.mean;
    return a;
}

// gpt-oss's own gains. YaRN's magnitude (1.35 on q and k) and 64-dim heads make qk_gain 4's
// scores so large that attention is one-hot and sinks (5 qk_gain^2) could not compete; with
// attn_gain 8 the attention output dominates the residual, whose RMS norm then cancels the
// share the sinks take. Its output matrix is untied (scale 1/sqrt(n_embd), not the
// embedding's 1), so output_norm 1.6 brings the logits to the tied shapes' size. Measured
// with these (Ember deliberately broken, llama.cpp not): sinks dropped KL 1.9e-5, windows of
// 1 token 7.2e-5, YaRN replaced by plain 1/32 scaling 4.6e-5, against 1.3e-7 when right.
void gpt_oss_gains(SyntheticShape& sh) {
    sh.qk_gain = 1.0f;
    sh.attn_gain = 2.0f;
    sh.output_norm = 1.6f;
}

// A variant of a tiny shape in F32, with the gains of the test below, against llama.cpp (passes
// of n_batch tokens), within that test's bounds.
void check_f32_variant(const std::string& label, SyntheticShape sh, int32_t n_batch) {
    const std::string bin = test::llama_tools_dir();
    test::TempDir dir;
    const std::string path = dir.file("model.gguf");
    sh.output_norm = 0.1f, sh.qk_gain = 4.0f, sh.attn_gain = 8.0f;
    write_synthetic_model(path, sh, "F32");
    const Agreement a = compare(bin, path, dir, n_batch);
    MESSAGE(label, ": llama.cpp PPL ", a.llama_ppl, ", Ember PPL ", a.ember_ppl, ", KL ", a.kl, ", top-1 agreement ",
            a.same_top);
    CHECK(a.ember_ppl == doctest::Approx(a.llama_ppl).epsilon(1e-4));
    CHECK(std::abs(a.kl) < 1e-5);
    CHECK(a.same_top > 0.99);
}

}  // namespace

TEST_CASE("llama.cpp and Ember agree on synthetic files of every architecture") {
    const std::string bin = test::llama_tools_dir();
    for (const char* shape : {"tiny", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-qwen3moe", "tiny-gemma4",
                              "tiny-gemma4moe", "tiny-gpt-oss", "tiny-qwen35", "tiny-qwen35moe", "tiny-qwen3next"}) {
        SUBCASE(shape) {
            test::TempDir dir;
            const std::string path = dir.file("model.gguf");
            SyntheticShape sh = synthetic_shape(shape);
            sh.output_norm = 0.1f;  // logits of order 1: every layer's error shows in the KL
            sh.qk_gain = 4.0f;      // attention that picks positions: RoPE and windows matter
            sh.attn_gain = 8.0f;    // attention, not the token alone, decides the output
            if (sh.arch == "gpt-oss") gpt_oss_gains(sh);
            write_synthetic_model(path, sh, "F32");
            // qwen35's recurrent state must carry from one pass to the next: chunks of 128
            // tokens in passes of 40, 40, 40 and 8 (llama.cpp runs each chunk in one pass).
            const Agreement a = compare(bin, path, dir, sh.qwen35.n_v_heads > 0 ? 40 : 512);
            MESSAGE(std::string(shape), ": llama.cpp PPL ", a.llama_ppl, ", Ember PPL ", a.ember_ppl, ", KL ", a.kl,
                    ", top-1 agreement ", a.same_top);
            // Measured: |KL| <= 5e-8 and PPL equal to 5 digits for the dense four, 1.9e-7 for
            // tiny-qwen3moe (its router's softmax and top-k in both); qwen3 with the wrong
            // RoPE pairing gave KL 7.8e-5 (PPL +0.09 %), without its QK-norm KL 1.3e-4.
            // tiny-gpt-oss 1.3e-7 (its errors: gpt_oss_gains).
            // tiny-gemma4 (|KL| ~1e-7): without the logit soft-cap KL 0.57, without the
            // per-layer embeddings and output scale KL 7e-4, without V's norm KL 8e-6 (PPL
            // +0.15 %), sliding layers sharing the wrong layer's K/V KL 1.7e-6 (PPL -0.05 %).
            // tiny-gemma4moe (KL -1.7e-7, PPL equal to 6 digits): without the per-expert down
            // scales KL 6.9e-6 but PPL +0.04 %, the router input unscaled by 1/sqrt(n_embd) KL
            // 2.2e-5 (PPL +0.3 %).
            // tiny-qwen35 (KL 1.3e-7, PPL 1374.04 both; passes of 40 tokens): the delta rule's
            // state dropped between passes KL 0.069 (PPL +2.8 %), the convolution's state
            // dropped KL 0.077 (+1.7 %), value heads paired with key head h / 2 instead of
            // h % 2 KL 0.069, full attention without its sigmoid gate KL 0.017.
            // tiny-qwen35moe (KL 5.6e-8, PPL 1431.73 both): the shared expert's sigmoid gate
            // left out KL 0.013, the shared expert left out KL 0.050.
            // tiny-qwen3next (KL -5.3e-8, PPL 1417.36 both): value heads paired with key head
            // h % 2 (qwen35's tiled order) instead of h / 2 KL 0.25, ssm_ba read as all betas
            // then all alphas instead of per key head KL 0.096.
            CHECK(a.ember_ppl == doctest::Approx(a.llama_ppl).epsilon(1e-4));
            CHECK(std::abs(a.kl) < 1e-5);
            CHECK(a.same_top > 0.99);
        }
    }
}

// gemma4's experts with separate gate and up tensors (llama.cpp's other load path; the real
// files fuse them): the same bound as above.
TEST_CASE("llama.cpp and Ember agree on gemma4 experts with separate gate and up tensors") {
    SyntheticShape sh = synthetic_shape("tiny-gemma4moe");
    sh.gemma4.split_gate_up = true;
    check_f32_variant("tiny-gemma4moe, split gate/up", sh, 512);
}

// qwen3next as its first conversions wrote it: q, k, v and z from one fused ssm_in, grouped per
// key head (llama.cpp's legacy path, still loaded), regrouped by Ember with column copies.
// Measured KL 6.2e-8, PPL equal to 6 digits, top-1 1; the same bounds as above. Deliberately
// broken (z taken from the v columns) KL 3.5e-4.
TEST_CASE("llama.cpp and Ember agree on qwen3next with the fused ssm_in") {
    SyntheticShape sh = synthetic_shape("tiny-qwen3next");
    sh.qwen35.fused_qkvz = true;  // test_config_validation checks the file reads as fused
    check_f32_variant("tiny-qwen3next, fused ssm_in", sh, 40);
}

// Quantized files of the new architectures (logits kept moderate by output_norm 0.1; no gains:
// the check is of the quantized weight paths, experts and per-layer embeddings included, not of
// attention, which the F32 files above check).
//  * Q4_0: both engines quantize activations to 8 bits per 32 with d = max|x| / 127 (ggml's
//    q8_0, its d a half float as Ember's for these types), so the integer dot products agree
//    and the summation order differs as in F32; on top of that, a 1-ulp difference in an activation occasionally
//    rounds it to the next code (an error of d, 0.4 % of its block's largest value), which
//    F32 has not. Measured KL 8.1e-7 (qwen3moe), 4.7e-6 (qwen3), 6.1e-6 (gemma4), 5.7e-6
//    (gemma4moe), top-1 agreement >= 0.994: bound 1e-4.
//  * Q4_K_M: ggml rounds activations per 256 (q8_K, one d for 256 values), Ember per 32, so
//    the two differ by up to d_256 / 2 per element, and these random files amplify it (see
//    above). Measured KL 0.0097 (qwen3moe, top-1 0.92), 7.7e-4 (qwen3, 0.95), 0.0044
//    (gemma4, 1), 5.1e-5 (gemma4moe, 1); the dense llama shape differs as much (tiny: KL
//    0.018), so this is the activation rounding. Bound KL 0.05: a wrong expert, weight or
//    gating gives KL of order 1.
TEST_CASE("llama.cpp and Ember agree on quantized files of the new architectures") {
    const std::string bin = test::llama_tools_dir();
    struct Scheme {
        const char* name;
        double kl, same_top, ppl_eps;
    };
    for (const char* shape : {"tiny-qwen3", "tiny-qwen3moe", "tiny-gemma4", "tiny-gemma4moe"}) {
        for (const Scheme& c : {Scheme{"Q4_0", 1e-4, 0.98, 1e-3}, Scheme{"Q4_K_M", 0.05, 0.85, 0.05}}) {
            SUBCASE((std::string(shape) + " " + c.name).c_str()) {
                test::TempDir dir;
                const std::string path = dir.file("model.gguf");
                SyntheticShape sh = synthetic_shape(shape);
                sh.output_norm = 0.1f;
                write_synthetic_model(path, sh, c.name);
                const Agreement a = compare(bin, path, dir);
                MESSAGE(std::string(shape), " ", std::string(c.name), ": llama.cpp PPL ", a.llama_ppl, ", Ember PPL ",
                        a.ember_ppl, ", KL ", a.kl, ", top-1 agreement ", a.same_top);
                CHECK(a.ember_ppl == doctest::Approx(a.llama_ppl).epsilon(c.ppl_eps));
                CHECK(std::abs(a.kl) < c.kl);
                CHECK(a.same_top > c.same_top);
            }
        }
    }
}

// gpt-oss with its experts in MXFP4 and the other matrices in Q8_0 (MXFP4_MOE, as the real
// files): the F32 file of the test above (its gains: attention with sinks, YaRN and windows
// decides), quantized by Ember's quantizer, so the weights are real values rounded, not
// random blocks (random Q8_0 blocks are ~9x the F32 weights: the hot logits the header
// warns of, KL 0.11 even without gains). ggml multiplies MXFP4 and Q8_0 weights with
// activations rounded to 8 bits per 32 (q8_0, d = max|x| / 127), as Ember does, so the
// integer dot products agree and, as for qwen3moe's Q4_0 above, what remains is float order
// plus an occasional activation rounded to the next code. Measured KL 7.4e-7, top-1 1 (PPL
// within 2e-5); bounds as Q4_0's: KL 1e-4, top-1 0.99.
TEST_CASE("llama.cpp and Ember agree on a gpt-oss file with MXFP4 experts") {
    const std::string bin = test::llama_tools_dir();
    test::TempDir dir;
    const std::string f32 = dir.file("f32.gguf"), path = dir.file("model.gguf");
    SyntheticShape sh = synthetic_shape("tiny-gpt-oss");
    gpt_oss_gains(sh);
    write_synthetic_model(f32, sh, "F32");
    QuantizeOptions o;
    o.input = f32, o.output = path, o.type = "MXFP4_MOE", o.n_threads = 2;
    quantize_model(o);
    REQUIRE(GgufFile::open(path).tensor("blk.0.ffn_down_exps.weight").type == DType::MXFP4);
    const Agreement a = compare(bin, path, dir);
    MESSAGE("tiny-gpt-oss MXFP4_MOE: llama.cpp PPL ", a.llama_ppl, ", Ember PPL ", a.ember_ppl, ", KL ", a.kl,
            ", top-1 agreement ", a.same_top);
    CHECK(a.ember_ppl == doctest::Approx(a.llama_ppl).epsilon(1e-3));
    CHECK(std::abs(a.kl) < 1e-4);
    CHECK(a.same_top > 0.99);
}

// qwen35 and qwen35moe quantized by Ember's quantizer from test_arch_peer's F32 files (its
// gains: the states and attention decide), the convolution kept F32 as llama.cpp keeps it.
// Random quantized blocks (the test above) are a poor check here: the linear-attention layers
// carry every earlier token's rounding in their state and random blocks' large weights make it
// grow (tiny-qwen35 Q4_K_M with random blocks: KL 0.21). Real values rounded, as in the MXFP4
// test below. Measured KL: Q8_0 4.0e-6 (tiny-qwen35), Q4_K_M 1.4e-5 (tiny-qwen35), 8.3e-5
// (tiny-qwen35moe), Q5_K 2.2e-5, top-1 >= 0.9947; tiny-qwen3next Q8_0 4.7e-6, Q4_K_M 8.5e-5,
// Q4_0 4.3e-6, Q4_1 5.8e-6, top-1 >= 0.989; bound 5e-4, PPL within 2e-3, top-1 > 0.98 (the
// ASan build, -O1, rounds differently: tiny-qwen3next Q4_K_M KL 1.4e-4 there, PPL 1.1e-3 apart).
// Q4_0 and Q4_1 (KL 1.1e-6 and 1.6e-5 on tiny-qwen35, 8.1e-7 Q4_0 on tiny-qwen35moe) were
// 0.009 and 0.013 until two roundings matched ggml's: a Q4_0 token embedding holds multiples
// of its block's d, so the first layer's normed activations sit exactly on the int8 rounding
// ties (x / max|x| = 4 / 8 gives 63.5), where a 1-ulp difference in the norm's scale (a float
// sum of squares against ggml's double) moved whole codes; and ggml's q8_0 / q8_1 activation
// scales are half floats. The per-head norm of the gated delta rule's output then amplified
// the 0.4 % (codes) and 2e-4 (scales) differences into the states. Same bounds as above.
// These files use seed 42; one seed of ten (6) still gives Q4_0 KL 1e-3, from one position
// where the two engines' activations round to different codes (a tie, not an op: the test
// after this one derives it and checks that seed with bounds that tell the two apart).
TEST_CASE("llama.cpp and Ember agree on quantized qwen35 and qwen3next files") {
    const std::string bin = test::llama_tools_dir();
    for (const char* shape : {"tiny-qwen35", "tiny-qwen35moe", "tiny-qwen3next"}) {
        for (const char* type : {"Q8_0", "Q4_K_M", "Q4_0", "Q4_1"}) {
            SUBCASE((std::string(shape) + " " + type).c_str()) {
                test::TempDir dir;
                const std::string f32 = dir.file("f32.gguf"), path = dir.file("model.gguf");
                SyntheticShape sh = synthetic_shape(shape);
                sh.output_norm = 0.1f, sh.qk_gain = 4.0f, sh.attn_gain = 8.0f;
                write_synthetic_model(f32, sh, "F32");
                QuantizeOptions o;
                o.input = f32, o.output = path, o.type = type, o.n_threads = 2;
                quantize_model(o);
                REQUIRE(GgufFile::open(path).tensor("blk.0.ssm_conv1d.weight").type == DType::F32);
                const Agreement a = compare(bin, path, dir, 40);
                MESSAGE(std::string(shape), " ", std::string(type), " (Ember's quantizer): llama.cpp PPL ", a.llama_ppl,
                        ", Ember PPL ", a.ember_ppl, ", KL ", a.kl, ", top-1 agreement ", a.same_top);
                CHECK(a.ember_ppl == doctest::Approx(a.llama_ppl).epsilon(2e-3));
                CHECK(std::abs(a.kl) < 5e-4);
                CHECK(a.same_top > 0.98);
            }
        }
    }
}

// Ember's MXFP4 quantizer against llama-quantize's on the same F32 file: every tensor's type
// and bytes identical (MXFP4 experts: E8M0 scales, nibble codes, ties; Q8_0 elsewhere).
TEST_CASE("MXFP4_MOE: Ember's quantizer writes llama-quantize's bytes") {
    const std::string bin = test::llama_tools_dir({"llama-quantize"});
    test::TempDir dir;
    const std::string src = dir.file("f32.gguf"), theirs = dir.file("llama.gguf"), ours = dir.file("ember.gguf");
    write_synthetic_model(src, synthetic_shape("tiny-gpt-oss"), "F32");
    const auto r = test::run_process({bin + "/llama-quantize", src, theirs, "MXFP4_MOE", "2"}, 600 * 1000);
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.ok());
    QuantizeOptions o;
    o.input = src, o.output = ours, o.type = "MXFP4_MOE", o.n_threads = 2;
    quantize_model(o);
    const GgufFile a = GgufFile::open(theirs), b = GgufFile::open(ours);
    int mxfp4 = 0;
    for (const GgufTensor& t : a.tensors()) {
        CAPTURE(t.name);
        const GgufTensor* u = b.find_tensor(t.name);
        REQUIRE(u);
        CHECK(u->type == t.type);
        REQUIRE(u->n_bytes == t.n_bytes);
        CHECK(std::memcmp(u->data, t.data, t.n_bytes) == 0);
        mxfp4 += t.type == DType::MXFP4;
    }
    CHECK(mxfp4 == 3 * 4);
}

namespace {

// Ember's mean KL against a llama-perplexity base file, and its KL at every scored token.
double ember_kl(const std::string& model, const std::string& base, std::vector<float>& per_token) {
    LoadOptions lo;
    lo.path = model, lo.device = BackendPreference::Cpu, lo.n_threads = 2, lo.n_ctx = 128, lo.n_batch = 40;
    auto loaded = Model::load(lo);
    PerplexityOptions po;
    po.kl_divergence = base;
    const PerplexityResult e = perplexity(*loaded, "", po);
    REQUIRE(e.kl);
    per_token = e.kl->kld_tokens;
    return e.kl->kld.mean;
}

// llama-perplexity over compare()'s text with more arguments; its output and log.
std::string llama_perplexity(const std::string& bin, std::vector<std::string> more) {
    std::vector<std::string> argv{
        bin + "/llama-perplexity", "-f", "/usr/share/common-licenses/GPL-3", "-c", "128", "--chunks", "3", "-t", "2"};
    argv.insert(argv.end(), more.begin(), more.end());
    const auto r = test::run_process(argv, 600 * 1000);
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.ok());
    return r.out + r.err;
}

// llama.cpp's own mean KL against a base file ("Mean    KLD:   x" in its log, which it writes
// from a thread of its own: tried again when the line is missing).
double llama_kl(const std::string& bin, const std::string& model, const std::string& base) {
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::string out = llama_perplexity(bin, {"-m", model, "--kl-divergence-base", base, "--kl-divergence"});
        const size_t at = out.find("Mean    KLD:");
        if (at != std::string::npos) return std::stod(out.substr(at + 12));
    }
    FAIL("llama-perplexity printed no mean KLD");
    return 0;
}

}  // namespace

// Where a quantized qwen35 file's KL against llama.cpp comes from when it is large: seed 6 of
// tiny-qwen35 Q4_0 (the test above uses seed 42, KL 1.1e-6; seeds 0-9 give 1e-6..7e-6 except
// this one) gives KL 1.0e-3, all of it at one scored position of 189 (KL 0.19 there; every
// other position <= 9e-4, the median ~1e-6). A third run says which engine is off there: R,
// llama.cpp in F32 on the Q4_0 file dequantized (the same weights, no activation rounding).
// Measured: Ember's dequantized F32 run against R 1.5e-8 (every op and weight the same);
// against R, Ember's Q4_0 run 0.0163 and llama.cpp's 0.0167 (seed 42: 0.0083 and 0.0083). Both
// engines are 16x farther from exact arithmetic than from each other, by the same amount: the
// difference is where their 8-bit activations round differently, not an op. It concentrates
// on one position because a code flips only where x * 127 / max|x| lands within a float ulp of
// k + 0.5 (the engines' sums then differ in the last bit), and one flipped code (an error of
// d = max|x| / 127 in one product) moves a distribution that sits near a decision by up to what
// rounding moves it from R there (a position's KL against R reaches 1.59 in these files). So
// the mean over 189 positions can be up to 1.59 / 189 = 8e-3 from a single flip, and a bound
// on the mean against llama.cpp alone cannot tell a tie from a wrong op. The bounds here are
// the ones that can: the dequantized run against R (the F32 checks' bound above, 1e-5: a
// wrong op or weight shows there), the median position against llama.cpp (a systematic
// difference moves every position), at most 2 positions above 1e-3, and Ember no farther from R than llama.cpp
// (10 % of slack: the two seeds' ratios are 0.98 and 1.00).
TEST_CASE("tiny-qwen35 Q4_0 seed 6: the one position apart from llama.cpp is an activation rounding tie") {
    const std::string bin = test::llama_tools_dir();
    test::TempDir dir;
    const std::string f32 = dir.file("f32.gguf"), q4 = dir.file("q4_0.gguf"), deq = dir.file("dequantized.gguf");
    SyntheticShape sh = synthetic_shape("tiny-qwen35");
    sh.output_norm = 0.1f, sh.qk_gain = 4.0f, sh.attn_gain = 8.0f;  // as the test above
    write_synthetic_model(f32, sh, "F32", 6);
    QuantizeOptions o;
    o.input = f32, o.output = q4, o.type = "Q4_0", o.n_threads = 2;
    quantize_model(o);
    o.input = q4, o.output = deq, o.type = "F32", o.allow_requantize = true;  // exact: codes times d
    quantize_model(o);
    const std::string base_q4 = dir.file("q4.kld"), base_exact = dir.file("exact.kld");
    llama_perplexity(bin, {"-m", q4, "--kl-divergence-base", base_q4});
    llama_perplexity(bin, {"-m", deq, "--kl-divergence-base", base_exact});

    std::vector<float> vs_llama, vs_exact, dequantized;
    const double kl_llama = ember_kl(q4, base_q4, vs_llama);
    const double kl_exact = ember_kl(q4, base_exact, vs_exact);
    const double kl_dequantized = ember_kl(deq, base_exact, dequantized);
    const double llama_exact = llama_kl(bin, q4, base_exact);
    std::vector<float> sorted = vs_llama;
    std::sort(sorted.begin(), sorted.end());
    const auto apart = std::count_if(sorted.begin(), sorted.end(), [](float k) { return k > 1e-3f; });
    MESSAGE("KL against llama.cpp ", kl_llama, " (median ", sorted[sorted.size() / 2], ", max ", sorted.back(), ", ",
            apart, " positions > 1e-3); against exact: Ember ", kl_exact, ", llama.cpp ", llama_exact,
            "; dequantized F32 ", kl_dequantized);
    REQUIRE(sorted.size() == 189);  // 3 chunks of 128, 63 scored in each (llama-perplexity)
    CHECK(std::abs(kl_dequantized) < 1e-5);
    CHECK(sorted[sorted.size() / 2] < 1e-5);
    CHECK(apart <= 2);
    CHECK(kl_exact < 1.1 * llama_exact);
}
