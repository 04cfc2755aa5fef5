// Global-memory traffic of emulated launches, for the offline performance model
// (tools/perf_model). Off unless a program links the counting flavour of the emulated kernels
// (`ember_cuda_emu_counted`: the same .cu files compiled with GCC's -fsanitize=thread
// instrumentation, whose per-access callbacks traffic.cpp implements, without the TSan runtime)
// and calls set_traffic_counting(true). The ordinary emulated library has no callbacks, so the
// emulated tests keep their speed; the runtime's hooks below are one null check per launch,
// block and allocation.
//
// The model, per launch:
//   - a warp-instruction is the k-th execution of one load/store site by the lanes of a warp
//     (lanes run one after another here; SIMT lanes execute the k-th instance together);
//   - sectors: the distinct 32-byte sectors one warp-instruction touches (what L1 requests
//     from L2), against ideal: ceil(distinct bytes / 32), the fewest sectors that could hold them;
//   - dram_bytes: distinct sectors over the whole launch x 32 (DRAM traffic with an L2 that
//     keeps everything one launch touches), against floor_bytes: the distinct bytes touched;
//   - uploaded_bytes: distinct bytes read from allocations filled by host copies and never
//     written by a kernel (the weights; also the batch's small tables), and the load sites
//     that read them (weight_sites).
// Host access widths are not the GPU's (the host compiler splits or narrows loads): widths come
// from the SASS (tools/perf_model), never from here.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::emu {

struct LaunchTraffic {
    std::string kernel;           // the launch's kernel name as written at the launch site
    uintptr_t kernel_offset = 0;  // the instantiation's address minus its object's load base
    std::string kernel_object;    // that object's path (nm on it names the instantiation)
    dim3 grid, block;
    size_t smem = 0;               // dynamic shared memory
    uint64_t requests = 0;         // warp-instructions that touched global memory
    uint64_t bytes_requested = 0;  // summed over lanes
    uint64_t sectors = 0, ideal_sectors = 0;
    uint64_t dram_bytes = 0, floor_bytes = 0;
    uint64_t uploaded_bytes = 0, written_bytes = 0;
    // The load sites (return addresses of the instrumentation calls, minus the load base of
    // kernel_object) that read uploaded allocations: their source lines name the weight loads.
    std::vector<uintptr_t> weight_sites;
};

void set_traffic_counting(bool on);
// The launches counted since the last call, in launch order.
std::vector<LaunchTraffic> take_traffic();

// The runtime's hooks (runtime.cpp calls them when g_traffic is set).
struct TrafficHooks {
    virtual ~TrafficHooks() = default;
    virtual void launch_begin(const char* name, const void* id, dim3 grid, dim3 block, size_t smem) = 0;
    virtual void block_end() = 0;
    virtual void launch_end() = 0;
    virtual void allocated(const void* p, size_t bytes) = 0;
    virtual void freed(const void* p) = 0;
    virtual void copied_to(const void* p, size_t bytes, bool from_host) = 0;
};
extern TrafficHooks* g_traffic;

}  // namespace ember::emu
