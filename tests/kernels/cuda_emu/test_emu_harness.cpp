// The emulator itself (kernels/cuda/emu): that the bugs it exists to catch are caught —
// a missing barrier gives a wrong result deterministically, a divergent barrier or a
// full-mask shuffle under a branch is reported as a deadlock naming the waiting threads,
// an out-of-bounds read is stopped by AddressSanitizer (asan builds) — and the kernels no
// backend op launches (bench.cu's ceilings, the module's kernel-image probe) run too.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/bench.h"
#include "kernels/cuda/cuda_module.h"
#include "kernels/cuda/emu/emu.h"
#include "tests/kernels/cuda_emu/broken_kernels.h"

namespace ember::cuda {
void probe_kernel();  // bench.cu (a __global__ function: a plain one under the emulator)
}

using namespace ember;
namespace broken = ember::test::broken;

namespace {

// A device buffer of n floats with the given contents.
struct DevBuf {
    float* p = nullptr;
    size_t n = 0;
    explicit DevBuf(const std::vector<float>& v) : n(v.size()) {
        REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) == cudaSuccess);
        REQUIRE(cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    ~DevBuf() { cudaFree(p); }
    std::vector<float> read() const {
        std::vector<float> v(n);
        REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
        return v;
    }
};

// The message of the KernelFault `f` throws ("" if none).
template <class F>
std::string fault_of(F&& f) {
    try {
        f();
    } catch (const emu::KernelFault& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("emulator: a missing __syncthreads gives a wrong sum, the same one every time") {
    std::vector<float> x(128);
    for (int i = 0; i < 128; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
    DevBuf dx(x), out(std::vector<float>(1, 0.0f));
    broken::block_sum(dx.p, out.p, false);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(out.read()[0] == 8128.0f);
    // Without the barrier thread 0 reads the other threads' slots before they are written:
    // shared memory starts as 0xFF bytes, a NaN.
    for (int run = 0; run < 3; ++run) {
        broken::block_sum(dx.p, out.p, true);
        CHECK(std::isnan(out.read()[0]));
    }
}

TEST_CASE("emulator: a divergent __syncthreads is a deadlock naming who waits where") {
    const std::string f = fault_of([] { broken::divergent_barrier(); });
    INFO(f);
    CHECK(contains(f, "deadlock in kernel divergent_barrier_kernel"));
    CHECK(contains(f, "threads 0-63: wait at __syncthreads (broken_kernels.cu:"));
    CHECK(contains(f, "threads 64-127: exited"));
    const std::string g = fault_of([] { broken::split_barrier(); });
    INFO(g);
    CHECK(contains(g, "divergent __syncthreads"));
}

TEST_CASE("emulator: a full-mask shuffle under a branch is a deadlock; a lane outside the mask is refused") {
    DevBuf out(std::vector<float>(32, 0.0f));
    const std::string f = fault_of([&] { broken::shuffle_under_branch(out.p); });
    INFO(f);
    CHECK(contains(f, "deadlock in kernel shuffle_under_branch_kernel"));
    CHECK(contains(f, "threads 0-15: wait at __shfl_xor_sync(mask 0xffffffff) (broken_kernels.cu:"));
    CHECK(contains(f, "threads 16-31: exited"));
    const std::string g = fault_of([&] { broken::shuffle_outside_mask(out.p); });
    INFO(g);
    CHECK(contains(g, "reads lane 20, which is not in the mask 0x0000ffff"));
}

TEST_CASE("emulator: host pointers and oversized shared memory are refused at launch") {
    std::vector<float> host(64, 1.0f);
    DevBuf out(std::vector<float>(64, 0.0f));
    const std::string f = fault_of([&] { broken::copy(host.data(), out.p, 64); });
    INFO(f);
    CHECK(contains(f, "argument 0 of kernel copy_kernel"));
    CHECK(contains(f, "is not device memory"));
    DevBuf in(host);
    broken::copy(in.p, out.p, 64);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(out.read() == host);
    broken::too_much_shared_memory(out.p);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
}

#if defined(__SANITIZE_ADDRESS__)
TEST_CASE("emulator under ASan: an out-of-bounds read in a kernel is caught") {
    // In a child process: ASan reports and exits non-zero there.
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        std::vector<float> x(100, 1.0f);
        DevBuf dx(x), out(x);
        broken::out_of_bounds(dx.p, out.p, 100);
        _exit(0);  // not reached when ASan catches the read
    }
    close(pipefd[1]);
    std::string err;
    char buf[4096];
    for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    INFO(err);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(contains(err, "heap-buffer-overflow"));
    CHECK(contains(err, "out_of_bounds_kernel"));
}
#endif

TEST_CASE("emulator: bench.cu's ceilings, the kernel-image probe and the module ABI run") {
    // Their timings mean nothing here; that they run (their kernels included) does.
    CHECK(cuda::bench_copy_gbps(0, 1 << 16, 2) > 0.0);
    CHECK(cuda::bench_gemm_f16_seconds(0, 64, 16, 32, 1) >= 0.0);
    CHECK(cuda::probe_kernel_image() == cudaSuccess);
    emu::launcher("probe_kernel", &cuda::probe_kernel, dim3(1), dim3(1))();
    CHECK(cudaGetLastError() == cudaSuccess);
    char why[256];
    CHECK(ember_cuda_device_count(why, sizeof why) == 1);
    EmberCudaDeviceInfo info{};
    CHECK(ember_cuda_device_info(0, &info, why, sizeof why) == 1);
    CHECK(std::string(info.name) == "ember CUDA emulator");
    EmberBackend* b = ember_cuda_create_backend(0, why, sizeof why);
    INFO(why);
    REQUIRE(b != nullptr);
    ember_cuda_destroy_backend(b);
}
