// Helpers shared by the kernel tests: seeded random data (tools/op_data, the generator
// ember-gpu-check uses too) and the ISA paths to run. A temporary folder and a child process:
// tests/test_util.h.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/quant.h"
#include "test_util.h"
#include "tools/op_data/op_data.h"

namespace ktest {

// Gaussian values with a per-32-element magnitude that varies over two decades and a few
// outliers, like real weights and activations (never all zeros).
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
    return ember::opdata::random_floats_seeded(n, seed, scale);
}

// Random bytes for types without a quantizer (Q2_K, Q3_K): every code random, half-float
// scales forced to moderate values (|d| in [2^-7, 2^-3)).
inline std::vector<uint8_t> random_blocks(ember::DType type, size_t bytes, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> w(bytes);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const auto info = *ember::dtype_info(static_cast<uint32_t>(type));
    const std::vector<int> halves = ember::opdata::half_fields(type);
    for (size_t blk = 0; blk < bytes / info.block_bytes; ++blk) {
        for (int off : halves) {
            uint8_t* p = &w[blk * info.block_bytes + static_cast<size_t>(off)];
            const uint16_t v = static_cast<uint16_t>(((p[0] | (p[1] << 8)) & 0x8FFF) | 0x2000);
            p[0] = static_cast<uint8_t>(v);
            p[1] = static_cast<uint8_t>(v >> 8);
        }
    }
    return w;
}

// Bytes holding `rows` rows of `cols` random values quantized to `type`.
inline std::vector<uint8_t> random_weights(ember::DType type, int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = ember::opdata::type_row_bytes(type, cols);
    if (!ember::cpu::can_quantize(type)) return random_blocks(type, rb * static_cast<size_t>(rows), seed);
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    const std::vector<float> f = random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
    for (int64_t r = 0; r < rows; ++r) {
        ember::cpu::quantize_row(type, f.data() + r * cols, w.data() + static_cast<size_t>(r) * rb, cols);
    }
    return w;
}

using ember::opdata::dequantize_matrix;

// Every ISA this machine can run, scalar first.
inline std::vector<ember::cpu::Isa> available_isas() {
    std::vector<ember::cpu::Isa> v{ember::cpu::Isa::Scalar};
    if (static_cast<int>(ember::cpu::detected_isa()) >= static_cast<int>(ember::cpu::Isa::Avx2))
        v.push_back(ember::cpu::Isa::Avx2);
    if (ember::cpu::detected_isa() == ember::cpu::Isa::Avx512) v.push_back(ember::cpu::Isa::Avx512);
    return v;
}

// Forces an ISA for the lifetime of the object.
struct ForceIsa {
    explicit ForceIsa(ember::cpu::Isa isa) { ok = ember::cpu::force_isa(isa); }
    ~ForceIsa() { ember::cpu::reset_isa(); }
    bool ok;
};

}  // namespace ktest
