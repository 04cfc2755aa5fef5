// Which SIMD instruction set the CPU kernels use. Detected once at run time (the library is
// built for baseline x86-64; the AVX2 and AVX-512 kernels live in separately compiled files),
// and overridable so tests can run every path the machine supports.
#pragma once
#include <string_view>

namespace ember::cpu {

enum class Isa {
    Scalar,  // portable C++, any x86-64 (or other) CPU
    Avx2,    // AVX2 + FMA + F16C (Haswell / Zen 1 and newer)
    Avx512,  // AVX-512 F/BW/VL/VNNI (Ice Lake / Zen 4 and newer)
};

std::string_view isa_name(Isa isa);

// Best ISA this CPU supports (and the build compiled in).
Isa detected_isa();

// ISA the kernels use now: the detected one unless forced.
Isa active_isa();

// Forces the kernels onto `isa` (for tests and benchmarks). Returns false and changes nothing
// if the CPU cannot run it. Not thread-safe against kernels running concurrently.
bool force_isa(Isa isa);

// Back to the detected ISA.
void reset_isa();

}  // namespace ember::cpu
