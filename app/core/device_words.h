// Where a model runs, in words a user can act on. The engine's reasons are written for logs
// and bug reports ("no NVIDIA driver, or one older than this CUDA 13 build needs
// (cudaErrorInsufficientDriver)", "CUDA module not found (looked for ...)"); the app shows
// `summary` and keeps the engine's words as `detail` (a tooltip, a Details line).
#pragma once
#include <QString>

namespace ember::app {

struct DeviceWords {
    QString summary;  // "No NVIDIA driver found: running on the CPU"
    QString detail;   // the engine's own words, unchanged
};

// `backend_line` as ModelInfo::backend has it: "<backend name> — <device reason>".
DeviceWords device_words(const QString& backend_line);

// Why no GPU is used, from the backend loader's reason (AboutInfo::cudaStatus); "" for "".
QString no_gpu_words(const QString& loader_reason);

}  // namespace ember::app
