// The budget of this machine, measured: free VRAM of the first CUDA device (through the
// backend loader, so with no GPU or no driver it is 0 and the plan is for the CPU) and the
// RAM the kernel says is available (MemAvailable: free plus reclaimable page cache).
#pragma once
#include <string>

#include "engine/fit/planner.h"

namespace ember::fit {

// `gpu_note` receives the device's name and size ("cuda:0 NVIDIA H200, 139.8 GiB") or why
// there is none.
Budget measured_budget(std::string* gpu_note = nullptr);
// MemAvailable from /proc/meminfo, in bytes; 0 when unreadable.
uint64_t available_ram();

}  // namespace ember::fit
