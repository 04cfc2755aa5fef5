// Telemetry: the window math on synthetic timings (percentiles, rates, ring and clock
// wrap-around), readers racing a writer (run under ASan/TSan too), a real model generating
// with a reader polling, and the NVML loader against a scripted stand-in library.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "engine/telemetry/nvml.h"
#include "engine/telemetry/process_stats.h"
#include "engine/telemetry/telemetry.h"
#include "test_data.h"

using namespace ember;

TEST_CASE("percentilesByNearestRank") {
    std::vector<float> v;
    for (int i = 100; i >= 1; --i) v.push_back(static_cast<float>(i));  // 100..1, unsorted on purpose
    const WindowStats s = stats_of(v);
    CHECK(s.count == 100);
    CHECK(s.p50 == 50);
    CHECK(s.p95 == 95);
    CHECK(s.p99 == 99);
    CHECK(s.min == 1);
    CHECK(s.max == 100);
    CHECK(s.mean == doctest::Approx(50.5));
    std::vector<float> one{7};
    const WindowStats o = stats_of(one);
    CHECK((o.p50 == 7 && o.p99 == 7 && o.count == 1));
    std::vector<float> none;
    CHECK(stats_of(none).count == 0);
    // Nearest rank never interpolates: with 10 samples p95 is the 10th, p50 the 5th.
    std::vector<float> ten{1, 2, 3, 4, 5, 6, 7, 8, 9, 1000};
    const WindowStats t = stats_of(ten);
    CHECK(t.p50 == 5);
    CHECK(t.p95 == 1000);
}

TEST_CASE("windowKeepsTheNewestSamplesWhenTheRingWraps") {
    SampleWindow<8> w;
    for (int i = 0; i < 20; ++i) w.add(static_cast<uint32_t>(i), static_cast<float>(i));
    CHECK(w.total() == 20);
    std::vector<float> v = w.values(19, 0);
    std::sort(v.begin(), v.end());
    REQUIRE(v.size() == 8);
    CHECK(v.front() == 12);
    CHECK(v.back() == 19);
}

TEST_CASE("windowFiltersByAgeAcrossTheClockWrap") {
    SampleWindow<16> w;
    const uint32_t near_wrap = 0xFFFFFFF0u;
    w.add(near_wrap - 5000, 1.0f);              // 5 s before: outside a 1 s window
    w.add(near_wrap, 2.0f);                     // 31 ms before the wrap
    w.add(10, 3.0f);                            // 10 ms after the wrap
    std::vector<float> v = w.values(20, 1000);  // now: 20 ms after the wrap
    std::sort(v.begin(), v.end());
    REQUIRE(v.size() == 2);
    CHECK(v[0] == 2.0f);
    CHECK(v[1] == 3.0f);
    CHECK(w.values(20, 0).size() == 3);    // 0: everything the ring holds
    CHECK(w.values(5, 1000).size() == 1);  // a sample "from the future" (written after now) is left out
}

TEST_CASE("requestTimingsBecomeRatesPercentilesAndHitRate") {
    Telemetry t(std::chrono::minutes(5));
    t.request_started(1, 100, 60, 12.5, 1);
    auto s = t.snapshot();
    CHECK(s.current.id == 1);
    CHECK(s.current.running);
    CHECK(s.current.generated_tokens == 0);
    t.first_token(1, 80.0, 500.0);
    for (int i = 0; i < 99; ++i) t.token(1, i < 90 ? 10.0 : 50.0);  // 90 fast tokens, 9 slow ones
    s = t.snapshot();
    CHECK(s.current.generated_tokens == 100);
    CHECK(s.inter_token_ms.count == 99);
    CHECK(s.inter_token_ms.p50 == 10.0);
    CHECK(s.inter_token_ms.p95 == 50.0);
    CHECK(s.inter_token_ms.p99 == 50.0);
    CHECK(s.decode_tok_s_now == doctest::Approx(1000.0 / ((90 * 10.0 + 9 * 50.0) / 99)));
    t.request_finished(1, 100, 73.3);
    t.request_started(2, 200, 190, 0.5, 1);
    t.first_token(2, 20.0, 1000.0);
    t.request_finished(2, 1, 0);
    s = t.snapshot();
    CHECK_FALSE(s.current.running);
    CHECK(s.current.id == 2);
    CHECK(s.requests == 2);
    CHECK(s.prompt_tokens == 300);
    CHECK(s.reused_tokens == 250);
    CHECK(s.generated_tokens == 101);
    CHECK(s.cache_hit_rate == doctest::Approx(250.0 / 300.0));
    CHECK(s.ttft_ms.count == 2);
    CHECK(s.ttft_ms.max == 80.0);
    CHECK(s.queue_wait_ms.max == 12.5);
    CHECK(s.decode_tok_s.count == 1);  // a one-token answer has no decode rate
    CHECK(s.decode_tok_s.mean == doctest::Approx(73.3));
    CHECK(s.batch_size.mean == 1.0);
}

// Two requests at once (a scheduler): `current` is the newest, the older one's tokens and end
// do not change it, and the per-pass batch sizes and load gauges describe the whole engine.
TEST_CASE("concurrentRequestsKeepCurrentOnTheNewestAndCountPasses") {
    Telemetry t(std::chrono::minutes(5));
    t.request_started(1, 10, 0, 3.0, 1);
    t.first_token(1, 5.0, 100.0);
    t.request_started(2, 20, 0, 7.0, 2);
    t.first_token(2, 6.0, 100.0);
    t.token(1, 2.0);
    t.token(2, 2.0);
    t.token(2, 2.0);
    t.request_finished(1, 2, 500.0);
    t.step(2, 2);
    t.step(2, 34);
    t.set_load(1, 3);
    const auto s = t.snapshot();
    CHECK(s.current.id == 2);
    CHECK(s.current.running);
    CHECK(s.current.generated_tokens == 3);
    CHECK(s.generated_tokens == 5);
    CHECK(s.queue_wait_ms.max == 7.0);
    CHECK(s.batch_size.max == 2.0);
    CHECK(s.steps == 2);
    CHECK(s.step_sequences.mean == 2.0);
    CHECK(s.step_tokens.max == 34.0);
    CHECK(s.running == 1);
    CHECK(s.queued == 3);
}

TEST_CASE("readersNeverSeeTornOrInventedSamples") {
    Telemetry t;
    constexpr int kTokens = 200000;
    std::atomic<bool> done{false};
    std::atomic<int> bad{0}, reads{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 3; ++r) {
        readers.emplace_back([&] {
            uint64_t last_total = 0;
            while (!done.load()) {
                const TelemetrySnapshot s = t.snapshot();
                // The writer only ever records 1..8 ms; anything else is a torn or invented sample.
                if (s.inter_token_ms.count > 0 && (s.inter_token_ms.min < 1 || s.inter_token_ms.max > 8)) ++bad;
                if (s.generated_tokens < last_total) ++bad;  // totals only grow
                last_total = s.generated_tokens;
                ++reads;
            }
        });
    }
    t.request_started(1, 10, 0, 0, 1);
    t.first_token(1, 1, 1);
    for (int i = 0; i < kTokens; ++i) t.token(1, 1 + i % 8);
    t.request_finished(1, kTokens, 1);
    done = true;
    for (auto& th : readers) th.join();
    CHECK(bad.load() == 0);
    CHECK(reads.load() > 0);
    CHECK(t.snapshot().generated_tokens == kTokens + 1);
}

TEST_CASE("aRealModelReportsWhileAReaderPolls") {
    LoadOptions lo;
    lo.path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(lo.path);
    lo.device = BackendPreference::Cpu;
    lo.n_threads = 2;
    lo.n_ctx = 256;
    auto model = Model::load(lo);
    Telemetry tel;  // owned by the client (the app's engine worker, the CLI), outliving models
    tel.set_memory(model->memory_use());
    Sequence seq(*model);
    std::atomic<bool> done{false};
    std::atomic<int> polls{0};
    std::thread reader([&] {
        while (!done.load()) {
            const TelemetrySnapshot s = tel.snapshot();
            CHECK(s.memory.size() == 1);
            ++polls;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
    GenerateOptions go;
    go.sampling.temperature = 0;  // greedy
    go.max_tokens = 64;
    go.ignore_eog = true;
    go.telemetry = &tel;
    const std::vector<int32_t> prompt{1};
    const GenerateStats st = seq.generate(prompt, go, nullptr);
    done = true;
    reader.join();
    const TelemetrySnapshot s = tel.snapshot();
    CHECK(polls.load() > 0);
    CHECK(s.current.id == 1);  // the first request of the Sequence's scheduler
    CHECK_FALSE(s.current.running);
    CHECK(s.current.generated_tokens == st.generated_tokens);
    CHECK(s.generated_tokens == static_cast<uint64_t>(st.generated_tokens));
    CHECK(s.inter_token_ms.count == st.generated_tokens - 1);
    CHECK(s.ttft_ms.max == doctest::Approx(st.ttft_ms).epsilon(1e-3));
    REQUIRE(s.memory.size() == 1);
    CHECK(s.memory[0].device == "cpu");
    CHECK(s.memory[0].layers == model->config().n_layers);
    CHECK(s.memory[0].kv_cache > 0);
    CHECK(s.memory[0].mapped_weights > 0);  // the CPU uses the file map in place
}

TEST_CASE("processStatsAreReadFromProc") {
    ProcessSampler ps;
    auto a = ps.sample();
    REQUIRE(a.has_value());
    CHECK(a->rss_bytes > 1024 * 1024);
    CHECK(a->threads >= 1);
    volatile double x = 0;
    for (int i = 0; i < 20000000; ++i) x = x + i * 1e-9;  // burn some CPU so the rate is > 0
    auto b = ps.sample();
    REQUIRE(b.has_value());
    CHECK(b->cpu_seconds >= a->cpu_seconds);
    CHECK(b->cpu_percent >= 0);
}

// ---- NVML ----------------------------------------------------------------------------

namespace {

struct StandIn {
    std::filesystem::path script =
        std::filesystem::temp_directory_path() / ("ember-nvml-" + std::to_string(::getpid()) + ".txt");
    explicit StandIn(const std::string& text) {
        std::ofstream(script) << text;
        ::setenv("EMBER_NVML_STANDIN", script.c_str(), 1);
    }
    ~StandIn() {
        ::unsetenv("EMBER_NVML_STANDIN");
        std::filesystem::remove(script);
    }
};

const char* kH200 =
    "count=1\nname=NVIDIA H200\nutil=87\nmem_util=64\nmem_total=150754820096\nmem_used=20000000000\n"
    "power_mw=412345\ntemp_c=61\nsm_mhz=1980\nmem_mhz=2619\nenergy_mj=123456789\n";

}  // namespace

TEST_CASE("nvmlMissingLibraryHidesSensorsWithTheReason") {
    std::string why;
    auto n = Nvml::open(why, "/nonexistent/libnvidia-ml.so.1");
    CHECK(n == nullptr);
    CHECK(why.find("NVML not available") != std::string::npos);
    CHECK(why.find("/nonexistent/libnvidia-ml.so.1") != std::string::npos);
}

TEST_CASE("nvmlStandInValuesArriveInTheRightUnits") {
    StandIn s(kH200);
    std::string why;
    auto n = Nvml::open(why, EMBER_NVML_STANDIN_LIB);
    REQUIRE_MESSAGE(n != nullptr, why);
    REQUIRE(n->device_count() == 1);
    const GpuSensors g = n->read(0);
    CHECK(g.name == "NVIDIA H200");
    CHECK((g.utilization_pct.ok && g.utilization_pct.value == 87));
    CHECK(g.memory_busy_pct.value == 64);
    CHECK(g.memory_total_bytes.value == 150754820096.0);
    CHECK(g.memory_used_bytes.value == 20000000000.0);
    CHECK(g.memory_free_bytes.value == 150754820096.0 - 20000000000.0);
    CHECK(g.power_w.value == doctest::Approx(412.345));  // milliwatts -> watts
    CHECK(g.temperature_c.value == 61);
    CHECK(g.sm_clock_mhz.value == 1980);
    CHECK(g.memory_clock_mhz.value == 2619);
    CHECK(g.energy_j.value == doctest::Approx(123456.789));  // millijoules -> joules
    const GpuSensors out = n->read(1);
    CHECK_FALSE(out.power_w.ok);
    CHECK(out.power_w.reason.find("no GPU 1") != std::string::npos);
}

TEST_CASE("nvmlErrorCodesHideOneSensorWithItsReason") {
    StandIn s(std::string(kH200) +
              "rc_nvmlDeviceGetPowerUsage=3\nrc_nvmlDeviceGetTemperature=4\n"
              "rc_nvmlDeviceGetTotalEnergyConsumption=999\n");
    std::string why;
    auto n = Nvml::open(why, EMBER_NVML_STANDIN_LIB);
    REQUIRE_MESSAGE(n != nullptr, why);
    const GpuSensors g = n->read(0);
    CHECK_FALSE(g.power_w.ok);
    CHECK(g.power_w.reason == "not supported on this GPU");
    CHECK_FALSE(g.temperature_c.ok);
    CHECK(g.temperature_c.reason == "no permission to read it");
    CHECK_FALSE(g.energy_j.ok);
    CHECK(g.energy_j.reason == "NVML error 999: stand-in error 999");
    CHECK(g.utilization_pct.ok);  // the others still read
    CHECK(g.sm_clock_mhz.ok);
}

TEST_CASE("nvmlMissingSymbolHidesThatSensorOnly") {
    StandIn s(kH200);
    std::string why;
    auto n = Nvml::open(why, EMBER_NVML_STANDIN_NO_POWER_LIB);
    REQUIRE_MESSAGE(n != nullptr, why);
    const GpuSensors g = n->read(0);
    CHECK_FALSE(g.power_w.ok);
    CHECK(g.power_w.reason == "this driver's NVML has no nvmlDeviceGetPowerUsage");
    CHECK(g.temperature_c.ok);
}

TEST_CASE("nvmlInitFailureAndNoDevicesAreReported") {
    {
        StandIn s(std::string(kH200) + "rc_nvmlInit_v2=9\n");  // NVML_ERROR_DRIVER_NOT_LOADED
        std::string why;
        CHECK(Nvml::open(why, EMBER_NVML_STANDIN_LIB) == nullptr);
        CHECK(why == "NVML did not start: NVML error 9: stand-in error 9");
    }
    {
        StandIn s("count=0\n");
        std::string why;
        auto n = Nvml::open(why, EMBER_NVML_STANDIN_LIB);
        REQUIRE(n != nullptr);
        CHECK(n->device_count() == 0);
    }
    {
        std::string why;  // a library that is not NVML at all
        CHECK(Nvml::open(why, "libm.so.6") == nullptr);
        CHECK(why == "libm.so.6 has no nvmlInit_v2 (not a usable NVML)");
    }
}
