// The forward pass's debug dump (engine/models/dump.h) on stories260K (llama, F32, 5 layers):
// the names, layers and shapes a sink receives, dumped values against a recomputation on the
// host, the final logits unchanged by dumping, and the stderr printer's lines.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/dump.h"
#include "engine/models/transformer.h"
#include "test_data.h"

using namespace ember;

namespace {

struct Record {
    std::string name;
    int layer;
    int64_t rows, cols;
    std::vector<float> values;
};

const std::vector<int32_t> kTokens = {1, 50, 100, 200, 300};

// One prefill of kTokens on a fresh cache, logits of every row.
std::vector<float> prefill(Transformer& tr, Backend& be) {
    KvCache kv(be, tr.kv_config(64, 1));
    const int32_t seq = kv.new_sequence();
    const std::vector<int32_t> slots = kv.append(seq, static_cast<int32_t>(kTokens.size()));
    std::vector<int32_t> pos, seq_of(kTokens.size(), 0), rows;
    for (size_t i = 0; i < kTokens.size(); ++i) {
        pos.push_back(static_cast<int32_t>(i));
        rows.push_back(static_cast<int32_t>(i));
    }
    const std::vector<int32_t> table = kv.block_table(seq);
    BatchInfo b;
    b.tokens = kTokens;
    b.positions = pos;
    b.seq_of = seq_of;
    b.kv_slot = slots;
    b.block_table = table;
    b.n_seqs = 1;
    b.max_blocks = static_cast<int32_t>(table.size());
    b.output_rows = rows;
    std::vector<float> logits;
    tr.forward(b, kv, logits);
    return logits;
}

const float* f32_tensor(const GgufFile& f, const std::string& name) {
    const GgufTensor& t = f.tensor(name);
    REQUIRE(t.type == DType::F32);
    return reinterpret_cast<const float*>(t.data);
}

// y = x / rms(x) * w in double, row by row.
std::vector<double> rms_norm(const std::vector<float>& x, const float* w, int64_t cols, float eps) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / static_cast<size_t>(cols); ++r) {
        double ss = 0;
        for (int64_t i = 0; i < cols; ++i) ss += double(x[r * cols + i]) * x[r * cols + i];
        const double inv = 1.0 / std::sqrt(ss / double(cols) + eps);
        for (int64_t i = 0; i < cols; ++i) y[r * cols + i] = x[r * cols + i] * inv * w[i];
    }
    return y;
}

}  // namespace

TEST_CASE("a dump sink sees each named tensor per layer; the logits do not change") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    auto be = make_cpu_backend(2);
    Transformer tr(file, *be);
    const ModelConfig& c = tr.config();
    REQUIRE(c.n_layers == 5);
    const std::vector<float> plain = prefill(tr, *be);

    std::vector<Record> seen;
    tr.set_dump(
        TensorDump({"inp_embd", "attn_norm", "ffn_out", "l_out", "result_norm", "logits"},
                   [&](const std::string& name, int layer, const Tensor& t, Backend& b) {
                       Record r{name, layer, t.rows, t.cols, std::vector<float>(static_cast<size_t>(t.rows * t.cols))};
                       b.download(t, r.values.data(), r.values.size() * sizeof(float));
                       seen.push_back(std::move(r));
                   }));
    const std::vector<float> dumped = prefill(tr, *be);
    REQUIRE(dumped.size() == plain.size());
    CHECK(std::memcmp(dumped.data(), plain.data(), plain.size() * sizeof(float)) == 0);

    // Order, names, layers, shapes.
    const int64_t T = static_cast<int64_t>(kTokens.size());
    REQUIRE(seen.size() == static_cast<size_t>(3 + 3 * c.n_layers));
    CHECK(seen.front().name == "inp_embd");
    CHECK(seen.front().layer == -1);
    for (int l = 0; l < c.n_layers; ++l) {
        const char* names[] = {"attn_norm", "ffn_out", "l_out"};
        for (int j = 0; j < 3; ++j) {
            const Record& r = seen[static_cast<size_t>(1 + 3 * l + j)];
            CHECK(r.name == names[j]);
            CHECK(r.layer == l);
            CHECK(r.rows == T);
            CHECK(r.cols == c.n_embd);
        }
    }
    const Record& norm = seen[seen.size() - 2];
    const Record& logits = seen.back();
    CHECK(norm.name == "result_norm");
    CHECK(logits.name == "logits");
    CHECK(logits.layer == -1);
    CHECK(logits.rows == T);
    CHECK(logits.cols == c.n_vocab);
    // The dumped logits are the pass's output, bit for bit.
    CHECK(std::memcmp(logits.values.data(), plain.data(), plain.size() * sizeof(float)) == 0);

    // Recomputed on the host: the embedding is the table's rows; layer 0's attn_norm is the
    // RMS norm of it; the logits are the output norm of the last l_out times the (tied)
    // embedding matrix.
    const float* embd = f32_tensor(*file, "token_embd.weight");
    const Record& inp = seen.front();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < c.n_embd; ++i)
            REQUIRE(inp.values[static_cast<size_t>(t * c.n_embd + i)] ==
                    embd[kTokens[static_cast<size_t>(t)] * c.n_embd + i]);
    const std::vector<double> attn_norm0 =
        rms_norm(inp.values, f32_tensor(*file, "blk.0.attn_norm.weight"), c.n_embd, c.norm_eps);
    for (size_t i = 0; i < attn_norm0.size(); ++i)
        REQUIRE(seen[1].values[i] == doctest::Approx(attn_norm0[i]).epsilon(1e-5));

    const Record& last = seen[seen.size() - 3];
    REQUIRE(last.name == "l_out");
    REQUIRE(last.layer == c.n_layers - 1);
    const std::vector<double> out_norm =
        rms_norm(last.values, f32_tensor(*file, "output_norm.weight"), c.n_embd, c.norm_eps);
    const float* out_w = file->find_tensor("output.weight") ? f32_tensor(*file, "output.weight") : embd;
    double max_err = 0, max_ref = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t v = 0; v < c.n_vocab; ++v) {
            double ref = 0;
            for (int64_t i = 0; i < c.n_embd; ++i)
                ref += out_norm[static_cast<size_t>(t * c.n_embd + i)] * out_w[v * c.n_embd + i];
            max_err = std::max(max_err, std::fabs(ref - plain[static_cast<size_t>(t * c.n_vocab + v)]));
            max_ref = std::max(max_ref, std::fabs(ref));
        }
    CHECK(max_ref > 0.1);
    CHECK(max_err < 1e-4 * max_ref);
}

TEST_CASE("\"all\" selects every name: 13 per layer and 3 per pass") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    auto be = make_cpu_backend(1);
    Transformer tr(file, *be);
    std::vector<std::pair<std::string, int>> seen;
    tr.set_dump(
        TensorDump({"all"}, [&](const std::string& n, int l, const Tensor&, Backend&) { seen.emplace_back(n, l); }));
    prefill(tr, *be);
    REQUIRE(seen.size() == static_cast<size_t>(3 + 13 * tr.config().n_layers));
    const char* layer_names[] = {"attn_norm", "q",        "k",      "v",       "kqv_out", "attn_out", "ffn_inp",
                                 "ffn_norm",  "ffn_gate", "ffn_up", "ffn_glu", "ffn_out", "l_out"};
    for (int l = 0; l < tr.config().n_layers; ++l)
        for (int j = 0; j < 13; ++j) {
            CHECK(seen[static_cast<size_t>(1 + 13 * l + j)].first == layer_names[j]);
            CHECK(seen[static_cast<size_t>(1 + 13 * l + j)].second == l);
        }
}

TEST_CASE("the printer writes one line per tensor; EMBER_DUMP turns it on") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    auto be = make_cpu_backend(1);
    Transformer tr(file, *be);
    std::FILE* out = std::tmpfile();
    REQUIRE(out);
    tr.set_dump(TensorDump({"ffn_out"}, print_dump_sink(out, 3)));
    prefill(tr, *be);
    std::rewind(out);
    std::vector<std::string> lines;
    char buf[512];
    while (std::fgets(buf, sizeof buf, out)) lines.emplace_back(buf);
    std::fclose(out);
    REQUIRE(lines.size() == 5);
    CHECK(lines[0].rfind("ember dump: layer   0 ffn_out      [5 x 64] mean ", 0) == 0);
    CHECK(lines[4].rfind("ember dump: layer   4 ffn_out      [5 x 64] mean ", 0) == 0);
    CHECK(lines[0].find(" rms ") != std::string::npos);

    ::setenv("EMBER_DUMP", "attn_norm,ffn_out", 1);
    CHECK(TensorDump::from_env().active());
    ::unsetenv("EMBER_DUMP");
    CHECK_FALSE(TensorDump::from_env().active());
}
