// matmul against a float64 reference for every weight type, odd shapes, decode (gemv) and
// prefill (gemm) token counts, and every ISA path the machine supports.
//
// Tolerances (stated per element y[t][r]):
//  * float weights: |err| <= 4 * K * 2^-24 * sum_c |w x| (f32 accumulation of K products).
//  * quantized weights, random activations: activations are rounded to 8-bit blocks with step
//    d_b = max_b|x| / 127, so |x - x_q| <= d_b / 2 per element and
//    |err| <= sum_b (d_b / 2) * sum_{c in b} |w_c| + 4 K 2^-24 sum |w x|.
//    Where d_b is stored as a half float (ggml's q8_0 / q8_1: Q4_0, Q4_1, Q5_*, Q8_0, MXFP4),
//    each code |q| <= 127 is scaled by d_b (1 + e), |e| <= 2^-11: up to 127 d_b 2^-11 =
//    max_b|x| 2^-11 more per element, times |w_c|.
//    This is a proven bound, yet tight enough that any misplaced block, scale or offset
//    (errors of order |w x| of whole blocks) exceeds it.
//  * quantized weights, activations exactly representable in 8 bits (each block holds
//    +-127 * 2^e and integer multiples of 2^e): only float rounding remains, so
//    |err| <= 4 K 2^-24 sum |w x|.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant.h"
#include "test_data.h"

using ember::DType;
using namespace ember::cpu;

namespace {

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                           DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Activation block size the int8 kernels use for this weight type.
int act_block(DType t) { return (t == DType::Q2_K || t == DType::Q3_K || t == DType::Q6_K) ? 16 : 32; }

// Weight types whose activation scales are rounded to half floats, as ggml's q8_0 / q8_1.
bool half_scale(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
           t == DType::MXFP4;
}

// Activations exactly representable as 8-bit blocks of 32: per block a power-of-two step,
// +-127 steps at elements 0 and 16, other elements integer multiples of the step.
std::vector<float> exact_activations(int64_t n, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> code(-127, 127), expo(-8, 2), sign(0, 1);
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (int64_t b = 0; b < n * cols / 32; ++b) {
        const float step = std::ldexp(1.0f, expo(rng));
        for (int j = 0; j < 32; ++j) {
            const int q = (j % 16 == 0) ? (sign(rng) ? 127 : -127) : code(rng);
            x[static_cast<size_t>(b * 32 + j)] = static_cast<float>(q) * step;
        }
    }
    return x;
}

// Concatenates its arguments as an ostream would print them.
template <typename... Args>
std::string cat(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}

struct Check {
    double worst_ratio = 0;  // max |err| / tolerance
    std::string where;
};

// Compares Y with the float64 product of the dequantized weights, element by element.
Check compare(DType type, const std::vector<float>& w, const std::vector<float>& x, const std::vector<float>& y,
              int64_t rows, int64_t cols, int64_t n, bool exact_x) {
    Check c;
    const int G = act_block(type);
    for (int64_t t = 0; t < n; ++t) {
        const float* xt = x.data() + t * cols;
        for (int64_t r = 0; r < rows; ++r) {
            const float* wr = w.data() + r * cols;
            double ref = 0, mag = 0, act_err = 0;
            for (int64_t b = 0; b < cols / G; ++b) {
                double amax = 0, wabs = 0;
                for (int j = 0; j < G; ++j) {
                    const int64_t i = b * G + j;
                    ref += double(wr[i]) * xt[i];
                    mag += std::fabs(double(wr[i]) * xt[i]);
                    amax = std::max(amax, std::fabs(double(xt[i])));
                    wabs += std::fabs(double(wr[i]));
                }
                act_err += amax * (1.0 / 127.0 / 2.0 + (half_scale(type) ? std::ldexp(1.0, -11) : 0.0)) * wabs;
            }
            double tol = 4.0 * double(cols) * std::ldexp(1.0, -24) * mag + 1e-30;
            if (!is_float(type) && !exact_x) tol += act_err * 1.0001;
            const double err = std::fabs(double(y[size_t(t * rows + r)]) - ref);
            if (err / tol > c.worst_ratio) {
                c.worst_ratio = err / tol;
                c.where = cat("t=", t, " r=", r, " got ", y[size_t(t * rows + r)], " want ", ref, " tol ", tol);
            }
            if (std::isnan(y[size_t(t * rows + r)])) {
                c.worst_ratio = INFINITY;
                c.where = cat("NaN at t=", t, " r=", r);
                return c;
            }
        }
    }
    return c;
}

void run_case(DType type, int64_t rows, int64_t cols, int64_t n, bool exact_x, ThreadPool& pool, uint32_t seed) {
    const std::vector<uint8_t> wq = ktest::random_weights(type, rows, cols, seed);
    const std::vector<float> w = ktest::dequantize_matrix(type, wq.data(), rows, cols);
    const std::vector<float> x =
        exact_x ? exact_activations(n, cols, seed + 1) : ktest::random_floats(size_t(n * cols), seed + 1);
    std::vector<float> y(size_t(n * rows), NAN);
    matmul(make_weight_matrix(type, rows, cols, wq.data()), x.data(), n, y.data(), pool);
    const Check c = compare(type, w, x, y, rows, cols, n, exact_x);
    REQUIRE_MESSAGE(c.worst_ratio <= 1.0, std::string(ember::dtype_name(type)), " ", rows, "x", cols, " n=", n, " ",
                    (exact_x ? "exact-x" : "random-x"), ": error ", c.worst_ratio, "x tolerance at ", c.where);
}

}  // namespace

// One subcase per (ISA, weight type), named like "avx2/Q4_K".
std::string isa_type_name(Isa isa, DType t) {
    return std::string(isa_name(isa)) + "/" + std::string(ember::dtype_name(t));
}

TEST_CASE("all types, shapes and ISAs") {
    for (Isa isa : ktest::available_isas()) {
        for (DType t : kAllTypes) {
            SUBCASE(isa_type_name(isa, t).c_str()) {
                ktest::ForceIsa force{isa};
                REQUIRE(force.ok);
                const int block = int(ember::dtype_info(uint32_t(t))->block_elems);
                // 32*7 (odd number of 32-blocks, not a whole 512-element chunk), 256*3.
                std::vector<int64_t> col_sizes{256 * 3};
                if (block <= 32) col_sizes.push_back(32 * 7);
                ThreadPool pool(3);
                uint32_t seed = 100;
                for (int64_t cols : col_sizes) {
                    for (int64_t rows : {1, 3, 17, 67}) {
                        for (int64_t n : {1, 2, 4, 5, 8, 9, 33}) {
                            run_case(t, rows, cols, n, false, pool, ++seed);
                            if (!is_float(t)) run_case(t, rows, cols, n, true, pool, ++seed);
                        }
                    }
                }
            }
        }
    }
}

// Several panels, long rows (many chunks), both kernel families, 2 threads.
TEST_CASE("larger shapes") {
    for (Isa isa : ktest::available_isas()) {
        for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
            SUBCASE(isa_type_name(isa, t).c_str()) {
                ktest::ForceIsa force{isa};
                ThreadPool pool(2);
                for (int64_t n : {1, 3, 70}) run_case(t, 200, 2560, n, false, pool, 7);
            }
        }
    }
}

// Batch invariance (docs: kernels/cpu/README.md, "canonical order"): every output row has
// the same bits whatever the batch around it, so a token's result is the same in any batch
// the scheduler forms. For n = 1..40 tokens (gemv below gemv_max_tokens, gemm above, every
// gemm tile remainder) each row must equal, bitwise, the same token computed alone; and as
// all ISAs follow one order, the same bits on every ISA. 67 rows: two panels and a partial
// one; columns with a partial last 512-element chunk (and, for float weights, a K that is
// not a multiple of 16).
TEST_CASE("batch invariance: every row equals the token alone, bitwise") {
    constexpr int64_t kMaxTokens = 40, rows = 67;
    for (DType t : kAllTypes) {
        SUBCASE(std::string(ember::dtype_name(t)).c_str()) {
            const int block = int(ember::dtype_info(uint32_t(t))->block_elems);
            const int64_t cols = is_float(t) ? 1000 + 13 : block == 256 ? 256 * 5 : 32 * 23;
            const std::vector<uint8_t> wq = ktest::random_weights(t, rows, cols, 5);
            const WeightMatrix W = make_weight_matrix(t, rows, cols, wq.data());
            const std::vector<float> x = ktest::random_floats(size_t(kMaxTokens * cols), 6);
            ThreadPool pool(3);
            std::vector<float> first_isa;  // the tokens alone on the first ISA (scalar)
            for (Isa isa : ktest::available_isas()) {
                ktest::ForceIsa force{isa};
                REQUIRE(force.ok);
                std::vector<float> alone(size_t(kMaxTokens * rows));
                for (int64_t i = 0; i < kMaxTokens; ++i)
                    matmul(W, x.data() + i * cols, 1, alone.data() + i * rows, pool);
                std::vector<float> y(size_t(kMaxTokens * rows));
                for (int64_t n = 1; n <= kMaxTokens; ++n) {
                    std::fill(y.begin(), y.end(), NAN);
                    matmul(W, x.data(), n, y.data(), pool);
                    for (int64_t i = 0; i < n * rows; ++i) {
                        REQUIRE_MESSAGE(std::memcmp(&y[size_t(i)], &alone[size_t(i)], 4) == 0, isa_name(isa), " n=", n,
                                        " token ", i / rows, " row ", i % rows, ": ", y[size_t(i)], " alone ",
                                        alone[size_t(i)]);
                    }
                }
                if (first_isa.empty()) first_isa = alone;
                for (size_t i = 0; i < alone.size(); ++i) {
                    REQUIRE_MESSAGE(std::memcmp(&alone[i], &first_isa[i], 4) == 0, isa_name(isa), " token ", i / rows,
                                    " row ", i % rows, ": ", alone[i], " vs scalar ", first_isa[i]);
                }
            }
        }
    }
}

// Codes at (or next to) their maximum against activations at +-127 everywhere: the largest
// integer partial sums any kernel sees. The AVX2 gemm sums several vpmaddubsw results in
// int16 before widening (matmul_avx2.cpp, int16_steps); an overflow there would change the
// bits. Every token count and ISA must equal the scalar kernel's exact int32 dots, bitwise.
TEST_CASE("extreme codes: integer partial sums do not overflow") {
    constexpr int64_t rows = 24, cols = 512 + 256, n = 24;
    for (DType t : kAllTypes) {
        if (is_float(t)) continue;
        SUBCASE(std::string(ember::dtype_name(t)).c_str()) {
            const size_t rb = ember::row_bytes(*ember::dtype_info(uint32_t(t)), uint64_t(cols));
            std::vector<uint8_t> wq(rb * rows);
            if (t == DType::Q2_K || t == DType::Q3_K) {
                // No quantizer for these: random blocks with every code bit set (Q2_K: qs at
                // bytes 16..79 of 84; Q3_K: hmask and qs at bytes 0..95 of 110).
                wq = ktest::random_weights(t, rows, cols, 9);
                const size_t bb = t == DType::Q2_K ? 84 : 110, lo = t == DType::Q2_K ? 16 : 0,
                             hi = lo + (t == DType::Q2_K ? 64 : 96);
                for (size_t b = 0; b < wq.size(); b += bb) std::memset(&wq[b + lo], 0xFF, hi - lo);
            } else if (t == DType::MXFP4) {
                // Every element code 7 (value 12, the largest: unsigned code 24 in the kernels).
                wq = ktest::random_weights(t, rows, cols, 9);
                for (size_t b = 0; b < wq.size(); b += 17) std::memset(&wq[b + 1], 0x77, 16);
            } else {
                // Per 16 elements: one at -1 (the block's minimum, code 0), the rest at +0.93:
                // codes at or next to the type's largest.
                std::vector<float> w(size_t(rows * cols));
                for (size_t i = 0; i < w.size(); ++i) w[i] = (i % 16 == 0) ? -1.0f : 0.93f;
                for (int64_t r = 0; r < rows; ++r)
                    quantize_row(t, w.data() + r * cols, wq.data() + size_t(r) * rb, cols);
            }
            const WeightMatrix W = make_weight_matrix(t, rows, cols, wq.data());
            for (float sign : {1.0f, -1.0f}) {
                const std::vector<float> x(size_t(n * cols), sign);  // every code +-127
                std::vector<float> scalar(size_t(n * rows));
                ThreadPool pool(2);
                {
                    ktest::ForceIsa force{Isa::Scalar};
                    REQUIRE(force.ok);
                    matmul(W, x.data(), n, scalar.data(), pool);
                }
                for (Isa isa : ktest::available_isas()) {
                    ktest::ForceIsa force{isa};
                    for (int64_t m : {int64_t{1}, int64_t{5}, n}) {
                        std::vector<float> y(size_t(m * rows), NAN);
                        matmul(W, x.data(), m, y.data(), pool);
                        for (int64_t i = 0; i < m * rows; ++i)
                            REQUIRE_MESSAGE(std::memcmp(&y[size_t(i)], &scalar[size_t(i)], 4) == 0, isa_name(isa),
                                            " n=", m, " sign ", sign, " at ", i, ": ", y[size_t(i)], " scalar ",
                                            scalar[size_t(i)]);
                    }
                }
            }
        }
    }
}

// Real weights (first 64 rows of tensors in the test models, offsets as in test_quant.cpp)
// through every ISA against the float64 product of their dequantized values.
TEST_CASE("real weights") {
    struct RealWeights {
        const char* name;
        const char* file;
        uint64_t offset;
        DType type;
        int cols;
    };
    const RealWeights cases[] = {
        {"gemma Q4_K attn_output", "gemma-3-270m-q4_k_m.gguf", 184901824ull, DType::Q4_K, 1024},
        {"gemma Q6_K ffn_down", "gemma-3-270m-q4_k_m.gguf", 185896128ull, DType::Q6_K, 2048},
        {"gemma Q5_0 attn_q", "gemma-3-270m-q4_k_m.gguf", 185270464ull, DType::Q5_0, 640},
        {"gemma Q8_0 attn_v", "gemma-3-270m-q4_k_m.gguf", 185722048ull, DType::Q8_0, 640},
        {"smollm Q4_1 ffn_down", "SmolLM2-135M-Instruct.Q4_1.gguf", 31868992ull, DType::Q4_1, 1536},
    };
    for (const RealWeights& rw : cases) {
        SUBCASE(rw.name) {
            const std::string path = ember::test::test_model(rw.file);
            EMBER_REQUIRE_FILE(path);
            std::ifstream f(path, std::ios::binary);
            REQUIRE_MESSAGE(f.good(), "cannot open ", path);
            const DType t = rw.type;
            const int64_t rows = 64, cols = rw.cols;
            const size_t rb = ember::row_bytes(*ember::dtype_info(uint32_t(t)), uint64_t(cols));
            std::vector<uint8_t> bytes(rb * rows);
            f.seekg(std::streamoff(rw.offset));
            REQUIRE(f.good());
            f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
            REQUIRE(size_t(f.gcount()) == rb * rows);
            const uint8_t* wq = bytes.data();
            const std::vector<float> w = ktest::dequantize_matrix(t, wq, rows, cols);
            ThreadPool pool(2);
            for (Isa isa : ktest::available_isas()) {
                ktest::ForceIsa force{isa};
                for (int64_t n : {1, 3, 24}) {
                    const std::vector<float> x = ktest::random_floats(size_t(n * cols), 77);
                    std::vector<float> y(static_cast<size_t>(n * rows), NAN);
                    matmul(WeightMatrix{t, rows, cols, wq, rb}, x.data(), n, y.data(), pool);
                    const Check c = compare(t, w, x, y, rows, cols, n, false);
                    REQUIRE_MESSAGE(c.worst_ratio <= 1.0, std::string(isa_name(isa)), " n=", n, ": error ",
                                    c.worst_ratio, "x tolerance at ", c.where);
                }
            }
        }
    }
}

TEST_CASE("vec_dot") {
    for (Isa isa : ktest::available_isas()) {
        ktest::ForceIsa force{isa};
        for (int64_t n : {1, 7, 16, 33, 1000}) {
            const auto a = ktest::random_floats(size_t(n), 1), b = ktest::random_floats(size_t(n), 2);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; ++i) {
                ref += double(a[size_t(i)]) * b[size_t(i)];
                mag += std::fabs(double(a[size_t(i)]) * b[size_t(i)]);
            }
            const float got = vec_dot_f32(a.data(), b.data(), n);
            REQUIRE_MESSAGE(std::fabs(got - ref) <= 4.0 * double(n) * std::ldexp(1.0, -24) * mag,
                            std::string(isa_name(isa)), " n=", n, ": ", got, " vs ", ref);
        }
    }
}

TEST_CASE("get_rows dequantizes") {
    const int64_t cols = 512;
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
        const std::string type_name(ember::dtype_name(t));
        CAPTURE(type_name);
        const auto wq = ktest::random_weights(t, 10, cols, 3);
        const auto w = ktest::dequantize_matrix(t, wq.data(), 10, cols);
        const int32_t ids[] = {7, 0, 7, 9};
        std::vector<float> out(4 * cols);
        get_rows(make_weight_matrix(t, 10, cols, wq.data()), ids, 4, out.data());
        for (int i = 0; i < 4; ++i)
            for (int64_t c = 0; c < cols; ++c) REQUIRE(out[size_t(i * cols + c)] == w[size_t(ids[i] * cols + c)]);
    }
}

// Q4_0, Q4_1 and Q8_0 rearranged into 32-row panels (weight_panels.h, what the CPU backend does at load under
// AVX-512): the same bits as the GGUF rows for every token count and ISA (ISAs without panel
// kernels convert back to rows), whole panels and a partial one, rows of whole and partial
// 512-element chunks, and get_rows reading either layout.
TEST_CASE("panel layout: bitwise equal to the rows") {
    constexpr int64_t kMaxTokens = 20;
    for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q8_0})
        for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{67, 32 * 23}, {96, 2048 + 32}, {32, 512}}) {
            CAPTURE(type);
            CAPTURE(rows);
            CAPTURE(cols);
            const std::vector<uint8_t> wq = ktest::random_weights(type, rows, cols, 11);
            const WeightMatrix W = make_weight_matrix(type, rows, cols, wq.data());
            ThreadPool pool(3);
            std::vector<uint8_t> packed(wq.size());
            repack_weight(W, WeightLayout::Panels, packed.data(), pool);
            REQUIRE(std::memcmp(packed.data(), wq.data(), 64) != 0);  // really rearranged
            WeightMatrix P = W;
            P.data = packed.data();
            P.layout = WeightLayout::Panels;

            const std::vector<float> x = ktest::random_floats(size_t(kMaxTokens * cols), 12);
            for (Isa isa : ktest::available_isas()) {
                ktest::ForceIsa force{isa};
                REQUIRE(force.ok);
                for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{6}, int64_t{7}, int64_t{12}, int64_t{16},
                                  kMaxTokens}) {
                    std::vector<float> want(size_t(n * rows), NAN), got(size_t(n * rows), NAN);
                    matmul(W, x.data(), n, want.data(), pool);
                    matmul(P, x.data(), n, got.data(), pool);
                    for (int64_t i = 0; i < n * rows; ++i)
                        REQUIRE_MESSAGE(std::memcmp(&got[size_t(i)], &want[size_t(i)], 4) == 0, isa_name(isa), " n=", n,
                                        " token ", i / rows, " row ", i % rows, ": ", got[size_t(i)], " rows ",
                                        want[size_t(i)]);
                }
            }
            std::vector<int32_t> ids(static_cast<size_t>(rows));
            for (int64_t r = 0; r < rows; ++r) ids[size_t(r)] = int32_t(rows - 1 - r);
            std::vector<float> from_rows(size_t(rows * cols)), from_panels(size_t(rows * cols));
            get_rows(W, ids.data(), int(rows), from_rows.data());
            get_rows(P, ids.data(), int(rows), from_panels.data());
            REQUIRE(from_rows == from_panels);
        }
}

// matmul_shared (q/k/v, gate/up): each output bitwise matmul()'s, whether the matrices share
// one quantization and dispatch (same activation blocks: Q4_0s; Q4_1 with Q8_0) or not
// (Q4_0 with Q8_0: different code offsets; a matrix in rows), with partial panels.
TEST_CASE("shared input: bitwise equal to one matmul each") {
    constexpr int64_t kCols = 32 * 23, kMaxTokens = 16;
    struct Part {
        DType type;
        int64_t rows;
        bool panels;
    };
    const std::vector<std::vector<Part>> sets = {
        {{DType::Q4_0, 96, true}, {DType::Q4_0, 35, true}, {DType::Q4_0, 64, true}},
        {{DType::Q4_1, 67, true}, {DType::Q8_0, 32, true}},
        {{DType::Q4_0, 64, true}, {DType::Q8_0, 40, true}},
        {{DType::Q4_0, 64, true}, {DType::Q4_0, 64, false}},
    };
    const std::vector<float> x = ktest::random_floats(size_t(kMaxTokens * kCols), 21);
    ThreadPool pool(3);
    for (size_t set = 0; set < sets.size(); ++set) {
        CAPTURE(set);
        std::vector<std::vector<uint8_t>> rows_data, panel_data;
        std::vector<WeightMatrix> plain;
        std::vector<SharedOut> outs;
        for (const Part& p : sets[set]) {
            rows_data.push_back(ktest::random_weights(p.type, p.rows, kCols, 30 + uint32_t(plain.size())));
            plain.push_back(make_weight_matrix(p.type, p.rows, kCols, rows_data.back().data()));
        }
        for (size_t i = 0; i < plain.size(); ++i) {
            WeightMatrix W = plain[i];
            panel_data.emplace_back(rows_data[i].size());
            if (sets[set][i].panels && preferred_layout(W.type, W.rows, W.cols) == WeightLayout::Panels) {
                repack_weight(W, WeightLayout::Panels, panel_data.back().data(), pool);
                W.data = panel_data.back().data();
                W.layout = WeightLayout::Panels;
            }
            outs.push_back({W, nullptr});
        }
        for (Isa isa : ktest::available_isas()) {
            ktest::ForceIsa force{isa};
            REQUIRE(force.ok);
            for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{6}, int64_t{9}, kMaxTokens}) {
                std::vector<std::vector<float>> got(outs.size());
                for (size_t i = 0; i < outs.size(); ++i) {
                    got[i].assign(size_t(n * outs[i].W.rows), NAN);
                    outs[i].Y = got[i].data();
                }
                matmul_shared(outs.data(), int(outs.size()), x.data(), n, pool);
                for (size_t i = 0; i < outs.size(); ++i) {
                    std::vector<float> want(size_t(n * plain[i].rows), NAN);
                    matmul(plain[i], x.data(), n, want.data(), pool);
                    REQUIRE_MESSAGE(std::memcmp(got[i].data(), want.data(), want.size() * 4) == 0, isa_name(isa),
                                    " n=", n, " output ", i);
                }
            }
        }
    }
}

TEST_CASE("preferred layout") {
    const bool avx512 = detected_isa() == Isa::Avx512;
    CHECK((preferred_layout(DType::Q4_0, 64, 2048) == WeightLayout::Panels) == avx512);
    CHECK(preferred_layout(DType::Q4_0, 31, 2048) == WeightLayout::Rows);
    CHECK((preferred_layout(DType::Q4_1, 64, 2048) == WeightLayout::Panels) == avx512);
    CHECK((preferred_layout(DType::Q8_0, 64, 2048) == WeightLayout::Panels) == avx512);
    CHECK(preferred_layout(DType::Q5_0, 64, 2048) == WeightLayout::Rows);
    CHECK(preferred_layout(DType::F32, 64, 2048) == WeightLayout::Rows);
    ktest::ForceIsa force{Isa::Avx2};
    if (force.ok) CHECK(preferred_layout(DType::Q4_0, 64, 2048) == WeightLayout::Rows);
}

TEST_CASE("rejects bad shapes") {
    ThreadPool pool(1);
    float x[64] = {}, y[4] = {};
    uint8_t w[256] = {};
    REQUIRE_THROWS_AS(matmul(WeightMatrix{DType::Q4_0, 1, 48, w, 36}, x, 1, y, pool), ember::Error);
    REQUIRE_THROWS_AS(matmul(WeightMatrix{DType::IQ2_XXS, 1, 256, w, 66}, x, 1, y, pool), ember::Error);
    REQUIRE(!matmul_supports(DType::Q8_K));
}
