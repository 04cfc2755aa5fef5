// The CUDA kernels' block decoding (kernels/cuda/quant_blocks.cuh) runs here on the host:
// the same source the GPU compiles, with the intrinsics (dp4a, per-byte subtraction, half
// conversion) emulated literally. Checked against the CPU backend's reference
// dequantization (kernels/cpu/quant.cpp), bit for bit, on fresh random blocks of every
// weight type; and the decode dot product against a float64 reference.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/common/fp16.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/quant_blocks.cuh"
#include "kernels/cuda/repack.h"

using namespace ember;

namespace {

const DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,
                        DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};

// Gaussian values whose scale changes every 32 elements over two decades, with outliers.
std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(-1.0f, 1.0f);
    std::vector<float> v(n);
    float s = 1.0f;
    for (size_t i = 0; i < n; ++i) {
        if (i % 32 == 0) s = std::pow(10.0f, mag(rng));
        v[i] = normal(rng) * s * (i % 97 == 13 ? 4.0f : 1.0f);
    }
    return v;
}

// rows x cols of `type`: quantized random floats, or random bytes with moderate half-float
// scales for the types without a quantizer (Q2_K, Q3_K).
std::vector<uint8_t> random_rows(DType type, int64_t rows, int64_t cols, uint32_t seed) {
    const auto info = *dtype_info(static_cast<uint32_t>(type));
    const size_t rb = row_bytes(info, static_cast<uint64_t>(cols));
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    if (cpu::can_quantize(type)) {
        const auto f = random_floats(static_cast<size_t>(rows * cols), seed);
        for (int64_t r = 0; r < rows; ++r) cpu::quantize_row(type, f.data() + r * cols, w.data() + r * rb, cols);
        return w;
    }
    std::mt19937 rng(seed);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    std::vector<int> halves = type == DType::Q2_K ? std::vector<int>{80, 82} : std::vector<int>{108};
    for (size_t blk = 0; blk < w.size() / info.block_bytes; ++blk) {
        for (int off : halves) {
            const float d = std::ldexp(static_cast<float>(rng() % 1000 + 1) / 1000.0f, -5) * (rng() % 2 ? 1 : -1);
            const uint16_t h = f32_to_fp16(d);
            std::memcpy(&w[blk * info.block_bytes + static_cast<size_t>(off)], &h, 2);
        }
    }
    return w;
}

using DequantFn = void (*)(const uint8_t*, int64_t, float*);
using DotFn = float (*)(const uint8_t*, int64_t, const int*, float, float);

template <int T>
void dq(const uint8_t* row, int64_t c, float* out) {
    cuda::dequant_chunk<T>(row, c, out);
}
template <int T>
float dot(const uint8_t* row, int64_t c, const int* xq, float dx, float sx) {
    return cuda::dot_chunk<T>(row, c, xq, dx, sx);
}

struct Fns {
    DequantFn dequant;
    DotFn dot;
};

Fns fns(DType t) {
    switch (t) {
        case DType::Q4_0:
            return {dq<cuda::kQ4_0>, dot<cuda::kQ4_0>};
        case DType::Q4_1:
            return {dq<cuda::kQ4_1>, dot<cuda::kQ4_1>};
        case DType::Q5_0:
            return {dq<cuda::kQ5_0>, dot<cuda::kQ5_0>};
        case DType::Q5_1:
            return {dq<cuda::kQ5_1>, dot<cuda::kQ5_1>};
        case DType::Q8_0:
            return {dq<cuda::kQ8_0>, dot<cuda::kQ8_0>};
        case DType::Q2_K:
            return {dq<cuda::kQ2_K>, dot<cuda::kQ2_K>};
        case DType::Q3_K:
            return {dq<cuda::kQ3_K>, dot<cuda::kQ3_K>};
        case DType::Q4_K:
            return {dq<cuda::kQ4_K>, dot<cuda::kQ4_K>};
        case DType::Q5_K:
            return {dq<cuda::kQ5_K>, dot<cuda::kQ5_K>};
        case DType::Q6_K:
            return {dq<cuda::kQ6_K>, dot<cuda::kQ6_K>};
        case DType::MXFP4:
            return {dq<cuda::kMXFP4>, dot<cuda::kMXFP4>};
        default:
            return {nullptr, nullptr};
    }
}

// One weight type: the CUDA decode of fresh random rows against the CPU's, bit for bit.
void dequant_matches_cpu(DType t) {
    const int64_t rows = 7, cols = 1024;
    const auto info = *dtype_info(static_cast<uint32_t>(t));
    const size_t rb = row_bytes(info, cols);
    const auto w = random_rows(t, rows, cols, 1000u + static_cast<uint32_t>(t));
    std::vector<float> ref(cols), got(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + r * rb;
        cpu::dequantize_row(t, row, ref.data(), cols);
        std::fill(got.begin(), got.end(), std::nanf(""));  // poison: every element must be written
        for (int64_t c = 0; c < cols / 32; ++c) fns(t).dequant(row, c, got.data() + 32 * c);
        for (int64_t i = 0; i < cols; ++i) {
            if (std::bit_cast<uint32_t>(ref[i]) != std::bit_cast<uint32_t>(got[i]))
                FAIL("row ", r, " element ", i, ": CPU ", ref[i], ", CUDA decode ", got[i]);
        }
    }
}

// One weight type: the dp4a dot products against float64.
void dot_matches_float64(DType t) {
    const int64_t rows = 16, cols = 2048;
    const auto info = *dtype_info(static_cast<uint32_t>(t));
    const size_t rb = row_bytes(info, cols);
    const auto w = random_rows(t, rows, cols, 2000u + static_cast<uint32_t>(t));
    const auto x = random_floats(static_cast<size_t>(cols), 3000u + static_cast<uint32_t>(t));
    // Activations as the decode kernels see them: 8-bit per 32 elements.
    std::vector<int8_t> xq(cols);
    std::vector<float> dx(cols / 32), sx(cols / 32);
    for (int64_t c = 0; c < cols / 32; ++c) cuda::quantize_chunk_q8(&x[32 * c], &xq[32 * c], dx[c], sx[c]);
    double err2 = 0, ref2 = 0;
    std::vector<float> wf(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + r * rb;
        cpu::dequantize_row(t, row, wf.data(), cols);
        double ref = 0;
        float got = 0;
        for (int64_t c = 0; c < cols / 32; ++c) {
            int words[8];
            std::memcpy(words, &xq[32 * c], 32);
            got += fns(t).dot(row, c, words, dx[c], sx[c]);
            for (int i = 0; i < 32; ++i) ref += double(wf[32 * c + i]) * double(xq[32 * c + i]) * double(dx[c]);
        }
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
    }
    const double rel = std::sqrt(err2 / ref2);
    MESSAGE(std::string(dtype_name(t)), ": relative error of the dp4a dot products vs float64 ", rel);
    REQUIRE_MESSAGE(rel < 1e-5, "relative error ", rel);
}

}  // namespace

TEST_CASE("type ids match DType") {
    REQUIRE(int(cuda::kQ4_0) == int(DType::Q4_0));
    REQUIRE(int(cuda::kQ8_0) == int(DType::Q8_0));
    REQUIRE(int(cuda::kQ2_K) == int(DType::Q2_K));
    REQUIRE(int(cuda::kQ6_K) == int(DType::Q6_K));
    REQUIRE(int(cuda::kBF16) == int(DType::BF16));
    REQUIRE(int(cuda::kMXFP4) == int(DType::MXFP4));
    for (DType t : kTypes) {
        const auto info = *dtype_info(static_cast<uint32_t>(t));
        int bytes = 0;
        switch (t) {
            case DType::Q4_0:
                bytes = cuda::QTraits<cuda::kQ4_0>::bytes;
                break;
            case DType::Q4_1:
                bytes = cuda::QTraits<cuda::kQ4_1>::bytes;
                break;
            case DType::Q5_0:
                bytes = cuda::QTraits<cuda::kQ5_0>::bytes;
                break;
            case DType::Q5_1:
                bytes = cuda::QTraits<cuda::kQ5_1>::bytes;
                break;
            case DType::Q8_0:
                bytes = cuda::QTraits<cuda::kQ8_0>::bytes;
                break;
            case DType::Q2_K:
                bytes = cuda::QTraits<cuda::kQ2_K>::bytes;
                break;
            case DType::Q3_K:
                bytes = cuda::QTraits<cuda::kQ3_K>::bytes;
                break;
            case DType::Q4_K:
                bytes = cuda::QTraits<cuda::kQ4_K>::bytes;
                break;
            case DType::Q5_K:
                bytes = cuda::QTraits<cuda::kQ5_K>::bytes;
                break;
            case DType::Q6_K:
                bytes = cuda::QTraits<cuda::kQ6_K>::bytes;
                break;
            case DType::MXFP4:
                bytes = cuda::QTraits<cuda::kMXFP4>::bytes;
                break;
            default:
                break;
        }
        const std::string type_name(dtype_name(t));
        CAPTURE(type_name);
        REQUIRE(uint32_t(bytes) == info.block_bytes);
    }
}

TEST_CASE("half conversion is exact") {
    for (uint32_t i = 0; i < 65536; ++i) {
        CAPTURE(i);
        const float a = cuda::h2f(static_cast<uint16_t>(i)), b = fp16_to_f32(static_cast<uint16_t>(i));
        if (std::isnan(b)) {
            REQUIRE(std::isnan(a));
        } else {
            REQUIRE(std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b));
        }
        REQUIRE(std::bit_cast<uint32_t>(cuda::bf2f(static_cast<uint16_t>(i))) ==
                std::bit_cast<uint32_t>(bf16_to_f32(static_cast<uint16_t>(i))));
    }
}

TEST_CASE("intrinsics emulation") {
    std::mt19937 rng(7);
    for (int i = 0; i < 10000; ++i) {
        const uint32_t a = rng(), b = rng();
        const int c = static_cast<int>(rng() % 1000) - 500;
        int ref = c;
        uint32_t sub = 0;
        for (int k = 0; k < 4; ++k) {
            const int8_t x = static_cast<int8_t>(a >> (8 * k)), y = static_cast<int8_t>(b >> (8 * k));
            ref += x * y;
            sub |= static_cast<uint32_t>(
                       static_cast<uint8_t>(static_cast<uint8_t>(a >> (8 * k)) - static_cast<uint8_t>(b >> (8 * k))))
                   << (8 * k);
        }
        CAPTURE(a);
        CAPTURE(b);
        REQUIRE(cuda::dp4a(static_cast<int>(a), static_cast<int>(b), c) == ref);
        REQUIRE(cuda::vsub4(a, b) == sub);
    }
}

TEST_CASE("dequant matches the CPU bit for bit") {
    for (DType t : kTypes) {
        SUBCASE(std::string(dtype_name(t)).c_str()) { dequant_matches_cpu(t); }
    }
}

TEST_CASE("dot matches float64") {
    for (DType t : kTypes) {
        SUBCASE(std::string(dtype_name(t)).c_str()) { dot_matches_float64(t); }
    }
}

TEST_CASE("activation quantization") {
    const auto x = random_floats(32 * 64, 99);
    for (int c = 0; c < 64; ++c) {
        CAPTURE(c);
        int8_t q[32];
        float d, s;
        cuda::quantize_chunk_q8(&x[32 * c], q, d, s);
        int sum = 0;
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * c + i]));
        REQUIRE(d == amax / 127.0f);
        for (int i = 0; i < 32; ++i) {
            sum += q[i];
            REQUIRE(std::fabs(x[32 * c + i] - q[i] * d) <= 0.5f * d * 1.0001f);
        }
        REQUIRE(s == d * float(sum));
    }
}

// GGUF chunk c of row r against the same chunk of the row-tile layout.
template <int G, int R>
void require_tiled_chunk_equal(const uint8_t* gguf, const uint8_t* packed, size_t rb, int64_t rows, int64_t r,
                               int64_t c) {
    cuda::Chunk a, b;
    cuda::decode_chunk<G>(gguf + r * rb, c, a);
    cuda::decode_tiled_chunk<R>(
        cuda::tiled_row(packed, rb, rows, r, static_cast<int64_t>(rb / cuda::QTraits<G>::bytes)), c, b);
    REQUIRE(std::memcmp(a.q, b.q, sizeof a.q) == 0);
    REQUIRE(a.a[0] == b.a[0]);
    REQUIRE(a.a[1] == b.a[1]);
}

// The device layout of Q4_0/Q5_0/Q8_0 (kernels/cuda/repack.h, row tiles): the same bytes
// rearranged, every chunk decoding to the GGUF block's codes and scale, at widths with a
// partial last group (96, 1152) and whole ones (2048), row counts with a partial last tile.
TEST_CASE("row-tiled Q4_0, Q5_0 and Q8_0 decode as the file's") {
    CHECK_FALSE(cuda::repackable(cuda::kQ4_1, 1024));
    CHECK_FALSE(cuda::repackable(cuda::kQ4_K, 768));  // 3 super-blocks: no whole pairs (repack.h)
    CHECK_FALSE(cuda::repackable(cuda::kQ8_0, 0));
    for (DType type : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) {
        for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{13, 96}, {9, 1152}, {8, 2048}, {3, 32}}) {
            CAPTURE(dtype_name(type));
            CAPTURE(rows);
            CAPTURE(cols);
            const int t = static_cast<int>(type);
            REQUIRE(cuda::repackable(t, cols));
            const auto w = random_rows(type, rows, cols, 7u + static_cast<uint32_t>(t + cols + rows));
            const size_t rb = w.size() / static_cast<size_t>(rows);
            std::vector<uint8_t> packed(w.size());
            cuda::repack_matrix(t, w.data(), rb, rows, cols, packed.data());
            CHECK(packed != w);
            const int rt = cuda::repacked_type(t);
            CHECK(cuda::is_tiled_type(rt));
            for (int64_t r = 0; r < rows; ++r) {
                // Every row's quants start 16-byte aligned within its tile (tiles are).
                const cuda::TiledRow tr = cuda::tiled_row(packed.data(), rb, rows, r, cols / 32);
                REQUIRE((tr.tile - packed.data()) % 16 == 0);
                REQUIRE((tr.i * (cols / 32) * cuda::tile_quant_bytes(rt)) % 16 == 0);
                // matvec_t_kernel reads a warp's two rows' scales (and high bits) from one
                // 16-byte word: the pair's values never straddle a word.
                const int other = tr.i ^ 1;
                for (int64_t c = 0; other < tr.m && c < cols / 32; ++c) {
                    REQUIRE(cuda::tile_scale_offset(rt, tr.m, cols / 32, c, tr.i) / 16 ==
                            cuda::tile_scale_offset(rt, tr.m, cols / 32, c, other) / 16);
                    REQUIRE(cuda::tile_high_offset(rt, tr.m, cols / 32, c, tr.i) / 16 ==
                            cuda::tile_high_offset(rt, tr.m, cols / 32, c, other) / 16);
                }
                for (int64_t c = 0; c < cols / 32; ++c) {
                    if (t == cuda::kQ4_0)
                        require_tiled_chunk_equal<cuda::kQ4_0, cuda::kQ4_0R>(w.data(), packed.data(), rb, rows, r, c);
                    else if (t == cuda::kQ5_0)
                        require_tiled_chunk_equal<cuda::kQ5_0, cuda::kQ5_0R>(w.data(), packed.data(), rb, rows, r, c);
                    else require_tiled_chunk_equal<cuda::kQ8_0, cuda::kQ8_0R>(w.data(), packed.data(), rb, rows, r, c);
                }
            }
        }
    }
}

// The device layouts of Q4_K (pairs of super-blocks) and Q6_K (units of 8): every chunk of
// the repacked rows decodes to the GGUF block's codes, scales and offsets, bit for bit.
TEST_CASE("repacked Q4_K and Q6_K rows decode as the file's") {
    CHECK_FALSE(cuda::repackable(cuda::kQ4_K, 256));
    CHECK_FALSE(cuda::repackable(cuda::kQ6_K, 1024));
    CHECK(cuda::repackable(cuda::kQ4_K, 1536));
    CHECK(cuda::repackable(cuda::kQ6_K, 14336));
    for (DType type : {DType::Q4_K, DType::Q6_K}) {
        CAPTURE(dtype_name(type));
        const int t = static_cast<int>(type);
        const int64_t rows = 3, cols = type == DType::Q4_K ? 1536 : 4096;
        REQUIRE(cuda::repackable(t, cols));
        const auto w = random_rows(type, rows, cols, 11u + static_cast<uint32_t>(t));
        const size_t rb = w.size() / rows;
        std::vector<uint8_t> packed(w.size());
        cuda::repack_matrix(t, w.data(), rb, rows, cols, packed.data());
        CHECK(packed != w);
        const int rt = cuda::repacked_type(t);
        CHECK(rt == (type == DType::Q4_K ? cuda::kQ4_KR : cuda::kQ6_KR));
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols / 32; ++c) {
                cuda::Chunk a, b;
                if (t == cuda::kQ4_K) {
                    cuda::decode_chunk<cuda::kQ4_K>(w.data() + r * rb, c, a);
                    cuda::decode_chunk<cuda::kQ4_KR>(packed.data() + r * rb, c, b);
                } else {
                    cuda::decode_chunk<cuda::kQ6_K>(w.data() + r * rb, c, a);
                    cuda::decode_chunk<cuda::kQ6_KR>(packed.data() + r * rb, c, b);
                }
                CAPTURE(c);
                REQUIRE(std::memcmp(a.q, b.q, sizeof a.q) == 0);
                REQUIRE(std::memcmp(a.a, b.a, sizeof a.a) == 0);
                REQUIRE(std::memcmp(a.b, b.b, sizeof a.b) == 0);
            }
        }
    }
}
