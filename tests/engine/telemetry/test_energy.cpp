// Energy meters: the RAPL reader against a fake powercap tree written to a temp folder (real
// files, read as sysfs is read: packages summed, subzones left out, the counter's wrap at
// max_energy_range_uj, unreadable and garbled files, no tree at all), and the GPU energy path
// through the NVML stand-in library (no GPU or NVIDIA driver on these machines).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "engine/telemetry/energy.h"
#include "test_util.h"

using namespace ember;
using ember::test::TempDir;
using ember::test::write_file;

namespace {

// One zone of a fake /sys/class/powercap.
void zone(const TempDir& root, const std::string& dir, const std::string& name, uint64_t energy_uj,
          uint64_t range_uj = 262143328850ull) {
    std::filesystem::create_directories(root.file(dir));
    write_file(root.file(dir + "/name"), name + "\n");
    write_file(root.file(dir + "/energy_uj"), std::to_string(energy_uj) + "\n");
    write_file(root.file(dir + "/max_energy_range_uj"), std::to_string(range_uj) + "\n");
}

void set_energy(const TempDir& root, const std::string& dir, uint64_t energy_uj) {
    write_file(root.file(dir + "/energy_uj"), std::to_string(energy_uj) + "\n");
}

struct StandIn {
    std::filesystem::path script =
        std::filesystem::temp_directory_path() / ("ember-nvml-energy-" + std::to_string(::getpid()) + ".txt");
    explicit StandIn(const std::string& text) { set(text); }
    void set(const std::string& text) {
        write_file(script.string(), text);
        ::setenv("EMBER_NVML_STANDIN", script.c_str(), 1);
    }
    ~StandIn() {
        ::unsetenv("EMBER_NVML_STANDIN");
        std::filesystem::remove(script);
    }
};

}  // namespace

TEST_CASE("raplSumsPackagesAndLeavesSubzonesOut") {
    TempDir root;
    zone(root, "intel-rapl:0", "package-0", 1'000'000);
    zone(root, "intel-rapl:0:0", "core", 500'000);  // part of package 0: never added again
    zone(root, "intel-rapl:1", "package-1", 7'000'000);
    zone(root, "intel-rapl:2", "psys", 9'000'000);  // the whole platform: a superset
    RaplMeter m(root.path());
    CHECK(m.packages() == 2);
    const Sensor first = m.read();
    REQUIRE(first.ok);
    CHECK(first.value == 0);  // joules since the meter's first read
    set_energy(root, "intel-rapl:0", 3'500'000);
    set_energy(root, "intel-rapl:0:0", 99'000'000);
    set_energy(root, "intel-rapl:1", 8'000'000);
    const Sensor second = m.read();
    REQUIRE(second.ok);
    CHECK(second.value == doctest::Approx(2.5 + 1.0));
}

TEST_CASE("raplCounterWrapsAtItsRange") {
    TempDir root;
    const uint64_t range = 1'000'000'000;  // 1 kJ
    zone(root, "intel-rapl:0", "package-0", range - 2'000'000, range);
    RaplMeter m(root.path());
    REQUIRE(m.read().ok);
    set_energy(root, "intel-rapl:0", 3'000'000);  // past the top: 2 J before it, 3 J after
    const Sensor after = m.read();
    REQUIRE(after.ok);
    CHECK(after.value == doctest::Approx(5.0));
    set_energy(root, "intel-rapl:0", 4'000'000);
    CHECK(m.read().value == doctest::Approx(6.0));
}

TEST_CASE("raplUnreadableCounterGivesTheReason") {
    TempDir root;
    zone(root, "intel-rapl:0", "package-0", 1'000'000);
    zone(root, "intel-rapl:1", "package-1", 1'000'000);
    const std::string counter = root.file("intel-rapl:1/energy_uj");
    SUBCASE("permission denied") {
        // As on a stock kernel, where energy_uj is mode 0400 root. Root reads through any mode,
        // so there the test makes the file unreadable the other way sysfs can: not a file.
        if (::geteuid() != 0) {
            REQUIRE(::chmod(counter.c_str(), 0) == 0);
            const Sensor s = RaplMeter(root.path()).read();
            CHECK_FALSE(s.ok);
            CHECK(s.reason == "cannot read " + counter +
                                  ": Permission denied (the RAPL energy counters are root-only on most Linux systems)");
        } else {
            MESSAGE("running as root: mode 000 does not stop root, checking a counter that is a folder instead");
        }
        std::filesystem::remove(counter);
        std::filesystem::create_directory(counter);
        const Sensor s = RaplMeter(root.path()).read();
        CHECK_FALSE(s.ok);
        CHECK(s.reason == "cannot read " + counter + ": Is a directory");
    }
    SUBCASE("garbled") {
        write_file(counter, "n/a\n");
        const Sensor s = RaplMeter(root.path()).read();
        CHECK_FALSE(s.ok);
        CHECK(s.reason == counter + " holds \"n/a\", not a count of microjoules");
    }
    SUBCASE("gone after start") {
        RaplMeter m(root.path());
        REQUIRE(m.read().ok);
        std::filesystem::remove(counter);
        const Sensor s = m.read();
        CHECK_FALSE(s.ok);
        CHECK(s.reason == "cannot read " + counter + ": No such file or directory");
    }
}

TEST_CASE("raplAbsentSaysWhy") {
    TempDir root;
    const Sensor none = RaplMeter(root.file("no-such-powercap")).read();
    CHECK_FALSE(none.ok);
    CHECK(none.reason.find("no powercap counters at " + root.file("no-such-powercap")) == 0);
    CHECK(none.reason.find("virtual machine") != std::string::npos);
    zone(root, "intel-rapl-mmio:0", "package-0", 1);  // the MMIO twin of a package: not a zone to sum
    zone(root, "intel-rapl:0", "psys", 1);
    const Sensor psys_only = RaplMeter(root.path()).read();
    CHECK_FALSE(psys_only.ok);
    CHECK(psys_only.reason == "no RAPL package zone under " + root.path() + " (no intel-rapl:N with a package name)");
}

TEST_CASE("energyMeterSpansCpuAndGpu") {
    TempDir root;
    zone(root, "intel-rapl:0", "package-0", 10'000'000);
    StandIn nvml("count=2\nenergy_mj=5000\n");  // the stand-in answers the same for both GPUs
    EnergyMeter m(root.path(), EMBER_NVML_STANDIN_LIB);
    const EnergySample a = m.sample();
    REQUIRE(a.cpu_j.ok);
    REQUIRE(a.gpu_j.ok);
    CHECK(a.gpu_j.value == doctest::Approx(2 * 5.0));
    set_energy(root, "intel-rapl:0", 14'000'000);
    nvml.set("count=2\nenergy_mj=8000\n");
    const EnergySample b = m.sample();
    const EnergySpan s = energy_between(a, b);
    CHECK(s.cpu_measured);
    CHECK(s.gpu_measured);
    CHECK(s.cpu_j == doctest::Approx(4.0));
    CHECK(s.gpu_j == doctest::Approx(2 * 3.0));
    CHECK(s.measured_j() == doctest::Approx(10.0));
    CHECK(s.seconds >= 0);
    CHECK(m.cpu_reason().empty());
    CHECK(m.gpu_reason().empty());
}

TEST_CASE("energyMeterReportsUnreadableGpuEnergy") {
    TempDir root;
    zone(root, "intel-rapl:0", "package-0", 10'000'000);
    StandIn nvml("count=1\nenergy_mj=5000\nrc_nvmlDeviceGetTotalEnergyConsumption=3\n");  // pre-Volta
    EnergyMeter m(root.path(), EMBER_NVML_STANDIN_LIB);
    const EnergySample a = m.sample();
    CHECK(a.cpu_j.ok);
    CHECK_FALSE(a.gpu_j.ok);
    CHECK(m.gpu_reason() == "GPU 0 energy: not supported on this GPU");
    const EnergySpan s = energy_between(a, m.sample());
    CHECK(s.cpu_measured);
    CHECK_FALSE(s.gpu_measured);
    CHECK(s.gpu_j == 0);

    EnergyMeter no_driver(root.file("none"), "/nonexistent/libnvidia-ml.so.1");
    const EnergySample n = no_driver.sample();
    CHECK_FALSE(n.cpu_j.ok);
    CHECK_FALSE(n.gpu_j.ok);
    CHECK(no_driver.gpu_reason().find("NVML not available") == 0);
    const EnergySpan none = energy_between(n, no_driver.sample());
    CHECK_FALSE(none.cpu_measured);
    CHECK_FALSE(none.gpu_measured);
    CHECK(none.measured_j() == 0);
}
