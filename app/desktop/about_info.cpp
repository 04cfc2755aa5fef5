#include "app/desktop/about_info.h"

#include <QDir>
#include <QFile>
#include <QMetaObject>
#include <QVariantMap>

#include "app/build_info/build_info.h"
#include "app/core/device_words.h"
#include "kernels/backend_loader.h"
#include "kernels/common/error.h"

namespace ember::app {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

QString gib(uint64_t bytes) {
    return QString::number(double(bytes) / double(1ull << 30), 'f', 1) + QStringLiteral(" GiB");
}

QString device_detail(const DeviceDescription& d) {
    QStringList parts;
    if (d.cc_major > 0) parts << QStringLiteral("compute capability %1.%2").arg(d.cc_major).arg(d.cc_minor);
    if (d.multiprocessors > 0) parts << QStringLiteral("%1 multiprocessors").arg(d.multiprocessors);
    if (d.total_memory > 0) parts << QStringLiteral("%1 free of %2").arg(gib(d.free_memory), gib(d.total_memory));
    return parts.join(QStringLiteral(", "));
}

QString read_text(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        throw Error("cannot read the licence notice " + path.toStdString() + ": " + f.errorString().toStdString());
    return QString::fromUtf8(f.readAll());
}

}  // namespace

AboutInfo::AboutInfo(QObject* parent) : QObject(parent) {
    // Built into the binary (qrc), so a bad list is a build mistake; still, show it rather
    // than refuse to start.
    try {
        notices_ = read_notices(QStringLiteral(":/licenses"));
    } catch (const std::exception& e) {
        notices_ = {QVariantMap{{QStringLiteral("name"), QStringLiteral("(licence notices missing)")},
                                {QStringLiteral("license"), QString()},
                                {QStringLiteral("shipped"), QString()},
                                {QStringLiteral("text"), QString::fromUtf8(e.what())}}};
    }
}

AboutInfo::~AboutInfo() {
    if (probe_.joinable()) probe_.join();
}

QString AboutInfo::version() const { return q(build::build_info().version); }
QString AboutInfo::commit() const { return q(build::build_info().commit); }
QString AboutInfo::buildType() const { return q(build::build_info().build_type); }
QString AboutInfo::compiler() const { return q(build::build_info().cxx_compiler); }
QString AboutInfo::cudaCompiler() const { return q(build::build_info().cuda_compiler); }
QString AboutInfo::versionLine() const { return q(build::version_line("ember-app")); }

QString AboutInfo::cudaArchitectures() const {
    const QString archs = q(build::build_info().cuda_architectures);
    if (archs.isEmpty()) return {};
    QStringList out;
    for (const QString& a : archs.split(QLatin1Char(','))) out << QStringLiteral("sm_") + a;
    return out.join(QStringLiteral(", "));
}

QVariantList AboutInfo::read_notices(const QString& dir) {
    const QString list_path = QDir(dir).filePath(QStringLiteral("notices.txt"));
    const QStringList lines = read_text(list_path).split(QLatin1Char('\n'));
    QVariantList out;
    for (int i = 0; i < lines.size(); ++i) {
        const QString line = lines[i].trimmed();
        if (line.isEmpty() || line.startsWith(QLatin1Char('#'))) continue;
        // " | " separates fields: the sonames column is a regex with '|' in it.
        const QStringList f = line.split(QStringLiteral(" | "));
        if (f.size() != 5)
            throw Error(list_path.toStdString() + " line " + std::to_string(i + 1) +
                        ": expected 5 fields separated by ' | ' (name | licence | shipped | sonames | files), got " +
                        std::to_string(f.size()));
        QVariantMap n;
        n[QStringLiteral("name")] = f[0].trimmed();
        n[QStringLiteral("license")] = f[1].trimmed();
        n[QStringLiteral("shipped")] = f[2].trimmed();
        QStringList texts;
        for (const QString& file : f[4].split(QLatin1Char(' '), Qt::SkipEmptyParts))
            texts << read_text(QDir(dir).filePath(file));
        n[QStringLiteral("text")] = texts.join(QStringLiteral("\n\n"));
        out << n;
    }
    return out;
}

void AboutInfo::probeBackends() {
    if (probing_) return;
    if (probe_.joinable()) probe_.join();
    probing_ = true;
    emit backendsChanged();
    // The destructor joins the thread, so `this` outlives it; the result comes back as a
    // queued call, which Qt drops if this object is gone by the time it would run.
    probe_ = std::thread([this] {
        QVariantList list;
        std::string cuda_status;
        try {
            for (const DeviceDescription& d : list_devices({}, &cuda_status)) {
                QVariantMap m;
                m[QStringLiteral("id")] = q(d.id);
                m[QStringLiteral("name")] = q(d.name);
                m[QStringLiteral("detail")] = device_detail(d);
                list << m;
            }
        } catch (const std::exception& e) {
            cuda_status = std::string("no backend could be made: ") + e.what();
        }
        QMetaObject::invokeMethod(
            this, [this, list, s = q(cuda_status)] { set_backends(list, s); }, Qt::QueuedConnection);
    });
}

QString AboutInfo::noGpuReason() const { return no_gpu_words(cuda_status_); }

void AboutInfo::set_backends(const QVariantList& backends, const QString& cuda_status) {
    backends_ = backends;
    cuda_status_ = cuda_status;
    probing_ = false;
    emit backendsChanged();
}

}  // namespace ember::app
