// The one byte-count formatter of the program ("512 B", "98.4 MiB", "1.5 GiB"), for messages
// and displays in every layer (kernels, engine, app).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace ember {

inline std::string format_bytes(uint64_t n) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

}  // namespace ember
