// Energy meters for the cost view: what one answer drew, read at its start, first token and
// finish (never per token). The CPU packages through Linux powercap/RAPL counters
// (<root>/intel-rapl:N/energy_uj, which wrap at max_energy_range_uj), the GPUs through NVML's
// total-energy counter. Either may be unreadable (root-only counters, a VM, no NVIDIA driver):
// then the reading carries the reason, and the caller falls back to an estimate it marks as one.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/telemetry/nvml.h"

namespace ember {

// The CPU packages' energy counters under a powercap root: /sys/class/powercap, or a fake tree
// a test writes into a temp folder. Only package zones (name "package-N") are summed: their
// subzones (core, uncore, dram) are parts of them or, for psys, a superset.
class RaplMeter {
public:
    static constexpr const char* kRoot = "/sys/class/powercap";
    explicit RaplMeter(std::string root = kRoot);

    // Joules drawn by all packages since this meter first read them, wrap-corrected. A counter
    // that wraps more than once between two reads loses a range: callers read at least once
    // per answer, and a range is tens of minutes at full package power.
    Sensor read();
    int packages() const { return static_cast<int>(zones_.size()); }
    const std::string& root() const { return root_; }

private:
    struct Zone {
        std::string dir;
        uint64_t range_uj = 0;
        uint64_t last_uj = 0;
        bool seen = false;
        double total_j = 0;
    };
    std::string root_;
    std::vector<Zone> zones_;
    std::string why_none_;  // why no zone was found (empty when there are zones)
};

// One reading of every meter, with its time.
struct EnergySample {
    double t_s = 0;  // steady clock, seconds
    Sensor cpu_j;    // cumulative, RaplMeter::read
    Sensor gpu_j;    // cumulative over every GPU NVML sees
};

// What a stretch between two samples drew, as far as it was measured.
struct EnergySpan {
    double seconds = 0;
    double cpu_j = 0, gpu_j = 0;  // 0 where that meter was unreadable
    bool cpu_measured = false, gpu_measured = false;
    double measured_j() const { return cpu_j + gpu_j; }
};
EnergySpan energy_between(const EnergySample& from, const EnergySample& to);

class EnergyMeter {
public:
    // nvml_library empty: no GPU meter (the reason says so).
    explicit EnergyMeter(std::string powercap_root = RaplMeter::kRoot,
                         const std::string& nvml_library = Nvml::kLibrary);
    EnergySample sample();
    // Why the CPU / GPU meter is unreadable, from the latest sample (empty when it reads).
    const std::string& cpu_reason() const { return cpu_reason_; }
    const std::string& gpu_reason() const { return gpu_reason_; }

private:
    Sensor read_gpus() const;
    RaplMeter rapl_;
    std::unique_ptr<Nvml> nvml_;
    std::string nvml_why_;
    std::string cpu_reason_, gpu_reason_;
};

}  // namespace ember
