#include "engine/telemetry/energy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace ember {
namespace {

// A sysfs attribute's text, or the reason it cannot be read (plain read(2): sysfs files are
// one page, and errno tells "root-only" from "gone").
bool read_attribute(const std::string& path, std::string& text, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[128];
    ssize_t n = -1;
    if (fd >= 0) {
        n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
    }
    if (n < 0) {
        const int e = errno;
        why = "cannot read " + path + ": " + std::strerror(e);
        if (e == EACCES || e == EPERM) why += " (the RAPL energy counters are root-only on most Linux systems)";
        return false;
    }
    text.assign(buf, static_cast<size_t>(n));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return true;
}

bool read_counter(const std::string& path, uint64_t& value, std::string& why) {
    std::string text;
    if (!read_attribute(path, text, why)) return false;
    char* end = nullptr;
    errno = 0;
    value = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0) {
        why = path + " holds \"" + text + "\", not a count of microjoules";
        return false;
    }
    return true;
}

// "intel-rapl:3" (a top-level zone), not "intel-rapl:3:1" (a subzone) nor "intel-rapl-mmio:0".
bool is_top_zone(const std::string& name) {
    const std::string prefix = "intel-rapl:";
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return false;
    return std::all_of(name.begin() + static_cast<long>(prefix.size()), name.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

RaplMeter::RaplMeter(std::string root) : root_(std::move(root)) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::directory_iterator it(root_, ec);
    if (ec) {
        why_none_ = "no powercap counters at " + root_ + " (" + ec.message() +
                    "): no RAPL here (a virtual machine, or the intel_rapl driver is not loaded)";
        return;
    }
    std::vector<std::string> dirs;
    for (const fs::directory_entry& e : it) {
        const std::string name = e.path().filename().string();
        std::string zone_name, why;
        if (!is_top_zone(name) || !read_attribute(e.path().string() + "/name", zone_name, why)) continue;
        if (zone_name.rfind("package", 0) == 0) dirs.push_back(e.path().string());
    }
    std::sort(dirs.begin(), dirs.end());
    for (std::string& d : dirs) zones_.push_back(Zone{std::move(d)});
    if (zones_.empty()) why_none_ = "no RAPL package zone under " + root_ + " (no intel-rapl:N with a package name)";
}

Sensor RaplMeter::read() {
    if (zones_.empty()) return Sensor{false, 0, why_none_};
    // Read every zone first: a partial sum would under-count, so one unreadable zone fails all.
    std::vector<uint64_t> now(zones_.size()), range(zones_.size());
    for (size_t i = 0; i < zones_.size(); ++i) {
        std::string why;
        if (!read_counter(zones_[i].dir + "/energy_uj", now[i], why) ||
            !read_counter(zones_[i].dir + "/max_energy_range_uj", range[i], why))
            return Sensor{false, 0, why};
    }
    double total = 0;
    for (size_t i = 0; i < zones_.size(); ++i) {
        Zone& z = zones_[i];
        if (z.seen) {
            // The counter runs from 0 to max_energy_range_uj and starts over.
            const uint64_t delta = now[i] >= z.last_uj ? now[i] - z.last_uj : range[i] - z.last_uj + now[i];
            z.total_j += static_cast<double>(delta) * 1e-6;
        }
        z.seen = true;
        z.last_uj = now[i];
        z.range_uj = range[i];
        total += z.total_j;
    }
    return Sensor{true, total, {}};
}

EnergySpan energy_between(const EnergySample& from, const EnergySample& to) {
    EnergySpan s;
    s.seconds = std::max(0.0, to.t_s - from.t_s);
    s.cpu_measured = from.cpu_j.ok && to.cpu_j.ok;
    s.gpu_measured = from.gpu_j.ok && to.gpu_j.ok;
    if (s.cpu_measured) s.cpu_j = std::max(0.0, to.cpu_j.value - from.cpu_j.value);
    if (s.gpu_measured) s.gpu_j = std::max(0.0, to.gpu_j.value - from.gpu_j.value);
    return s;
}

EnergyMeter::EnergyMeter(std::string powercap_root, const std::string& nvml_library) : rapl_(std::move(powercap_root)) {
    if (nvml_library.empty()) nvml_why_ = "no GPU meter (NVML not used)";
    else nvml_ = Nvml::open(nvml_why_, nvml_library);
}

Sensor EnergyMeter::read_gpus() const {
    if (!nvml_) return Sensor{false, 0, nvml_why_};
    if (nvml_->device_count() == 0) return Sensor{false, 0, "NVML sees no GPU"};
    double total = 0;
    for (int i = 0; i < nvml_->device_count(); ++i) {
        const GpuSensors g = nvml_->read(i);
        if (!g.energy_j.ok) return Sensor{false, 0, "GPU " + std::to_string(i) + " energy: " + g.energy_j.reason};
        total += g.energy_j.value;
    }
    return Sensor{true, total, {}};
}

EnergySample EnergyMeter::sample() {
    EnergySample s;
    s.t_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    s.cpu_j = rapl_.read();
    s.gpu_j = read_gpus();
    cpu_reason_ = s.cpu_j.reason;
    gpu_reason_ = s.gpu_j.reason;
    return s;
}

}  // namespace ember
