#include "kernels/backend_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "kernels/cuda/cuda_module.h"

#ifndef EMBER_CUDA_MODULE_DEFAULT
#define EMBER_CUDA_MODULE_DEFAULT ""
#endif

namespace ember {
namespace {

constexpr const char* kModuleName = "libember_cuda.so";

std::string exe_dir() {
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.parent_path().string();
}

bool file_exists(const std::string& p) {
    std::error_code ec;
    return !p.empty() && std::filesystem::is_regular_file(p, ec);
}

template <class F>
F sym(void* handle, const char* name) {
    return reinterpret_cast<F>(dlsym(handle, name));
}

std::string cuda_failure(const CudaModule& m, int device, std::string& name_out) {
    char why[512] = {};
    const int n = m.device_count(why, sizeof why);
    if (n <= 0) return std::string(why[0] ? why : "no CUDA device");
    if (device < 0 || device >= n)
        return "CUDA device " + std::to_string(device) + " requested, " + std::to_string(n) + " present";
    EmberCudaDeviceInfo info{};
    if (m.device_info && m.device_info(device, &info, why, sizeof why)) name_out = info.name;
    return "";
}

}  // namespace

std::vector<std::string> cuda_module_search_paths(const BackendRequest& r) {
    if (!r.cuda_module.empty()) return {r.cuda_module};
    if (const char* env = std::getenv("EMBER_CUDA_MODULE"); env && *env) return {env};
    std::vector<std::string> v;
    if (const std::string d = exe_dir(); !d.empty()) {
        v.push_back(d + "/" + kModuleName);
        v.push_back(d + "/../lib/ember/" + kModuleName);
    }
    if (*EMBER_CUDA_MODULE_DEFAULT) v.push_back(EMBER_CUDA_MODULE_DEFAULT);
    return v;
}

const CudaModule* load_cuda_module(const BackendRequest& request, std::string& why) {
    static std::mutex mutex;
    static std::map<std::string, CudaModule> loaded;  // by path; never unloaded
    const std::vector<std::string> paths = cuda_module_search_paths(request);
    std::string path;
    for (const auto& p : paths) {
        if (file_exists(p)) {
            path = p;
            break;
        }
    }
    if (path.empty()) {
        if (paths.size() == 1) {
            why = "CUDA module not found at " + paths[0];
        } else {
            why = "CUDA module not found (looked for";
            for (size_t i = 0; i < paths.size(); ++i) why += (i ? ", " : " ") + paths[i];
            why += ")";
        }
        return nullptr;
    }
    std::lock_guard lock(mutex);
    if (auto it = loaded.find(path); it != loaded.end()) return &it->second;
    dlerror();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* e = dlerror();
        why = "cannot load CUDA module " + path + ": " + (e ? e : "unknown dlopen error");
        return nullptr;
    }
    CudaModule m;
    m.path = path;
    m.abi_version = sym<int (*)()>(h, "ember_cuda_abi_version");
    if (!m.abi_version) {
        why = path + " is not an Ember CUDA module (no ember_cuda_abi_version)";
        dlclose(h);
        return nullptr;
    }
    const int abi = m.abi_version();
    if (abi != EMBER_CUDA_ABI_VERSION) {
        why = "CUDA module " + path + " has ABI version " + std::to_string(abi) + ", this program needs " +
              std::to_string(EMBER_CUDA_ABI_VERSION) + " (rebuild or reinstall it)";
        dlclose(h);
        return nullptr;
    }
    m.device_count = sym<int (*)(char*, size_t)>(h, "ember_cuda_device_count");
    m.device_info = sym<int (*)(int, void*, char*, size_t)>(h, "ember_cuda_device_info");
    m.create_backend = sym<Backend* (*)(int, char*, size_t)>(h, "ember_cuda_create_backend");
    m.destroy_backend = sym<void (*)(Backend*)>(h, "ember_cuda_destroy_backend");
    m.bench_copy = sym<int (*)(int, uint64_t, int, double*, char*, size_t)>(h, "ember_cuda_bench_copy");
    m.bench_gemm_f16 = sym<int (*)(int, int, int, int, int, double*, char*, size_t)>(h, "ember_cuda_bench_gemm_f16");
    if (!m.device_count || !m.create_backend || !m.destroy_backend) {
        why = "CUDA module " + path + " lacks required functions (ember_cuda_device_count/create_backend)";
        dlclose(h);
        return nullptr;
    }
    // From here on the module's code may be referenced: keep it loaded.
    return &loaded.emplace(path, std::move(m)).first->second;
}

BackendChoice choose_backend(const BackendRequest& request) {
    BackendChoice c;
    auto cpu = [&](std::string reason) {
        c.backend = make_cpu_backend(request.n_threads);
        c.device = "cpu";
        c.reason = std::move(reason);
        return std::move(c);
    };
    if (request.preference == BackendPreference::Cpu) return cpu("CPU requested");
    std::string why;
    const CudaModule* m = load_cuda_module(request, why);
    if (!m) return cpu(why);
    std::string name;
    why = cuda_failure(*m, request.cuda_device, name);
    if (!why.empty()) return cpu(why);
    char buf[1024] = {};
    Backend* b = m->create_backend(request.cuda_device, buf, sizeof buf);
    if (!b) return cpu("cannot create the CUDA backend: " + std::string(buf[0] ? buf : "unknown error"));
    c.backend.reset(b);  // `delete` runs the module's virtual destructor and operator delete
    c.device = "cuda:" + std::to_string(request.cuda_device);
    c.reason = "CUDA device " + std::to_string(request.cuda_device) + ": " + (name.empty() ? b->name() : name);
    return c;
}

std::vector<DeviceDescription> list_devices(const BackendRequest& request, std::string* cuda_status) {
    std::vector<DeviceDescription> v;
    {
        DeviceDescription d;
        d.id = "cpu";
        d.name = make_cpu_backend(1)->name();
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
        const long avail = sysconf(_SC_AVPHYS_PAGES);
        if (pages > 0 && page > 0) d.total_memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
        if (avail > 0 && page > 0) d.free_memory = static_cast<uint64_t>(avail) * static_cast<uint64_t>(page);
        v.push_back(d);
    }
    std::string why;
    const CudaModule* m = load_cuda_module(request, why);
    if (m) {
        char buf[512] = {};
        const int n = m->device_count(buf, sizeof buf);
        if (n <= 0) why = buf[0] ? buf : "no CUDA device";
        for (int i = 0; i < n; ++i) {
            EmberCudaDeviceInfo info{};
            DeviceDescription d;
            d.id = "cuda:" + std::to_string(i);
            if (m->device_info && m->device_info(i, &info, buf, sizeof buf)) {
                d.name = info.name;
                d.total_memory = info.total_memory;
                d.free_memory = info.free_memory;
                d.cc_major = info.cc_major;
                d.cc_minor = info.cc_minor;
                d.multiprocessors = info.multiprocessors;
            } else {
                d.name = std::string("(unavailable: ") + buf + ")";
            }
            v.push_back(d);
        }
    }
    if (cuda_status) *cuda_status = why;
    return v;
}

}  // namespace ember
