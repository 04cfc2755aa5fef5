// How a model file reaches a running Ember from outside: `ember-app FILE.gguf`, "Open with
// Ember" in a file manager (the .desktop entry's Exec=ember-app %F), `--model FILE`, or any
// of these in a second launch, which hands its command line to the running instance. All of
// them end in open_model_file(), the one place to extend (e.g. importing the file into the
// model library before loading it).
#pragma once
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QDir>
#include <QString>
#include <QStringList>

namespace ember::app {

class AppContext;

// ember-app's own command-line options (Qt adds --help and --version).
struct LaunchOptions {
    QCommandLineOption model{{QStringLiteral("m"), QStringLiteral("model")},
                             QStringLiteral("Load this GGUF model at start."),
                             QStringLiteral("path")};
    QCommandLineOption default_model{
        QStringLiteral("default-model"),
        QStringLiteral("Load the built-in default model (SmolLM2-135M-Instruct) at start.")};
    QCommandLineOption quit_after{QStringLiteral("quit-after"),
                                  QStringLiteral("Quit after this many milliseconds (smoke tests)."),
                                  QStringLiteral("ms")};
    // Adds the options and the positional FILE argument.
    void add_to(QCommandLineParser& parser) const;
};

// What a command line asks to open. Paths are absolute (resolved against the launching
// process's folder) so that they still mean the same file inside the running instance.
struct LaunchRequest {
    QString model_file;          // "" = none; the last one named wins (one model at a time)
    bool default_model = false;  // --default-model (a named file takes precedence)
};

LaunchRequest read_launch_request(const QCommandLineParser& parser, const LaunchOptions& options,
                                  const QDir& cwd = QDir::current());

// The command line a second launch hands to the running instance: `--model /abs/path`,
// `--default-model`, or nothing.
QStringList handover_arguments(const LaunchRequest& request);

// Loads `path` (absolute) as the current model; errors reach the UI through Models.loadFailed.
void open_model_file(AppContext& ctx, const QString& path);

// Opens what `request` names; returns false if it names nothing.
bool open_launch_request(AppContext& ctx, const LaunchRequest& request);

}  // namespace ember::app
