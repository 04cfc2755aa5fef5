#include "engine/telemetry/nvml.h"

#include <dlfcn.h>

namespace ember {
namespace {

// NVML's ABI, as documented (nvml.h): return codes, a device handle, two structs.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
    unsigned int gpu, memory;
};
struct nvmlMemory_t {
    unsigned long long total, free, used;
};
constexpr int kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1, kClockMem = 2;  // NVML_CLOCK_SM, NVML_CLOCK_MEM

// The reason for a failed call, in words a user can act on.
std::string describe(nvmlReturn_t rc, const char* (*error_string)(nvmlReturn_t)) {
    switch (rc) {
        case 3:
            return "not supported on this GPU";
        case 4:
            return "no permission to read it";
        case 15:
            return "the GPU has fallen off the bus";
        default:
            break;
    }
    const char* s = error_string ? error_string(rc) : nullptr;
    return std::string("NVML error ") + std::to_string(rc) + (s ? std::string(": ") + s : "");
}

}  // namespace

struct Nvml::Api {
    nvmlReturn_t (*init)() = nullptr;
    nvmlReturn_t (*shutdown)() = nullptr;
    const char* (*error_string)(nvmlReturn_t) = nullptr;
    nvmlReturn_t (*count)(unsigned int*) = nullptr;
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*) = nullptr;
    // Optional: a missing one hides its sensor with the reason.
    nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
};

namespace {

template <typename F>
void bind(void* lib, const char* symbol, F& fn) {
    fn = reinterpret_cast<F>(dlsym(lib, symbol));
}

Sensor missing(const char* symbol) { return Sensor{false, 0, std::string("this driver's NVML has no ") + symbol}; }

}  // namespace

std::unique_ptr<Nvml> Nvml::open(std::string& why, const std::string& library) {
    void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* e = dlerror();
        why = "NVML not available (" + library + " could not be loaded: " + (e ? e : "unknown error") +
              "); GPU power, temperature and clocks are hidden";
        return nullptr;
    }
    std::unique_ptr<Nvml> n(new Nvml());
    n->lib_ = lib;
    n->api_ = std::make_unique<Api>();
    Api& a = *n->api_;
    bind(lib, "nvmlInit_v2", a.init);
    bind(lib, "nvmlShutdown", a.shutdown);
    bind(lib, "nvmlErrorString", a.error_string);
    bind(lib, "nvmlDeviceGetCount_v2", a.count);
    bind(lib, "nvmlDeviceGetHandleByIndex_v2", a.handle);
    for (auto [fn, sym] : {std::pair{reinterpret_cast<void*>(a.init), "nvmlInit_v2"},
                           {reinterpret_cast<void*>(a.shutdown), "nvmlShutdown"},
                           {reinterpret_cast<void*>(a.count), "nvmlDeviceGetCount_v2"},
                           {reinterpret_cast<void*>(a.handle), "nvmlDeviceGetHandleByIndex_v2"}}) {
        if (!fn) {
            why = library + " has no " + sym + " (not a usable NVML)";
            a.shutdown = nullptr;  // never initialised: the destructor only closes the library
            return nullptr;
        }
    }
    bind(lib, "nvmlDeviceGetName", a.name);
    bind(lib, "nvmlDeviceGetUtilizationRates", a.utilization);
    bind(lib, "nvmlDeviceGetMemoryInfo", a.memory);
    bind(lib, "nvmlDeviceGetPowerUsage", a.power);
    bind(lib, "nvmlDeviceGetTemperature", a.temperature);
    bind(lib, "nvmlDeviceGetClockInfo", a.clock);
    bind(lib, "nvmlDeviceGetTotalEnergyConsumption", a.energy);
    if (const nvmlReturn_t rc = a.init(); rc != kSuccess) {
        why = "NVML did not start: " + describe(rc, a.error_string);
        a.shutdown = nullptr;  // nothing to shut down
        return nullptr;
    }
    unsigned int count = 0;
    if (const nvmlReturn_t rc = a.count(&count); rc != kSuccess) {
        why = "NVML found no devices: " + describe(rc, a.error_string);
        return nullptr;
    }
    n->count_ = static_cast<int>(count);
    return n;
}

Nvml::~Nvml() {
    if (api_ && api_->shutdown) api_->shutdown();
    if (lib_) dlclose(lib_);
}

GpuSensors Nvml::read(int index) const {
    GpuSensors g;
    const Api& a = *api_;
    nvmlDevice_t dev = nullptr;
    // No device: every sensor says why.
    auto none = [&g](std::string reason) {
        const Sensor s{false, 0, std::move(reason)};
        g.utilization_pct = g.memory_busy_pct = g.memory_total_bytes = g.memory_used_bytes = g.memory_free_bytes =
            g.power_w = g.temperature_c = g.sm_clock_mhz = g.memory_clock_mhz = g.energy_j = s;
        return g;
    };
    if (index < 0 || index >= count_)
        return none("no GPU " + std::to_string(index) + " (NVML sees " + std::to_string(count_) + ")");
    if (const nvmlReturn_t rc = a.handle(static_cast<unsigned int>(index), &dev); rc != kSuccess)
        return none(describe(rc, a.error_string));
    auto fail = [&](nvmlReturn_t rc) { return Sensor{false, 0, describe(rc, a.error_string)}; };
    auto ok = [](double v) { return Sensor{true, v, {}}; };

    if (a.name) {
        char buf[96] = {};
        if (a.name(dev, buf, sizeof buf) == kSuccess) g.name = buf;
    }
    if (!a.utilization) {
        g.utilization_pct = g.memory_busy_pct = missing("nvmlDeviceGetUtilizationRates");
    } else if (nvmlUtilization_t u{}; const nvmlReturn_t rc = a.utilization(dev, &u)) {
        g.utilization_pct = g.memory_busy_pct = fail(rc);
    } else {
        g.utilization_pct = ok(u.gpu);
        g.memory_busy_pct = ok(u.memory);
    }
    if (!a.memory) {
        g.memory_total_bytes = g.memory_used_bytes = g.memory_free_bytes = missing("nvmlDeviceGetMemoryInfo");
    } else if (nvmlMemory_t m{}; const nvmlReturn_t rc = a.memory(dev, &m)) {
        g.memory_total_bytes = g.memory_used_bytes = g.memory_free_bytes = fail(rc);
    } else {
        g.memory_total_bytes = ok(static_cast<double>(m.total));
        g.memory_used_bytes = ok(static_cast<double>(m.used));
        g.memory_free_bytes = ok(static_cast<double>(m.free));
    }
    auto uint_reading = [&](bool have, const char* sym, double scale, auto call) {
        if (!have) return missing(sym);
        unsigned int v = 0;
        const nvmlReturn_t rc = call(&v);
        return rc == kSuccess ? ok(v * scale) : fail(rc);
    };
    g.power_w = uint_reading(a.power != nullptr, "nvmlDeviceGetPowerUsage", 1e-3,  // milliwatts
                             [&](unsigned int* v) { return a.power(dev, v); });
    g.temperature_c = uint_reading(a.temperature != nullptr, "nvmlDeviceGetTemperature", 1.0,
                                   [&](unsigned int* v) { return a.temperature(dev, kTemperatureGpu, v); });
    g.sm_clock_mhz = uint_reading(a.clock != nullptr, "nvmlDeviceGetClockInfo", 1.0,
                                  [&](unsigned int* v) { return a.clock(dev, kClockSm, v); });
    g.memory_clock_mhz = uint_reading(a.clock != nullptr, "nvmlDeviceGetClockInfo", 1.0,
                                      [&](unsigned int* v) { return a.clock(dev, kClockMem, v); });
    if (!a.energy) {
        g.energy_j = missing("nvmlDeviceGetTotalEnergyConsumption");
    } else if (unsigned long long mj = 0; const nvmlReturn_t rc = a.energy(dev, &mj)) {
        g.energy_j = fail(rc);
    } else {
        g.energy_j = ok(static_cast<double>(mj) * 1e-3);  // millijoules
    }
    return g;
}

}  // namespace ember
