// The About dialog's data (app/desktop/about_info.h) and the dialog itself in the real main
// window: the build facts match this build's configuration, the licence notices are the
// files in resources/licenses/ with the real licence texts, a broken notices list is a clear
// error, the backends come from the real backend loader with its reasons.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QQmlApplicationEngine>
#include <QQmlExtensionPlugin>
#include <QQuickItem>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/device_words.h"
#include "app/desktop/about_info.h"
#include "app/desktop/app_context.h"
#include "kernels/common/error.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

using namespace ember::app;

namespace {

QQuickItem* find_item(QQuickItem* root, const QString& name) {
    if (!root) return nullptr;
    if (root->objectName() == name) return root;
    for (QQuickItem* c : root->childItems())
        if (QQuickItem* hit = find_item(c, name)) return hit;
    return nullptr;
}

QVariantMap notice_named(const QVariantList& notices, const QString& name) {
    for (const QVariant& n : notices)
        if (n.toMap().value(QStringLiteral("name")).toString() == name) return n.toMap();
    return {};
}

void write_file(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

}  // namespace

class TestAbout : public QObject {
    Q_OBJECT

private slots:
    void buildFactsMatchThisBuild() {
        AboutInfo about;
        QCOMPARE(about.version(), QStringLiteral(EMBER_EXPECT_VERSION));
        // From a git checkout: a 12-digit commit, "-dirty" with uncommitted changes; from a
        // source tree without .git: "unknown".
        if (QFileInfo::exists(QStringLiteral(EMBER_SOURCE_DIR "/.git")))
            QVERIFY2(QRegularExpression(QStringLiteral("^[0-9a-f]{12}(-dirty)?$")).match(about.commit()).hasMatch(),
                     qPrintable(about.commit()));
        else QCOMPARE(about.commit(), QStringLiteral("unknown"));
        QCOMPARE(about.buildType(), QStringLiteral(EMBER_EXPECT_BUILD_TYPE));
        QCOMPARE(about.compiler(), QStringLiteral(EMBER_EXPECT_COMPILER));
        QCOMPARE(about.cudaArchitectures(), QStringLiteral(EMBER_EXPECT_CUDA_ARCHS));
        QCOMPARE(about.cudaCompiler().isEmpty(), about.cudaArchitectures().isEmpty());
        QVERIFY2(about.versionLine().startsWith(QStringLiteral("ember-app ") + about.version() + " (commit " +
                                                about.commit() + ", " + about.buildType() + ", " + about.compiler()),
                 qPrintable(about.versionLine()));
    }

    // One notice per library the binaries link (scripts/package-test.sh checks that against
    // readelf), each with its real licence text.
    void noticesCarryTheRealLicenceTexts() {
        AboutInfo about;
        const QVariantList n = about.notices();
        QCOMPARE(n.size(), 12);
        const auto text = [&](const char* name) {
            return notice_named(n, QString::fromUtf8(name)).value(QStringLiteral("text")).toString();
        };
        QVERIFY(text("Qt 6").contains(
            QStringLiteral("GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007")));
        QVERIFY(text("Qt 6").contains(
            QStringLiteral("GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007")));
        QCOMPARE(notice_named(n, QStringLiteral("Qt 6")).value(QStringLiteral("license")).toString(),
                 QStringLiteral("LGPL-3.0-only"));
        QVERIFY(text("spdlog").contains(QStringLiteral("Copyright (c) 2016 Gabi Melman.")));
        QVERIFY(text("spdlog").contains(QStringLiteral("Permission is hereby granted, free of charge")));
        QVERIFY(text("{fmt}").contains(QStringLiteral("Victor Zverovich")));
        QVERIFY(text("SQLite").contains(QStringLiteral("May you do good and not evil.")));
        QVERIFY(text("GCC runtime (libstdc++, libgcc_s)").contains(QStringLiteral("GCC RUNTIME LIBRARY EXCEPTION")));
        QVERIFY(text("GNU C Library")
                    .contains(QStringLiteral(
                        "GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 2.1, February 1999")));
        QVERIFY(text("NVIDIA CUDA runtime and cuBLAS").contains(QStringLiteral("Attachment A")));
        QVERIFY(text("cpp-httplib").contains(QStringLiteral("Copyright (c) 2012 Yuji Hirose")));
        QVERIFY(text("QtKeychain").contains(QStringLiteral("Frank Osterfeld")));
        for (const QVariant& v : n) {
            const QVariantMap m = v.toMap();
            QVERIFY2(!m.value(QStringLiteral("shipped")).toString().isEmpty(), qPrintable(m.value("name").toString()));
        }
    }

    // The notices built into the binary are exactly the files in resources/licenses/ (which
    // are what the .deb installs to share/doc/ember/licenses/).
    void builtInNoticesAreTheSourceFiles() {
        AboutInfo about;
        const QVariantList from_source =
            AboutInfo::read_notices(QStringLiteral(EMBER_SOURCE_DIR) + QStringLiteral("/resources/licenses"));
        QCOMPARE(about.notices(), from_source);
    }

    void aBrokenNoticesListSaysWhatIsWrong() {
        QTemporaryDir dir;
        write_file(dir.filePath(QStringLiteral("notices.txt")),
                   "# comment\nQt 6 | LGPL-3.0-only | linked | ^libQt6 | qt.txt\nspdlog | MIT | linked\n");
        write_file(dir.filePath(QStringLiteral("qt.txt")), "text");
        try {
            AboutInfo::read_notices(dir.path());
            QFAIL("a line with three fields was accepted");
        } catch (const ember::Error& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("notices.txt line 3: expected 5 fields")),
                     e.what());
        }
        write_file(dir.filePath(QStringLiteral("notices.txt")), "Qt 6 | LGPL-3.0-only | linked | ^libQt6 | gone.txt\n");
        try {
            AboutInfo::read_notices(dir.path());
            QFAIL("a missing text file was accepted");
        } catch (const ember::Error& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("cannot read the licence notice ")) &&
                         QString::fromUtf8(e.what()).contains(QStringLiteral("gone.txt")),
                     e.what());
        }
    }

    // The real backend loader: the CPU is always there; CUDA is listed with its device or
    // with the loader's reason why not (this machine decides which).
    void backendsComeWithReasons() {
        AboutInfo about;
        QSignalSpy changed(&about, &AboutInfo::backendsChanged);
        about.probeBackends();
        QVERIFY(about.probing());
        QTRY_VERIFY_WITH_TIMEOUT(!about.probing(), 60'000);
        const QVariantList b = about.backends();
        QVERIFY(!b.isEmpty());
        QCOMPARE(b[0].toMap().value(QStringLiteral("id")).toString(), QStringLiteral("cpu"));
        QVERIFY(b[0].toMap().value(QStringLiteral("name")).toString().startsWith(QStringLiteral("cpu (")));
        QVERIFY(b[0].toMap().value(QStringLiteral("detail")).toString().contains(QStringLiteral("GiB")));
        const bool has_gpu = b.size() > 1;
        if (has_gpu) QVERIFY(b[1].toMap().value(QStringLiteral("id")).toString().startsWith(QStringLiteral("cuda:")));
        QCOMPARE(about.cudaStatus().isEmpty(), has_gpu);  // no GPU: the loader says why
        QCOMPARE(changed.count(), 2);                     // probing, then done
    }

    // Issue #33: where a model runs, in plain words, from the loader's reasons (as
    // kernels/backend_loader.cpp, kernels/cuda/module.cpp and engine/runtime/model.cpp write
    // them); the loader's words stay as the detail.
    void deviceReasonsInPlainWords() {
        const QString cpu = QStringLiteral("cpu (avx2, 4 threads) — ");
        const QString no_driver = QStringLiteral(
            "no NVIDIA driver, or one older than this CUDA 13 build needs (cudaErrorInsufficientDriver)");
        const DeviceWords w = device_words(cpu + no_driver);
        QCOMPARE(w.summary, QStringLiteral("No NVIDIA driver found: running on the CPU"));
        QCOMPARE(w.detail, cpu + no_driver);
        const QList<std::pair<QString, QString>> cases{
            {cpu + "no CUDA-capable device (cudaErrorNoDevice)", "No NVIDIA GPU found: running on the CPU"},
            {cpu + "cudaGetDeviceCount failed: cudaErrorUnknown: unknown error",
             "The GPU could not be used: running on the CPU"},
            {cpu + "CUDA module not found (looked for /opt/a/libember_cuda.so, /opt/lib/ember/libember_cuda.so)",
             "This copy of Ember has no GPU support installed: running on the CPU"},
            {cpu + "cannot load CUDA module /opt/libember_cuda.so: libcublas.so.13: cannot open shared object file",
             "Ember's GPU support could not be loaded (a CUDA library is missing): running on the CPU"},
            {cpu + "CPU requested", "Running on the CPU, as asked"},
            {"NVIDIA H200 — CUDA device 0: NVIDIA H200", "Running on the GPU: NVIDIA H200"},
            {"NVIDIA H200 — CUDA device 0: NVIDIA H200; 12 of 16 layers on the GPU, the rest on the CPU",
             "12 of 16 layers on the GPU (NVIDIA H200), the rest on the CPU"},
            {cpu + "CUDA device 0: NVIDIA T4; on the CPU with 4,096 tokens (3.1 GiB of RAM): not one layer fits",
             "The model does not fit in the memory of the GPU (NVIDIA T4): running on the CPU"},
        };
        for (const auto& [line, words] : cases) QCOMPARE(device_words(line).summary, words);
        QCOMPARE(device_words(QString()).summary, QString());
        QCOMPARE(no_gpu_words(no_driver), QStringLiteral("No NVIDIA driver found"));
        QCOMPARE(no_gpu_words(QString()), QString());
    }

    // The dialog in the real main window: opened from the sidebar, it shows the build line,
    // the backends with the reason, and a licence text.
    void aboutDialogShowsBuildBackendsAndLicences() {
        QTemporaryDir dir;
        AppContext ctx(dir.path());
        ctx.register_qml();
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
        QQmlApplicationEngine engine;
        engine.load(QUrl(QStringLiteral("qrc:/Ember/Ui/Main.qml")));
        QCOMPARE(engine.rootObjects().size(), 1);
        auto* window = qobject_cast<QQuickWindow*>(engine.rootObjects().first());
        QVERIFY(QTest::qWaitForWindowExposed(window));
        QQuickItem* button = find_item(window->contentItem(), QStringLiteral("aboutButton"));
        QVERIFY(button);
        QVERIFY(QMetaObject::invokeMethod(button, "clicked"));
        QQuickItem* title = nullptr;
        QTRY_VERIFY((title = find_item(window->contentItem(), QStringLiteral("aboutTitle"))) && title->isVisible());
        QCOMPARE(title->property("text").toString(), QStringLiteral("Ember ") + QStringLiteral(EMBER_EXPECT_VERSION));
        QQuickItem* root = window->contentItem();
        QCOMPARE(find_item(root, QStringLiteral("aboutBuild"))->property("text").toString(), ctx.about.versionLine());
        QTRY_VERIFY_WITH_TIMEOUT(!ctx.about.probing() && !ctx.about.backends().isEmpty(), 60'000);
        const QString backends = find_item(root, QStringLiteral("aboutBackends"))->property("text").toString();
        QVERIFY2(backends.startsWith(QStringLiteral("cpu: cpu (")), qPrintable(backends));
        QCOMPARE(find_item(root, QStringLiteral("aboutCudaStatus"))->property("text").toString(),
                 ctx.about.cudaStatus());
        if (!ctx.about.cudaStatus().isEmpty()) {  // no GPU: why, in plain words, above the details
            const QString why = find_item(root, QStringLiteral("aboutNoGpuReason"))->property("text").toString();
            QCOMPARE(why, no_gpu_words(ctx.about.cudaStatus()));
            QVERIFY2(!why.isEmpty() && !why.contains(QStringLiteral("cuda"), Qt::CaseInsensitive), qPrintable(why));
        }
        // The first notice (Qt) is selected: its licence text is shown.
        QVERIFY(find_item(root, QStringLiteral("aboutNoticeText"))
                    ->property("text")
                    .toString()
                    .contains(QStringLiteral("GNU LESSER GENERAL PUBLIC LICENSE")));
        // For a person to look at, next to test_screenshots' pictures.
        QDir().mkpath(QStringLiteral(EMBER_BINARY_DIR "/screenshots"));
        QVERIFY(window->grabWindow().save(QStringLiteral(EMBER_BINARY_DIR "/screenshots/about.png")));
        QVERIFY(QMetaObject::invokeMethod(find_item(root, QStringLiteral("aboutClose")), "clicked"));
        QTRY_VERIFY(!title->isVisible());
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    TestAbout t;
    return QTest::qExec(&t, argc, argv);
}
#include "test_about.moc"
