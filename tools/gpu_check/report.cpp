// ember-gpu-check's results: every check's row as it is printed, the summary at the end and
// the JSON file (--json).
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tools/gpu_check/check.h"

namespace ember::gpucheck {

namespace {

struct Result {
    std::string section, name, metric;
    double value = 0, tol = -1;  // tol < 0: information only
    bool pass = true;
    std::string note;
};
std::vector<Result> g_results;

struct BenchRow {
    std::string what;
    double value;
    std::string unit;
    std::string note;
};
std::vector<BenchRow> g_bench;

}  // namespace

void record(const std::string& section, const std::string& name, const std::string& metric, double value, double tol,
            const std::string& note) {
    Result r{section, name, metric, value, tol, tol < 0 || (std::isfinite(value) && value <= tol), note};
    char tol_text[32] = "-";
    if (tol >= 0) std::snprintf(tol_text, sizeof tol_text, "%.1e", tol);
    std::printf("  %-4s %-44s %-14s %11.3e  tol %-9s %s\n", r.pass ? "ok" : "FAIL", name.c_str(), metric.c_str(), value,
                tol_text, note.c_str());
    std::fflush(stdout);
    g_results.push_back(r);
}

void fail(const std::string& section, const std::string& name, const std::string& why) {
    Result r{section, name, "error", NAN, 0, false, why};
    std::printf("  FAIL %-44s %s\n", name.c_str(), why.c_str());
    std::fflush(stdout);
    g_results.push_back(r);
}

void bench_row(const std::string& what, double value, const std::string& unit, const std::string& note) {
    std::printf("  %-46s %10.2f %-8s %s\n", what.c_str(), value, unit.c_str(), note.c_str());
    std::fflush(stdout);
    g_bench.push_back({what, value, unit, note});
}

bool all_passed() {
    return std::all_of(g_results.begin(), g_results.end(), [](const Result& r) { return r.pass; });
}

void print_summary() {
    std::printf("\n================================ summary ================================\n");
    for (const char* section : {"ops", "models", "fit", "bench", "main"}) {
        int n = 0, bad = 0;
        for (const Result& r : g_results)
            if (r.section == section) {
                ++n;
                bad += !r.pass;
            }
        if (n) std::printf("%-7s %3d checks, %d failed\n", section, n, bad);
    }
    for (const Result& r : g_results)
        if (!r.pass)
            std::printf("FAILED  %-44s %s = %.3e (tol %.1e) %s\n", r.name.c_str(), r.metric.c_str(), r.value, r.tol,
                        r.note.c_str());
    if (!g_bench.empty()) {
        std::printf("\n%-46s %10s %-8s %s\n", "benchmark", "value", "unit", "note");
        for (const BenchRow& b : g_bench)
            std::printf("%-46s %10.2f %-8s %s\n", b.what.c_str(), b.value, b.unit.c_str(), b.note.c_str());
    }
}

void write_json(const std::string& path, const std::string& device) {
    std::ofstream o(path);
    auto esc = [](const std::string& s) {
        std::string r;
        for (char ch : s) {
            if (ch == '"' || ch == '\\') r += '\\';
            if (static_cast<unsigned char>(ch) >= 0x20) r += ch;
        }
        return r;
    };
    auto num = [](double v) { return std::isfinite(v) ? std::to_string(v) : std::string("null"); };
    o << "{\n  \"device\": \"" << esc(device) << "\",\n  \"checks\": [\n";
    for (size_t i = 0; i < g_results.size(); ++i) {
        const Result& r = g_results[i];
        o << "    {\"section\": \"" << r.section << "\", \"name\": \"" << esc(r.name) << "\", \"metric\": \""
          << r.metric << "\", \"value\": " << num(r.value) << ", \"tol\": " << num(r.tol)
          << ", \"pass\": " << (r.pass ? "true" : "false") << ", \"note\": \"" << esc(r.note) << "\"}"
          << (i + 1 < g_results.size() ? "," : "") << "\n";
    }
    o << "  ],\n  \"bench\": [\n";
    for (size_t i = 0; i < g_bench.size(); ++i) {
        const BenchRow& b = g_bench[i];
        o << "    {\"what\": \"" << esc(b.what) << "\", \"value\": " << num(b.value) << ", \"unit\": \"" << b.unit
          << "\", \"note\": \"" << esc(b.note) << "\"}" << (i + 1 < g_bench.size() ? "," : "") << "\n";
    }
    o << "  ]\n}\n";
}

size_t count_nonfinite(const std::vector<float>& v) {
    return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }));
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        if (!std::isfinite(d)) return INFINITY;
        m = std::max(m, d);
    }
    return m;
}

// Elements whose bits differ (NaN == NaN when the bits match); sizes must match.
size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

}  // namespace ember::gpucheck
