// GPU sensors through NVML (libnvidia-ml.so.1, shipped with the NVIDIA driver), loaded at run
// time so Ember starts where there is no driver. Every reading carries either a value or the
// reason it is missing (no library, a symbol this driver lacks, "not supported" for this GPU,
// no permission); the monitor shows the reason and never a made-up number.
//
// The few NVML types and functions used are declared in nvml.cpp from NVIDIA's documented
// ABI (NVML API reference), so building needs no NVML header.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace ember {

struct Sensor {
    bool ok = false;
    double value = 0;    // in the unit its name says
    std::string reason;  // why there is no value (empty when ok)
};

struct GpuSensors {
    std::string name;        // "NVIDIA H200"
    Sensor utilization_pct;  // kernels running, % of the last sample period
    Sensor memory_busy_pct;  // memory controller busy, %
    Sensor memory_total_bytes, memory_used_bytes, memory_free_bytes;
    Sensor power_w;        // board power draw
    Sensor temperature_c;  // GPU core
    Sensor sm_clock_mhz, memory_clock_mhz;
    Sensor energy_j;  // total energy since the driver loaded (Volta and newer)
};

class Nvml {
public:
    static constexpr const char* kLibrary = "libnvidia-ml.so.1";
    // Loads and initialises NVML; nullptr with `why` set when that fails.
    static std::unique_ptr<Nvml> open(std::string& why, const std::string& library = kLibrary);
    ~Nvml();
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    int device_count() const { return count_; }
    // Reads every sensor of device `index` (NVML is thread-safe: any thread may call this).
    GpuSensors read(int index) const;

private:
    struct Api;
    Nvml() = default;
    void* lib_ = nullptr;
    std::unique_ptr<Api> api_;
    int count_ = 0;
};

}  // namespace ember
