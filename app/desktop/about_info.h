// The About dialog's facts (ui/AboutDialog.qml, QML singleton "About"): what this build is
// (app/build_info), which compute backends this machine offers and why not CUDA when it does
// not (kernels/backend_loader), and the licence notices of what Ember ships
// (resources/licenses/, one entry per linked library; scripts/package-test.sh checks that
// the list covers every library the installed binaries link).
#pragma once
#include <QObject>
#include <QString>
#include <QVariantList>
#include <thread>

namespace ember::app {

class AboutInfo : public QObject {
    Q_OBJECT
    Q_PROPERTY(QString version READ version CONSTANT)
    Q_PROPERTY(QString commit READ commit CONSTANT)
    Q_PROPERTY(QString buildType READ buildType CONSTANT)
    Q_PROPERTY(QString compiler READ compiler CONSTANT)
    // "sm_90" or "sm_75, sm_80, ...", or "" when built without the CUDA backend.
    Q_PROPERTY(QString cudaArchitectures READ cudaArchitectures CONSTANT)
    Q_PROPERTY(QString cudaCompiler READ cudaCompiler CONSTANT)
    Q_PROPERTY(QString versionLine READ versionLine CONSTANT)  // as `ember --version` prints it
    // [{name, license, shipped, text}], in the order of resources/licenses/notices.txt.
    Q_PROPERTY(QVariantList notices READ notices CONSTANT)
    // [{id: "cpu"|"cuda:0", name, detail}]; empty until probeBackends() has finished.
    Q_PROPERTY(QVariantList backends READ backends NOTIFY backendsChanged)
    // Why no CUDA device is listed ("" when one is), in the backend loader's words (Details),
    // and the same in plain words ("No NVIDIA driver found").
    Q_PROPERTY(QString cudaStatus READ cudaStatus NOTIFY backendsChanged)
    Q_PROPERTY(QString noGpuReason READ noGpuReason NOTIFY backendsChanged)
    Q_PROPERTY(bool probing READ probing NOTIFY backendsChanged)
public:
    explicit AboutInfo(QObject* parent = nullptr);
    ~AboutInfo() override;

    QString version() const;
    QString commit() const;
    QString buildType() const;
    QString compiler() const;
    QString cudaArchitectures() const;
    QString cudaCompiler() const;
    QString versionLine() const;
    QVariantList notices() const { return notices_; }
    QVariantList backends() const { return backends_; }
    QString cudaStatus() const { return cuda_status_; }
    QString noGpuReason() const;
    bool probing() const { return probing_; }

    // Looks for backends on a background thread (loading the CUDA module and asking the
    // driver can take a moment); backendsChanged() when done. A call while probing is ignored.
    Q_INVOKABLE void probeBackends();

    // Parses a notices list (see resources/licenses/notices.txt) whose text files are
    // read from `dir`; throws ember::Error naming the line or file that is wrong.
    static QVariantList read_notices(const QString& dir);

signals:
    void backendsChanged();

private:
    void set_backends(const QVariantList& backends, const QString& cuda_status);

    QVariantList notices_;
    QVariantList backends_;
    QString cuda_status_;
    bool probing_ = false;
    std::thread probe_;
};

}  // namespace ember::app
