// The CUDA emulator's runtime (README.md): the block scheduler (threads as fibers, barriers,
// warp collectives, deadlock reports) and the part of the CUDA runtime API the backend uses,
// as host operations. Every stream is executed in order at the moment work is enqueued, so
// "asynchronous" calls have finished when they return; stream capture records the work for
// a graph instead, and a graph launch runs it.
#include <cuda_runtime.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emu/emu.h"
#include "kernels/cuda/emu/traffic.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EMBER_EMU_ASAN 1
#endif
#ifdef EMBER_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the ember CUDA emulator's fiber switch is written for x86-64"
#endif

// ---- fiber switch ---------------------------------------------------------------------------
// ember_emu_switch(save, load): pushes the callee-saved registers, stores the stack pointer in
// *save, continues on the stack `load` (popping what its own switch pushed). A new fiber's
// stack is prepared so that the switch "returns" into ember_emu_fiber_start, which calls
// r13(r12).
extern "C" void ember_emu_switch(void** save, void* load);
extern "C" void ember_emu_fiber_start();
asm(R"(
    .pushsection .text
    .p2align 4
    .globl ember_emu_switch
    .hidden ember_emu_switch
    .type ember_emu_switch, @function
ember_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ember_emu_switch, .-ember_emu_switch
    .p2align 4
    .globl ember_emu_fiber_start
    .hidden ember_emu_fiber_start
    .type ember_emu_fiber_start, @function
ember_emu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size ember_emu_fiber_start, .-ember_emu_fiber_start
    .popsection
)");

namespace ember::emu {

TrafficHooks* g_traffic = nullptr;
uint3 g_thread_idx;
uint3 g_block_idx;
dim3 g_block_dim;
dim3 g_grid_dim;
void* g_dynamic_smem = nullptr;

namespace {

#ifdef EMBER_EMU_ASAN
constexpr size_t kStackBytes = 256 << 10;  // ASan frames carry redzones
#else
constexpr size_t kStackBytes = 64 << 10;
#endif
constexpr size_t kMaxThreads = 1024;

struct Wait {
    enum Kind : uint8_t { None, Block, Warp } kind = None;
    Coll op = Coll::Shfl;
    unsigned mask = 0;
    int arg = 0, width = 32;
    uint64_t value = 0, result = 0;
    const char* file = "";
    int line = 0;
};

struct Fiber {
    enum State : uint8_t { Ready, Waiting, Exited } state = Ready;
    void* sp = nullptr;
    char* stack_lo = nullptr;
    void* asan_fake = nullptr;
    uint3 tid{};
    int index = 0;
    Wait w;
};

// One block being run: its fibers, the queue of runnable ones, the first fault.
struct Block {
    const char* kernel = "";
    int n = 0;
    int exited = 0, at_barrier = 0;
    std::vector<int> ready;  // FIFO (head index below)
    size_t head = 0;
    std::string fault;
};

std::vector<char*> g_stacks;  // kMaxThreads stacks (+ guard page), made on first use
Fiber g_fibers[kMaxThreads];
Fiber* g_cur = nullptr;
Block* g_block = nullptr;
void* g_sched_sp = nullptr;
const std::function<void()>* g_body = nullptr;
uint64_t g_block_serial = 0;
std::unordered_map<void*, uint64_t> g_static_serial;
#ifdef EMBER_EMU_ASAN
const void* g_sched_bottom = nullptr;
size_t g_sched_size = 0;
#endif

char* stack_for(int i) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    while (g_stacks.size() <= static_cast<size_t>(i)) {
        void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED) throw KernelFault("ember CUDA emulator: cannot map a fiber stack");
        mprotect(p, page, PROT_NONE);  // an overflowing fiber faults instead of corrupting a neighbour
        g_stacks.push_back(static_cast<char*>(p) + page);
    }
    return g_stacks[static_cast<size_t>(i)];
}

void push_ready(int i) { g_block->ready.push_back(i); }

void switch_to_scheduler(Fiber* f, bool exiting) {
#ifdef EMBER_EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &f->asan_fake, g_sched_bottom, g_sched_size);
#else
    (void)exiting;
#endif
    ember_emu_switch(&f->sp, g_sched_sp);
#ifdef EMBER_EMU_ASAN
    __sanitizer_finish_switch_fiber(f->asan_fake, &g_sched_bottom, &g_sched_size);
#endif
}

// A fault ends the block: the fiber never runs again, so nothing owning memory may live in
// its frames (the message is a plain char buffer; the Block copies it).
[[noreturn]] void fault(const char* msg) {
    if (g_block->fault.empty()) g_block->fault = msg;
    switch_to_scheduler(g_cur, false);
    std::abort();  // not reached: a faulted block is never resumed
}

void fiber_main(void* arg) {
    Fiber* f = static_cast<Fiber*>(arg);
#ifdef EMBER_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &g_sched_bottom, &g_sched_size);
#endif
    (*g_body)();
    f->state = Fiber::Exited;
    ++g_block->exited;
    switch_to_scheduler(f, true);
    std::abort();  // an exited fiber is never resumed
}

void start_fiber(Fiber& f, int i) {
    f.stack_lo = stack_for(i);
    char* top = f.stack_lo + kStackBytes;
#ifdef EMBER_EMU_ASAN
    // Frames of the fiber that used this stack last may have left redzones poisoned.
    __asan_unpoison_memory_region(top - (32 << 10), 32 << 10);
#endif
    void** sp = reinterpret_cast<void**>(top - 72);
    sp[0] = sp[1] = nullptr;                                  // r15, r14
    sp[2] = reinterpret_cast<void*>(&fiber_main);             // r13: entry
    sp[3] = &f;                                               // r12: its argument
    sp[4] = sp[5] = nullptr;                                  // rbx, rbp
    sp[6] = reinterpret_cast<void*>(&ember_emu_fiber_start);  // return address
    f.sp = sp;
    f.state = Fiber::Ready;
    f.asan_fake = nullptr;
    f.w = Wait{};
}

void resume(Fiber& f) {
    g_cur = &f;
    g_thread_idx = f.tid;
#ifdef EMBER_EMU_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack_lo, kStackBytes);
#endif
    ember_emu_switch(&g_sched_sp, f.sp);
#ifdef EMBER_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    g_cur = nullptr;
}

const char* base(const char* path) {
    const char* s = std::strrchr(path, '/');
    return s ? s + 1 : path;
}

const char* coll_name(Coll op) {
    switch (op) {
        case Coll::Shfl:
            return "__shfl_sync";
        case Coll::ShflUp:
            return "__shfl_up_sync";
        case Coll::ShflDown:
            return "__shfl_down_sync";
        case Coll::ShflXor:
            return "__shfl_xor_sync";
        case Coll::Ballot:
            return "__ballot_sync";
        case Coll::Any:
            return "__any_sync";
        case Coll::All:
            return "__all_sync";
        case Coll::SyncWarp:
            return "__syncwarp";
    }
    return "?";
}

std::string where(const Fiber& f) {
    char buf[256];
    if (f.state == Fiber::Exited) return "exited";
    if (f.state == Fiber::Ready) return "runnable";
    if (f.w.kind == Wait::Block) {
        std::snprintf(buf, sizeof buf, "wait at __syncthreads (%s:%d)", base(f.w.file), f.w.line);
    } else {
        std::snprintf(buf, sizeof buf, "wait at %s(mask 0x%08x) (%s:%d)", coll_name(f.w.op), f.w.mask, base(f.w.file),
                      f.w.line);
    }
    return buf;
}

// "0-31,64-95"
std::string ranges(const std::vector<int>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!s.empty()) s += ",";
        s += std::to_string(ids[i]);
        if (j > i) s += "-" + std::to_string(ids[j]);
        i = j + 1;
    }
    return s;
}

std::string block_name() {
    char buf[160];
    std::snprintf(buf, sizeof buf, "kernel %s, block (%u,%u,%u) of grid (%u,%u,%u), %d threads", g_block->kernel,
                  g_block_idx.x, g_block_idx.y, g_block_idx.z, g_grid_dim.x, g_grid_dim.y, g_grid_dim.z, g_block->n);
    return buf;
}

std::string deadlock_report() {
    std::map<std::string, std::vector<int>> groups;
    for (int i = 0; i < g_block->n; ++i) groups[where(g_fibers[i])].push_back(i);
    std::string s = "ember CUDA emulator: deadlock in " + block_name() + ":";
    for (const auto& [w, ids] : groups) s += "\n  threads " + ranges(ids) + ": " + w;
    return s;
}

void run_block(int n) {
    for (int i = 0; i < n; ++i) {
        Fiber& f = g_fibers[i];
        start_fiber(f, i);
        f.index = i;
        f.tid =
            uint3{static_cast<unsigned>(i) % g_block_dim.x, static_cast<unsigned>(i) / g_block_dim.x % g_block_dim.y,
                  static_cast<unsigned>(i) / (g_block_dim.x * g_block_dim.y)};
        push_ready(i);
    }
    while (g_block->head < g_block->ready.size()) {
        Fiber& f = g_fibers[g_block->ready[g_block->head++]];
        resume(f);
        if (!g_block->fault.empty()) break;
    }
    if (!g_block->fault.empty()) {
#ifdef EMBER_EMU_ASAN
        for (int i = 0; i < n; ++i) __asan_unpoison_memory_region(g_stacks[static_cast<size_t>(i)], kStackBytes);
#endif
        throw KernelFault("ember CUDA emulator: " + g_block->fault + " (" + block_name() + ")");
    }
    if (g_block->exited != n) {
#ifdef EMBER_EMU_ASAN
        for (int i = 0; i < n; ++i) __asan_unpoison_memory_region(g_stacks[static_cast<size_t>(i)], kStackBytes);
#endif
        throw KernelFault(deadlock_report());
    }
}

// ---- launch bookkeeping -----------------------------------------------------------------------
std::recursive_mutex g_mutex;  // one launch at a time (shared memory is static storage)
cudaError_t g_last_error = cudaSuccess;
struct Count {
    uint64_t launches = 0, blocks = 0;
    std::set<const void*> ids;
};
std::map<std::string, Count> g_counts;
std::map<const void*, int> g_max_dynamic_smem;  // cudaFuncAttributeMaxDynamicSharedMemorySize
constexpr size_t kDefaultSmem = 48 << 10;
constexpr size_t kOptinSmem = 227 << 10;  // sm_90

void set_error(cudaError_t e) {
    if (g_last_error == cudaSuccess) g_last_error = e;
}

void run_kernel(const char* name, const void* id, dim3 grid, dim3 block, size_t smem,
                const std::function<void()>& body) {
    std::lock_guard lock(g_mutex);
    Count& c = g_counts[name];
    ++c.launches;
    c.ids.insert(id);
    std::unique_ptr<unsigned char[]> dyn(smem ? new unsigned char[smem] : nullptr);  // exact size: ASan sees overruns
    const int n = static_cast<int>(block.x * block.y * block.z);
    g_block_dim = block;
    g_grid_dim = grid;
    g_body = &body;
    g_dynamic_smem = dyn.get();
    if (g_traffic) g_traffic->launch_begin(name, id, grid, block, smem);
    for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
            for (unsigned x = 0; x < grid.x; ++x) {
                g_block_idx = uint3{x, y, z};
                ++g_block_serial;
                if (smem) std::memset(dyn.get(), 0xFF, smem);
                Block b;
                b.kernel = name;
                b.n = n;
                b.ready.reserve(static_cast<size_t>(n) * 2);
                g_block = &b;
                struct Reset {
                    ~Reset() { g_block = nullptr; }
                } reset;
                run_block(n);
                if (g_traffic) g_traffic->block_end();
                ++c.blocks;
            }
        }
    }
    if (g_traffic) g_traffic->launch_end();
    g_dynamic_smem = nullptr;
}

}  // namespace

// ---- built-ins ----------------------------------------------------------------------------------
void syncthreads(const char* file, int line) {
    Fiber* f = g_cur;
    if (!f) throw KernelFault("ember CUDA emulator: __syncthreads called outside a kernel");
    f->w = Wait{};
    f->w.kind = Wait::Block;
    f->w.file = file;
    f->w.line = line;
    f->state = Fiber::Waiting;
    Block& b = *g_block;
    if (++b.at_barrier < b.n) {  // an exited thread never arrives: the block deadlocks
        switch_to_scheduler(f, false);
        return;
    }
    for (int i = 0; i < b.n; ++i) {
        const Wait& w = g_fibers[i].w;
        if (w.line != line || std::strcmp(w.file, file) != 0) {
            char buf[256];
            std::snprintf(buf, sizeof buf, "divergent __syncthreads: thread %d at %s:%d, thread %d at %s:%d", f->index,
                          base(file), line, i, base(w.file), w.line);
            fault(buf);
        }
    }
    b.at_barrier = 0;
    for (int i = 0; i < b.n; ++i) {
        g_fibers[i].state = Fiber::Ready;
        if (i != f->index) push_ready(i);
    }
}

uint64_t warp_collective(Coll op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line) {
    Fiber* f = g_cur;
    if (!f) throw KernelFault(std::string("ember CUDA emulator: ") + coll_name(op) + " called outside a kernel");
    const int lane = f->index & 31, warp0 = f->index - lane;
    char buf[256];
    if (!((mask >> lane) & 1u)) {
        std::snprintf(buf, sizeof buf,
                      "thread %d (lane %d) calls %s with mask 0x%08x, which does not include it (%s:%d)", f->index,
                      lane, coll_name(op), mask, base(file), line);
        fault(buf);
    }
    if (width < 1 || width > 32 || (width & (width - 1))) {
        std::snprintf(buf, sizeof buf, "%s width %d is not a power of two in 1..32 (%s:%d)", coll_name(op), width,
                      base(file), line);
        fault(buf);
    }
    f->w = Wait{Wait::Warp, op, mask, arg, width, value, 0, file, line};
    f->state = Fiber::Waiting;
    Block& b = *g_block;
    // From the highest lane down: lanes arrive in index order (or the previous collective's
    // last lane first), so an early arrival stops at the first lane above it that is not
    // here yet. Scanning upwards made every arrival walk the lanes below it: 528 checks per
    // full-warp collective instead of ~64, a third of test_cuda_emu's time in shuffle-heavy
    // kernels.
    for (int l = 31; l >= 0; --l) {
        if (!((mask >> l) & 1u)) continue;
        const int j = warp0 + l;
        if (j >= b.n) {
            std::snprintf(buf, sizeof buf, "%s mask 0x%08x names lane %d, which does not exist (%s:%d)", coll_name(op),
                          mask, l, base(file), line);
            fault(buf);
        }
        const Fiber& o = g_fibers[j];
        if (o.state != Fiber::Waiting || o.w.kind != Wait::Warp || o.w.op != op || o.w.mask != mask) {
            switch_to_scheduler(f, false);  // not all there yet: the last lane to arrive completes it
            return f->w.result;
        }
    }
    // Every lane of the mask is here: compute all results.
    uint64_t ballot = 0;
    for (int l = 0; l < 32; ++l)
        if ((mask >> l) & 1u) ballot |= static_cast<uint64_t>(g_fibers[warp0 + l].w.value != 0) << l;
    for (int l = 0; l < 32; ++l) {
        if (!((mask >> l) & 1u)) continue;
        Fiber& o = g_fibers[warp0 + l];
        const int seg = l & ~(width - 1);
        int src = l;
        switch (op) {
            case Coll::Shfl:
                src = seg + (o.w.arg & (width - 1));
                break;
            case Coll::ShflUp:
                src = l - o.w.arg >= seg ? l - o.w.arg : l;
                break;
            case Coll::ShflDown:
                src = l + o.w.arg < seg + width ? l + o.w.arg : l;
                break;
            case Coll::ShflXor: {
                const int s = l ^ o.w.arg;
                src = s >= seg && s < seg + width ? s : l;
                break;
            }
            default:
                break;
        }
        switch (op) {
            case Coll::Ballot:
                o.w.result = ballot;
                break;
            case Coll::Any:
                o.w.result = ballot != 0;
                break;
            case Coll::All:
                o.w.result = ballot == (mask & 0xffffffffull);
                break;
            case Coll::SyncWarp:
                o.w.result = 0;
                break;
            default:
                if (!((mask >> src) & 1u)) {
                    std::snprintf(buf, sizeof buf, "%s: lane %d reads lane %d, which is not in the mask 0x%08x (%s:%d)",
                                  coll_name(op), l, src, mask, base(file), line);
                    fault(buf);
                }
                o.w.result = g_fibers[warp0 + src].w.value;
        }
    }
    for (int l = 0; l < 32; ++l) {
        if (!((mask >> l) & 1u)) continue;
        g_fibers[warp0 + l].state = Fiber::Ready;
        if (warp0 + l != f->index) push_ready(warp0 + l);
    }
    return f->w.result;
}

void static_shared(void* p, size_t bytes) {
    uint64_t& serial = g_static_serial[p];
    if (serial == g_block_serial) return;
    serial = g_block_serial;
    std::memset(p, 0xFF, bytes);
}

std::vector<KernelCount> kernel_counts() {
    std::lock_guard lock(g_mutex);
    std::vector<KernelCount> v;
    for (const auto& [name, c] : g_counts) v.push_back({name, c.launches, c.blocks, c.ids.size()});
    return v;
}

void reset_kernel_counts() {
    std::lock_guard lock(g_mutex);
    g_counts.clear();
}

}  // namespace ember::emu

// ---- the runtime API ------------------------------------------------------------------------------
// Opaque handle types of cuda_runtime_api.h, defined here.
struct CUstream_st {
    bool capturing = false;
    std::vector<std::function<void()>> captured;
};
struct CUevent_st {
    std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
};
struct CUgraph_st {
    std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> nodes;
};

namespace {

using ember::emu::g_last_error;
using ember::emu::g_mutex;

std::set<cudaStream_t> g_streams;
std::map<const char*, size_t, std::less<>> g_device_allocs;  // start -> bytes (ordered: range lookups)
std::map<const char*, size_t, std::less<>> g_host_allocs;    // cudaMallocHost
size_t g_device_bytes = 0;
constexpr size_t kDeviceMemory = size_t{16} << 30;  // what cudaMemGetInfo reports

bool inside(const std::map<const char*, size_t, std::less<>>& m, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    auto it = m.upper_bound(c);
    if (it == m.begin()) return false;
    --it;
    return c >= it->first && c + n <= it->first + it->second;
}

bool device_range(const void* p, size_t n) { return inside(g_device_allocs, p, n) || inside(g_host_allocs, p, n); }

cudaError_t fail(cudaError_t e) {
    ember::emu::set_error(e);
    return e;
}

bool valid_stream(cudaStream_t s) { return s == nullptr || g_streams.count(s) != 0; }

// Runs `op` now, or records it when `stream` is being captured.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> op) {
    if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
    if (stream && stream->capturing) {
        stream->captured.push_back(std::move(op));
        return cudaSuccess;
    }
    op();
    return cudaSuccess;
}

}  // namespace

namespace ember::emu {

void submit(const char* name, const void* id, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            std::function<void()> body) {
    std::lock_guard lock(g_mutex);
    const uint64_t threads = uint64_t{block.x} * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        std::fprintf(
            stderr, "ember CUDA emulator: launch of %s with grid (%u,%u,%u), block (%u,%u,%u): invalid configuration\n",
            name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    const auto attr = g_max_dynamic_smem.find(id);
    const size_t allowed = attr != g_max_dynamic_smem.end() ? static_cast<size_t>(attr->second) : kDefaultSmem;
    if (smem > allowed || smem > kOptinSmem) {
        std::fprintf(
            stderr,
            "ember CUDA emulator: launch of %s asks for %zu bytes of dynamic shared memory; allowed %zu (raise it "
            "with cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize), at most %zu)\n",
            name, smem, allowed, kOptinSmem);
        set_error(cudaErrorInvalidValue);
        return;
    }
    const cudaError_t e = enqueue(stream, [name, id, grid, block, smem, body = std::move(body)] {
        run_kernel(name, id, grid, block, smem, body);
    });
    (void)e;
}

bool is_device_range(const void* p, size_t bytes) {
    std::lock_guard lock(g_mutex);
    return (p == nullptr && bytes == 0) || device_range(p, bytes);
}

void bad_pointer_argument(const char* kernel, int index, const void* p) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "ember CUDA emulator: argument %d of kernel %s (%p) is not device memory", index,
                  kernel, p);
    throw KernelFault(buf);
}

}  // namespace ember::emu

extern "C" {

cudaError_t cudaGetLastError(void) {
    std::lock_guard lock(g_mutex);
    const cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return g_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration:
            return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer:
            return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidDevice:
            return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle:
            return "cudaErrorInvalidResourceHandle";
        case cudaErrorStreamCaptureUnsupported:
            return "cudaErrorStreamCaptureUnsupported";
        case cudaErrorStreamCaptureInvalidated:
            return "cudaErrorStreamCaptureInvalidated";
        case cudaErrorIllegalState:
            return "cudaErrorIllegalState";
        case cudaErrorGraphExecUpdateFailure:
            return "cudaErrorGraphExecUpdateFailure";
        case cudaErrorInsufficientDriver:
            return "cudaErrorInsufficientDriver";
        case cudaErrorNoDevice:
            return "cudaErrorNoDevice";
        default:
            return "cudaErrorUnknown";
    }
}

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer:
            return "invalid device pointer";
        case cudaErrorInvalidDevice:
            return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle:
            return "invalid resource handle";
        case cudaErrorStreamCaptureUnsupported:
            return "operation not permitted when stream is capturing";
        case cudaErrorStreamCaptureInvalidated:
            return "operation failed due to a previous error during capture";
        case cudaErrorIllegalState:
            return "the operation is not permitted in the current state";
        case cudaErrorGraphExecUpdateFailure:
            return "the graph update was not performed";
        default:
            return "unknown error (ember CUDA emulator)";
    }
}

// ---- devices --------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int* device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (device != 0) return fail(cudaErrorInvalidDevice);
    *p = cudaDeviceProp{};
    std::snprintf(p->name, sizeof p->name, "ember CUDA emulator");
    p->totalGlobalMem = kDeviceMemory;
    p->sharedMemPerBlock = ember::emu::kDefaultSmem;
    p->sharedMemPerBlockOptin = ember::emu::kOptinSmem;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;  // as an H100/H200: decode attention splits its keys as there
    p->l2CacheSize = 50 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total_b) {
    std::lock_guard lock(g_mutex);
    *total_b = kDeviceMemory;
    *free_b = kDeviceMemory > g_device_bytes ? kDeviceMemory - g_device_bytes : 0;
    return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
    if (!func) return fail(cudaErrorInvalidDeviceFunction);
    *attr = cudaFuncAttributes{};
    attr->maxThreadsPerBlock = 1024;
    attr->ptxVersion = attr->binaryVersion = 90;
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    std::lock_guard lock(g_mutex);
    if (!func) return fail(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || static_cast<size_t>(value) > ember::emu::kOptinSmem) return fail(cudaErrorInvalidValue);
        ember::emu::g_max_dynamic_smem[func] = value;
    }
    return cudaSuccess;
}

// ---- memory ---------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, size_t bytes) {
    std::lock_guard lock(g_mutex);
    *p = nullptr;
    if (g_device_bytes + bytes > kDeviceMemory) return fail(cudaErrorMemoryAllocation);
    void* q = nullptr;
    if (posix_memalign(&q, 256, bytes ? bytes : 1) != 0) return fail(cudaErrorMemoryAllocation);  // exact size: ASan
    std::memset(q, 0xA5, bytes);  // device memory starts as garbage, not zeros
    g_device_allocs[static_cast<const char*>(q)] = bytes;
    g_device_bytes += bytes;
    if (ember::emu::g_traffic) ember::emu::g_traffic->allocated(q, bytes);
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    std::lock_guard lock(g_mutex);
    if (!p) return cudaSuccess;
    auto it = g_device_allocs.find(static_cast<const char*>(p));
    if (it == g_device_allocs.end()) return fail(cudaErrorInvalidDevicePointer);
    g_device_bytes -= it->second;
    g_device_allocs.erase(it);
    if (ember::emu::g_traffic) ember::emu::g_traffic->freed(p);
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
    std::lock_guard lock(g_mutex);
    void* q = nullptr;
    if (posix_memalign(&q, 4096, bytes ? bytes : 1) != 0) return fail(cudaErrorMemoryAllocation);
    g_host_allocs[static_cast<const char*>(q)] = bytes;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
    std::lock_guard lock(g_mutex);
    if (!p) return cudaSuccess;
    auto it = g_host_allocs.find(static_cast<const char*>(p));
    if (it == g_host_allocs.end()) return fail(cudaErrorInvalidValue);
    g_host_allocs.erase(it);
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
    std::lock_guard lock(g_mutex);
    if (n == 0) return cudaSuccess;
    // A device side must lie inside one allocation (a host pointer or an overrun is an error,
    // as the driver reports it).
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((dst_dev && !inside(g_device_allocs, dst, n)) || (src_dev && !inside(g_device_allocs, src, n))) {
        std::fprintf(
            stderr,
            "ember CUDA emulator: cudaMemcpy of %zu bytes (kind %d): the device range is not inside one allocation\n",
            n, static_cast<int>(kind));
        return fail(cudaErrorInvalidValue);
    }
    return enqueue(stream, [dst, src, n, dst_dev, kind] {
        std::memmove(dst, src, n);
        if (dst_dev && ember::emu::g_traffic) ember::emu::g_traffic->copied_to(dst, n, kind == cudaMemcpyHostToDevice);
    });
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    return cudaMemcpyAsync(dst, src, n, kind, nullptr);
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) {
    std::lock_guard lock(g_mutex);
    if (n == 0) return cudaSuccess;
    if (!inside(g_device_allocs, p, n)) return fail(cudaErrorInvalidValue);
    return enqueue(stream, [p, value, n] { std::memset(p, value, n); });
}
cudaError_t cudaMemset(void* p, int value, size_t n) { return cudaMemsetAsync(p, value, n, nullptr); }

// ---- streams and events ---------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
    std::lock_guard lock(g_mutex);
    *s = new CUstream_st;
    g_streams.insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    std::lock_guard lock(g_mutex);
    if (!g_streams.erase(s)) return fail(cudaErrorInvalidResourceHandle);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    std::lock_guard lock(g_mutex);
    if (!valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    if (s && s->capturing) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
    *e = new CUevent_st;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard lock(g_mutex);
    return enqueue(stream, [e] { e->t = std::chrono::steady_clock::now(); });
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : fail(cudaErrorInvalidResourceHandle); }
// Host time between the two records: it says nothing about a GPU.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a || !b) return fail(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}

// ---- graphs: capture records the stream's work, a launch runs it again ----------------------------
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    std::lock_guard lock(g_mutex);
    if (!s || !g_streams.count(s)) return fail(cudaErrorStreamCaptureUnsupported);  // not the legacy stream
    if (s->capturing) return fail(cudaErrorIllegalState);
    s->capturing = true;
    s->captured.clear();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
    std::lock_guard lock(g_mutex);
    if (!s || !g_streams.count(s) || !s->capturing) return fail(cudaErrorIllegalState);
    s->capturing = false;
    *g = new CUgraph_st{std::move(s->captured)};
    s->captured.clear();
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* st) {
    *st = s && s->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
    if (!g) return fail(cudaErrorInvalidValue);
    *e = new CUgraphExec_st{g->nodes};
    return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t e, cudaGraph_t g, cudaGraphExecUpdateResultInfo* info) {
    if (!e || !g) return fail(cudaErrorInvalidValue);
    if (info) *info = cudaGraphExecUpdateResultInfo{};
    if (e->nodes.size() != g->nodes.size()) {  // only parameters may change, not the topology
        if (info) info->result = cudaGraphExecUpdateErrorTopologyChanged;
        return fail(cudaErrorGraphExecUpdateFailure);
    }
    e->nodes = g->nodes;
    if (info) info->result = cudaGraphExecUpdateSuccess;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    if (!e) return fail(cudaErrorInvalidValue);
    std::lock_guard lock(g_mutex);
    if (!valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    if (s && s->capturing) return fail(cudaErrorStreamCaptureUnsupported);
    for (const auto& node : e->nodes) node();
    return cudaSuccess;
}

}  // extern "C"
