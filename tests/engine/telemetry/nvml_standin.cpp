// A stand-in for libnvidia-ml.so.1, for tests only (no GPU and no NVIDIA driver here). It
// exports the NVML functions Ember calls, with NVML's documented signatures, and answers from
// a script: the file named by $EMBER_NVML_STANDIN, re-read at every call, one `key=value` per
// line. Keys: count, name, util, mem_util, mem_total, mem_used, power_mw, temp_c, sm_mhz,
// mem_mhz, energy_mj, and rc_<function> (e.g. rc_nvmlDeviceGetPowerUsage=3) to make that
// function return an NVML error code. Built twice: once complete, once without
// nvmlDeviceGetPowerUsage (EMBER_STANDIN_NO_POWER), for the missing-symbol case.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

namespace {

std::map<std::string, std::string> script() {
    std::map<std::string, std::string> kv;
    const char* path = std::getenv("EMBER_NVML_STANDIN");
    if (!path) return kv;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        const size_t eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

unsigned long long number(const std::map<std::string, std::string>& s, const char* key) {
    auto it = s.find(key);
    return it == s.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

int rc(const std::map<std::string, std::string>& s, const char* function) {
    auto it = s.find(std::string("rc_") + function);
    return it == s.end() ? 0 : std::atoi(it->second.c_str());
}

struct Device {};
Device g_device;

}  // namespace

extern "C" {

struct nvmlUtilization_t {
    unsigned int gpu, memory;
};
struct nvmlMemory_t {
    unsigned long long total, free, used;
};
using nvmlDevice_t = Device*;

__attribute__((visibility("default"))) int nvmlInit_v2() { return rc(script(), "nvmlInit_v2"); }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
    static char buf[64];
    std::snprintf(buf, sizeof buf, "stand-in error %d", code);
    return buf;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
    const auto s = script();
    *count = static_cast<unsigned int>(number(s, "count"));
    return rc(s, "nvmlDeviceGetCount_v2");
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t* dev) {
    *dev = &g_device;
    return rc(script(), "nvmlDeviceGetHandleByIndex_v2");
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned int length) {
    const auto s = script();
    auto it = s.find("name");
    std::snprintf(name, length, "%s", it == s.end() ? "" : it->second.c_str());
    return rc(s, "nvmlDeviceGetName");
}
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t* u) {
    const auto s = script();
    u->gpu = static_cast<unsigned int>(number(s, "util"));
    u->memory = static_cast<unsigned int>(number(s, "mem_util"));
    return rc(s, "nvmlDeviceGetUtilizationRates");
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t* m) {
    const auto s = script();
    m->total = number(s, "mem_total");
    m->used = number(s, "mem_used");
    m->free = m->total - m->used;
    return rc(s, "nvmlDeviceGetMemoryInfo");
}
#ifndef EMBER_STANDIN_NO_POWER
__attribute__((visibility("default"))) int nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned int* mw) {
    const auto s = script();
    *mw = static_cast<unsigned int>(number(s, "power_mw"));
    return rc(s, "nvmlDeviceGetPowerUsage");
}
#endif
__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(nvmlDevice_t, int sensor, unsigned int* c) {
    const auto s = script();
    *c = static_cast<unsigned int>(number(s, "temp_c"));
    return sensor == 0 ? rc(s, "nvmlDeviceGetTemperature") : 2;  // only NVML_TEMPERATURE_GPU
}
__attribute__((visibility("default"))) int nvmlDeviceGetClockInfo(nvmlDevice_t, int type, unsigned int* mhz) {
    const auto s = script();
    if (type == 1) *mhz = static_cast<unsigned int>(number(s, "sm_mhz"));
    else if (type == 2) *mhz = static_cast<unsigned int>(number(s, "mem_mhz"));
    else return 2;  // NVML_ERROR_INVALID_ARGUMENT: Ember asks for SM and memory clocks only
    return rc(s, "nvmlDeviceGetClockInfo");
}
__attribute__((visibility("default"))) int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t, unsigned long long* mj) {
    const auto s = script();
    *mj = number(s, "energy_mj");
    return rc(s, "nvmlDeviceGetTotalEnergyConsumption");
}

}  // extern "C"
