#include "kernels/cpu/cpu_isa.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ember::cpu {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C (CPUID.1:ECX bit 29) is asked of cpuid itself: clang before 17 has no "f16c" for
// __builtin_cpu_supports, and the `fuzz` preset builds with Debian 12's clang 14.
bool has_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && has_f16c()) {
        return Isa::Avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()) {
        return Isa::Avx2;
    }
#endif
    return Isa::Scalar;
}

std::atomic<Isa>& active() {
    static std::atomic<Isa> isa{detected_isa()};
    return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
    switch (isa) {
        case Isa::Scalar:
            return "scalar";
        case Isa::Avx2:
            return "avx2";
        case Isa::Avx512:
            return "avx512";
    }
    return "unknown";
}

Isa detected_isa() {
    static const Isa isa = detect();
    return isa;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

bool force_isa(Isa isa) {
    if (static_cast<int>(isa) > static_cast<int>(detected_isa())) return false;
    active().store(isa, std::memory_order_relaxed);
    return true;
}

void reset_isa() { active().store(detected_isa(), std::memory_order_relaxed); }

}  // namespace ember::cpu
