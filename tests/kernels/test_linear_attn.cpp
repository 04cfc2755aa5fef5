// The linear-attention ops of qwen35 (kernels/backend.h: ssm_conv, gated_delta_rule, copy and
// the sigmoid gate) on the CPU backend, against float64 references written from the math
// the header states, on seeded random inputs, with two sequences whose tokens share a batch
// and whose states start from random values in slots other than their index.
//
// Tolerances:
//  * ssm_conv: a sum of conv_kernel (4) float products then SiLU: 8 * 2^-24 relative to the
//    sum of |products| plus SiLU's exp (2e-7 relative): 1e-6 * (sum |x w| + 1e-3).
//  * gated_delta_rule: each token's state row is a float dot product over head_dim (32) and
//    an update; errors carry over tokens, scaled down by the decay (< 1) and the delta rule
//    (which pulls S k toward v). Bound 2e-5 * (|ref| + max|v|) per output and state element,
//    for up to 100 tokens: 4 orders above float rounding of one step (measured worst 1.4e-8)
//    and well below what a wrong head, sign or gate gives (of order 1).
//  * Splitting a sequence's tokens over passes (prefill chunks, decode steps) changes nothing:
//    the ops walk tokens in order either way, so the results are bitwise equal.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "tools/op_data/op_data.h"

using namespace ember;
using opdata::get;
using opdata::put;

namespace {

constexpr int32_t kKernel = 4, kHkeys = 2, kHvals = 4, kDim = 32, kSlots = 3;

struct Shape {
    int64_t channels() const { return int64_t{2 * kHkeys + kHvals} * kDim; }
};

// Two sequences in slots 2 and 0: sequence 0's tokens then sequence 1's (n0 and n1 of them).
opdata::Batch two_seqs(int n0, int n1, std::vector<int32_t>& slots) {
    opdata::Batch b = opdata::simple_batch(n0 + n1);
    b.n_seqs = 2;
    b.seq_of.assign(size_t(n0), 0);
    b.seq_of.insert(b.seq_of.end(), size_t(n1), 1);
    b.kv_slot.assign(size_t(n0 + n1), 0);
    b.block_table = {0, 0};
    slots = {2, 0};
    return b;
}

BatchInfo with_slots(const opdata::Batch& b, const std::vector<int32_t>& slots) {
    BatchInfo i = b.info();
    i.state_slot = slots;
    return i;
}

RecurrentLayer make_state(Backend& be, uint32_t seed) {
    RecurrentLayer s;
    s.n_slots = kSlots, s.conv_kernel = kKernel, s.conv_channels = static_cast<int32_t>(Shape{}.channels());
    s.n_k_heads = kHkeys, s.n_v_heads = kHvals, s.head_dim = kDim;
    s.conv = put(be, ktest::random_floats(size_t(kSlots * (kKernel - 1) * s.conv_channels), seed), s.conv_channels,
                 kSlots * (kKernel - 1), MemoryKind::KvCache);
    s.delta = put(be, ktest::random_floats(size_t(kSlots * kHvals * kDim * kDim), seed + 1, 0.1f), kDim,
                  kSlots * kHvals * kDim, MemoryKind::KvCache);
    return s;
}

void free_state(Backend& be, RecurrentLayer& s) {
    be.free(s.conv);
    be.free(s.delta);
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// The convolution of one sequence's rows of x (rows `toks`), from and into `state` (one slot).
void conv_ref(const std::vector<float>& x, const std::vector<int64_t>& toks, const std::vector<float>& w,
              std::vector<double>& state, std::vector<double>& out, std::vector<double>& mag) {
    const int64_t C = Shape{}.channels();
    for (int64_t t : toks)
        for (int64_t c = 0; c < C; ++c) {
            double s = 0, m = 0;
            for (int k = 0; k < kKernel; ++k) {
                const double in = k < kKernel - 1 ? state[size_t(k * C + c)] : x[size_t(t * C + c)];
                s += in * w[size_t(c * kKernel + k)];
                m += std::fabs(in * w[size_t(c * kKernel + k)]);
            }
            out[size_t(t * C + c)] = silu(s);
            mag[size_t(t * C + c)] = m;
            for (int k = 0; k + 1 < kKernel - 1; ++k) state[size_t(k * C + c)] = state[size_t((k + 1) * C + c)];
            state[size_t((kKernel - 2) * C + c)] = x[size_t(t * C + c)];
        }
}

struct DeltaInputs {
    std::vector<float> q, k, v, alpha, beta, dt_bias, a;
};

DeltaInputs delta_inputs(int64_t T, uint32_t seed) {
    DeltaInputs d;
    d.q = ktest::random_floats(size_t(T * kHkeys * kDim), seed);
    d.k = ktest::random_floats(size_t(T * kHkeys * kDim), seed + 1);
    d.v = ktest::random_floats(size_t(T * kHvals * kDim), seed + 2);
    d.alpha = ktest::random_floats(size_t(T * kHvals), seed + 3);
    d.beta = ktest::random_floats(size_t(T * kHvals), seed + 4);
    d.dt_bias = ktest::random_floats(size_t(kHvals), seed + 5);
    for (int h = 0; h < kHvals; ++h) d.a.push_back(-0.5f * float(h + 1));  // -exp(A_log): negative
    return d;
}

// The recurrent form in float64 for one sequence (tokens `toks`) and its slot's state S
// ([head][value j][key i]); value head h reads key head h % kHkeys (qwen35) or, grouped,
// h / (kHvals / kHkeys) (qwen3next).
void delta_ref(const DeltaInputs& in, const std::vector<int64_t>& toks, std::vector<double>& S,
               std::vector<double>& out, float eps, bool grouped) {
    for (int64_t t : toks)
        for (int h = 0; h < kHvals; ++h) {
            const int kh = grouped ? h / (kHvals / kHkeys) : h % kHkeys;
            std::vector<double> q(kDim), k(kDim);
            double qq = 0, kk = 0;
            for (int i = 0; i < kDim; ++i) {
                q[size_t(i)] = in.q[size_t((t * kHkeys + kh) * kDim + i)];
                k[size_t(i)] = in.k[size_t((t * kHkeys + kh) * kDim + i)];
                qq += q[size_t(i)] * q[size_t(i)];
                kk += k[size_t(i)] * k[size_t(i)];
            }
            for (int i = 0; i < kDim; ++i) q[size_t(i)] /= std::sqrt(qq + eps), k[size_t(i)] /= std::sqrt(kk + eps);
            const double x = double(in.alpha[size_t(t * kHvals + h)]) + in.dt_bias[size_t(h)];
            const double g = std::log1p(std::exp(x)) * in.a[size_t(h)];
            const double b = 1 / (1 + std::exp(-double(in.beta[size_t(t * kHvals + h)])));
            double* s = &S[size_t(h) * kDim * kDim];
            for (int j = 0; j < kDim; ++j) {
                double sk = 0;
                for (int i = 0; i < kDim; ++i) sk += (s[j * kDim + i] *= std::exp(g)) * k[size_t(i)];
                const double d = (in.v[size_t((t * kHvals + h) * kDim + j)] - sk) * b;
                double o = 0;
                for (int i = 0; i < kDim; ++i) o += (s[j * kDim + i] += d * k[size_t(i)]) * q[size_t(i)];
                out[size_t((t * kHvals + h) * kDim + j)] = o / std::sqrt(double(kDim));
            }
        }
}

}  // namespace

TEST_CASE("ssm_conv: causal convolution with each sequence's rolling state, then SiLU") {
    auto be = make_cpu_backend(2);
    const int n0 = 7, n1 = 2, T = n0 + n1;
    const int64_t C = Shape{}.channels();
    std::vector<int32_t> slots;
    const opdata::Batch b = two_seqs(n0, n1, slots);
    be->set_batch(with_slots(b, slots));
    RecurrentLayer st = make_state(*be, 11);
    const std::vector<float> state0 = get(*be, st.conv), xv = ktest::random_floats(size_t(T * C), 13),
                             wv = ktest::random_floats(size_t(C * kKernel), 14);
    Tensor x = put(*be, xv, C, T), w = put(*be, wv, kKernel, C),
           out = put(*be, std::vector<float>(size_t(T * C)), C, T);
    opdata::poison(*be, out);
    be->ssm_conv(st, x, w, out);
    const std::vector<float> got = get(*be, out), state1 = get(*be, st.conv);

    std::vector<double> ref(size_t(T * C)), mag(size_t(T * C));
    const int64_t slot_floats = (kKernel - 1) * C;
    std::vector<std::vector<int64_t>> toks = {{0, 1, 2, 3, 4, 5, 6}, {7, 8}};
    for (int s = 0; s < 2; ++s) {
        const auto first = state0.begin() + slots[size_t(s)] * slot_floats;
        std::vector<double> state(first, first + slot_floats);
        conv_ref(xv, toks[size_t(s)], wv, state, ref, mag);
        for (int64_t i = 0; i < slot_floats; ++i)
            CHECK(state1[size_t(slots[size_t(s)] * slot_floats + i)] == float(state[size_t(i)]));
    }
    for (size_t i = 0; i < ref.size(); ++i) CHECK(std::fabs(got[i] - ref[i]) <= 1e-6 * (mag[i] + 1e-3));
    // The slot no sequence uses is untouched.
    for (int64_t i = 0; i < slot_floats; ++i) CHECK(state1[size_t(slot_floats + i)] == state0[size_t(slot_floats + i)]);
    for (Tensor* t : {&x, &w, &out}) be->free(*t);
    free_state(*be, st);
}

namespace {

// One run of gated_delta_rule on two sequences of n0 and n1 tokens against float64.
void check_delta_rule(cpu::Isa isa, int n0, int n1, bool grouped) {
    auto be = make_cpu_backend(2);
    const int T = n0 + n1;

    std::vector<int32_t> slots;
    const opdata::Batch b = two_seqs(n0, n1, slots);
    be->set_batch(with_slots(b, slots));
    RecurrentLayer st = make_state(*be, 21);
    const std::vector<float> S0 = get(*be, st.delta);
    const DeltaInputs in = delta_inputs(T, 31);
    Tensor q = put(*be, in.q, kHkeys * kDim, T), k = put(*be, in.k, kHkeys * kDim, T),
           v = put(*be, in.v, kHvals * kDim, T), alpha = put(*be, in.alpha, kHvals, T),
           beta = put(*be, in.beta, kHvals, T), dt = put(*be, in.dt_bias, kHvals, 1), a = put(*be, in.a, kHvals, 1),
           out = put(*be, std::vector<float>(size_t(T * kHvals * kDim)), kHvals * kDim, T);
    opdata::poison(*be, out);
    const DeltaRuleParams p{1e-6f, &dt, &a, grouped};
    be->gated_delta_rule(st, q, k, v, alpha, beta, p, out);
    const std::vector<float> got = get(*be, out), S1 = get(*be, st.delta);

    float vmax = 0;
    for (float x : in.v) vmax = std::max(vmax, std::fabs(x));
    std::vector<double> ref(got.size());
    const size_t slot_floats = size_t(kHvals) * kDim * kDim;
    std::vector<std::vector<int64_t>> toks(2);
    for (int64_t t = 0; t < T; ++t) toks[t < n0 ? 0 : 1].push_back(t);
    for (int s = 0; s < 2; ++s) {
        const auto first = S0.begin() + std::ptrdiff_t(size_t(slots[size_t(s)]) * slot_floats);
        std::vector<double> S(first, first + std::ptrdiff_t(slot_floats));
        delta_ref(in, toks[size_t(s)], S, ref, 1e-6f, grouped);
        for (size_t i = 0; i < slot_floats; ++i) {
            const double g = S1[size_t(slots[size_t(s)]) * slot_floats + i];
            REQUIRE(std::fabs(g - S[i]) <= 2e-5 * (std::fabs(S[i]) + vmax));
        }
    }
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i)
        worst = std::max(worst, std::fabs(got[i] - ref[i]) / (std::fabs(ref[i]) + vmax));
    const std::string what = std::string(cpu::isa_name(isa)) + (grouped ? ", grouped heads" : "");
    MESSAGE(what, ", ", n0, "+", n1, " tokens: worst output error ", worst, " x (|ref| + max|v|)");
    for (size_t i = 0; i < ref.size(); ++i) REQUIRE(std::fabs(got[i] - ref[i]) <= 2e-5 * (std::fabs(ref[i]) + vmax));
    for (Tensor* t : {&q, &k, &v, &alpha, &beta, &dt, &a, &out}) be->free(*t);
    free_state(*be, st);
}

}  // namespace

// Short sequences (12 and 5 tokens) and long ones (100 and 70: the error carried over more
// tokens), against the recurrence in float64, on every ISA path; key heads shared tiled
// (qwen35) and grouped (qwen3next).
TEST_CASE("gated_delta_rule: the recurrent form matches float64, key heads shared in llama.cpp's order") {
    for (cpu::Isa isa : ktest::available_isas())  // the state rows' kernel is built per ISA
        for (auto [n0, n1] : {std::pair{12, 5}, std::pair{100, 70}})
            for (bool grouped : {false, true}) {
                const ktest::ForceIsa force{isa};
                REQUIRE(force.ok);
                check_delta_rule(isa, n0, n1, grouped);
            }
}

TEST_CASE("linear attention over several passes equals one pass, bitwise") {
    auto be = make_cpu_backend(2);
    const int T = 9, C = int(Shape{}.channels());
    const DeltaInputs in = delta_inputs(T, 41);
    const std::vector<float> xv = ktest::random_floats(size_t(T * C), 43), wv = ktest::random_floats(size_t(C * 4), 44);
    Tensor dt = put(*be, in.dt_bias, kHvals, 1), a = put(*be, in.a, kHvals, 1), w = put(*be, wv, kKernel, C);
    const DeltaRuleParams p{1e-6f, &dt, &a};
    const std::vector<int32_t> slot = {1};
    // Tokens [first, first + n) of the one sequence: its conv output and delta-rule output.
    auto run = [&](RecurrentLayer& st, int first, int n, std::vector<float>& conv_out, std::vector<float>& o) {
        const opdata::Batch b = opdata::simple_batch(n);
        be->set_batch(with_slots(b, slot));
        auto rows = [&](const std::vector<float>& v, int cols) {
            return put(*be, std::vector<float>(v.begin() + first * cols, v.begin() + (first + n) * cols), cols, n);
        };
        Tensor x = rows(xv, C), q = rows(in.q, kHkeys * kDim), k = rows(in.k, kHkeys * kDim),
               v = rows(in.v, kHvals * kDim), al = rows(in.alpha, kHvals), be_ = rows(in.beta, kHvals),
               co = put(*be, std::vector<float>(size_t(n * C)), C, n),
               out = put(*be, std::vector<float>(size_t(n * kHvals * kDim)), kHvals * kDim, n);
        be->ssm_conv(st, x, w, co);
        be->gated_delta_rule(st, q, k, v, al, be_, p, out);
        for (float f : get(*be, co)) conv_out.push_back(f);
        for (float f : get(*be, out)) o.push_back(f);
        for (Tensor* t : {&x, &q, &k, &v, &al, &be_, &co, &out}) be->free(*t);
    };
    RecurrentLayer one = make_state(*be, 51), split = make_state(*be, 51);
    std::vector<float> c1, o1, c2, o2;
    run(one, 0, T, c1, o1);
    run(split, 0, 5, c2, o2);  // a prefill chunk, then decode steps
    for (int t = 5; t < T; ++t) run(split, t, 1, c2, o2);
    CHECK(c1 == c2);
    CHECK(o1 == o2);
    CHECK(get(*be, one.conv) == get(*be, split.conv));
    CHECK(get(*be, one.delta) == get(*be, split.delta));
    for (Tensor* t : {&dt, &a, &w}) be->free(*t);
    free_state(*be, one);
    free_state(*be, split);
}

TEST_CASE("copy of a column view, into a column view, and the sigmoid gate") {
    auto be = make_cpu_backend(2);
    const int64_t rows = 6, D = 8;
    const std::vector<float> qg = ktest::random_floats(size_t(rows * 2 * D), 61),
                             up = ktest::random_floats(size_t(rows * D), 62);
    Tensor both = put(*be, qg, 2 * D, rows), gate = put(*be, std::vector<float>(size_t(rows * D)), D, rows),
           u = put(*be, up, D, rows);
    be->set_batch(opdata::simple_batch(rows).info());
    be->copy(both.slice_cols(D, D), gate);  // the second half of every row
    const std::vector<float> g = get(*be, gate);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < D; ++c) CHECK(g[size_t(r * D + c)] == qg[size_t(r * 2 * D + D + c)]);
    {  // into a column view: the first half of every row of a copy of `both`, the rest untouched
        Tensor into = put(*be, qg, 2 * D, rows);
        Tensor first = into.slice_cols(0, D);
        be->copy(gate, first);
        const std::vector<float> w = get(*be, into);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < 2 * D; ++c)
                CHECK(w[size_t(r * 2 * D + c)] == (c < D ? g[size_t(r * D + c)] : qg[size_t(r * 2 * D + c)]));
        be->free(into);
    }
    be->glu(gate, u, GluAct::Sigmoid, gate);
    const std::vector<float> o = get(*be, gate);
    for (size_t i = 0; i < o.size(); ++i) {
        const double ref = double(up[i]) / (1 + std::exp(-double(g[i])));
        CHECK(std::fabs(o[i] - ref) <= 2e-6 * std::fabs(ref) + 1e-9);
    }
    for (Tensor* t : {&both, &gate, &u}) be->free(*t);
}
