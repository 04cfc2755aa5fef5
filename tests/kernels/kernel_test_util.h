// Helpers shared by the kernel tests: seeded random data and float64 references; a temporary
// folder and a child process with a time limit (std/POSIX, what QTemporaryDir and QProcess did).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

#include "kernels/common/dtype.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/quant.h"

namespace ktest {

// Gaussian values with a per-32-element magnitude that varies over two decades and a few
// outliers, like real weights and activations (never all zeros).
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(-1.0f, 1.0f);
    std::vector<float> v(n);
    float block_scale = 1.0f;
    for (size_t i = 0; i < n; ++i) {
        if (i % 32 == 0) block_scale = scale * std::pow(10.0f, mag(rng));
        v[i] = normal(rng) * block_scale;
        if (i % 97 == 13) v[i] *= 4.0f;
    }
    return v;
}

// Random bytes for types without a quantizer (Q2_K, Q3_K): every code random, half-float
// scales forced to moderate values (|d| in [2^-7, 2^-3)).
inline std::vector<uint8_t> random_blocks(ember::DType type, size_t bytes, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> w(bytes);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const auto info = *ember::dtype_info(static_cast<uint32_t>(type));
    std::vector<int> halves;
    if (type == ember::DType::Q2_K) halves = {80, 82};
    if (type == ember::DType::Q3_K) halves = {108};
    for (size_t blk = 0; blk < bytes / info.block_bytes; ++blk) {
        for (int off : halves) {
            uint8_t* p = &w[blk * info.block_bytes + static_cast<size_t>(off)];
            const uint16_t v = static_cast<uint16_t>(((p[0] | (p[1] << 8)) & 0x8FFF) | 0x2000);
            p[0] = static_cast<uint8_t>(v);
            p[1] = static_cast<uint8_t>(v >> 8);
        }
    }
    return w;
}

// Bytes holding `rows` rows of `cols` random values quantized to `type`.
inline std::vector<uint8_t> random_weights(ember::DType type, int64_t rows, int64_t cols, uint32_t seed) {
    const auto info = *ember::dtype_info(static_cast<uint32_t>(type));
    const size_t rb = ember::row_bytes(info, static_cast<uint64_t>(cols));
    if (!ember::cpu::can_quantize(type)) return random_blocks(type, rb * static_cast<size_t>(rows), seed);
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    const std::vector<float> f = random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
    for (int64_t r = 0; r < rows; ++r) {
        ember::cpu::quantize_row(type, f.data() + r * cols, w.data() + static_cast<size_t>(r) * rb, cols);
    }
    return w;
}

inline std::vector<float> dequantize_matrix(ember::DType type, const uint8_t* data, int64_t rows, int64_t cols) {
    const auto info = *ember::dtype_info(static_cast<uint32_t>(type));
    const size_t rb = ember::row_bytes(info, static_cast<uint64_t>(cols));
    std::vector<float> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        ember::cpu::dequantize_row(type, data + static_cast<size_t>(r) * rb, out.data() + r * cols, cols);
    }
    return out;
}

// Every ISA this machine can run, scalar first.
inline std::vector<ember::cpu::Isa> available_isas() {
    std::vector<ember::cpu::Isa> v{ember::cpu::Isa::Scalar};
    if (static_cast<int>(ember::cpu::detected_isa()) >= static_cast<int>(ember::cpu::Isa::Avx2))
        v.push_back(ember::cpu::Isa::Avx2);
    if (ember::cpu::detected_isa() == ember::cpu::Isa::Avx512) v.push_back(ember::cpu::Isa::Avx512);
    return v;
}

// Forces an ISA for the lifetime of the object.
struct ForceIsa {
    explicit ForceIsa(ember::cpu::Isa isa) { ok = ember::cpu::force_isa(isa); }
    ~ForceIsa() { ember::cpu::reset_isa(); }
    bool ok;
};

// A fresh folder under $TMPDIR (or /tmp), removed with its contents when the object dies.
class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ember-ktest-XXXXXX";
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;  // never throw from a destructor
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

struct ProcessResult {
    bool exited = false;  // ended by exit() (not a signal, not killed for the time limit)
    int exit_code = -1;
    bool timed_out = false;
    std::string stderr_text;  // everything it wrote to stderr
};

// Runs argv[0] with argv (stdout to /dev/null, stderr captured) and waits up to `timeout`;
// a child still running then is killed. Throws when it cannot be started.
inline ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    TempDir dir;
    const std::string err_path = dir.file("stderr");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    ProcessResult r;
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            r.timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polls a condition: the child's end
    }
    r.exited = !r.timed_out && WIFEXITED(status);
    r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
    std::ifstream in(err_path, std::ios::binary);
    r.stderr_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return r;
}

}  // namespace ktest
