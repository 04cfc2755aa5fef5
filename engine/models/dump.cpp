#include "engine/models/dump.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace ember {

TensorDump::TensorDump(std::vector<std::string> names, DumpSink sink)
    : names_(std::move(names)), sink_(std::move(sink)) {
    all_ = std::find(names_.begin(), names_.end(), "all") != names_.end();
}

TensorDump TensorDump::from_env() {
    const char* v = std::getenv("EMBER_DUMP");
    if (!v || !*v) return {};
    std::vector<std::string> names;
    std::string s(v);
    for (size_t at = 0; at <= s.size();) {
        const size_t comma = std::min(s.find(',', at), s.size());
        if (comma > at) names.push_back(s.substr(at, comma - at));
        at = comma + 1;
    }
    return TensorDump(std::move(names), print_dump_sink(stderr));
}

void TensorDump::pass_on(const char* name, int layer, const Tensor& t, Backend& backend) const {
    if (all_ || std::find(names_.begin(), names_.end(), name) != names_.end()) sink_(name, layer, t, backend);
}

DumpSink print_dump_sink(std::FILE* out, int n_values) {
    return [out, n_values](const std::string& name, int layer, const Tensor& t, Backend& backend) {
        std::vector<float> v(static_cast<size_t>(t.rows * t.cols));
        backend.download(t, v.data(), v.size() * sizeof(float));  // waits for the ops so far
        double sum = 0, sq = 0;
        float lo = v.empty() ? 0.0f : v[0], hi = lo;
        for (float x : v) {
            sum += x;
            sq += double(x) * x;
            lo = std::min(lo, x);
            hi = std::max(hi, x);
        }
        const double n = std::max<double>(1.0, static_cast<double>(v.size()));
        std::fprintf(out, "ember dump: layer %3d %-12s [%lld x %lld] mean %.6g rms %.6g min %.6g max %.6g:", layer,
                     name.c_str(), static_cast<long long>(t.rows), static_cast<long long>(t.cols), sum / n,
                     std::sqrt(sq / n), double(lo), double(hi));
        for (size_t i = 0; i < std::min(v.size(), static_cast<size_t>(n_values)); ++i)
            std::fprintf(out, " %.6g", double(v[i]));
        std::fprintf(out, "\n");
    };
}

}  // namespace ember
