// The backend loader on a machine without a GPU: every way the CUDA module can fail to give
// a backend must fall back to the CPU backend, with a reason that names what failed.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>
#include <dlfcn.h>

#include <cstdlib>
#include <fstream>

#include "kernels/backend_loader.h"
#include "kernels/common/error.h"
#include "kernels/cuda/cuda_module.h"
#include "test_paths.h"

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
    qInfo("fallback reason: %s", c.reason.c_str());
    QVERIFY(c.backend != nullptr);
    QCOMPARE(QString::fromStdString(c.device), QString("cpu"));
    QVERIFY2(c.backend->name().rfind("cpu", 0) == 0, c.backend->name().c_str());
    Tensor x = c.backend->alloc(MemoryKind::Activations, DType::F32, 4, 1, "x");
    Tensor y = c.backend->alloc(MemoryKind::Activations, DType::F32, 4, 1, "y");
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    c.backend->upload(x, a, sizeof a);
    c.backend->upload(y, b, sizeof b);
    c.backend->add(x, y);
    float out[4] = {};
    c.backend->download(x, out, sizeof out);
    QCOMPARE(out[3], 44.0f);
    c.backend->free(x);
    c.backend->free(y);
}

#define VERIFY_REASON(choice, text)                                                                      \
    do {                                                                                                 \
        const std::string expected_ = (text);                                                           \
        QVERIFY2((choice).reason.find(expected_) != std::string::npos,                                   \
                 qPrintable(QString("reason '%1' lacks '%2'")                                           \
                                .arg(QString::fromStdString((choice).reason), QString::fromStdString(expected_)))); \
    } while (0)

}  // namespace

class TestBackendLoader : public QObject {
    Q_OBJECT
private slots:
    void init() { unsetenv("EMBER_CUDA_MODULE"); }

    void cpuRequested() {
        BackendRequest r;
        r.preference = BackendPreference::Cpu;
        r.n_threads = 1;
        const BackendChoice c = choose_backend(r);
        verify_cpu(c);
        VERIFY_REASON(c, "CPU requested");
    }

    void moduleMissing() {
        const BackendChoice c = choose_backend(with_module("/nonexistent/dir/libember_cuda.so"));
        verify_cpu(c);
        VERIFY_REASON(c, "CUDA module not found at /nonexistent/dir/libember_cuda.so");
    }

    void moduleMissingViaEnvironment() {
        setenv("EMBER_CUDA_MODULE", "/nonexistent/env/libember_cuda.so", 1);
        BackendRequest r;
        r.n_threads = 1;
        const BackendChoice c = choose_backend(r);
        unsetenv("EMBER_CUDA_MODULE");
        verify_cpu(c);
        VERIFY_REASON(c, "CUDA module not found at /nonexistent/env/libember_cuda.so");
    }

    void moduleNotAnElfFile() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string path = dir.filePath("libember_cuda.so").toStdString();
        std::ofstream(path) << "this is not a shared object\n";
        const BackendChoice c = choose_backend(with_module(path));
        verify_cpu(c);
        VERIFY_REASON(c, "cannot load CUDA module " + path);
        // dlopen's own words (glibc: "invalid ELF header" / "file too short").
        QVERIFY2(c.reason.find("ELF") != std::string::npos || c.reason.find("too short") != std::string::npos,
                 c.reason.c_str());
    }

    void moduleDependencyMissing() {
        // Like a machine with the module but without libcublas.so.13.
        const BackendChoice c = choose_backend(with_module(EMBER_TEST_MISSING_DEP_MODULE));
        verify_cpu(c);
        VERIFY_REASON(c, "cannot load CUDA module");
        VERIFY_REASON(c, "libember_fake_dep.so: cannot open shared object file");
    }

    void moduleAbiMismatch() {
        const BackendChoice c = choose_backend(with_module(EMBER_TEST_ABI_MODULE));
        verify_cpu(c);
        VERIFY_REASON(c, "ABI version 999");
        VERIFY_REASON(c, "this program needs " + std::to_string(EMBER_CUDA_ABI_VERSION));
    }

    void moduleExceptionsAreCaughtByType() {
        // The CUDA backend throws ember::Error from hidden-visibility module code; callers catch
        // it as ember::Error. Shown with the helper module, built with the same visibility.
        void* h = dlopen(EMBER_TEST_ABI_MODULE, RTLD_NOW | RTLD_LOCAL);
        QVERIFY2(h, dlerror());
        auto fn = reinterpret_cast<void (*)()>(dlsym(h, "ember_test_throw_error"));
        QVERIFY(fn);
        bool caught = false;
        try {
            fn();
        } catch (const ember::Error& e) {
            caught = std::string(e.what()) == "thrown inside a module";
        } catch (...) {
        }
        QVERIFY(caught);
    }

    void notAModule() {
        // A loadable shared library that is not an Ember module at all (built by this test).
        const BackendChoice c = choose_backend(with_module(EMBER_TEST_PLAIN_LIBRARY));
        verify_cpu(c);
        VERIFY_REASON(c, "is not an Ember CUDA module");
    }

    void listDevicesAlwaysHasCpu() {
        std::string status;
        const auto devs = list_devices(with_module("/nonexistent/libember_cuda.so"), &status);
        QVERIFY(!devs.empty());
        QCOMPARE(QString::fromStdString(devs[0].id), QString("cpu"));
        QVERIFY(devs[0].total_memory > 0);
        QVERIFY2(status.find("CUDA module not found") != std::string::npos, status.c_str());
    }

    void realModuleWithoutDriver() {
#ifndef EMBER_REAL_CUDA_MODULE
        QSKIP("built without EMBER_BUILD_CUDA: no CUDA module to load");
#else
        if (driver_present()) QSKIP("an NVIDIA driver is installed here: the no-driver fallback cannot be shown");
        // Explicit path, and the default search (which finds the build tree's module).
        for (const std::string& path : {std::string(EMBER_REAL_CUDA_MODULE), std::string()}) {
            const BackendChoice c = choose_backend(with_module(path));
            verify_cpu(c);
            VERIFY_REASON(c, "no NVIDIA driver");
            VERIFY_REASON(c, "cudaErrorInsufficientDriver");
            std::string status;
            const auto devs = list_devices(with_module(path), &status);
            QCOMPARE(int(devs.size()), 1);
            QVERIFY2(status.find("no NVIDIA driver") != std::string::npos, status.c_str());
        }
        // Asking for CUDA explicitly still gives a working program.
        BackendRequest r = with_module(EMBER_REAL_CUDA_MODULE);
        r.preference = BackendPreference::Cuda;
        const BackendChoice c = choose_backend(r);
        verify_cpu(c);
        VERIFY_REASON(c, "no NVIDIA driver");
#endif
    }

    void realModuleWithDriver() {
#ifndef EMBER_REAL_CUDA_MODULE
        QSKIP("built without EMBER_BUILD_CUDA");
#else
        if (!driver_present()) QSKIP("no NVIDIA driver here (the other case is tested)");
        const BackendChoice c = choose_backend(with_module(EMBER_REAL_CUDA_MODULE));
        if (c.device == "cpu") qWarning("driver present but CPU chosen: %s", c.reason.c_str());
        QVERIFY(c.backend != nullptr);
#endif
    }

    void cliStartsWithoutDriver() {
#ifndef EMBER_CLI
        QSKIP("the ember CLI is not part of this build");
#else
        const std::string model = test::testdata(test::kStories);
        EMBER_REQUIRE_FILE(model);
        QProcess p;
        p.start(EMBER_CLI, {"info", QString::fromStdString(model)});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
#endif
    }
};

QTEST_GUILESS_MAIN(TestBackendLoader)
#include "test_backend_loader.moc"
