// Qt Quick Test runner for the desktop UI. The app is started the way ember-app starts it
// (AppContext on a temporary data folder, the Ember.Core singletons, the Ember.Ui module)
// inside a QApplication, then the tst_*.qml files click through it offscreen.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QQmlEngine>
#include <QQmlExtensionPlugin>
#include <QQuickStyle>
#include <QTemporaryDir>
#include <QtQuickTest>
#include <QtTest>
#include <filesystem>
#include <memory>

#include "app/desktop/app_context.h"
#include "model_with_template.h"

Q_IMPORT_QML_PLUGIN(Ember_UiPlugin)

// Keyboard input for a window other than the test's own: TestCase.keyClick() always
// targets the TestCase's window, and Qt 6.4's runner cannot use a Window as the root, so
// the ember-app window gets its keys through this (real QTest key events, shortcuts included).
class WindowKeys : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    Q_INVOKABLE void click(QObject* window, int key, int modifiers = 0) {
        if (auto* w = qobject_cast<QWindow*>(window))
            QTest::keyClick(w, static_cast<Qt::Key>(key), Qt::KeyboardModifiers(modifiers));
    }
    Q_INVOKABLE void type(QObject* window, const QString& text) {
        if (auto* w = qobject_cast<QWindow*>(window))
            for (QChar c : text) QTest::keyClick(w, c.toLatin1());
    }
    Q_INVOKABLE void sequence(QObject* window, const QString& keys) {
        if (auto* w = qobject_cast<QWindow*>(window)) QTest::keySequence(w, QKeySequence(keys));
    }
    Q_INVOKABLE void paste(QObject* window) {
        if (auto* w = qobject_cast<QWindow*>(window)) QTest::keySequence(w, QKeySequence(QKeySequence::Paste));
    }
};

// Files the tests make: `thinkingModelPath`, SmolLM2 with tests/fixtures/think-chatml.jinja as
// its chat template (a model that thinks: tests/model_with_template.h).
class TestFiles : public QObject {
    Q_OBJECT
    Q_PROPERTY(QString thinkingModelPath MEMBER thinking_model_path CONSTANT)
    // Where the tests save screenshots (the build's screenshots/ folder, as test_monitor's).
    Q_PROPERTY(QString screenshotDir MEMBER screenshot_dir CONSTANT)
public:
    QString thinking_model_path;
    QString screenshot_dir = QStringLiteral(EMBER_SCREENSHOT_DIR);
};

class Setup : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<ember::app::AppContext> ctx_;
    WindowKeys keys_;
    TestFiles files_;

public slots:
    void applicationAvailable() {
        // The built-in default model must be there: a missing resource fails, never skips.
        const QString builtin = ember::app::AppSettings::builtinModelPath();
        if (!std::filesystem::exists(builtin.toStdString()))
            qFatal("missing test resource %s (run scripts/fetch-test-models.sh)", qPrintable(builtin));
        qputenv("EMBER_DATA_DIR", dir_.path().toUtf8());
        ctx_ = std::make_unique<ember::app::AppContext>(dir_.path());
        ctx_->settings.setContextLength(1024);
        ctx_->settings.setThreads(1);
        ctx_->register_qml();
        qmlRegisterSingletonInstance("Ember.Test", 1, 0, "WindowKeys", &keys_);
        QFile tmpl(QStringLiteral(EMBER_SOURCE_DIR "/tests/fixtures/think-chatml.jinja"));
        if (!tmpl.open(QIODevice::ReadOnly)) qFatal("missing test resource %s", qPrintable(tmpl.fileName()));
        files_.thinking_model_path = dir_.filePath(QStringLiteral("SmolLM2-thinking.gguf"));
        ember::test::write_model_with_template(builtin.toStdString(), files_.thinking_model_path.toStdString(),
                                               tmpl.readAll().toStdString());
        QDir().mkpath(files_.screenshot_dir);
        qmlRegisterSingletonInstance("Ember.Test", 1, 0, "TestFiles", &files_);
        QQuickStyle::setStyle(QStringLiteral("Fusion"));
    }
    void qmlEngineAvailable(QQmlEngine* engine) { engine->addImportPath(QStringLiteral("qrc:/")); }
    void cleanupTestCase() { ctx_.reset(); }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);  // as ember-app: QtCharts views need widgets
    Setup setup;
    return quick_test_main_with_setup(argc, argv, "ember_qml", QUICK_TEST_SOURCE_DIR, &setup);
}

#include "main.moc"
