// ember-bench-matmul: throughput of cpu::matmul per weight type and shape, for decode
// (n_tokens = 1) and prefill (n_tokens = 512 by default). Prints a table and optionally
// writes JSON.
//
//   ember-bench-matmul [--types Q4_0,Q8_0,...] [--shapes 2048x8192,...] [--n 1,512]
//                      [--threads N] [--isa scalar|avx2|avx512] [--min-time S] [--json FILE]
//                      [--hot] [--best]
//
// Shapes are rows x cols (output features x input features), default the Llama-3.2-1B
// matrices. GFLOP/s counts 2 * rows * cols * n. GB/s counts the bytes a call must move at
// least: the weights once, plus X and Y. Calls rotate over enough copies of the weights
// (>= 96 MiB, 3x a 32 MiB L3) that each one streams them from DRAM as in a real model (a
// batched decode step of 16 tokens too: whether its compute hides the reads is what it
// measures). --hot reuses one copy, to measure the kernels' compute speed on cache-resident
// weights. Times are the median call;
// --best reports the fastest call instead (useful on a machine shared with other work). Weights are random valid blocks
// (random codes, moderate scales): speed does not depend on the values.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/common/error.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant.h"
#include "tools/op_data/op_data.h"

using namespace ember;
using namespace ember::cpu;

namespace {

struct Shape {
    int64_t rows, cols;
};

struct Result {
    std::string type;
    Shape shape;
    int64_t n;
    double seconds;  // median (or fastest, --best) per call
    double gflops, gbs;
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        const size_t end = comma == std::string::npos ? s.size() : comma;
        if (end > start) out.push_back(s.substr(start, end - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

DType parse_type(const std::string& name) {
    for (uint32_t id = 0; id < 64; ++id) {
        const auto info = dtype_info(id);
        if (info && info->name == name) return static_cast<DType>(id);
    }
    throw Error("unknown type " + name);
}

void fill_random(DType t, uint8_t* p, size_t bytes, uint64_t seed) {
    std::mt19937_64 rng(seed);
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        const uint64_t v = rng();
        std::memcpy(p + i, &v, 8);
    }
    for (; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng());
    const auto info = *dtype_info(static_cast<uint32_t>(t));
    auto sane = [](uint8_t* h, uint16_t base) {
        const uint16_t v = static_cast<uint16_t>(((h[0] | (h[1] << 8)) & 0x83FF) | base);
        h[0] = static_cast<uint8_t>(v);
        h[1] = static_cast<uint8_t>(v >> 8);
    };
    if (t == DType::F16 || t == DType::BF16) {
        for (size_t j = 0; j + 2 <= bytes; j += 2) sane(p + j, t == DType::F16 ? 0x2000 : 0x3C00);
    } else if (t == DType::F32) {
        float* f = reinterpret_cast<float*>(p);
        for (size_t j = 0; j < bytes / 4; ++j) f[j] = static_cast<float>(static_cast<int>(j % 255) - 127) / 1024.0f;
    } else {
        for (size_t b = 0; b < bytes / info.block_bytes; ++b)
            for (int off : opdata::half_fields(t)) sane(p + b * info.block_bytes + off, 0x2000);
    }
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

Result bench_one(DType type, Shape sh, int64_t n, ThreadPool& pool, double min_time, bool hot, bool best,
                 bool rows_only) {
    const auto info = *dtype_info(static_cast<uint32_t>(type));
    const size_t rb = row_bytes(info, static_cast<uint64_t>(sh.cols));
    const size_t wbytes = rb * static_cast<size_t>(sh.rows);
    const size_t rotate_target = size_t{96} << 20;
    const int copies = hot ? 1 : static_cast<int>(std::clamp<size_t>((rotate_target + wbytes - 1) / wbytes, 1, 64));
    std::vector<uint8_t*> weights;
    for (int c = 0; c < copies; ++c) {
        auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (wbytes + 63) / 64 * 64));
        if (!p) throw std::bad_alloc();
        fill_random(type, p, wbytes, 1234 + static_cast<uint64_t>(c));
        weights.push_back(p);
    }
    // The layout the CPU backend loads this weight in (unless --rows): repacked copies.
    const WeightLayout layout = rows_only ? WeightLayout::Rows : preferred_layout(type, sh.rows, sh.cols);
    if (layout != WeightLayout::Rows) {
        std::vector<uint8_t> tmp(wbytes);
        for (auto* p : weights) {
            repack_weight(WeightMatrix{type, sh.rows, sh.cols, p, rb}, layout, tmp.data(), pool);
            std::memcpy(p, tmp.data(), wbytes);
        }
    }
    std::vector<float> X(static_cast<size_t>(n * sh.cols)), Y(static_cast<size_t>(n * sh.rows));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    for (auto& x : X) x = normal(rng);

    auto call = [&](int i) {
        matmul(WeightMatrix{type, sh.rows, sh.cols, weights[static_cast<size_t>(i % copies)], rb, layout}, X.data(), n,
               Y.data(), pool);
    };
    call(0);  // warm-up: page faults, thread wake-up, scratch allocation
    std::vector<double> times;
    const double start = now();
    for (int i = 1; (now() - start < min_time || times.size() < 3) && times.size() < 10000; ++i) {
        const double t0 = now();
        call(i);
        times.push_back(now() - t0);
    }
    for (auto* p : weights) std::free(p);
    std::sort(times.begin(), times.end());
    const double t = best ? times.front() : times[times.size() / 2];
    const double flops = 2.0 * static_cast<double>(sh.rows) * static_cast<double>(sh.cols) * static_cast<double>(n);
    const double bytes =
        static_cast<double>(wbytes) + 4.0 * static_cast<double>(n) * static_cast<double>(sh.rows + sh.cols);
    return {std::string(info.name), sh, n, t, flops / t * 1e-9, bytes / t * 1e-9};
}

void write_json(const std::string& path, const std::vector<Result>& results, int threads) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path);
    std::fprintf(f, "{\n  \"isa\": \"%s\",\n  \"threads\": %d,\n  \"results\": [\n",
                 std::string(isa_name(active_isa())).c_str(), threads);
    for (size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        std::fprintf(f,
                     "    {\"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"n_tokens\": %lld, "
                     "\"ms\": %.4f, \"gflops\": %.2f, \"gbs\": %.2f}%s\n",
                     r.type.c_str(), static_cast<long long>(r.shape.rows), static_cast<long long>(r.shape.cols),
                     static_cast<long long>(r.n), r.seconds * 1e3, r.gflops, r.gbs, i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> types{"Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"};
    std::vector<Shape> shapes{{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}};
    std::vector<int64_t> ns{1, 512};
    int threads = 0;
    double min_time = 1.0;
    bool hot = false, best = false, rows_only = false;
    std::string json;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto next = [&]() -> std::string {
                if (i + 1 >= argc) throw Error(a + " needs a value");
                return argv[++i];
            };
            if (a == "--types") types = split(next());
            else if (a == "--shapes") {
                shapes.clear();
                for (const auto& s : split(next())) {
                    const size_t x = s.find('x');
                    if (x == std::string::npos) throw Error("shape must be ROWSxCOLS: " + s);
                    shapes.push_back({std::stoll(s.substr(0, x)), std::stoll(s.substr(x + 1))});
                }
            } else if (a == "--n") {
                ns.clear();
                for (const auto& s : split(next())) ns.push_back(std::stoll(s));
            } else if (a == "--threads") threads = std::stoi(next());
            else if (a == "--min-time") min_time = std::stod(next());
            else if (a == "--json") json = next();
            else if (a == "--hot") hot = true;
            else if (a == "--best") best = true;
            else if (a == "--rows") rows_only = true;
            else if (a == "--isa") {
                const std::string v = next();
                const Isa isa = v == "scalar" ? Isa::Scalar : v == "avx2" ? Isa::Avx2 : Isa::Avx512;
                if (!force_isa(isa)) throw Error("this CPU cannot run " + v);
            } else if (a == "--help" || a == "-h") {
                std::printf(
                    "usage: %s [--types T,..] [--shapes RxC,..] [--n N,..] [--threads N] [--isa I] "
                    "[--min-time S] [--json FILE] [--hot] [--best] [--rows]\n"
                    "  --rows: weights as GGUF rows even where the CPU backend would repack them\n",
                    argv[0]);
                return 0;
            } else throw Error("unknown option " + a);
        }
        ThreadPool pool(threads);
        std::printf("ember-bench-matmul: isa %s, %d threads\n", std::string(isa_name(active_isa())).c_str(),
                    pool.size());
        std::printf("%-6s %15s %6s %10s %10s %9s\n", "type", "rows x cols", "n", "ms", "GFLOP/s", "GB/s");
        std::vector<Result> results;
        for (const auto& tn : types) {
            const DType t = parse_type(tn);
            for (const Shape& sh : shapes) {
                for (int64_t n : ns) {
                    const Result r = bench_one(t, sh, n, pool, min_time, hot, best, rows_only);
                    results.push_back(r);
                    char shape[32];
                    std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(sh.rows),
                                  static_cast<long long>(sh.cols));
                    std::printf("%-6s %15s %6lld %10.3f %10.1f %9.1f\n", r.type.c_str(), shape,
                                static_cast<long long>(n), r.seconds * 1e3, r.gflops, r.gbs);
                    std::fflush(stdout);
                }
            }
        }
        if (!json.empty()) write_json(json, results, pool.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember-bench-matmul: %s\n", e.what());
        return 1;
    }
    return 0;
}
