#include "engine/fit/measured_budget.h"

#include <fstream>
#include <sstream>

#include "kernels/backend_loader.h"
#include "kernels/common/format.h"

namespace ember::fit {

uint64_t available_ram() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream s(line);
        std::string key;
        uint64_t kib = 0;
        if (s >> key >> kib && key == "MemAvailable:") return kib * 1024;
    }
    return 0;
}

Budget measured_budget(std::string* gpu_note) {
    Budget b;
    b.ram = available_ram();
    std::string why;
    for (const DeviceDescription& d : list_devices({}, &why)) {
        if (d.id == "cpu") continue;
        // Free memory as the device reports it with a context open: the context is already
        // taken off (Budget::vram_measured).
        b.vram = d.free_memory;
        b.vram_measured = true;
        if (gpu_note)
            *gpu_note =
                d.id + " " + d.name + ", " + format_bytes(d.free_memory) + " free of " + format_bytes(d.total_memory);
        return b;
    }
    if (gpu_note) *gpu_note = "no GPU: " + why;
    return b;
}

}  // namespace ember::fit
