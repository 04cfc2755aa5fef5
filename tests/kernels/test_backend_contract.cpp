// The backend contract (kernels/backend.h): every op checks its arguments once, in Backend,
// and a bad call throws ember::Error naming the op and what is wrong, before the backend
// touches any memory (the output keeps its bytes). Run on the CPU backend, and on the CUDA
// backend too where one loads (a GPU machine): the checks are the same code for both.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_loader.h"
#include "kernels/common/error.h"
#include "kernel_test_util.h"
#include "test_data.h"
#include "tools/op_data/op_data.h"

using namespace ember;

namespace {

// Runs `call`, which must throw ember::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& call, std::initializer_list<const char*> parts) {
    std::string msg;
    try {
        call();
    } catch (const Error& e) {
        msg = e.what();
    } catch (const std::exception& e) {
        FAIL("not an ember::Error: ", e.what());
    }
    REQUIRE_MESSAGE(!msg.empty(), "no error thrown (expected one mentioning ", *parts.begin(), ")");
    for (const char* p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "'", msg, "' lacks '", p, "'");
}

using opdata::Batch;

// A small, valid batch: 3 tokens of sequence 0 at positions 0..2, KV slots 0..2.
Batch valid_batch() {
    Batch b = opdata::simple_batch(3);
    b.tokens = {1, 2, 3};
    b.output_rows = {2};
    return b;
}

struct Fixture {
    Backend& be;
    std::vector<Tensor> owned;
    Tensor f32(int64_t cols, int64_t rows, float fill = 0.5f) {
        Tensor t = be.alloc(MemoryKind::Activations, DType::F32, cols, rows, "test");
        std::vector<float> v(static_cast<size_t>(cols * rows), fill);
        be.upload(t, v.data(), t.bytes());
        owned.push_back(t);
        return t;
    }
    Tensor typed(DType type, int64_t cols, int64_t rows) {
        Tensor t = be.alloc(MemoryKind::Activations, type, cols, rows, "test");
        owned.push_back(t);
        return t;
    }
    std::vector<float> read(const Tensor& t) {
        std::vector<float> v(static_cast<size_t>(t.cols * t.rows));
        be.download(t, v.data(), t.bytes());
        return v;
    }
    ~Fixture() {
        for (Tensor& t : owned) be.free(t);
    }
};

void check_contract(Backend& be) {
    Fixture f{be, {}};
    const Batch batch = valid_batch();
    be.set_batch(batch.info());
    const int64_t T = 3, D = 64, H = 2, HD = 32;

    SUBCASE("set_batch") {
        Batch b = batch;
        b.positions.pop_back();
        expect_error([&] { be.set_batch(b.info()); }, {"set_batch", "one entry per token"});
        b = batch;
        b.output_rows = {3};
        expect_error([&] { be.set_batch(b.info()); }, {"set_batch", "output row 3"});
        b = batch;
        b.seq_of[1] = 1;
        expect_error([&] { be.set_batch(b.info()); }, {"set_batch", "sequence 1"});
        b = batch;
        b.block_table.clear();
        expect_error([&] { be.set_batch(b.info()); }, {"set_batch", "block_table"});
    }
    SUBCASE("upload and download sizes") {
        Tensor t = f.f32(4, 2);
        std::vector<float> big(9);
        expect_error([&] { be.upload(t, big.data(), big.size() * 4); }, {"upload", "36 bytes", "32"});
        expect_error([&] { be.download(t, big.data(), big.size() * 4); }, {"download", "36 bytes"});
    }
    SUBCASE("embed") {
        Tensor table = f.f32(D, 3);  // token 3 is outside
        Tensor out = f.f32(D, T);
        expect_error([&] { be.embed(table, 1.0f, out); }, {"embed", "token id 3", "3 rows"});
        Tensor wide = f.f32(D, 8), narrow = f.f32(D / 2, T);
        expect_error([&] { be.embed(wide, 1.0f, narrow); }, {"embed", "out", "64 columns"});
        Tensor short_out = f.f32(D, 2);
        expect_error([&] { be.embed(wide, 1.0f, short_out); }, {"embed", "fewer than the 3 rows"});
    }
    SUBCASE("matmul") {
        Tensor w = f.f32(D, 16), x = f.f32(D, T), y = f.f32(16, T, 7.0f);
        be.matmul(w, x, y);  // valid
        Tensor y2 = f.f32(16, T, 7.0f);
        Tensor x_bad = f.f32(D / 2, T);
        expect_error([&] { be.matmul(w, x_bad, y2); }, {"matmul", "shapes do not match", "W 16 x 64 F32", "x 3 x 32"});
        for (float v : f.read(y2)) REQUIRE(v == 7.0f);  // untouched
        Tensor y_bad = f.f32(8, T);
        expect_error([&] { be.matmul(w, x, y_bad); }, {"matmul", "y.cols = W.rows"});
        Tensor x_f16 = f.typed(DType::F16, D, T);
        expect_error([&] { be.matmul(w, x_f16, y2); }, {"matmul", "x (3 x 64 F16)", "contiguous F32"});
        Tensor bias = f.f32(15, 1);
        expect_error([&] { be.matmul(w, x, y2, &bias); }, {"matmul", "bias", "16 F32 values"});
    }
    SUBCASE("matmul_shared") {
        // q/k/v-like: Q4_0 weights as a model loads them (panels on AVX-512; 40 rows: a
        // partial panel), each with a bias. Every output must be matmul()'s, bias included.
        const int64_t rows[] = {64, 40, 40};
        std::vector<std::vector<uint8_t>> host;
        std::vector<Tensor> ws, biases, shared, single, plain;
        for (int i = 0; i < 3; ++i) {
            host.push_back(ktest::random_weights(DType::Q4_0, rows[i], D, 40 + uint32_t(i)));
            ws.push_back(be.load_weight(host.back().data(), DType::Q4_0, D, rows[i], "w"));
            f.owned.push_back(ws.back());
            biases.push_back(f.f32(rows[i], 1, 0.25f * float(i + 1)));
            shared.push_back(f.f32(rows[i], T, 7.0f));
            single.push_back(f.f32(rows[i], T, 9.0f));
            plain.push_back(f.f32(rows[i], T, 9.0f));
        }
        Tensor x = f.f32(D, T);
        const std::vector<float> xv = ktest::random_floats(size_t(D * T), 44);
        be.upload(x, xv.data(), x.bytes());
        std::vector<MatmulOut> outs;
        for (int i = 0; i < 3; ++i) {
            be.matmul(ws[size_t(i)], x, single[size_t(i)], &biases[size_t(i)]);
            be.matmul(ws[size_t(i)], x, plain[size_t(i)]);
            outs.push_back({&ws[size_t(i)], &shared[size_t(i)], &biases[size_t(i)]});
        }
        be.matmul_shared(x, outs);
        for (size_t i = 0; i < 3; ++i) {
            const std::vector<float> got = f.read(shared[i]), want = f.read(single[i]), no_bias = f.read(plain[i]);
            REQUIRE_MESSAGE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0, "output ", i);
            for (size_t e = 0; e < got.size(); ++e)  // the bias is there
                REQUIRE(std::fabs(got[e] - no_bias[e] - 0.25f * float(i + 1)) <= 1e-5f * (1 + std::fabs(got[e])));
        }
        Tensor y_bad = f.f32(8, T);
        const MatmulOut bad[] = {{&ws[0], &shared[0]}, {&ws[1], &y_bad}};
        expect_error([&] { be.matmul_shared(x, bad); }, {"matmul", "y.cols = W.rows"});
        const MatmulOut missing[] = {{nullptr, &shared[0]}};
        expect_error([&] { be.matmul_shared(x, missing); }, {"matmul", "without its weight"});
    }
    SUBCASE("rms_norm") {
        Tensor x = f.f32(D, T), y = f.f32(D, T), w = f.f32(D - 1, 1);
        expect_error([&] { be.rms_norm(x, w, 1e-5f, y); }, {"rms_norm", "weight", "64 F32 values"});
        Tensor w_ok = f.f32(D, 1), y_small = f.f32(D, 2);
        expect_error([&] { be.rms_norm(x, w_ok, 1e-5f, y_small); }, {"rms_norm", "y", "fewer than the 3 rows"});
    }
    SUBCASE("rope") {
        Tensor q = f.f32(HD, T * H);
        RopeParams p;
        p.n_heads = H;
        p.head_dim = HD;
        p.n_rot = HD - 1;
        expect_error([&] { be.rope(q, p); }, {"rope", "n_rot 31", "even n_rot"});
        p.n_rot = HD;
        p.head_dim = HD * 2;
        expect_error([&] { be.rope(q, p); }, {"rope", "x", "64 columns", "head_dim"});
        p.head_dim = HD;
        Tensor q4 = f.f32(HD, 4 * H);  // 4 tokens in a batch of 3
        expect_error([&] { be.rope(q4, p); }, {"rope", "batch of 3 tokens"});
        Tensor q_odd = f.f32(HD, 5);
        expect_error([&] { be.rope(q_odd, p); }, {"rope", "2 heads"});
    }
    SUBCASE("glu and add") {
        Tensor g = f.f32(D, T), u = f.f32(D, T - 1), o = f.f32(D, T);
        expect_error([&] { be.glu(g, u, false, o); }, {"glu", "gate (3 x 64 F32)", "up (2 x 64 F32)", "differ"});
        Tensor u_ok = f.f32(D, T), o_small = f.f32(D / 2, T);
        expect_error([&] { be.glu(g, u_ok, true, o_small); }, {"glu", "out", "64 columns"});
        expect_error([&] { be.add(g, u); }, {"add", "differ"});
        // The halves of a fused gate+up result (slice_cols views): glu's bits on copies.
        Tensor fused = f.f32(2 * D, T), gc = f.f32(D, T), uc = f.f32(D, T), o1 = f.f32(D, T), o2 = f.f32(D, T);
        const std::vector<float> fv = ktest::random_floats(size_t(2 * D * T), 52);
        be.upload(fused, fv.data(), fused.bytes());
        std::vector<float> gv, uv;
        for (int64_t t = 0; t < T; ++t) {
            gv.insert(gv.end(), fv.begin() + t * 2 * D, fv.begin() + t * 2 * D + D);
            uv.insert(uv.end(), fv.begin() + t * 2 * D + D, fv.begin() + (t + 1) * 2 * D);
        }
        be.upload(gc, gv.data(), gc.bytes());
        be.upload(uc, uv.data(), uc.bytes());
        for (bool gelu : {false, true}) {
            be.glu(fused.slice_cols(0, D), fused.slice_cols(D, D), gelu, o1);
            be.glu(gc, uc, gelu, o2);
            const std::vector<float> a = f.read(o1), b = f.read(o2);
            REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
        }
        Tensor f16_rows = f.typed(DType::F16, D, T);
        expect_error([&] { be.glu(f16_rows, uc, false, o1); }, {"glu", "gate", "F32 rows"});
    }
    SUBCASE("scale and softcap") {
        Tensor x = f.f32(D, T);
        expect_error([&] { be.scale(x, std::numeric_limits<float>::infinity()); }, {"scale", "not finite"});
        expect_error([&] { be.softcap(x, 0.0f); }, {"softcap", "must be positive"});
        expect_error([&] { be.softcap(x, -30.0f); }, {"softcap", "must be positive"});
    }
    SUBCASE("add_rms_norm") {
        // Valid: the same bits as add() then rms_norm() on this backend.
        Tensor x1 = f.f32(D, T), x2 = f.f32(D, T), y = f.f32(D, T), n1 = f.f32(D, T), n2 = f.f32(D, T), w = f.f32(D, 1);
        const std::vector<float> xv = ktest::random_floats(size_t(D * T), 50),
                                 yv = ktest::random_floats(size_t(D * T), 51);
        for (Tensor* t : {&x1, &x2}) be.upload(*t, xv.data(), t->bytes());
        be.upload(y, yv.data(), y.bytes());
        be.add_rms_norm(x1, y, w, 1e-5f, n1);
        be.add(x2, y);
        be.rms_norm(x2, w, 1e-5f, n2);
        const std::vector<float> a1 = f.read(x1), a2 = f.read(x2), b1 = f.read(n1), b2 = f.read(n2);
        REQUIRE(std::memcmp(a1.data(), a2.data(), a1.size() * 4) == 0);
        REQUIRE(std::memcmp(b1.data(), b2.data(), b1.size() * 4) == 0);
        Tensor y_short = f.f32(D, 2), w_bad = f.f32(D - 1, 1), n_narrow = f.f32(D / 2, T);
        expect_error([&] { be.add_rms_norm(x1, y_short, w, 1e-5f, n1); }, {"add_rms_norm", "differ"});
        expect_error([&] { be.add_rms_norm(x1, y, w_bad, 1e-5f, n1); }, {"add_rms_norm", "weight", "64 F32 values"});
        expect_error([&] { be.add_rms_norm(x1, y, w, 1e-5f, n_narrow); }, {"add_rms_norm", "out", "64 columns"});
        // norm_add_rms_norm: rms_norm of y in place, then add_rms_norm, the same bits.
        Tensor y1 = f.f32(D, T), y2 = f.f32(D, T), wy = f.f32(D, 1);
        for (Tensor* t : {&y1, &y2}) be.upload(*t, yv.data(), t->bytes());
        be.norm_add_rms_norm(x1, y1, wy, w, 1e-5f, n1);
        be.rms_norm(y2, wy, 1e-5f, y2);
        be.add_rms_norm(x2, y2, w, 1e-5f, n2);
        CHECK(f.read(x1) == f.read(x2));
        CHECK(f.read(y1) == f.read(y2));
        CHECK(f.read(n1) == f.read(n2));
        expect_error([&] { be.norm_add_rms_norm(x1, y1, w_bad, w, 1e-5f, n1); },
                     {"norm_add_rms_norm", "weight", "64 F32 values"});
        expect_error([&] { be.norm_add_rms_norm(x1, y_short, wy, w, 1e-5f, n1); }, {"norm_add_rms_norm", "differ"});
    }
    SUBCASE("store_kv and attention") {
        KvLayer layer;
        layer.k = f.typed(DType::F16, H * HD, 16);
        layer.v = f.typed(DType::F16, H * HD, 16);
        layer.n_kv_heads = H;
        layer.head_dim = HD;
        Tensor k = f.f32(H * HD, T), v = f.f32(H * HD, T), k_bad = f.f32(HD, T);
        expect_error([&] { be.store_kv(layer, k_bad, v); }, {"store_kv", "k (3 x 32 F32)", "64 columns"});
        Batch far = batch;
        far.kv_slot[2] = 16;
        be.set_batch(far.info());
        expect_error([&] { be.store_kv(layer, k, v); }, {"store_kv", "KV slot 16", "16 slots"});
        be.set_batch(batch.info());
        KvLayer f32_layer = layer;
        f32_layer.k = f.typed(DType::F32, H * HD, 16);
        f32_layer.v = f.typed(DType::F32, H * HD, 16);
        expect_error([&] { be.store_kv(f32_layer, k, v); }, {"store_kv", "F16 or Q8_0"});
        be.store_kv(layer, k, v);  // valid

        // rope_store_kv: rope's and store_kv's checks on token rows; valid, the bits of the
        // three ops (the cache read back as keys and values rotated and stored apart).
        RopeParams pq, pk;
        pq.n_heads = 4, pq.head_dim = pq.n_rot = HD, pk = pq, pk.n_heads = H;
        Tensor q_tok = f.f32(4 * HD, T), q_odd = f.f32(3 * HD, T);
        expect_error([&] { be.rope_store_kv(layer, q_odd, k, v, pq, pk); }, {"rope_store_kv", "not token rows"});
        expect_error([&] { be.rope_store_kv(f32_layer, q_tok, k, v, pq, pk); }, {"rope_store_kv", "F16 or Q8_0"});
        const std::vector<float> qv = ktest::random_floats(size_t(4 * HD * T), 52),
                                 kv = ktest::random_floats(size_t(H * HD * T), 53);
        Tensor q2 = f.f32(4 * HD, T), k2 = f.f32(H * HD, T), k_back = f.f32(H * HD, T), v_back = f.f32(H * HD, T);
        for (Tensor* t : {&q_tok, &q2}) be.upload(*t, qv.data(), t->bytes());
        for (Tensor* t : {&k, &k2}) be.upload(*t, kv.data(), t->bytes());
        be.rope_store_kv(layer, q_tok, k, v, pq, pk);
        Tensor q2h = q2.reshape(HD), k2h = k2.reshape(HD);
        be.rope(q2h, pq);
        be.rope(k2h, pk);
        be.load_kv(layer, k_back, v_back);
        CHECK(f.read(q_tok) == f.read(q2));
        CHECK(f.read(k) == f.read(k2));
        be.store_kv(layer, k2, v);
        Tensor k_back2 = f.f32(H * HD, T), v_back2 = f.f32(H * HD, T);
        be.load_kv(layer, k_back2, v_back2);
        CHECK(f.read(k_back) == f.read(k_back2));
        CHECK(f.read(v_back) == f.read(v_back2));

        AttentionParams ap;
        ap.n_heads = 3;
        ap.n_kv_heads = H;
        ap.head_dim = HD;
        Tensor q = f.f32(3 * HD, T), out = f.f32(3 * HD, T);
        expect_error([&] { be.attention(layer, q, ap, out); }, {"attention", "multiple of n_kv_heads"});
        ap.n_heads = 4;
        Tensor q4 = f.f32(4 * HD, T), o4 = f.f32(4 * HD, T);
        ap.head_dim = 16;
        expect_error([&] { be.attention(layer, q4, ap, o4); }, {"attention", "does not match the params"});
        ap.head_dim = HD;
        Tensor q_short = f.f32(4 * HD, T - 1);
        expect_error([&] { be.attention(layer, q_short, ap, o4); }, {"attention", "one row per token", "(3)"});
        be.attention(layer, q4, ap, o4);  // valid
        for (float x : f.read(o4)) REQUIRE(std::isfinite(x));
    }
    SUBCASE("moe_route, moe_matmul and moe_combine") {
        const int64_t E = 4, K = 2, R = 8;
        Tensor logits = f.f32(E, T), ids = f.typed(DType::I32, K, T), w = f.f32(K, T);
        expect_error(
            [&] {
                be.moe_route(logits, {E + 1, MoeGating::Softmax, true, 1.0f}, ids, w);
            },
            {"moe_route", "n_used = 5", "1..4"});
        Tensor ids_f32 = f.f32(K, T);
        expect_error(
            [&] {
                be.moe_route(logits, {K, MoeGating::Softmax, true, 1.0f}, ids_f32, w);
            },
            {"moe_route", "ids", "I32"});
        Tensor w_short = f.f32(K, T - 1);
        expect_error(
            [&] {
                be.moe_route(logits, {K, MoeGating::Softmax, true, 1.0f}, ids, w_short);
            },
            {"moe_route", "weights", "fewer than the 3 rows"});
        be.moe_route(logits, {K, MoeGating::SoftmaxTopK, false, 1.0f}, ids, w);  // valid

        Tensor exps = f.f32(D, E * R), x = f.f32(D, T), y = f.f32(R, T * K, 7.0f);
        expect_error([&] { be.moe_matmul(exps, 3, x, ids, y); }, {"moe_matmul", "3 experts of equal rows"});
        Tensor y_narrow = f.f32(R * E, T * K, 7.0f);
        expect_error([&] { be.moe_matmul(exps, E, x, ids, y_narrow); },
                     {"moe_matmul", "shapes do not match", "y.cols = W.rows / n_expert"});
        for (float v : f.read(y_narrow)) REQUIRE(v == 7.0f);  // untouched
        Tensor x_odd = f.f32(D, T + 1);
        expect_error([&] { be.moe_matmul(exps, E, x_odd, ids, y); }, {"moe_matmul", "x.rows = ids.rows"});
        Tensor bias_bad = f.f32(R, 1);
        expect_error([&] { be.moe_matmul(exps, E, x, ids, y, &bias_bad); }, {"moe_matmul", "bias", "32 F32 values"});
        be.moe_matmul(exps, E, x, ids, y);  // valid
        for (float v : f.read(y)) REQUIRE(v == 0.5f * 0.5f * float(D));

        Tensor out = f.f32(R, T), out_bad = f.f32(R + 1, T), y_short = f.f32(R, T * K - 1);
        expect_error([&] { be.moe_combine(y, w, out_bad); }, {"moe_combine", "out", "8 columns"});
        expect_error([&] { be.moe_combine(y_short, w, out); }, {"moe_combine", "weights.rows x weights.cols rows"});
        be.moe_combine(y, w, out);  // valid: the weights of each token sum to 1
        for (float v : f.read(out)) REQUIRE(std::fabs(v - 0.5f * 0.5f * float(D)) <= 1e-4f);
    }
    SUBCASE("gather_output_rows") {
        Tensor x = f.f32(D, 2), out = f.f32(D, 1);  // output row 2 is outside x
        expect_error([&] { be.gather_output_rows(x, out); }, {"gather_output_rows", "output row 2"});
        Tensor x3 = f.f32(D, T), out_bad = f.f32(D + 1, 1);
        expect_error([&] { be.gather_output_rows(x3, out_bad); }, {"gather_output_rows", "out", "64 columns"});
    }
    SUBCASE("top_k") {
        Tensor logits = f.f32(100, 2);
        std::vector<TopKRow> rows(2);
        std::vector<TopKCandidate> out(2 * 10);
        std::vector<int32_t> counts(2);
        expect_error([&] { be.top_k(logits, 0, rows, out, counts); }, {"top_k", "k = 0", "1..1024"});
        expect_error([&] { be.top_k(logits, kMaxTopK + 1, rows, out, counts); }, {"top_k", "k = 1025"});
        expect_error([&] { be.top_k(logits, 11, rows, out, counts); }, {"top_k", "output spans too small"});
        std::vector<TopKRow> three(3);
        expect_error([&] { be.top_k(logits, 10, three, out, counts); }, {"top_k", "3 rows", "2 x 100 F32"});
        be.top_k(logits, 10, rows, out, counts);  // valid
        CHECK(counts[0] == 10);
    }
}

}  // namespace

TEST_CASE("every op of the CPU backend checks its arguments") {
    auto be = make_cpu_backend(1);
    check_contract(*be);
}

TEST_CASE("the CUDA backend, where one loads, checks the same way") {
    BackendRequest req;
    req.preference = BackendPreference::Cuda;
    BackendChoice c = choose_backend(req);
    if (c.device == "cpu") {
        MESSAGE("no CUDA backend here (", c.reason, "): the checks ran on the CPU backend above");
        return;
    }
    check_contract(*c.backend);
}
