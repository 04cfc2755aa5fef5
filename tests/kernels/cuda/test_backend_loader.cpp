// The backend loader on a machine without a GPU: every way the CUDA module can fail to give
// a backend must fall back to the CPU backend, with a reason that names what failed.
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "kernels/backend_loader.h"
#include "kernels/common/error.h"
#include "kernels/cuda/cuda_module.h"
#include "test_data.h"  // testdata(); TempDir, run_process (test_util.h)

using namespace ember;

namespace {

[[maybe_unused]] bool driver_present() {
    void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != nullptr;
}

BackendRequest with_module(const std::string& path) {
    BackendRequest r;
    r.n_threads = 1;
    r.cuda_module = path;
    return r;
}

// The fallback must be a working CPU backend, not just a non-null pointer.
void verify_cpu(const BackendChoice& c) {
    MESSAGE("fallback reason: ", c.reason);
    REQUIRE(c.backend != nullptr);
    REQUIRE(c.device == "cpu");
    REQUIRE_MESSAGE(c.backend->name().rfind("cpu", 0) == 0, c.backend->name());
    Tensor x = c.backend->alloc(MemoryKind::Activations, DType::F32, 4, 1, "x");
    Tensor y = c.backend->alloc(MemoryKind::Activations, DType::F32, 4, 1, "y");
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    c.backend->upload(x, a, sizeof a);
    c.backend->upload(y, b, sizeof b);
    c.backend->add(x, y);
    float out[4] = {};
    c.backend->download(x, out, sizeof out);
    REQUIRE(out[3] == 44.0f);
    c.backend->free(x);
    c.backend->free(y);
}

#define VERIFY_REASON(choice, text)                                                                        \
    do {                                                                                                   \
        const std::string expected_ = (text);                                                              \
        REQUIRE_MESSAGE((choice).reason.find(expected_) != std::string::npos, "reason '", (choice).reason, \
                        "' lacks '", expected_, "'");                                                      \
    } while (0)

}  // namespace

// Each case starts without EMBER_CUDA_MODULE (what the Qt Test suite's init() did).
struct NoModuleEnv {
    NoModuleEnv() { unsetenv("EMBER_CUDA_MODULE"); }
};

TEST_CASE_FIXTURE(NoModuleEnv, "CPU requested") {
    BackendRequest r;
    r.preference = BackendPreference::Cpu;
    r.n_threads = 1;
    const BackendChoice c = choose_backend(r);
    verify_cpu(c);
    VERIFY_REASON(c, "CPU requested");
}

TEST_CASE_FIXTURE(NoModuleEnv, "module missing") {
    const BackendChoice c = choose_backend(with_module("/nonexistent/dir/libember_cuda.so"));
    verify_cpu(c);
    VERIFY_REASON(c, "CUDA module not found at /nonexistent/dir/libember_cuda.so");
}

TEST_CASE_FIXTURE(NoModuleEnv, "module missing, named by the environment") {
    setenv("EMBER_CUDA_MODULE", "/nonexistent/env/libember_cuda.so", 1);
    BackendRequest r;
    r.n_threads = 1;
    const BackendChoice c = choose_backend(r);
    unsetenv("EMBER_CUDA_MODULE");
    verify_cpu(c);
    VERIFY_REASON(c, "CUDA module not found at /nonexistent/env/libember_cuda.so");
}

TEST_CASE_FIXTURE(NoModuleEnv, "module not an ELF file") {
    test::TempDir dir;
    const std::string path = dir.file("libember_cuda.so");
    std::ofstream(path) << "this is not a shared object\n";
    const BackendChoice c = choose_backend(with_module(path));
    verify_cpu(c);
    VERIFY_REASON(c, "cannot load CUDA module " + path);
    // dlopen's own words (glibc: "invalid ELF header" / "file too short").
    REQUIRE_MESSAGE((c.reason.find("ELF") != std::string::npos || c.reason.find("too short") != std::string::npos),
                    c.reason);
}

TEST_CASE_FIXTURE(NoModuleEnv, "module dependency missing") {
    // Like a machine with the module but without libcublas.so.13.
    const BackendChoice c = choose_backend(with_module(EMBER_TEST_MISSING_DEP_MODULE));
    verify_cpu(c);
    VERIFY_REASON(c, "cannot load CUDA module");
    VERIFY_REASON(c, "libember_fake_dep.so: cannot open shared object file");
}

TEST_CASE_FIXTURE(NoModuleEnv, "module ABI mismatch") {
    const BackendChoice c = choose_backend(with_module(EMBER_TEST_ABI_MODULE));
    verify_cpu(c);
    VERIFY_REASON(c, "ABI version 999");
    VERIFY_REASON(c, "this program needs " + std::to_string(EMBER_CUDA_ABI_VERSION));
}

TEST_CASE_FIXTURE(NoModuleEnv, "module exceptions are caught by type") {
    // The CUDA backend throws ember::Error from hidden-visibility module code; callers catch
    // it as ember::Error. Shown with the helper module, built with the same visibility.
    void* h = dlopen(EMBER_TEST_ABI_MODULE, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(h != nullptr, dlerror());
    auto fn = reinterpret_cast<void (*)()>(dlsym(h, "ember_test_throw_error"));
    REQUIRE(static_cast<bool>(fn));
    bool caught = false;
    try {
        fn();
    } catch (const ember::Error& e) {
        caught = std::string(e.what()) == "thrown inside a module";
    } catch (...) {}
    REQUIRE(caught);
}

TEST_CASE_FIXTURE(NoModuleEnv, "not a module") {
    // A loadable shared library that is not an Ember module at all (built by this test).
    const BackendChoice c = choose_backend(with_module(EMBER_TEST_PLAIN_LIBRARY));
    verify_cpu(c);
    VERIFY_REASON(c, "is not an Ember CUDA module");
}

TEST_CASE_FIXTURE(NoModuleEnv, "list_devices always has the CPU") {
    std::string status;
    const auto devs = list_devices(with_module("/nonexistent/libember_cuda.so"), &status);
    REQUIRE(!devs.empty());
    REQUIRE(devs[0].id == "cpu");
    REQUIRE(devs[0].total_memory > 0);
    REQUIRE_MESSAGE(status.find("CUDA module not found") != std::string::npos, status);
}

TEST_CASE_FIXTURE(NoModuleEnv, "the real module without a driver") {
#ifndef EMBER_REAL_CUDA_MODULE
    MESSAGE("skipped: built without EMBER_BUILD_CUDA, so there is no CUDA module to load");
#else
    if (driver_present()) {
        MESSAGE("skipped: an NVIDIA driver is installed here, so the no-driver fallback cannot be shown");
        return;
    }
    // Explicit path, and the default search (which finds the build tree's module).
    for (const std::string& path : {std::string(EMBER_REAL_CUDA_MODULE), std::string()}) {
        CAPTURE(path);
        const BackendChoice c = choose_backend(with_module(path));
        verify_cpu(c);
        VERIFY_REASON(c, "no NVIDIA driver");
        VERIFY_REASON(c, "cudaErrorInsufficientDriver");
        std::string status;
        const auto devs = list_devices(with_module(path), &status);
        REQUIRE(int(devs.size()) == 1);
        REQUIRE_MESSAGE(status.find("no NVIDIA driver") != std::string::npos, status);
    }
    // Asking for CUDA explicitly still gives a working program.
    BackendRequest r = with_module(EMBER_REAL_CUDA_MODULE);
    r.preference = BackendPreference::Cuda;
    const BackendChoice c = choose_backend(r);
    verify_cpu(c);
    VERIFY_REASON(c, "no NVIDIA driver");
#endif
}

TEST_CASE_FIXTURE(NoModuleEnv, "the real module with a driver") {
#ifndef EMBER_REAL_CUDA_MODULE
    MESSAGE("skipped: built without EMBER_BUILD_CUDA");
#else
    if (!driver_present()) {
        MESSAGE("skipped: no NVIDIA driver here (the other case is tested)");
        return;
    }
    const BackendChoice c = choose_backend(with_module(EMBER_REAL_CUDA_MODULE));
    if (c.device == "cpu") MESSAGE("WARNING: driver present but CPU chosen: ", c.reason);
    REQUIRE(c.backend != nullptr);
#endif
}

TEST_CASE_FIXTURE(NoModuleEnv, "the CLI starts without a driver") {
#ifndef EMBER_CLI
    MESSAGE("skipped: the ember CLI is not part of this build");
#else
    const std::string model = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(model);
    const test::ProcessResult p = test::run_process({EMBER_CLI, "info", model}, 60000);
    REQUIRE(!p.timed_out);
    REQUIRE(p.exited);
    REQUIRE_MESSAGE(p.exit_code == 0, p.err);
#endif
}
