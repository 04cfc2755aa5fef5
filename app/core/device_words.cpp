#include "app/core/device_words.h"

#include <QRegularExpression>

namespace ember::app {

QString no_gpu_words(const QString& r) {
    if (r.isEmpty()) return {};
    if (r.contains(QLatin1String("cudaErrorInsufficientDriver")) || r.contains(QLatin1String("no NVIDIA driver")))
        return QStringLiteral("No NVIDIA driver found");
    if (r.contains(QLatin1String("cudaErrorNoDevice")) || r.contains(QLatin1String("no CUDA-capable device")) ||
        r.contains(QLatin1String("no CUDA device")))
        return QStringLiteral("No NVIDIA GPU found");
    if (r.contains(QLatin1String(" requested, "))) return QStringLiteral("The chosen GPU is not there");
    if (r.contains(QLatin1String("cudaErrorStubLibrary")))
        return QStringLiteral("The NVIDIA driver found is not a real one (see Details)");
    if (r.startsWith(QLatin1String("CUDA module not found")))
        return QStringLiteral("This copy of Ember has no GPU support installed");
    if (r.startsWith(QLatin1String("cannot load CUDA module")))
        return QStringLiteral("Ember's GPU support could not be loaded (a CUDA library is missing)");
    if (r.contains(QLatin1String("ABI version")) || r.contains(QLatin1String("not an Ember CUDA module")) ||
        r.contains(QLatin1String("lacks required functions")))
        return QStringLiteral("Ember's GPU support belongs to another version of Ember");
    if (r.startsWith(QLatin1String("CPU requested"))) return QStringLiteral("The CPU was asked for");
    return QStringLiteral("The GPU could not be used");
}

DeviceWords device_words(const QString& backend_line) {
    static const QString kDash = QStringLiteral(" — ");
    const qsizetype dash = backend_line.indexOf(kDash);
    const QString backend = dash < 0 ? QString() : backend_line.left(dash);
    const QString reason = dash < 0 ? backend_line : backend_line.mid(dash + kDash.size());
    DeviceWords w{{}, backend_line};
    if (backend_line.isEmpty()) return w;
    const bool on_cpu = backend.startsWith(QLatin1String("cpu"), Qt::CaseInsensitive);
    // "CUDA device 0: NVIDIA H200[; 12 of 16 layers on the GPU, the rest on the CPU | ; <fit>]"
    static const QRegularExpression kGpu(QStringLiteral("^CUDA device \\d+: ([^;]*)(?:; (\\d+) of (\\d+) layers)?"));
    const QRegularExpressionMatch gpu = kGpu.match(reason);
    if (gpu.hasMatch()) {
        const QString name = gpu.captured(1).trimmed();
        if (on_cpu)
            w.summary =
                QStringLiteral("The model does not fit in the memory of the GPU (%1): running on the CPU").arg(name);
        else if (gpu.hasCaptured(2))
            w.summary = QStringLiteral("%1 of %2 layers on the GPU (%3), the rest on the CPU")
                            .arg(gpu.captured(2), gpu.captured(3), name);
        else w.summary = QStringLiteral("Running on the GPU: %1").arg(name);
        return w;
    }
    if (reason.startsWith(QLatin1String("CPU requested"))) {
        w.summary = QStringLiteral("Running on the CPU, as asked");
        return w;
    }
    w.summary = no_gpu_words(reason) + QStringLiteral(": running on the CPU");
    return w;
}

}  // namespace ember::app
