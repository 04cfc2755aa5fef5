// The CUDA built-ins of the emulator (kernels/cuda/emu/README.md): what a kernel's C++ sees
// of threadIdx/blockIdx, barriers, warp collectives, atomics, shared memory and the device
// intrinsics the kernels use, as plain host C++. Included by prelude.h after NVIDIA's own
// host headers (cuda_runtime.h for the types, cuda_fp16.h / cuda_bf16.h for half and
// __nv_bfloat16), never by code built with nvcc.
//
// Execution model (runtime.cpp): blocks run one after another on the calling thread; the
// threads of a block are fibers, switched only at a barrier or warp collective. So
// __syncthreads is a real barrier, a collective waits for every lane of its mask, and a
// barrier that cannot complete is reported as a deadlock (which threads wait where), as an
// ember::emu::KernelFault exception from the launch.
#pragma once
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace ember::emu {

// A kernel that cannot finish: a deadlock, a collective used wrongly, a bad launch.
struct KernelFault : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The built-in variables of the running thread (set by the scheduler at every switch).
extern uint3 g_thread_idx;
extern uint3 g_block_idx;
extern dim3 g_block_dim;
extern dim3 g_grid_dim;
extern void* g_dynamic_smem;

// Barriers and warp collectives (runtime.cpp). `file`/`line`: the call site, for reports.
void syncthreads(const char* file, int line);
enum class Coll : uint8_t { Shfl, ShflUp, ShflDown, ShflXor, Ballot, Any, All, SyncWarp };
uint64_t warp_collective(Coll op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line);

// `extern __shared__ T name[]` (rewritten by rewrite_cu.py): the launch's dynamic shared
// memory, filled with 0xFF bytes (NaN as floats) before every block.
template <class T>
T* dynamic_shared() {
    return static_cast<T*>(g_dynamic_smem);
}
// `__shared__ T name[N]` becomes a static local plus this call: the block's first thread to
// get here fills it with 0xFF bytes, so a read before any write sees garbage, as on a GPU.
void static_shared(void* p, size_t bytes);

// Launches (rewrite_cu.py turns `k<<<g, b, s, st>>>(args)` into launcher(...)(args)).
void submit(const char* name, const void* id, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            std::function<void()> body);

// Whether [p, p + bytes) lies inside one cudaMalloc / cudaMallocHost allocation (null with
// 0 bytes: yes). Pointer arguments of a launch are checked with it.
bool is_device_range(const void* p, size_t bytes);
[[noreturn]] void bad_pointer_argument(const char* kernel, int index, const void* p);

template <class... P>
struct Launcher {
    const char* name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <class... A>
    void operator()(A&&... args) const {
        static_assert(sizeof...(A) == sizeof...(P), "wrong number of kernel arguments");
        // Converted once, as a call would convert them; every thread gets the same values.
        std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
        check_pointers(params, std::index_sequence_for<P...>{});
        void (*k)(P...) = kernel;
        submit(name, reinterpret_cast<const void*>(k), grid, block, smem, stream,
               [k, params]() { std::apply(k, params); });
    }
    // A host pointer passed to a kernel would fault on the GPU; here it would just work.
    template <class Tuple, size_t... I>
    void check_pointers(const Tuple& t, std::index_sequence<I...>) const {
        (check_pointer(static_cast<int>(I), std::get<I>(t)), ...);
    }
    template <class T>
    void check_pointer(int index, const T& v) const {
        if constexpr (std::is_pointer_v<T>) {
            if (v != nullptr && !is_device_range(v, 0)) bad_pointer_argument(name, index, v);
        }
    }
};
template <class... P>
Launcher<P...> launcher(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem = 0,
                        cudaStream_t stream = nullptr) {
    return {name, kernel, grid, block, smem, stream};
}

// Kernels launched so far: name -> launches (for the coverage list of the tests).
struct KernelCount {
    std::string name;
    uint64_t launches = 0, blocks = 0, instantiations = 0;
};
std::vector<KernelCount> kernel_counts();
void reset_kernel_counts();

template <class T>
uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp collectives move up to 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T>
T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

}  // namespace ember::emu

// nvcc's typed overloads of the runtime's function-attribute calls (cuda_runtime.h declares
// them for nvcc only).
template <class... P>
cudaError_t cudaFuncSetAttribute(void (*f)(P...), cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute(reinterpret_cast<const void*>(f), attr, value);
}
template <class... P>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, void (*f)(P...)) {
    return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(f));
}

// ---- built-in variables -----------------------------------------------------------------
#define threadIdx (static_cast<const uint3&>(::ember::emu::g_thread_idx))
#define blockIdx (static_cast<const uint3&>(::ember::emu::g_block_idx))
#define blockDim (static_cast<const dim3&>(::ember::emu::g_block_dim))
#define gridDim (static_cast<const dim3&>(::ember::emu::g_grid_dim))
constexpr int warpSize = 32;

// ---- barriers and warp collectives -------------------------------------------------------
#define __syncthreads() ::ember::emu::syncthreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::ember::emu::warp_collective(::ember::emu::Coll::SyncWarp, mask, 0, 0, 32, file, line);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return from_bits<T>(warp_collective(Coll::Shfl, mask, to_bits(v), src, width, file, line));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return from_bits<T>(warp_collective(Coll::ShflUp, mask, to_bits(v), static_cast<int>(delta), width, file, line));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return from_bits<T>(warp_collective(Coll::ShflDown, mask, to_bits(v), static_cast<int>(delta), width, file, line));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return from_bits<T>(warp_collective(Coll::ShflXor, mask, to_bits(v), lane_mask, width, file, line));
}
inline unsigned __ballot_sync(unsigned mask, int pred, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return static_cast<unsigned>(warp_collective(Coll::Ballot, mask, pred != 0, 0, 32, file, line));
}
inline int __any_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return static_cast<int>(warp_collective(Coll::Any, mask, pred != 0, 0, 32, file, line));
}
inline int __all_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    using namespace ::ember::emu;
    return static_cast<int>(warp_collective(Coll::All, mask, pred != 0, 0, 32, file, line));
}

// ---- atomics: fibers switch only at barriers, so a read-modify-write is atomic -------------
template <class T>
T atomicAdd(T* p, T v) {
    const T o = *p;
    *p = o + v;
    return o;
}
template <class T>
T atomicSub(T* p, T v) {
    const T o = *p;
    *p = o - v;
    return o;
}
template <class T>
T atomicExch(T* p, T v) {
    const T o = *p;
    *p = v;
    return o;
}
template <class T>
T atomicMin(T* p, T v) {
    const T o = *p;
    *p = v < o ? v : o;
    return o;
}
template <class T>
T atomicMax(T* p, T v) {
    const T o = *p;
    *p = v > o ? v : o;
    return o;
}
template <class T>
T atomicAnd(T* p, T v) {
    const T o = *p;
    *p = o & v;
    return o;
}
template <class T>
T atomicOr(T* p, T v) {
    const T o = *p;
    *p = o | v;
    return o;
}
template <class T>
T atomicXor(T* p, T v) {
    const T o = *p;
    *p = o ^ v;
    return o;
}
template <class T>
T atomicCAS(T* p, T cmp, T v) {
    const T o = *p;
    if (o == cmp) *p = v;
    return o;
}
inline unsigned atomicInc(unsigned* p, unsigned lim) {
    const unsigned o = *p;
    *p = o >= lim ? 0 : o + 1;
    return o;
}
inline unsigned atomicDec(unsigned* p, unsigned lim) {
    const unsigned o = *p;
    *p = (o == 0 || o > lim) ? lim : o - 1;
    return o;
}

// ---- loads and integer / float intrinsics --------------------------------------------------
// 8- and 16-byte loads stay one host access each (as LDG.64 / LDG.128 are one GPU load):
// the counting build (traffic.h) groups accesses by host load site, and the host compiler
// would otherwise split a vector load into field loads, each a site of its own, which the
// model would count as narrow, strided loads.
template <class T>
T __ldg(const T* p) {
    if constexpr (sizeof(T) == 16 && std::is_trivially_copyable_v<T>) {
        typedef unsigned v4u __attribute__((vector_size(16), aligned(1), may_alias));
        const v4u v = *reinterpret_cast<const v4u*>(p);
        T r;
        memcpy(&r, &v, 16);
        return r;
    } else if constexpr (sizeof(T) == 8 && std::is_trivially_copyable_v<T>) {
        typedef unsigned long long u64a __attribute__((aligned(1), may_alias));
        const unsigned long long v = *reinterpret_cast<const u64a*>(p);
        T r;
        memcpy(&r, &v, 8);
        return r;
    } else {
        return *p;
    }
}
inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
inline float __int_as_float(int u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline int __float_as_int(float f) {
    int u;
    memcpy(&u, &f, 4);
    return u;
}
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i)
        c += static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
             static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i)));
    return c;
}
inline unsigned __vsub4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (((a >> (8 * i)) - (b >> (8 * i))) & 0xFFu) << (8 * i);
    return r;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
// Explicitly rounded float arithmetic: the host does each operation in float, never fused.
inline float __fadd_rn(float a, float b) {
    volatile float r = a + b;
    return r;
}
inline float __fsub_rn(float a, float b) {
    volatile float r = a - b;
    return r;
}
inline float __fmul_rn(float a, float b) {
    volatile float r = a * b;
    return r;
}
inline float __fdiv_rn(float a, float b) {
    volatile float r = a / b;
    return r;
}
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

// CUDA's integer min/max overloads (device code calls them unqualified).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// ---- what the emulator does not run: a clear compile error ---------------------------------
// (rewrite_cu.py also stops at inline PTX and texture fetches with the file and line.)
namespace ember::emu {
template <class...>
inline constexpr bool kUnsupported = false;
}
template <class... A>
void tex1Dfetch(A...) {
    static_assert(::ember::emu::kUnsupported<A...>, "the ember CUDA emulator does not support textures");
}
template <class... A>
void tex2D(A...) {
    static_assert(::ember::emu::kUnsupported<A...>, "the ember CUDA emulator does not support textures");
}
