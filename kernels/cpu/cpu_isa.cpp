#include "kernels/cpu/cpu_isa.h"

#include <atomic>

namespace ember::cpu {

namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
        return Isa::Avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c")) {
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
        case Isa::Scalar: return "scalar";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512";
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
