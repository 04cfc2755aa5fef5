// gpt-oss (llama.cpp's openai-moe): the configuration Ember reads from its synthetic files
// (real metadata keys and tensor names; the tiny test shape and gpt-oss-20b's real sizes),
// MXFP4_MOE's per-tensor types, and a load and generation on the CPU. llama.cpp runs the same
// files against Ember in test_arch_peer.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/models/model_config.h"
#include "engine/models/synthetic.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "kernels/common/error.h"
#include "test_util.h"

using namespace ember;

TEST_CASE("gpt-oss: the synthetic file's configuration is gpt-oss's") {
    test::TempDir dir;
    const std::string path = dir.file("tiny-gpt-oss.gguf");
    write_synthetic_model(path, synthetic_shape("tiny-gpt-oss"), "F32");
    const ModelConfig c = read_model_config(GgufFile::open(path));
    CHECK(c.arch == "gpt-oss");
    CHECK(c.n_embd == 256);
    CHECK(c.q_dim() == 512);  // 8 heads of 64: not n_embd, as in gpt-oss-20b (64 x 64 vs 2880)
    CHECK(c.n_expert == 8);
    CHECK(c.n_expert_used == 2);
    CHECK(c.n_ff_exp == 128);
    CHECK(c.expert_softmax_top_k);
    CHECK(c.expert_biases);
    CHECK_FALSE(c.expert_weights_norm);  // llama.cpp: norm_w false for gpt-oss
    CHECK(c.expert_weights_scale == 1.0f);
    CHECK(c.swiglu_oai);
    CHECK((c.qkv_bias && c.out_bias && c.attn_sinks));
    CHECK(c.ffn_norm == "post_attention_norm");
    CHECK(c.rope_neox);
    // YaRN 32x over 4096 tokens on every layer: attn_factor 1 (llama.cpp's context cancels
    // mscale(32) by 1 / (1 + 0.1 ln 32)), the kernels add the 1 + 0.1 ln 32 themselves.
    CHECK(c.rope_scale == doctest::Approx(1.0 / 32));
    CHECK(c.rope_ext_factor == 1.0f);
    CHECK(c.rope_attn_factor == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(c.n_ctx_orig == 4096);
    CHECK(c.rope_scale_local);
    CHECK(c.rope_base_local == c.rope_base);
    // Even layers in a 8-token window, odd ones global (llama.cpp's swa pattern 2).
    CHECK(c.sliding_window == 8);
    REQUIRE(c.layer_sliding.size() == 4);
    CHECK((c.layer_sliding[0] && !c.layer_sliding[1] && c.layer_sliding[2] && !c.layer_sliding[3]));
}

TEST_CASE("gpt-oss: MXFP4_MOE keeps experts in MXFP4 and the other matrices in Q8_0") {
    test::TempDir dir;
    const std::string path = dir.file("tiny-gpt-oss-mxfp4.gguf");
    write_synthetic_model(path, synthetic_shape("tiny-gpt-oss"), "MXFP4_MOE");
    const GgufFile f = GgufFile::open(path);
    CHECK(f.get_u64("general.file_type") == 38);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    int experts = 0;
    for (const GgufTensor& t : f.tensors()) {
        CAPTURE(t.name);
        const bool expert = t.name.find("_exps.weight") != std::string::npos;
        // The router stays F32 (quant_plan.h, llama.cpp's rule).
        const bool matrix = t.dims.size() >= 2 && t.rows() > 1 && t.name.ends_with(".weight") &&
                            t.name.find("ffn_gate_inp") == std::string::npos;
        if (expert) ++experts;
        if (expert) CHECK(t.type == DType::MXFP4);
        else if (matrix) CHECK(t.type == DType::Q8_0);
        else CHECK(t.type == DType::F32);  // norms, biases, sinks, the router
    }
    CHECK(experts == 3 * 4);
    CHECK(read_model_config(f).n_expert == 8);
}

TEST_CASE("gpt-oss: gpt-oss-20b's real sizes") {
    // The header alone (12 GB of weights are not written): the tensor table llama.cpp and the
    // fit planner see. Experts: 24 layers x 3 x 32 x 2880 x 2880 in MXFP4 (4.25 bits).
    const SyntheticShape sh = synthetic_shape("gpt-oss-20b");
    CHECK(sh.n_vocab == 201088);
    CHECK(sh.sliding_window == 128);
    const SyntheticHeader h = synthetic_header(sh, "MXFP4_MOE");
    const double expert_bytes = 24.0 * 3 * 32 * 2880 * 2880 * 17 / 32;
    CHECK(double(h.file_size) > expert_bytes);
    CHECK(double(h.file_size) < expert_bytes + 2.0e9);  // attention, router, embeddings in Q8_0
    MESSAGE("gpt-oss-20b MXFP4_MOE: ", h.file_size, " bytes");
}

TEST_CASE("gpt-oss: loads and generates, MXFP4 experts too") {
    for (const char* scheme : {"F32", "MXFP4_MOE"}) {
        CAPTURE(scheme);
        test::TempDir dir;
        const std::string path = dir.file("tiny-gpt-oss.gguf");
        write_synthetic_model(path, synthetic_shape("tiny-gpt-oss"), scheme);
        LoadOptions lo;
        lo.path = path, lo.device = BackendPreference::Cpu, lo.n_threads = 2, lo.n_ctx = 64;
        auto model = Model::load(lo);
        Sequence seq(*model);
        GenerateOptions g;
        g.max_tokens = 24;  // past the 8-token window of the even layers
        g.sampling.temperature = 0;
        g.ignore_eog = true;
        const GenerateStats st = seq.generate(std::vector<int32_t>{1, 300, 301}, g, nullptr);
        CHECK(st.generated_tokens == 24);
    }
    const auto& archs = supported_architectures();
    CHECK(std::find(archs.begin(), archs.end(), "gpt-oss") != archs.end());
}
